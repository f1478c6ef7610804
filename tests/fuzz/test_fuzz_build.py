"""The builder's bad-input suite (docs/fuzz.md, "The builder"): every case of tests/fuzz/build_cases.py through
`python -m recbench.build perrec`'s entry point, in this process, on every engine that reads the input. Each asserts
exit 2, exactly one `recbench:` line holding the case's message, no traceback, nothing written (no output, staging or
work folder, no probe left behind), and that the engines name the same place (file and line, or flag, or path); one
case plants a bad rating near the end of 10 M rows and runs both engines in processes of their own, under a memory
limit."""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recbench.tasks.perrec.build import main
from tests.fuzz.build_cases import BAD, FLAGS, PATHS, ROWS, Defect, Format, _row, layout, matrix

pytestmark = pytest.mark.full


def _invoke(args: list[str], capsys) -> tuple[int, list[str], str]:
    """(exit code, the recbench: lines, all of stderr) of one in-process build."""
    try:
        main(args)
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    err = capsys.readouterr().err
    return code, [x for x in err.splitlines() if x.startswith("recbench:")], err


def _refused(args: list[str], capsys, tmp: Path, message: str) -> str:
    """Run a build that must be refused; return its one line without the prefix."""
    before = sorted(p.name for p in tmp.iterdir())
    code, lines, err = _invoke(args, capsys)
    assert "Traceback" not in err, err
    assert code == 2 and len(lines) == 1, (code, err)
    assert lines[0].startswith("recbench: error: ") and message in lines[0], lines[0]
    assert sorted(p.name for p in tmp.iterdir()) == before, "a refused build left files behind"
    return lines[0][len("recbench: error: "):]


def place(line: str) -> str:
    """What a refusal names first: the file and line, the file, or the flag and its value."""
    return line.split(": ", 1)[0]


def _plant(tmp: Path, fmt: Format, defect: Defect) -> str:
    rows = [_row(i) for i in range(ROWS)] if defect.rows else []
    return fmt.write(tmp, rows, defect.raw[layout(fmt)])


@pytest.mark.parametrize("fmt, defect", matrix(), ids=[f"{f.id}-{d.id}" for f, d in matrix()])
def test_a_bad_field_is_refused_alike_by_every_engine(fmt, defect, tmp_path, capsys):
    places = {}
    for engine in fmt.engines:
        case = tmp_path / engine
        case.mkdir()
        path = _plant(case, fmt, defect)
        args = ["--source", fmt.source, "--input", path, "--engine", engine, "--gamma", "5", "--out", str(case / "out")]
        line = _refused(args, capsys, case, defect.message or "")
        places[engine] = place(line).replace(str(case), "<case>")
    file = Path(path).name if fmt.source != "movielens" else "ratings.csv"
    named_line = defect.rows and defect.id != "missing-column"
    want = f"{file}:{BAD + 1 + fmt.header}" if named_line else file
    assert all(p.endswith(want) for p in places.values()), places
    assert len(set(places.values())) == 1, f"the engines name different places: {places}"


def _good(tmp: Path) -> Path:
    """A good MovieLens folder (and a good reviews.jsonl in it) for the flag and path cases."""
    from tests.fuzz.build_cases import FORMATS

    good = tmp / "good"
    good.mkdir()
    folder = Path(FORMATS[0].write(good, [_row(i) for i in range(ROWS)], None))
    FORMATS[3].write(folder, [_row(i) for i in range(ROWS)], None)
    return folder


@pytest.mark.parametrize("engine", ["duckdb", "pandas"])
@pytest.mark.parametrize("case", FLAGS, ids=[c[0] for c in FLAGS])
def test_a_bad_flag_is_refused_before_any_work(case, engine, tmp_path, capsys):
    _, flags, message = case
    good = _good(tmp_path)
    args = ["--source", "movielens", "--input", str(good), "--engine", engine, *flags, "--out", str(tmp_path / "out")]
    _refused(args, capsys, tmp_path, message)


@pytest.mark.parametrize("engine", ["duckdb", "pandas"])
@pytest.mark.parametrize("case", PATHS, ids=[c[0] for c in PATHS])
def test_a_bad_path_is_one_line(case, engine, tmp_path, capsys):
    _, args, message = case
    good = _good(tmp_path)
    (tmp_path / "empty").mkdir()
    (tmp_path / "nomovies").mkdir()
    (tmp_path / "nomovies" / "ratings.csv").write_text((good / "ratings.csv").read_text())
    (tmp_path / "afile").write_text("x")
    fill = {"good": str(good), "tmp": str(tmp_path)}
    args = [a.format(**fill) for a in args]
    if "--out" not in args:
        args += ["--out", str(tmp_path / "out")]
    _refused([*args, "--engine", engine], capsys, tmp_path, message.format(**fill))


def test_a_missing_category_is_named_with_every_other(tmp_path, capsys):
    good = _good(tmp_path)
    cats = ["--category", f"A={good}/reviews.jsonl", "--category", f"B={tmp_path}/b.jsonl",
            "--category", f"C={tmp_path}"]
    line = _refused(["--source", "amazon-jsonl", *cats, "--out", str(tmp_path / "out")], capsys, tmp_path,
                    "2 inputs refused, nothing started")
    assert f"--category B={tmp_path}/b.jsonl: no such file" in line and f"--category C={tmp_path}: a folder" in line


def test_no_group_is_refused_not_written(tmp_path, capsys):
    good = _good(tmp_path)
    for engine in ("duckdb", "pandas"):
        _refused(["--source", "movielens", "--input", str(good), "--engine", engine, "--gamma", "100000",
                  "--out", str(tmp_path / "out")], capsys, tmp_path, "no group meets the selection: 0 eligible ratings")


def test_off_grid_ratings_warn_on_both_engines(tmp_path, capsys):
    from tests.fuzz.build_cases import FORMATS

    rows = [_row(i) for i in range(ROWS)]
    for r in rows[::7]:
        r["rating"] = round(r["rating"] - 0.1, 1) if r["rating"] > 1 else 1.1
    folder = Path(FORMATS[0].write(tmp_path, rows, None))
    warned = {}
    for engine in ("duckdb", "pandas"):
        code, lines, err = _invoke(["--source", "movielens", "--input", str(folder), "--engine", engine, "--gamma",
                                    "5", "--out", str(tmp_path / f"out-{engine}")], capsys)
        assert code == 0 and len(lines) == 1 and lines[0].startswith("recbench: warning: "), err
        warned[engine] = lines[0]
    n_off = len(rows[::7])
    assert warned["duckdb"] == warned["pandas"], warned
    assert f"ratings.csv:2: rating 1.1 and {n_off - 1} more of {ROWS} are not multiples of 1/64" in warned["duckdb"]


# ---- the far line: a bad rating near the end of 10 M rows, each engine in a process of its own ------------------------
FAR_ROWS = 10_000_000
MEMORY_LIMIT = 8 << 30  # address space of each build process


def _write_far(folder: Path) -> int:
    """A 10 M-row MovieLens folder whose rating 7 sits 10 rows before the end; returns the bad line's number."""
    import numpy as np
    import pandas as pd

    folder.mkdir()
    (folder / "movies.csv").write_text("movieId,title,genres\n1,A,x\n")
    bad = FAR_ROWS - 10
    with open(folder / "ratings.csv", "w") as f:
        f.write("userId,movieId,rating,timestamp\n")
        for start in range(0, FAR_ROWS, 1_000_000):
            i = np.arange(start, min(start + 1_000_000, FAR_ROWS))
            rating = (1 + i % 9) / 2 + 0.5
            rating[i == bad] = 7.0
            pd.DataFrame({"u": i % 60_000, "m": i % 9_973, "r": rating, "t": 1_000_000_000 + i}).to_csv(
                f, header=False, index=False)
    return bad + 2  # the header is line 1


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def test_a_bad_rating_near_the_end_of_10m_rows(tmp_path):
    line = _write_far(tmp_path / "ml")
    for engine in ("duckdb", "pandas"):
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "recbench.build", "perrec", "--source", "movielens", "--input",
                            str(tmp_path / "ml"), "--engine", engine, "--out", str(tmp_path / "out")],
                           capture_output=True, text=True, preexec_fn=_limit, timeout=900,
                           env={**os.environ, "PYTHONWARNINGS": "ignore"})
        wall = time.perf_counter() - t0
        lines = [x for x in p.stderr.splitlines() if x.startswith("recbench:")]
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e6  # the largest child so far, GB
        print(f"{engine}: exit {p.returncode} in {wall:.1f} s, children's peak RSS so far {peak:.2f} GB; {lines}")
        assert "Traceback" not in p.stderr and p.returncode == 2 and len(lines) == 1, p.stderr[-3000:]
        assert f"ratings.csv:{line}: rating 7 is outside the rating scale 0.5-5" in lines[0], lines[0]
        assert sorted(x.name for x in tmp_path.iterdir()) == ["ml"]


def test_mixed_line_endings_are_named_by_duckdb_and_read_by_pandas(tmp_path, capsys):
    """A CRLF file with one LF line (a line appended by another editor): DuckDB's reader cannot read it, so the duckdb
    engine names the line and the fix; the pandas engine reads it (the one input the engines answer differently)."""
    from tests.fuzz.build_cases import FORMATS

    folder = Path(FORMATS[0].write(tmp_path, [_row(i) for i in range(ROWS)], None))
    text = (folder / "ratings.csv").read_text().replace("\n", "\r\n") + "1,b1,4.0,1600000000\n"
    (folder / "ratings.csv").write_bytes(text.encode())
    line = _refused(["--source", "movielens", "--input", str(folder), "--engine", "duckdb", "--gamma", "5",
                     "--out", str(tmp_path / "out")], capsys, tmp_path, "LF and CRLF mixed")
    assert line.startswith(f"{folder}/ratings.csv:{ROWS + 2}: ")
    code, lines, err = _invoke(["--source", "movielens", "--input", str(folder), "--engine", "pandas", "--gamma", "5",
                                "--out", str(tmp_path / "out")], capsys)
    assert code == 0 and not lines, err
