"""recbench.stats.verdicts on hand-written run dirs: clusters, binary metrics, id intersection, undefined values, pooled
seeds, corpus metrics, slices, letters and errors, each checked against a direct scipy/statsmodels computation."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from statsmodels.stats.contingency_tables import mcnemar

from recbench.stats import cluster_means, paired_bootstrap_ci, sign_flip_test
from recbench.stats.verdicts import CompareError, compare_runs, letters

pytestmark = pytest.mark.full


def write_run(d: Path, values: dict[str, list], *, task="toy", method="m", seed=0, cluster_by=None, meta=None,
              ids=None, info=None) -> Path:
    """A run dir in the metrics.json schema (version 2) with one samples.jsonl line per example; its metric_info
    declares every metric higher-is-better unless `info` is given (info={}: nothing recorded)."""
    if info is None:
        info = {m: {"higher_is_better": True, "direction": "higher", "binary": False, "aggregation": "mean"}
                for m in values}
    d.mkdir(parents=True)
    n = len(next(iter(values.values())))
    ids = ids or [f"e{i:03d}" for i in range(n)]
    meta = meta or [{} for _ in range(n)]
    with open(d / "samples.jsonl", "w") as f:
        for i in range(n):
            rec = {"id": ids[i], "meta": meta[i], "parse_status": "ok",
                   "metrics": {m: (None if v[i] is None or (isinstance(v[i], float) and math.isnan(v[i])) else v[i])
                               for m, v in values.items()}, "calls": []}
            f.write(json.dumps(rec) + "\n")
    keys = sorted({k for m in meta for k in m if k != cluster_by})
    summary = {m: {"mean": float(np.nanmean([np.nan if x is None else x for x in v])), "ci_low": None,
                   "ci_high": None, "n": n, "n_undefined": 0} for m, v in values.items()}
    (d / "metrics.json").write_text(json.dumps({
        "schema_version": 2, "task": {"name": task}, "model": "none", "method": method, "headline_metric":
        next(iter(values)), "metrics": summary, "breakdown": {k: {} for k in keys}, "complete": True,
        "metric_info": info, "cluster_by": cluster_by}))
    (d / "config.yaml").write_text(f"task:\n  name: {task}\nmethod:\n  name: {method}\nseed: {seed}\n"
                                   f"sampling:\n  seed: {seed}\n  temperature: 0.0\n")
    return d


def test_clusters_are_the_resampling_unit(tmp_path):
    rng = np.random.default_rng(0)
    users = [f"u{i // 3}" for i in range(90)]  # 30 users, 3 examples each
    a = rng.normal(0.5, 0.3, 90)
    b = a - 0.1 + rng.normal(0, 0.3, 90)
    meta = [{"user": u} for u in users]
    ra = write_run(tmp_path / "a", {"score": a.tolist()}, method="a", cluster_by="user", meta=meta)
    rb = write_run(tmp_path / "b", {"score": b.tolist()}, method="b", cluster_by="user", meta=meta)
    (c,) = compare_runs([ra, rb], seed=4)
    xa, _ = cluster_means(a, users)
    xb, _ = cluster_means(b, users)
    assert (c.n, c.n_examples, c.cluster_by) == (30, 90, "user")
    assert c.mean_a == pytest.approx(xa.mean()) and c.diff == pytest.approx((xa - xb).mean())
    assert (c.ci_low, c.ci_high) == pytest.approx(paired_bootstrap_ci(xa, xb, seed=4))
    assert c.p_value == pytest.approx(sign_flip_test(xa, xb, seed=4).p_value)
    assert c.test == "permutation" and c.p_adjusted == c.p_value  # a family of one


def test_binary_metric_gets_exact_mcnemar_and_slices(tmp_path):
    rng = np.random.default_rng(1)
    a = (rng.random(200) < 0.35).astype(float)
    b = np.where(rng.random(200) < 0.75, a, 0.0)
    meta = [{"history": "short" if i % 2 else "long"} for i in range(200)]
    info = {"hr@10": {"higher_is_better": True, "binary": True, "aggregation": "mean"}}
    write_run(tmp_path / "runs" / "a", {"hr@10": a.tolist()}, method="a", meta=meta, info=info)
    write_run(tmp_path / "runs" / "b", {"hr@10": b.tolist()}, method="b", meta=meta, info=info)
    comps = compare_runs([tmp_path / "runs"])
    assert [c.slice for c in comps] == ["all", "history=long", "history=short"]
    allc = comps[0]
    table = [[np.sum((a == 1) & (b == 1)), np.sum((a == 1) & (b == 0))],
             [np.sum((a == 0) & (b == 1)), np.sum((a == 0) & (b == 0))]]
    assert allc.test == "mcnemar" and allc.p_value == pytest.approx(mcnemar(table, exact=True).pvalue)
    short = comps[2]
    assert short.n == 100 and short.mean_a == pytest.approx(a[1::2].mean())
    # one family per (metric, slice) over the pairs of runs: one pair here, so each p is its own adjusted p
    assert [(c.family, c.family_size) for c in comps] == [("toy · hr@10 · all", 1), ("toy · hr@10 · history=long", 1),
                                                          ("toy · hr@10 · history=short", 1)]
    assert all(c.p_adjusted == c.p_value for c in comps)
    assert allc.significant == (allc.p_adjusted < 0.05)
    if allc.significant:
        assert allc.better == "a"


def test_intersection_of_ids_and_undefined_values_are_named(tmp_path):
    ra = write_run(tmp_path / "a", {"s": [1.0, 0.5, None, 0.25, 0.75]}, method="a")
    rb = write_run(tmp_path / "b", {"s": [0.5, 0.5, 0.5, 0.0]}, method="b")  # e004 missing
    (c,) = compare_runs([ra, rb])
    assert c.n == 3 and c.mean_a == pytest.approx((1.0 + 0.5 + 0.25) / 3)
    assert "4 shared ids (a: 5, b: 4)" in c.note and "1 example(s) undefined" in c.note


def test_pooled_seeds_average_per_example(tmp_path):
    rng = np.random.default_rng(2)
    x = rng.normal(0.3, 0.2, 50)
    s0, s1 = x + rng.normal(0, 0.1, 50), x + rng.normal(0, 0.1, 50)
    write_run(tmp_path / "r" / "a0", {"s": s0.tolist()}, method="a", seed=0)
    write_run(tmp_path / "r" / "a1", {"s": s1.tolist()}, method="a", seed=1)
    write_run(tmp_path / "r" / "b", {"s": (x - 0.05).tolist()}, method="b")
    unpooled = compare_runs([tmp_path / "r"], slices=False)
    assert len(unpooled) == 3
    (c,) = compare_runs([tmp_path / "r"], slices=False, pool_seeds_=True)
    assert c.run_a == "a0 [2 seeds]" and c.seeds_a == 2 and c.seeds_b == 1
    assert c.mean_a == pytest.approx(((s0 + s1) / 2).mean())
    within = np.mean(np.var(np.vstack([s0, s1]), axis=0, ddof=1)) / 2
    assert c.seed_var_share == pytest.approx(within / np.var((s0 + s1) / 2 - (x - 0.05), ddof=1))


def test_corpus_metric_with_a_per_example_form(tmp_path):
    rng = np.random.default_rng(3)
    se_a, se_b = rng.random(80) * 2, rng.random(80) * 2 + 0.5
    ra = write_run(tmp_path / "a", {"squared_error": se_a.tolist()}, method="a")
    rb = write_run(tmp_path / "b", {"squared_error": se_b.tolist()}, method="b")
    for d in (ra, rb):  # the run's corpus metric beside the per-example squared errors
        m = json.loads((d / "metrics.json").read_text())
        m["metrics"]["rmse"] = {"mean": 0.0, "n": 80}
        (d / "metrics.json").write_text(json.dumps(m))
    (c,) = compare_runs([ra, rb], metrics=["rmse"], slices=False, n_resamples=999)
    assert c.mean_a == pytest.approx(math.sqrt(se_a.mean())) and c.mean_b == pytest.approx(math.sqrt(se_b.mean()))
    assert c.ci_low < c.diff < c.ci_high < 0 and not c.higher_is_better
    assert c.significant and c.better == "a"  # lower RMSE wins


def test_letters_from_comparisons(tmp_path):
    rng = np.random.default_rng(4)
    base = rng.normal(0, 1, 300)
    for name, shift in (("best", 0.5), ("close", 0.48), ("worst", 0.0)):
        write_run(tmp_path / "r" / name, {"s": (base + shift + rng.normal(0, 0.3, 300)).tolist()}, method=name)
    comps = compare_runs([tmp_path / "r"], slices=False)
    assert letters(comps, "s") == {"best": "a", "close": "a", "worst": "b"}
    with pytest.raises(CompareError, match="no comparisons of metric 'x'"):
        letters(comps, "x")


def test_errors(tmp_path):
    ra = write_run(tmp_path / "a", {"s": [1.0, 0.0]}, method="a")
    rb = write_run(tmp_path / "b", {"s": [1.0, 0.0]}, method="b", task="other")
    rc = write_run(tmp_path / "c", {"s": [1.0, 0.0]}, method="c", ids=["x1", "x2"])
    with pytest.raises(CompareError, match="different tasks"):
        compare_runs([ra, rb])
    with pytest.raises(CompareError, match="share no example ids"):
        compare_runs([ra, rc])
    with pytest.raises(CompareError, match="Did you mean 's'"):
        compare_runs([ra, rc], metrics=["ss"])


def test_monte_carlo_p_values_are_refined_where_the_corrected_verdict_is_uncertain():
    from recbench.stats.paired import sign_flip_mc_se
    from recbench.stats.paired import sign_flip_test as sft
    from recbench.stats.verdicts import Comparison, correct, refine_monte_carlo

    rng = np.random.default_rng(9)
    d = rng.normal(0.36, 1.0, 100)  # p about 0.0005: with 60 comparisons Holm puts it near 0.05
    first = sft(d, np.zeros(100), n_resamples=10_000, seed=0)
    precise = sft(d, np.zeros(100), n_resamples=400_000, seed=1)
    assert 0.0002 < precise.p_value < 0.002

    def comp(i, p, units):
        return Comparison(run_a=f"a{i}", run_b="b", metric="s", slice="all", n=100, mean_a=0, mean_b=0, diff=1,
                          ci_low=0, ci_high=2, test="permutation", p_value=p, n_resamples=10_000, p_mc_se=0.0,
                          units_a=units, units_b=np.zeros(100) if units is not None else None)

    family = [comp(0, first.p_value, d)] + [comp(i, 0.9, None) for i in range(1, 60)]
    correct(family, "holm")
    refine_monte_carlo(family, method="holm", alpha=0.05)
    c = family[0]
    assert c.n_resamples > 10_000
    se = sign_flip_mc_se(c.p_value, c.n_resamples)  # the two-sided p's Monte Carlo error
    assert c.p_mc_se == pytest.approx(se)
    assert abs(c.p_value - precise.p_value) < 4 * se + 4 * precise.mc_se
    assert c.p_adjusted == pytest.approx(min(1.0, 60 * c.p_value))


def test_paired_sd_for_planning(tmp_path):
    from recbench.stats.planning import paired_sd_from_runs

    rng = np.random.default_rng(5)
    a = rng.normal(0, 1, 400)
    b = a + rng.normal(0.1, 0.5, 400)  # strongly correlated systems: sd of differences 0.5
    write_run(tmp_path / "one" / "a", {"s": a.tolist()}, method="a")
    single = paired_sd_from_runs([tmp_path / "one"], "s")
    assert single.n_units == 400 and single.sd == pytest.approx(math.sqrt(2) * np.std(a, ddof=1))
    assert "one run" in single.source
    write_run(tmp_path / "one" / "b", {"s": b.tolist()}, method="b")
    pair = paired_sd_from_runs([tmp_path / "one"], "s")
    assert pair.sd == pytest.approx(np.std(a - b, ddof=1))
    assert pair.source == f"paired runs {tmp_path / 'one' / 'a'} vs {tmp_path / 'one' / 'b'}"  # the run dirs, named
    assert paired_sd_from_runs([tmp_path / "one"], "other") is None
    # the same system twice (equal on every unit) says nothing of a difference: the informative pair is kept, and
    # alone it is passed over for the one-run estimate (was: sd 0, and mode=plan's power step raised a ValueError)
    write_run(tmp_path / "one" / "a2", {"s": a.tolist()}, method="a2")
    assert paired_sd_from_runs([tmp_path / "one"], "s").sd == pytest.approx(np.std(a - b, ddof=1))
    write_run(tmp_path / "twins" / "a", {"s": a.tolist()}, method="a")
    write_run(tmp_path / "twins" / "a2", {"s": a.tolist()}, method="a2")
    assert "one run" in paired_sd_from_runs([tmp_path / "twins"], "s").source
    write_run(tmp_path / "flat" / "a", {"s": [0.5] * 10}, method="a")
    assert paired_sd_from_runs([tmp_path / "flat"], "s") is None


def test_missing_cluster_key_is_named(tmp_path):
    meta = [{"user": "u1"}, {"user": "u1"}, {}, {}]
    ra = write_run(tmp_path / "a", {"s": [1.0, 0.0, 1.0, 0.5]}, method="a", cluster_by="user", meta=meta)
    rb = write_run(tmp_path / "b", {"s": [0.0, 0.0, 0.5, 0.5]}, method="b", cluster_by="user", meta=meta)
    (c,) = compare_runs([ra, rb], slices=False)
    assert c.n == 3 and c.mean_a == pytest.approx((0.5 + 1.0 + 0.5) / 3)
    assert "cluster key 'user' missing from the meta of 2 example(s)" in c.note
