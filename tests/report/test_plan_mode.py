"""mode=plan: request counts, prompt tokens, context overflows, cached share and cost, without calling a model."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from recbench.run.evaluate import run_from_config
from recbench.run.cost import run_cost
from recbench.run.plan import plan_from_config
from tests.doubles import ScriptedBackend
from tests.helpers import compose_cfg, listwise_answer

pytestmark = pytest.mark.full

REPO = Path(__file__).resolve().parents[2]
REPO_CONF = REPO / "conf"
GPT4O = yaml.safe_load((REPO_CONF / "model" / "gpt4o.yaml").read_text())["backend"]["name"]  # what the cache records


def _cfg(tmp: Path, *extra: str):
    return compose_cfg(["model=gpt4o", "method=listwise", "limit=5", f"cache.path={tmp / 'cache.sqlite'}",
                        "run.progress=false", *extra])


def test_plan_counts_requests_tokens_and_cost_from_the_price_table(tmp_path):
    cfg = _cfg(tmp_path)
    p = plan_from_config(cfg, tmp_path / "run")
    assert (p.examples, p.already_finished, p.requests, p.unique_requests, p.cached) == (5, 0, 5, 5, 0)
    assert p.requests_exact and p.cached_share == 0.0
    assert p.tokenizer.startswith("estimate")  # no local GPT-4o tokenizer: says so
    assert 0 < p.max_prompt_tokens <= p.prompt_tokens and p.max_completion_tokens == 64
    price = cfg.model.price
    assert p.cost == run_cost(price, p.prompt_tokens, 5 * 64)
    assert p.cost["total"] == pytest.approx((p.prompt_tokens * 2.5 + 5 * 64 * 10.0) / 1e6, abs=1e-6)
    assert p.over_context == 0 and p.context_length == 128000
    assert not (tmp_path / "run" / "samples.jsonl").exists()


def test_plan_sees_the_cache_and_the_finished_examples(tmp_path):
    cfg = _cfg(tmp_path)
    run_from_config(cfg, tmp_path / "run", backend=ScriptedBackend(listwise_answer, name=GPT4O))
    fresh = plan_from_config(cfg, tmp_path / "other_run_dir")  # same requests, all answered in the cache
    assert fresh.cached == fresh.unique_requests == 5 and fresh.cached_share == 1.0
    assert fresh.prompt_tokens_uncached == 0 and fresh.cost_uncached["total"] == 0.0
    same = plan_from_config(cfg, tmp_path / "run")  # the run dir already holds every example
    assert same.already_finished == 5 and same.requests == 0
    more = plan_from_config(_cfg(tmp_path, "limit=8"), tmp_path / "other_run_dir")
    assert (more.requests, more.cached) == (8, 5)


def test_plan_counts_prompts_over_the_context_length(tmp_path):
    p = plan_from_config(_cfg(tmp_path, "model.context_length=200"), tmp_path / "run")
    assert p.over_context == p.unique_requests == 5  # every listwise prompt + 64 answer tokens exceeds 200


def test_adaptive_method_is_simulated_and_flagged_as_an_estimate(tmp_path):
    p = plan_from_config(_cfg(tmp_path, "method=pairwise", "task.difficulties=[hard]", "limit=2"), tmp_path / "r")
    assert p.requests >= 2 * 2 * 3  # heapsort over 4 users, both orders: at least 3 comparisons per group
    assert not p.requests_exact and any("estimate" in n for n in p.notes)


def test_plan_needs_no_model_for_reference_rows_and_rejects_unknown_modes(tmp_path):
    p = plan_from_config(_cfg(tmp_path, "method=random"), tmp_path / "run")
    assert p.model == "none" and p.requests == 0
    env = {**os.environ, "RECBENCH_RUNS_DIR": str(tmp_path / "runs")}
    r = subprocess.run([sys.executable, "-m", "recbench", "mode=plann", "method=random"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "Unknown mode: 'plann'. Did you mean 'plan'?" in r.stderr, r.stderr
    r = subprocess.run([sys.executable, "-m", "recbench", "mode=plan", "model=gpt4o", "method=listwise", "limit=3"],
                       cwd=REPO, env={**env, "RECBENCH_CACHE_DIR": str(tmp_path / "c")}, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "requests" in r.stdout and "estimated cost" in r.stdout and "USD" in r.stdout
    plan = json.loads(next((tmp_path / "runs").rglob("plan.json")).read_text())
    assert plan["requests"] == 3 and plan["cost"]["currency"] == "USD"


def test_plan_power_uses_the_paired_sd_of_earlier_runs(tmp_path):
    from recbench.stats.planning import paired_sd_from_runs
    from recbench.stats.power import min_detectable_difference, power

    runs = tmp_path / "runs" / "perrec"
    for method in ("random", "bm25_history"):  # earlier model-free runs of the task, 120 groups each
        run_from_config(compose_cfg([f"method={method}", f"cache.path={tmp_path / 'c.sqlite'}", "run.progress=false"]),
                        runs / "none" / method / "default")
    p = plan_from_config(_cfg(tmp_path, "limit=40"), runs / "gpt4o" / "listwise" / "limit=40")
    sd = paired_sd_from_runs([runs], "ptc", task="perrec")
    assert p.power["sd"] == pytest.approx(sd.sd) and "paired runs" in p.power["sd_source"] and sd.n_units == 120
    assert p.power["mdd"] == pytest.approx(min_detectable_difference(40, sd.sd))
    assert p.power["power_at_effect"] == pytest.approx(power(0.05, 40, sd.sd)) and p.power["power_at_effect"] < 0.8
    assert any("plan.effect=0.05" in n for n in p.notes)
    alone = plan_from_config(_cfg(tmp_path / "fresh", "limit=40"), tmp_path / "fresh" / "a" / "b" / "c")
    assert alone.power["sd"] == 1.0 and "default plan.sd" in alone.power["sd_source"]
