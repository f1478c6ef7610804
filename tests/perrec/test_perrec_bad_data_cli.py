"""Malformed PerRecBench data through the real CLI, end to end in a second interpreter: every case is refused with one
clean error line naming the file and line (exit 2), never a traceback, and no run dir is left behind (the loader's
own checks, in-process: test_perrec_bad_data.py; the CLI's refusals on the toy task: tests/core/test_core_bad_inputs.py)."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from recbench.run.construct import bundled_data

pytestmark = pytest.mark.full
RUN = ["task=perrec", "method=bm25_history", "limit=10", "run.progress=false"]


def _cli(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RECBENCH_RUNS_DIR": str(tmp / "runs"), "RECBENCH_CACHE_DIR": str(tmp / "cache"),
           "HYDRA_FULL_ERROR": "0"}
    return subprocess.run([sys.executable, "-m", "recbench", *args], cwd=tmp, env=env, capture_output=True, text=True,
                          timeout=300)


def _files(root: Path) -> dict[str, bytes]:
    """Every file under root (relative path -> bytes)."""
    return {str(f.relative_to(root)): f.read_bytes() for f in sorted(root.rglob("*")) if f.is_file()} if root.exists() else {}


def _one_clean_line(p: subprocess.CompletedProcess) -> str:
    """The single error line of a failed run (asserts there is no traceback and one 'recbench' line)."""
    err = p.stderr + p.stdout
    assert "Traceback" not in err, err
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("recbench")]
    assert len(lines) == 1, p.stderr
    return lines[0]


def _data_copy(tmp: Path) -> Path:
    d = tmp / "data"
    shutil.copytree(bundled_data("perrec_sample"), d)
    return d


def _mutate_groups(d: Path, how: str) -> None:
    p = d / "groups.jsonl"
    lines = p.read_text().splitlines()
    if how == "torn":
        p.write_text("\n".join(lines[:5]) + "\n" + lines[5][: len(lines[5]) // 2])
    elif how == "garbage":
        p.write_text("\n".join(lines[:3] + ["{not json"] + lines[3:]) + "\n")
    elif how == "no users":
        rec = json.loads(lines[2])
        rec.pop("users")
        lines[2] = json.dumps(rec)
        p.write_text("\n".join(lines) + "\n")
    elif how == "unknown item":
        rec = json.loads(lines[1])
        rec["query_item"] = "no-such-item"
        lines[1] = json.dumps(rec)
        p.write_text("\n".join(lines) + "\n")
    elif how == "NaN rating":  # JSON NaN parses as a float: it must not reach the ranking
        p.write_text(p.read_text().replace('"rating": 1.0', '"rating": NaN', 1))
    elif how == "user twice":
        rec = json.loads(lines[1])
        rec["users"].append(dict(rec["users"][0]))
        lines[1] = json.dumps(rec)
        p.write_text("\n".join(lines) + "\n")
    elif how == "group_id twice":
        rec = json.loads(lines[1])
        rec["group_id"] = json.loads(lines[0])["group_id"]
        lines[1] = json.dumps(rec)
        p.write_text("\n".join(lines) + "\n")
    elif how == "empty":
        p.write_text("")
    elif how == "not UTF-8":
        p.write_bytes(p.read_bytes().replace(b"easy-0002", b"easy-\xff002", 1))
    elif how == "ratings not gzip":
        r = p.parent / "ratings.csv.gz"
        r.write_bytes(gzip.decompress(r.read_bytes()))
    elif how == "ratings text":
        r = p.parent / "ratings.csv.gz"
        rows = gzip.decompress(r.read_bytes()).decode().splitlines()
        rows[4] = rows[4].rsplit(",", 2)[0] + ",five," + rows[4].rsplit(",", 1)[1]
        r.write_bytes(gzip.compress(("\n".join(rows) + "\n").encode()))


DATA_CASES = {
    "groups torn mid-line": ("torn", "groups.jsonl:6"),
    "groups garbage line": ("garbage", "groups.jsonl:4"),
    "group without users": ("no users", "groups.jsonl:3: the group has no field 'users'"),
    "unknown query item": ("unknown item", "query_item no-such-item"),
    "NaN rating of a member": ("NaN rating", "groups.jsonl:1: member u0192: field 'rating' = NaN is not a finite number"),
    "a user twice in a group": ("user twice", "groups.jsonl:2: member 3: user 'u0215' was already given at"),
    "a group_id twice": ("group_id twice", "groups.jsonl:2: group_id 'easy-0000' was already given at"),
    "empty groups file": ("empty", "groups.jsonl: the file is empty (0 bytes)"),
    "groups line not UTF-8": ("not UTF-8", "groups.jsonl:3: not UTF-8 text (byte 0xff"),
    "ratings file not gzip": ("ratings not gzip", "ratings.csv.gz: cannot be read as gzip"),
    "non-numeric rating": ("ratings text", "ratings.csv.gz:5: column 'rating' is 'five', not a finite number"),
}


@pytest.mark.parametrize("case", sorted(DATA_CASES))
def test_bad_data_names_file_and_line(tmp_path, case):
    """Refused before the run dir is touched: exit 2, one line naming the file and line, no run dir left behind."""
    how, needle = DATA_CASES[case]
    d = _data_copy(tmp_path)
    _mutate_groups(d, how)
    p = _cli(tmp_path, *RUN, "limit=50", f"task.data_dir={d}")
    assert p.returncode == 2, p.stderr
    assert needle in _one_clean_line(p)
    assert _files(tmp_path / "runs") == {}  # Hydra's own files of the refused job are gone too
