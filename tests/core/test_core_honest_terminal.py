"""Every honest fact in the terminal (issue 30): cut answers with the knob to raise, metric legends under the run's
table, and refused CLI input (unknown backend keys, secrets, non-ASCII names) that writes nothing."""
from __future__ import annotations

import pytest

from recbench.cli.summary import MAX_WIDTH, print_summary
from recbench.store.schema import RunResult
from tests.helpers import run_cli
from tests.toy import TOY, isolate

pytestmark = pytest.mark.fast


def _result(tmp_path, counts: dict, metrics: dict, headline: str = "ptc", max_tokens: int = 64) -> RunResult:
    """A RunResult with the given counts and metrics, its run dir holding a config.yaml with method.max_tokens."""
    (tmp_path / "config.yaml").write_text(f"method:\n  max_tokens: {max_tokens}\n", encoding="utf-8")
    return RunResult.from_dict({
        "schema_version": 2, "task": {"name": "perrec"}, "model": "m", "method": "listwise",
        "headline_metric": headline, "counts": counts, "breakdown": {}, "run_dir": str(tmp_path),
        "metrics": {k: {"mean": v, "ci_low": v - 0.1, "ci_high": v + 0.1, "n": counts["examples"]}
                    for k, v in metrics.items()},
        "this_invocation": {"backend_calls": counts.get("model_calls", 0), "cache_hits": 0, "examples_skipped": 0,
                            "total_wall_time_s": 1.0}})


def test_cut_answers_get_one_line_with_count_share_and_knob(tmp_path, capsys):
    counts = {"examples": 120, "parsed": 112, "parse_failed": 8, "parse_failure_rate": 8 / 120, "model_calls": 120,
              "finish_length": 11, "backend_errors": 2}
    print_summary(_result(tmp_path, counts, {"ptc": 0.033}))
    out = capsys.readouterr().out
    assert ("cut: 11 of 120 answers (9.2%) hit the token limit (finish_reason=length; method.max_tokens=64; raise it, "
            "e.g. method.max_tokens=128)") in " ".join(out.split())
    assert "parse failures 8 (6.7%)" in out and "backend errors 2" in out  # the other two facts, as before
    assert out.count("finish_reason=length") == 1  # one line, no second warning


def test_no_cut_line_when_no_answer_was_cut(tmp_path, capsys):
    counts = {"examples": 120, "parsed": 120, "model_calls": 120, "finish_length": 0}
    print_summary(_result(tmp_path, counts, {"ptc": 0.2}))
    out = capsys.readouterr().out
    assert "cut:" not in out and "token limit" not in out
    assert "examples 120 | parsed 120" in out


def test_legends_for_the_metrics_in_the_table_wrapped_within_120_columns(tmp_path, capsys):
    """RecBench+ cmr: its meaning, direction and why its n differs, under the table, at word boundaries."""
    from recbench.report.legends import legend_lines

    counts = {"examples": 36, "parsed": 36, "model_calls": 36}
    print_summary(_result(tmp_path, counts, {"ftr": 0.5, "cmr": 0.25}, headline="ftr"))
    out = capsys.readouterr().out
    assert all(len(ln) <= MAX_WIDTH for ln in out.splitlines())
    flat = " ".join(out.split())
    (cmr,) = legend_lines(["cmr"])
    assert "condition match rate" in cmr and "higher is better" in cmr and "defined on condition queries" in cmr
    assert " ".join(cmr.split()) in flat  # the whole legend, wrapped only between words
    assert flat.index(" ".join(cmr.split())) < flat.index("examples 36 | parsed 36")  # right under the table
    assert "kg_existence:" not in out  # only the metrics shown


@pytest.fixture()
def cli(tmp_path, monkeypatch, capfd):
    """`python -m recbench <TOY> <args>` in this process, runs and cache under tmp_path."""
    isolate(monkeypatch, tmp_path)
    return lambda *args: run_cli([*TOY, *args], capfd)


def test_toy_run_prints_the_legend_of_each_metric_shown(cli):
    from recbench.report.legends import legend_lines

    r = cli()
    assert r.code == 0, r.err
    flat = " ".join(r.out.split())
    for line in legend_lines(["toy_tau", "toy_hit"]):
        assert " ".join(line.split()) in flat
    assert "toy_tau: Kendall tau of the true vs the predicted order" in r.out
    assert all(len(ln) <= MAX_WIDTH for ln in r.out.splitlines())


def test_sweep_prints_one_clean_report_line_and_no_raw_log_line(tmp_path, monkeypatch, capfd):
    isolate(monkeypatch, tmp_path)
    r = run_cli(["-m", *TOY, "method=toy_popular,toy_rank"], capfd)
    assert r.code == 0, r.err
    both = r.out + r.err
    assert "[HYDRA] report:" not in both and "runs ->" not in both
    (line,) = [ln for ln in both.splitlines() if "report:" in ln and "/report" in ln]
    assert line.startswith("sweep report: ") and line.endswith(("report.html", "report.md"))
