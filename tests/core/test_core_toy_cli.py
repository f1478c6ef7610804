"""The entry point's outputs on the toy task, in-process: the terminal summary (headline, slices in the task's order,
the numbers of metrics.json), plan mode (exact and estimated request counts, no model started, the power line equal
to statsmodels) and the paired comparison of two runs (clusters, exact sign-flip p, verdicts)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from recbench.cli.summary import cell_text
from tests.helpers import run_cli
from tests.toy import TOY, isolate
from tests.toy.scripted import ToyBackend

pytestmark = pytest.mark.fast


@pytest.fixture()
def cli(tmp_path, monkeypatch, capfd):
    """`python -m recbench <TOY> <args>` in this process, runs and cache under tmp_path."""
    isolate(monkeypatch, tmp_path)
    return lambda *args: run_cli([*TOY, *args], capfd)


def _metrics(tmp_path: Path, variant: str = "default") -> dict:
    return json.loads((tmp_path / "runs" / "toy" / "toy_scripted" / "toy_rank" / variant / "metrics.json").read_text())


def test_summary_shows_the_headline_and_each_level_in_the_tasks_order(tmp_path, cli):
    r = cli()
    assert r.code == 0, r.err
    m = _metrics(tmp_path)
    rows = [ln for ln in r.out.splitlines() if ln.startswith("│")]
    cells = [[c.strip() for c in ln.strip("│").split("│")] for ln in rows]
    assert [c[0] for c in cells] == ["all", "level=easy", "level=medium", "level=hard"]  # breakdown_order, not a-z
    assert [c[1] for c in cells] == ["36", "12", "12", "12"]
    assert cells[0][2] == cell_text(m["metrics"]["toy_tau"]) and cells[1][3] == cell_text(m["breakdown"]["level"]["easy"]["metrics"]["toy_hit"])
    assert re.search(r"★ toy_tau", r.out) and "★ = headline metric" in r.out
    assert re.search(r"examples 36 \| parsed 36 \| parse failures 0 \(0\.0%\)", r.out)
    assert f"run dir: {tmp_path / 'runs' / 'toy' / 'toy_scripted' / 'toy_rank' / 'default'}" in r.out


def test_plan_counts_requests_without_starting_the_model(tmp_path, cli):
    from statsmodels.stats.power import TTestPower

    ToyBackend.built = 0
    r = cli("mode=plan")
    assert r.code == 0, r.err
    assert re.search(r"examples \(to run / already finished\) +│ +36 / 0 │", r.out)
    assert re.search(r"│ requests +│ +36 │", r.out)  # one round: exact
    d = TTestPower().solve_power(nobs=36, alpha=0.05, power=0.8)  # in sd units; plan.sd defaults to 1
    assert f"{d:.3f}  (n=36, sd=1.000)" in r.out
    r2 = cli("mode=plan", "method.rounds=2", "limit=12")
    assert re.search(r"│ requests \(estimate\) +│ +24 │", r2.out) and "adaptive method" in r2.out
    r3 = cli("mode=plan", "method=toy_popular")
    assert "this method needs no model: no requests, no cost" in r3.out
    assert ToyBackend.built == 0 and not list((tmp_path / "runs").rglob("samples.jsonl"))


def test_compare_two_runs_clusters_by_listener_and_gives_the_exact_sign_flip_p(tmp_path, cli, capfd):
    from recbench.cli.compare import main as compare_main
    from recbench.stats.verdicts import compare_pair, load_systems

    assert cli().code == 0 and cli("model.backend.answer=oracle").code == 0
    base = tmp_path / "runs" / "toy" / "toy_scripted" / "toy_rank"
    a, b = base / "default", base / "model.backend.answer=oracle"
    sa, sb = load_systems([a, b])
    comps = {(c.metric, c.slice): c for c in compare_pair(sa, sb)}
    c = comps[("toy_tau", "all")]
    ma, mb = _metrics(tmp_path), _metrics(tmp_path, "model.backend.answer=oracle")
    assert c.mean_a == pytest.approx(ma["metrics"]["toy_tau"]["mean"]) and c.mean_b == pytest.approx(mb["metrics"]["toy_tau"]["mean"]) == 1.0
    # resampled by listener (cluster_by = user): 6 clusters, the oracle ahead in each -> exact sign flip p = 2 / 2^6
    assert c.n == 6 and c.cluster_by == "user" and c.n_examples == 36
    assert c.diff == pytest.approx(c.mean_a - c.mean_b) and c.p_value == pytest.approx(2 / 64)
    miss = comps[("toy_miss", "all")]
    assert miss.direction == "lower" and miss.diff > 0 and miss.p_value == pytest.approx(2 / 64)
    capfd.readouterr()
    assert compare_main([str(a), str(b)]) == 0
    out = capfd.readouterr().out
    # the better run named by what tells it apart (its override), never 'b' (a significance letter)
    assert re.search(r"toy_tau +│ all +│ 6 │ +-0\.037 │ +1\.000 │ +-1\.037 │.*│ 0\.031 │ 0\.031 │ …er=oracle better", out)
    # lower is better: the oracle's toy_miss of 0 wins, as its higher toy_tau does
    assert re.search(r"toy_miss +│ all +│ 6 │ +0\.917 │ +0\.000 │ +0\.917 │.*│ …er=oracle better", out)
