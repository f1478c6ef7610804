"""A PerRecBench group with a difficulty outside easy / medium / hard / sizeN is refused naming the line and the valid
ones (it used to be dropped by every difficulty filter without a word: 119 of 120 groups ran)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from recbench.api.errors import DataError
from recbench.run.construct import bundled_data
from recbench.tasks.perrec.data import check_difficulty, load_examples

pytestmark = pytest.mark.fast


def _copy_with(tmp_path: Path, line: int, **fields) -> Path:
    d = tmp_path / "data"
    shutil.copytree(bundled_data("perrec_sample"), d)
    p = d / "groups.jsonl"
    lines = p.read_text().splitlines()
    rec = json.loads(lines[line - 1])
    rec.update(fields)
    lines[line - 1] = json.dumps(rec)
    p.write_text("\n".join(lines) + "\n")
    return d


def test_an_unknown_difficulty_is_refused_naming_line_and_valid_ones(tmp_path):
    d = _copy_with(tmp_path, 3, difficulty="extreme")
    with pytest.raises(DataError, match=r'groups.jsonl:3: difficulty "extreme" is not one of easy, medium, hard '
                                        r"\(or sizeN for a built group of N > 4 users\)"):
        load_examples.__wrapped__.uncached(str(d), 4, 200)


def test_known_difficulties_and_a_missing_one_load(tmp_path):
    d = _copy_with(tmp_path, 3, difficulty=None)  # absent: taken from the group size (2 users: easy)
    exs = load_examples.__wrapped__.uncached(str(d), 4, 200)
    assert len(exs) == 120 and exs[2].meta["difficulty"] == "easy"
    assert [check_difficulty(v, "x") for v in ("easy", "medium", "hard", "size5", None, "")] == \
        ["easy", "medium", "hard", "size5", None, ""]
    for bad in ("Easy", "size", "size5x", 3):
        with pytest.raises(DataError, match="x: difficulty"):
            check_difficulty(bad, "x")
