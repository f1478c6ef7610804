"""`python -m recbench.results` and `recbench.results.connect()` (issue 43): the views runs, metrics and samples read the
run dirs as they are on disk and agree with read_run; only one SELECT runs; bad SQL, an unreadable schema version and
an empty folder are one `recbench:` line and exit 2; a version-1 run dir is read as it is."""
from __future__ import annotations

import json
import math
import shutil

import pytest

from recbench import results
from recbench.store.schema import read_run
from tests.publish.runs import model_free_sweep

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    return model_free_sweep(tmp_path_factory.mktemp("sql"))


def _close(a, b) -> bool:
    return (a is None and (b is None or math.isnan(b))) or (a is not None and math.isclose(a, b))


def test_the_views_agree_with_read_run(sweep):
    con = results.connect(sweep)
    runs = {r[0]: r for r in con.execute("SELECT run_dir, method, headline, examples, seed, \"limit\" FROM runs").fetchall()}
    assert len(runs) == 3
    for d, (_, method, headline, examples, seed, limit) in runs.items():
        rd = read_run(d)
        assert method == rd.result.method and examples == rd.result.counts.examples and (seed, limit) == (0, 8)
        assert headline == rd.result.metrics[rd.result.headline_metric].mean
        got = {(s, v, m): (mean, lo, hi, n) for s, v, m, mean, lo, hi, n in con.execute(
            "SELECT slice, value, metric, mean, ci_low, ci_high, n FROM metrics WHERE run_dir = ?", [d]).fetchall()}
        want = {("all", "all", m): s for m, s in rd.result.metrics.items()}
        want.update({(k, v, m): s for k, vals in rd.result.breakdown.items() for v, sl in vals.items()
                     for m, s in sl.metrics.items()})
        assert set(got) == set(want)
        for key, s in want.items():
            mean, lo, hi, n = got[key]
            assert _close(mean, s.mean) and _close(lo, s.ci_low) and _close(hi, s.ci_high) and n == s.n, key
        samples = con.execute("SELECT id, metrics['ptc'], meta->>'difficulty' FROM samples WHERE run_dir = ? ORDER BY id",
                              [d]).fetchall()
        assert [(s.id, s.metrics["ptc"], s.meta["difficulty"]) for s in sorted(rd.samples(), key=lambda s: s.id)] \
            == samples


def test_the_cli_answers_in_each_format(sweep, capsys):
    sql = "SELECT method, mean FROM metrics WHERE slice = 'history' AND value = 'long' AND metric = 'ptc' ORDER BY method"
    assert results.main([str(sweep), "--sql", sql, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["method"] for r in rows] == ["bm25_history", "random", "user_avg"]
    assert results.main([str(sweep), "--sql", sql, "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "method,mean"
    assert results.main([str(sweep), "--sql", sql]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "| method | mean |" and len(out) == 5


@pytest.mark.parametrize("sql, says", [
    ("SELEC method FROM runs", "recbench: SQL error: Parser Error: syntax error"),
    ("SELECT nope FROM runs", "recbench: SQL error: Binder Error"),
    ("COPY (SELECT 1) TO 'x.csv'", "recbench: read-only: one SELECT query at a time (this is COPY)"),
    ("CREATE TABLE t AS SELECT 1", "recbench: read-only: one SELECT query at a time (this is CREATE)"),
    ("SELECT 1; SELECT 2", "recbench: read-only: one SELECT query at a time (this is SELECT, SELECT)"),
])
def test_bad_sql_is_one_line_and_exit_2(sweep, capsys, sql, says):
    assert results.main([str(sweep), "--sql", sql]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(says), err


def _copy_with_version(sweep, tmp_path, version):
    src = next(sweep.rglob("metrics.json")).parent
    dst = tmp_path / "old" / "run"
    shutil.copytree(src, dst)
    d = json.loads((dst / "metrics.json").read_text())
    d["schema_version"] = version
    if version == 1:  # version 1 had no metric_info and no cluster_by
        d.pop("metric_info")
        d.pop("cluster_by")
    (dst / "metrics.json").write_text(json.dumps(d))
    return dst


def test_a_version_1_run_dir_is_read_as_it_is(sweep, tmp_path):
    dst = _copy_with_version(sweep, tmp_path, 1)
    con = results.connect(tmp_path / "old")
    assert con.execute("SELECT schema_version FROM runs").fetchall() == [(1,)]
    rows = con.execute("SELECT metric, mean, direction FROM metrics WHERE slice = 'all'").fetchall()
    assert rows and all(d is None for _, _, d in rows)  # no metric_info: no direction, never a guess
    assert {m for m, _, _ in rows} == set(read_run(dst).result.metrics)


def test_an_unknown_schema_version_is_refused_in_one_line(sweep, tmp_path, capsys):
    dst = _copy_with_version(sweep, tmp_path, 99)
    assert results.main([str(tmp_path / "old"), "--sql", "SELECT * FROM runs"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"recbench: {dst / 'metrics.json'}: schema_version 99 is not readable by this recbench (reads 1, 2); "
                   "upgrade recbench, or rerun the command that made it"]


def test_no_run_dirs_is_one_line(tmp_path, capsys):
    assert results.main([str(tmp_path), "--sql", "SELECT 1"]) == 2
    assert capsys.readouterr().err.startswith("recbench: no run dirs")
    assert results.main([str(tmp_path / "missing"), "--sql", "SELECT 1"]) == 2
    assert "no such runs root" in capsys.readouterr().err
