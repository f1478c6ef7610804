"""The template and noise-floor audits in `recbench.compare` and the report, on run dirs made by the app with the
planted doubles: the paired verdict under each template (template 0 = the plain comparison; a pair whose winner
swaps with the wording keeps neither sign nor verdict), the noise floor on every comparison record of a noise-audited
run (a difference below it marked), and the report's tables showing metrics.json's numbers."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from recbench.audits.templates import template_verdicts, verdict_kept
from recbench.run.evaluate import run_from_config
from recbench.stats.verdicts import compare_runs, load_systems
from recbench.testing.planted_audits import BatchSensitive, PlantedTemplateEffect
from tests.helpers import compose_cfg, read_samples

pytestmark = pytest.mark.full  # eight runs of the app, shared by the module's tests


def _run(root: Path, name: str, backend, *overrides: str) -> dict:
    cfg = compose_cfg(["method=listwise", "run.progress=false", f"cache.path={root / 'c.sqlite'}", *overrides])
    return run_from_config(cfg, root / name, backend=backend).to_dict()


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """t/a, t/b: template-audited (K=3) doubles whose better template is 0 for a and 2 for b; n/a: noise-audited
    batch-sensitive double, n/b: the same double (other seed) without the audit: equal answers at the run's batch size."""
    r = tmp_path_factory.mktemp("audits")
    _run(r, "t/a", PlantedTemplateEffect([1.0, 0.5, 0.0], seed=0), "limit=30", "audit.templates=3", "model.name=ta")
    _run(r, "t/b", PlantedTemplateEffect([0.0, 0.5, 1.0], seed=0), "limit=30", "audit.templates=3", "model.name=tb")
    _run(r, "n/a", BatchSensitive(0.5, seed=0), "limit=12", "audit.noise.batch_size=4", "model.name=na")
    _run(r, "n/b", BatchSensitive(0.5, seed=1), "limit=12", "model.name=nb")
    return r


def test_verdict_under_each_template(root):
    systems = load_systems([root / "t"])
    recs = template_verdicts(systems, metrics=["ptc"])
    assert sorted(c.slice for c in recs) == ["template=0", "template=1", "template=2"]
    plain = next(c for c in compare_runs([root / "t"], metrics=["ptc"], slices=False))
    t0 = next(c for c in recs if c.slice == "template=0")
    assert (t0.diff, t0.ci_low, t0.ci_high, t0.p_value) == pytest.approx((plain.diff, plain.ci_low, plain.ci_high,
                                                                           plain.p_value))
    # template 2's difference by hand from the records
    per = {}
    for name in ("a", "b"):
        per[name] = {r["id"]: next(v for v in r["variants"] if v["variant"].get("template") == 2)["metrics"]["ptc"]
                     for r in read_samples(root / "t" / name)}
    t2 = next(c for c in recs if c.slice == "template=2")
    hand = np.mean([per["a"][i] - per["b"][i] for i in per["a"]])
    assert t2.diff == pytest.approx(hand) and t2.diff < 0 < t0.diff
    assert t0.better == "a" and t2.better == "b"
    assert {c.family for c in recs} == {f"perrec · ptc · template={j}" for j in range(3)}
    kept = verdict_kept(recs)
    assert kept == [{"run_a": "a", "run_b": "b", "metric": "ptc", "templates": 3,
                     "diff": [c.diff for c in sorted(recs, key=lambda c: c.slice)],
                     "p_adjusted": [c.p_adjusted for c in sorted(recs, key=lambda c: c.slice)],
                     "verdict": [c.verdict for c in sorted(recs, key=lambda c: c.slice)],
                     "sign_kept": False, "verdict_kept": False}]


def test_compare_cli_prints_the_template_table_and_writes_its_json(root, tmp_path, capsys):
    from recbench.cli.compare import main

    out = tmp_path / "cmp.json"
    assert main([str(root / "t"), "--metric", "ptc", "--no-slices", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "verdicts under each prompt template" in text and "templates: a = a  vs  b = b" in text
    plain = json.loads(out.read_text())
    assert [r["slice"] for r in plain] == ["all"] and "noise_floor" not in plain[0]  # unchanged without noise audits
    per = json.loads((tmp_path / "cmp.templates.json").read_text())
    assert [r["slice"] for r in per] == ["template=0", "template=1", "template=2"]


def test_noise_floor_marks_a_smaller_difference(root, capsys):
    floor = json.loads((root / "n" / "a" / "metrics.json").read_text())["extra"]["noise_floor"]
    comps = compare_runs([root / "n"], metrics=["ptc"])
    overall = next(c for c in comps if c.slice == "all")
    assert overall.diff == 0.0  # both doubles answer the same at the run's batch size
    assert overall.noise_floor == pytest.approx(floor["metrics"]["ptc"]["floor"]) and overall.noise_floor > 0
    assert overall.below_noise_floor is True
    easy = next(c for c in comps if c.slice == "difficulty=easy")
    assert easy.noise_floor == pytest.approx(floor["by_slice"]["difficulty=easy"]["ptc"]["floor"])
    d = overall.to_dict()
    assert d["noise_floor"] == overall.noise_floor and d["below_noise_floor"] is True
    from recbench.cli.compare import main

    assert main([str(root / "n"), "--metric", "ptc", "--no-slices"]) == 0
    text = capsys.readouterr().out
    assert "n.s. ≈" in text and "≈ |diff| is below the noise floor of either run" in text


def test_report_tables_show_metrics_json(root, tmp_path):
    from recbench.report import write_report

    written = write_report([root], tmp_path / "rep", formats=("md", "csv"))
    md = Path(written["md"]).read_text()
    assert "## Template and noise-floor audits" in md
    assert "### Template audit: score and variance across prompt templates" in md
    assert "### Noise floor: answers and headline under another batch size" in md
    assert "### Verdicts under each prompt template" in md
    import pandas as pd

    from recbench.report.numbers import fmt

    def row(table_title: str, model: str) -> str:
        part = md.split(f"### {table_title}")[1].split("###")[0]
        return next(line for line in part.splitlines() if f"| {model} |" in line)

    ta = json.loads((root / "t" / "a" / "metrics.json").read_text())["extra"]["template_audit"]
    line = row("Template audit: score and variance across prompt templates", "ta")
    for p in ta["per_template"]:
        assert f"{fmt(p['mean'])} [{fmt(p['ci_low'])}, {fmt(p['ci_high'])}]" in line
    assert fmt(ta["variance"]["shares"]["template"]) in line and fmt(ta["spread"]) in line
    tables = pd.read_csv(written["tables_csv"])
    assert set(tables["table"]) >= {"template-audit", "template-verdicts", "noise-floor"}
    nf = json.loads((root / "n" / "a" / "metrics.json").read_text())["extra"]["noise_floor"]
    line = row("Noise floor: answers and headline under another batch size", "na")
    assert fmt(nf["floor"]) in line and "batch_size=4" in line and "batch_size=16" in line
    verdicts = md.split("### Verdicts under each prompt template")[1].split("###")[0]
    assert "| no | no |" in verdicts  # the winner swaps with the wording: neither sign nor verdict kept
    assert "≈" in md  # the noise pair's comparison row is marked, with its caption
    assert "below the noise floor of either run" in md
    assert math.isfinite(nf["floor"])


def test_terminal_summary_states_the_audits_as_the_report_does(root, tmp_path, capsys):
    """The end-of-run summary carries one line per audit, with the report table's numbers and verdict."""
    from recbench.cli.summary import print_summary
    from recbench.store.schema import RunResult
    from recbench.report import write_report
    from recbench.report.audit_tables import p_text

    md = Path(write_report([root], tmp_path / "rep", formats=("md",))["md"]).read_text()
    capsys.readouterr()
    ta = json.loads((root / "t" / "a" / "metrics.json").read_text())
    print_summary(RunResult.from_dict(ta))
    out = " ".join(capsys.readouterr().out.split())  # the console may wrap a long line
    b = ta["extra"]["template_audit"]
    line = out.split("template audit (", 1)[1]
    assert line.startswith(f"3 templates, {b['examples']} examples): ptc t0 ")
    for p in b["per_template"]:
        assert f"t{p['template']} {p['mean']:.3f} [{p['ci_low']:.3f}, {p['ci_high']:.3f}]" in line
    eff = b["template_effect"]
    verdict = "DETECTED" if eff["detected"] else "n.s."
    assert f"template effect p = {p_text(eff['p_value'])}: {verdict}" in line
    part = md.split("### Template audit: score and variance across prompt templates")[1].split("###")[0]
    row = next(x for x in part.splitlines() if "| ta |" in x)
    assert f"| {p_text(eff['p_value'])} | {'yes' if eff['detected'] else 'no'} |" in row  # the same verdict

    na = json.loads((root / "n" / "a" / "metrics.json").read_text())
    print_summary(RunResult.from_dict(na))
    out = " ".join(capsys.readouterr().out.split())
    nf = na["extra"]["noise_floor"]
    head = nf["metrics"]["ptc"]
    assert (f"noise floor (re-decoded with batch_size=4, the run had batch_size=16; 12 examples): answer text changed "
            f"{nf['answers_changed']['share']:.0%}") in out
    assert f"ptc shift {head['diff']:+.3f} [{head['ci_low']:+.3f}, {head['ci_high']:+.3f}]" in out
    assert f"floor {nf['floor']:.3f}" in out
    assert "template audit" not in out  # a run without that audit has no line for it
