"""Bad input to the duckdb build engine at scale: a malformed line in the middle of a large CSV / JSONL(.gz) is named
by file and line in one `recbench:` line (exit 2, nothing written); a disk that fills while the work database or
the output is written gives DiskFull, with no output folder and no work folder left behind."""
from __future__ import annotations

import errno
import gzip
from pathlib import Path

import pytest

from recbench.store.diskspace import DiskFull
from recbench.tasks.perrec.build import duckdb_engine as build_duckdb, write as build_write
from recbench.tasks.perrec.build import BuildConfig, build, main

pytestmark = pytest.mark.fast

ROWS = 200_000  # the bad line sits after the first 100,000 rows: well past DuckDB's sniffing sample


def run_cli(tmp: Path, capsys, *args: str) -> str:
    with pytest.raises(SystemExit) as e:
        main([*args, "--out", str(tmp / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and err[0].startswith("recbench: error: "), err
    assert not (tmp / "out").exists() and not (tmp / "out.work").exists()
    return err[0]


def movielens(tmp: Path, bad: str) -> Path:
    d = tmp / "ml"
    d.mkdir()
    rows = [f"{i % 997},{i % 1009},{1 + i % 5}.0,{1_500_000_000 + i}" for i in range(ROWS)]
    rows[ROWS // 2] = bad
    (d / "ratings.csv").write_text("userId,movieId,rating,timestamp\n" + "\n".join(rows) + "\n")
    (d / "movies.csv").write_text("movieId,title,genres\n1,A,x\n")
    return d


@pytest.mark.parametrize("bad, needle", [
    ("5,7,four,1500000000", f"ratings.csv:{ROWS // 2 + 2}: column 'rating' is 'four', not a finite number"),
    ("5,7,,1500000000", f"ratings.csv:{ROWS // 2 + 2}: column 'rating' is empty, not a finite number"),
    ("5,7,4.0,soon", f"ratings.csv:{ROWS // 2 + 2}: column 'timestamp' is 'soon', not a finite number"),
    ("5,7,4.0,1500000000,extra", f"ratings.csv:{ROWS // 2 + 2}: not a well-formed line")])
def test_a_bad_csv_line_in_the_middle_is_named(tmp_path, capsys, bad, needle):
    err = run_cli(tmp_path, capsys, "--source", "movielens", "--input", str(movielens(tmp_path, bad)))
    assert needle in err, err


@pytest.mark.parametrize("name", ["reviews.jsonl", "reviews.jsonl.gz"])
@pytest.mark.parametrize("bad, needle", [('{"user_id": "u1", broken', "not a well-formed line"),
                                         ('{"user_id": "u1", "parent_asin": "b", "rating": NaN, "timestamp": 5}',
                                          "field 'rating' = NaN is not a finite number"),
                                         ('{"user_id": "u1", "parent_asin": "b", "rating": "x", "timestamp": 5}',
                                          "not a finite number")])
def test_a_bad_jsonl_line_in_the_middle_is_named(tmp_path, capsys, name, bad, needle):
    rows = [f'{{"user_id": "u{i % 997}", "parent_asin": "b{i % 1009}", "rating": {1 + i % 5}, "timestamp": {i}}}'
            for i in range(ROWS)]
    rows[ROWS // 2] = bad
    text = "\n".join(rows) + "\n"
    p = tmp_path / name
    p.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
    err = run_cli(tmp_path, capsys, "--source", "amazon-jsonl", "--input", str(p))
    assert f"{name}:{ROWS // 2 + 1}: " in err and needle in err, err


def test_a_missing_column_is_named(tmp_path, capsys):
    d = tmp_path / "ml"
    d.mkdir()
    (d / "ratings.csv").write_text("userId,movieId,stars,timestamp\n1,1,4.0,100\n")
    (d / "movies.csv").write_text("movieId,title,genres\n1,A,x\n")
    err = run_cli(tmp_path, capsys, "--source", "movielens", "--input", str(d))
    assert "ratings.csv: missing column(s) ['rating']" in err, err


def _full(*_a, **_k):
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("where", ["work", "output"])
def test_a_full_disk_is_disk_full_and_leaves_nothing(tmp_path, monkeypatch, where):
    d = movielens(tmp_path, "5,7,4.0,1500000001")
    if where == "work":  # DuckDB's own write error, as it reports a full disk
        import duckdb

        def full_db(*_a, **_k):
            raise duckdb.IOException('IO Error: Could not write file "db.duckdb.wal": No space left on device')

        monkeypatch.setattr(build_duckdb.sql, "annotate", full_db)
    else:  # the output half written: groups.jsonl done, then the disk fills
        real = build_write.json.dumps
        calls = {"n": 0}

        def dumps(*a, **k):
            calls["n"] += 1
            if calls["n"] > 3:
                _full()
            return real(*a, **k)

        monkeypatch.setattr(build_write.json, "dumps", dumps)
    with pytest.raises(DiskFull, match="disk full"):
        build("movielens", str(d), str(tmp_path / "out"), None, BuildConfig(gamma=5, per_size=2, heldout_per_size=1))
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["ml"], left  # no out/, no out.work/, no .out.partial/
