"""PerRecBench's ranking parser on malformed answers: exact, repaired (duplicates, missing users, prose, bare
letters) or failed."""
import pytest

from recbench.tasks.perrec.methods import parse_ranking

pytestmark = pytest.mark.fast
LABELS = ["User A", "User B", "User C"]


def test_ranking_variants():
    assert parse_ranking('{"ranking": ["User C", "User A", "User B"]}', LABELS).value == ["User C", "User A", "User B"]
    p = parse_ranking('{"ranking": ["User B", "User B"]}', LABELS)  # duplicate + missing users
    assert p.status == "repaired" and p.value == ["User B", "User A", "User C"]
    p = parse_ranking("First User C, then User A, and last User B.", LABELS)
    assert p.status == "repaired" and p.value == ["User C", "User A", "User B"]
    assert parse_ranking('{"ranking": ["C", "B", "A"]}', LABELS).value == ["User C", "User B", "User A"]
    assert parse_ranking("I don't know.", LABELS).status == "failed"
    assert parse_ranking('{"ranking": []}', LABELS).status == "failed"
