"""mode=plan for the memorization probe plans the probe's own test: real and control items as two independent
samples (one-sided), not a paired difference over real + control items."""
from __future__ import annotations

import json
import math

import pytest
from scipy.stats import norm

from recbench.tasks.memorization.stats import two_sample_power
from tests.helpers import run_cli

pytestmark = pytest.mark.fast


def test_two_sample_power_matches_the_normal_formula_on_cohens_h():
    n1, n0, alpha, target = 80, 40, 0.05, 0.8
    w = two_sample_power(n1, n0, 0.0, alpha, target, effect=0.1)
    scale = math.sqrt(n1 * n0 / (n1 + n0))
    h = (norm.ppf(1 - alpha) + norm.ppf(target)) / scale  # one-sided: z_{1-alpha}
    assert w["mdd"] == pytest.approx(math.sin(h / 2) ** 2, rel=1e-6)  # p0 = 0: h = 2 asin(sqrt(p1))
    h_at = 2 * math.asin(math.sqrt(0.1))
    assert w["power_at_effect"] == pytest.approx(norm.sf(norm.ppf(1 - alpha) - h_at * scale), abs=1e-6)
    assert (w["n"], w["n_control"]) == (80, 40)


def test_plan_of_the_probe_counts_real_and_control_items_apart(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    res = run_cli(["task=memorization_bundled", "method=id_to_title", "model=llama70b", "mode=plan"], capfd)
    assert res.code == 0, res.err
    out = res.out
    plan = json.loads(next(tmp_path.rglob("plan.json")).read_text())
    w = plan["power"]
    assert w["test"].startswith("two independent samples") and w["n_control"] > 0
    assert w["n"] + w["n_control"] == plan["examples"]
    assert "real +" in out and "control" in out
