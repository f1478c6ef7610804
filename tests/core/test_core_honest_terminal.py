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


def _files_holding(root, text: str) -> list[str]:
    """Paths under root whose name or content holds `text`."""
    out = []
    for p in root.rglob("*") if root.exists() else []:
        if text in p.name or (p.is_file() and text in p.read_text(encoding="utf-8", errors="replace")):
            out.append(str(p))
    return out


def test_unknown_backend_key_is_refused_before_any_run_dir(tmp_path, cli):
    r = cli("+model.backend.api_key=sk-SECRET123", "limit=3")
    assert r.code == 2
    (line,) = [ln for ln in r.err.splitlines() if ln.strip()]
    assert line.startswith("recbench: config error: model.backend.api_key: ") and "takes no key 'api_key'" in line
    assert "sk-SECRET123" not in r.out + r.err
    assert not (tmp_path / "runs").exists()  # nothing written: no run dir, no config copy holding the key


def test_secret_named_values_stay_out_of_run_dir_names_files_and_output(tmp_path, cli):
    r = cli("+model.token=sk-SECRET123", "limit=3")
    assert r.code == 0, r.err
    assert "sk-SECRET123" not in r.out + r.err
    assert (tmp_path / "runs" / "toy" / "toy_scripted" / "toy_rank" / "+model.token=***,limit=3").is_dir()
    assert _files_holding(tmp_path / "runs", "sk-SECRET123") == []
    assert _files_holding(tmp_path / "cache", "sk-SECRET123") == []


def test_redaction_masks_secret_keys_but_not_their_neighbours():
    from recbench.store.redact import redact_text, secret_key
    from recbench.store.rundir import variant_name

    assert redact_text("- +model.backend.api_key=sk-1\noverride_dirname: +x.token=t1,limit=3") == (
        "- +model.backend.api_key=***\noverride_dirname: +x.token=***,limit=3")
    assert redact_text('  password: pw\n{"secret": "s", "n": 1}') == '  password: ***\n{"secret": "***", "n": 1}'
    assert redact_text("api_key_env: OPENAI_API_KEY\nmax_tokens: 64") == "api_key_env: OPENAI_API_KEY\nmax_tokens: 64"
    assert [secret_key(k) for k in ("api_key", "+db.password", "hf_token", "api_key_env", "max_tokens")] == [
        True, True, True, False, False]
    assert variant_name("+model.backend.api_key=sk-1,limit=3") == "+model.backend.api_key=***,limit=3"


def test_non_ascii_model_name_is_an_unknown_model_with_the_choices(tmp_path, cli):
    from recbench.cli.overrides import quote_non_ascii

    r = cli("model=modèle")
    assert r.code == 2
    (line,) = [ln for ln in r.err.splitlines() if ln.strip()]
    assert line.startswith("recbench: config error: Unknown model 'modèle'.") and "toy_scripted" in line
    assert "Lexer" not in r.err and not (tmp_path / "runs").exists()
    assert quote_non_ascii(["model=a,modèle", "limit=3", "+task.note=l'été"]) == [
        'model=a,"modèle"', "limit=3", '+task.note="l\'été"']
