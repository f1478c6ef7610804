"""Every path a command takes (issue: the builder as trustworthy as the runner): a missing, wrong-kind or unwritable
path given to view, compare, audit, report, cache or merge is one `recbench:` line with the fix, exit 2, and leaves
nothing behind. The builder's own paths: tests/fuzz/test_fuzz_build.py."""
from __future__ import annotations

from pathlib import Path

import pytest

from recbench.store.paths import PathRefused, writable_dir

pytestmark = pytest.mark.fast


def _commands():
    from recbench.cli import audit, cache, compare, merge, view
    from recbench.report import __main__ as report

    return {"view": view.main, "compare": compare.main, "audit": audit.main, "report": report.main,
            "cache": lambda a: cache.main(["stats", *a]), "merge": merge.main}


CASES = [  # (command, args with {tmp}, a substring of the one line)
    ("view", ["{tmp}/nope"], "nope: no such folder"),
    ("view", ["{tmp}/afile"], "afile: a file, not a folder"),
    ("view", ["{tmp}/run", "--out", "/proc/recbench-x/samples.html"], "cannot write in /proc"),
    ("view", ["{tmp}/run", "--out", "{tmp}/run"], "a folder, not a file"),
    ("compare", ["{tmp}/nope", "{tmp}/run"], "no such run or sweep dir"),
    ("audit", ["{tmp}/nope"], "nope: no such folder"),
    ("audit", ["{tmp}/afile"], "afile: a file, not a folder"),
    ("report", ["{tmp}/nope"], "nope: no such folder"),
    ("report", ["{tmp}/afile"], "afile: a file, not a folder"),
    ("report", ["{tmp}/run", "--out", "{tmp}/afile"], "--out {tmp}/afile: a file, not a folder"),
    ("report", ["{tmp}/run", "--out", "/proc/recbench-x"], "cannot write in /proc"),
    ("cache", ["{tmp}/nope.sqlite"], "no cache file or folder"),
    ("merge", ["{tmp}/nope"], "no such shard dir or folder"),
]


@pytest.fixture
def tmp(tmp_path):
    (tmp_path / "afile").write_text("x")
    run = tmp_path / "run"
    run.mkdir()
    (run / "samples.jsonl").write_text("")
    return tmp_path


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("name, args, needle", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_bad_path_is_one_line_exit_2_and_nothing_written(name, args, needle, tmp, capsys):
    before = _listing(tmp)
    code = _commands()[name]([a.format(tmp=tmp) for a in args])
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert code == 2 and len(err) == 1 and err[0].startswith("recbench:"), (code, err)
    assert needle.format(tmp=tmp) in err[0], err[0]
    assert "Traceback" not in err[0]
    assert _listing(tmp) == before


def test_a_writable_probe_leaves_nothing(tmp_path):
    writable_dir(tmp_path / "a" / "b", "--out", "the report")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(PathRefused, match="is a file, not a folder"):
        (tmp_path / "f").write_text("x")
        writable_dir(tmp_path / "f" / "x", "--out", "the report")
