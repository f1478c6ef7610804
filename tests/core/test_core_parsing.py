"""Parsers on malformed answers: each returns a value with a status, or a recorded failure."""
import pytest

from recbench.api.parsing import parse_choice, parse_json, parse_list, parse_number

pytestmark = pytest.mark.fast


def test_json_exact_repaired_and_failed():
    assert parse_json('{"ranking": ["User A"]}').status == "ok"
    p = parse_json('Sure! Here it is:\n```json\n{"ranking": ["User B", "User A"]}\n```')
    assert p.status == "repaired" and p.value == {"ranking": ["User B", "User A"]}
    p = parse_json("{'ranking': ['User B']} hope this helps")
    assert p.status == "repaired" and p.value["ranking"] == ["User B"]
    assert parse_json('{"ranking": ["User A", ').status == "failed"  # truncated JSON
    assert parse_json("I cannot rank these users.").status == "failed"


def test_number():
    assert parse_number("4").value == 4 and parse_number("4").status == "ok"
    p = parse_number("I think 3.5 stars")
    assert p.value == 3.5 and p.status == "repaired"
    p = parse_number("7", lo=1, hi=5)
    assert p.value == 5 and p.status == "repaired" and "clamped" in p.note
    assert parse_number("five stars").status == "failed"


def test_choice():
    ch = ("[User A]", "[User B]")
    assert parse_choice("[User A]", ch).status == "ok"
    assert parse_choice("user b", ch).value == "[User B]"
    assert parse_choice("The answer is [User B] because...", ch).value == "[User B]"
    assert parse_choice("Both [User A] and [User B]", ch).status == "failed"
    assert parse_choice("neither", ch).status == "failed"


def test_list():
    assert parse_list('["a", "b"]').value == ["a", "b"]
    assert parse_list("x [SEP] y [SEP] z", sep="[SEP]").value == ["x", "y", "z"]
    assert parse_list("1. foo\n2. bar").value == ["foo", "bar"]
    assert parse_list("nothing here").status == "failed"
