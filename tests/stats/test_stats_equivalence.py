"""Equivalence and non-inferiority (issue 21, item 5): `python -m recbench.compare ... --margin D` against statsmodels'
ttost_paired and multipletests on hand-written runs; the score test of 0/1 units against scipy (restricted maximum
likelihood, brute-force exact tails) and statsmodels' McNemar; type I error at the margin and power at 0 by
simulation (numbers in docs/verdicts.md)."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.weightstats import ttost_paired
from test_stats_compare import write_run

from recbench.cli.compare import main
from recbench.stats.equivalence import (
    NUISANCE_GRID,
    exact_score_upper,
    paired_margin_test,
    score_tost,
    score_z,
    skew_excess,
    tost_t,
)
from recbench.stats.verdicts import MARGIN_FIELDS, compare_runs

pytestmark = pytest.mark.fast

HIGHER = {"higher_is_better": True, "direction": "higher", "binary": False, "aggregation": "mean"}
LOWER = {"higher_is_better": False, "direction": "lower", "binary": False, "aggregation": "mean"}
NONE = {"higher_is_better": None, "direction": "none", "binary": False, "aggregation": "mean"}
BINARY = {"higher_is_better": True, "direction": "higher", "binary": True, "aggregation": "mean"}


# ---- the paired t TOST is statsmodels' ------------------------------------------------------------------
@pytest.mark.parametrize("n, shift, margin, skewed", [(2, 0.1, 0.5, False), (12, 0.0, 0.3, False),
                                                       (40, 0.2, 0.25, True), (300, -0.05, 0.1, False)])
def test_t_tost_equals_statsmodels_ttost_paired(n, shift, margin, skewed):
    rng = np.random.default_rng(n)
    a = rng.exponential(1.0, n) if skewed else rng.normal(0.5, 0.3, n)
    b = a - shift + rng.normal(0, 0.4, n)
    p, (_, p_lo, _), (_, p_up, _) = ttost_paired(a, b, -margin, margin)
    res = paired_margin_test(a, b, margin)
    assert res.test == "t"
    assert abs(res.p_lower - p_lo) < 1e-10 and abs(res.p_upper - p_up) < 1e-10 and abs(res.p_equivalence - p) < 1e-10
    lo, up = tost_t(np.stack([a - b, b - a]), margin)  # vectorized rows; the second row is the mirror image
    assert lo[0] == pytest.approx(p_lo, abs=1e-12) and up[1] == pytest.approx(p_lo, abs=1e-12)


def test_constant_differences_and_too_few_units():
    assert paired_margin_test([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], 0.1).p_equivalence == 0.0  # identical: inside
    assert paired_margin_test([1.0, 2.0], [0.5, 1.5], 0.1).p_equivalence == 1.0  # constant 0.5, outside +-0.1
    res = paired_margin_test([1.0], [0.0], 0.1)
    assert res.test == "none" and math.isnan(res.p_equivalence)


# ---- the score test of 0/1 units ------------------------------------------------------------------------
def _restricted_mle_z(b: int, c: int, n: int, delta: float) -> float:
    """Score z by hand: maximize the trinomial likelihood under q10 = q01 + delta numerically (scipy)."""
    r = n - b - c

    def nll(x):
        return -(b * math.log(x + delta) + (c * math.log(x) if c else 0.0) + (r * math.log(1 - 2 * x - delta) if r else 0.0))

    x = optimize.minimize_scalar(nll, bounds=(1e-12, (1 - delta) / 2 - 1e-12), method="bounded",
                                 options={"xatol": 1e-13}).x
    return (b - c - n * delta) / math.sqrt(n * ((x + delta) + x - delta ** 2))


def test_score_statistic_is_the_restricted_mle_score_and_mcnemar_at_zero():
    for b, c, n, delta in [(10, 3, 40, 0.1), (0, 0, 30, 0.2), (25, 5, 60, 0.3), (2, 9, 50, 0.05), (40, 0, 40, 0.5)]:
        assert score_z(b, c, n, delta) == pytest.approx(_restricted_mle_z(b, c, n, delta), abs=1e-5)
    for b, c in [(12, 4), (7, 7), (1, 9)]:  # margin 0: McNemar's z, statsmodels' chi-square without correction
        stat = mcnemar([[5, b], [c, 20]], exact=False, correction=False).statistic
        assert float(score_z(b, c, 5 + b + c + 20, 0.0)) ** 2 == pytest.approx(stat, rel=1e-12)


def test_exact_score_p_is_the_largest_tail_over_the_nuisance():
    """n = 15, margin 0.2: six tables' exact p against brute force (scipy multinomial pmf, the tail at 801
    nuisance values refined by a bounded scipy maximization); the 200-point grid is within 1e-3 of it."""
    n, delta = 15, 0.2
    tables = [(b, c) for b in range(n + 1) for c in range(n + 1 - b)]
    z = {t: float(score_z(*t, n, delta)) for t in tables}
    table = exact_score_upper(n, delta)
    worst = 0.0
    for obs in [(0, 0), (1, 2), (3, 3), (2, 0), (5, 1), (0, 6)]:
        tail_tables = np.array([t for t in tables if z[t] <= z[obs] + 1e-9])

        def tail(q01, tables=tail_tables):
            q = [q01 + delta, q01, max(0.0, 1 - 2 * q01 - delta)]
            return float(stats.multinomial.pmf(np.c_[tables, n - tables.sum(1)], n, q).sum())

        grid = np.linspace(0, (1 - delta) / 2, 801)
        vals = [tail(q) for q in grid]
        k = int(np.argmax(vals))
        lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
        best = max(vals[k], -optimize.minimize_scalar(lambda q: -tail(q), bounds=(lo, hi), method="bounded").fun)
        assert table[obs] <= best + 1e-12 and table[obs] == pytest.approx(best, abs=1e-3)
        worst = max(worst, best - table[obs])
        lo_p, _ = score_tost(obs[1], obs[0], n, delta)  # the lower test of (c, b) is the upper test of (b, c)
        assert float(lo_p) == table[obs]
    print(f"\nexact score p, n 15, margin 0.2: {NUISANCE_GRID}-point grid under the refined sup by at most {worst:.1e}")


# ---- recbench.compare --margin against statsmodels ------------------------------------------------------
def _runs(tmp_path):
    """Three systems, 60 users x 2 examples in two slices: a higher-is-better score, a lower-is-better loss and a
    descriptive count; b sits about 0.05 below a, c about 0.4 below."""
    rng = np.random.default_rng(21)
    users = [f"u{i // 2:02d}" for i in range(120)]
    meta = [{"user": u, "g": "x" if int(u[1:]) % 2 else "y"} for u in users]
    base = np.repeat(rng.normal(0.5, 0.5, 60), 2)
    for name, shift in (("a", 0.0), ("b", -0.05), ("c", -0.4)):
        s = base + shift + rng.normal(0, 0.25, 120)
        write_run(tmp_path / "r" / name, {"score": s.tolist(), "loss": (1 - s).tolist(),
                                          "count": np.round(3 * s).tolist()},
                  method=name, meta=meta, cluster_by="user", info={"score": HIGHER, "loss": LOWER, "count": NONE})
    return tmp_path / "r", users, meta


def _units(run_dir, metric, meta, sl):
    """Per-user means of the run's per-example values in the slice, by hand (pandas), in user order."""
    rows = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    df = pd.DataFrame({"user": [m["user"] for m in meta], "g": [m["g"] for m in meta],
                       "v": [r["metrics"][metric] for r in rows]})
    if sl != "all":
        df = df[df["g"] == sl.split("=")[1]]
    return df.groupby("user", sort=False)["v"].mean().to_numpy()


@pytest.mark.full  # in-process, but loads every task package and bootstraps 27 records: many seconds on 2 cores
def test_compare_margin_matches_statsmodels_tost_and_holm(tmp_path, capsys):
    root, _, meta = _runs(tmp_path)
    margin = 0.15
    assert main([str(root), "--margin", str(margin), "--json", str(tmp_path / "eq.json"), "--resamples", "999"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    recs = json.loads((tmp_path / "eq.json").read_text())
    assert len(recs) == 3 * 3 * 3  # 3 pairs x 3 metrics x 3 slices
    fams: dict = {}
    for r in recs:
        fams.setdefault((r["metric"], r["slice"]), []).append(r)
        ua = _units(root / r["run_a"], r["metric"], meta, r["slice"])
        ub = _units(root / r["run_b"], r["metric"], meta, r["slice"])
        assert r["n"] == len(ua) and r["margin"] == margin and r["equivalence_test"] == "t"
        p, (_, p_lo, _), (_, p_up, _) = ttost_paired(ua, ub, -margin, margin)
        assert abs(r["p_equivalence"] - p) < 1e-10
        if r["metric"] == "score":  # higher is better: b worse when a - b is large: the upper test
            assert abs(r["p_noninferior"] - p_up) < 1e-10
        elif r["metric"] == "loss":  # lower is better: b worse when a - b is very negative: the lower test
            assert abs(r["p_noninferior"] - p_lo) < 1e-10
        else:
            assert r["p_noninferior"] is None and r["noninferior"] is None and r["p_noninferior_adj"] is None
            assert "no non-inferiority verdict: no direction (descriptive)" in r["margin_verdict"]
    for (metric, sl), rs in fams.items():
        assert len(rs) == 3
        adj = multipletests([r["p_equivalence"] for r in rs], method="holm")[1]
        assert [r["p_equivalence_adj"] for r in rs] == pytest.approx(adj, abs=1e-12)
        assert [r["equivalent"] for r in rs] == [bool(x < 0.05) for x in adj]
        if metric != "count":
            adj = multipletests([r["p_noninferior"] for r in rs], method="holm")[1]
            assert [r["p_noninferior_adj"] for r in rs] == pytest.approx(adj, abs=1e-12)
            assert [r["noninferior"] for r in rs] == [bool(x < 0.05) for x in adj]
    by = {(r["run_a"], r["run_b"], r["metric"], r["slice"]): r for r in recs}
    ab, ac = by[("a", "b", "score", "all")], by[("a", "c", "score", "all")]
    assert ab["equivalent"] and ab["noninferior"] and ab["margin_verdict"] == "equivalent within ±0.15; b non-inferior to a"
    assert not ac["equivalent"] and not ac["noninferior"] and ac["significant"]  # c is clearly worse than a
    assert by[("a", "b", "loss", "all")]["noninferior"]  # the same data as a loss: b non-inferior as well
    assert by[("a", "c", "loss", "all")]["noninferior"] is False
    # the terminal shows the columns, the margin and the family rule, and says why 'count' has no NI verdict
    for text in ("equivalence within ±0.15", "p eq adj", "equiv = equivalent", "p ni adj", "b non-inf",
                 "holm within each family (one metric and slice", "no non-inferiority verdict for count"):
        assert text in out, text
    print(f"\na vs b score: diff {ab['diff']:.3f}, p_equivalence {ab['p_equivalence']:.4g} (statsmodels "
          f"{ttost_paired(_units(root / 'a', 'score', meta, 'all'), _units(root / 'b', 'score', meta, 'all'), -margin, margin)[0]:.4g})")


def test_without_a_margin_the_records_are_unchanged(tmp_path):
    root, _, _ = _runs(tmp_path)
    plain = compare_runs([root], metrics=["score"], slices=False, n_resamples=999)
    withm = compare_runs([root], metrics=["score"], slices=False, n_resamples=999, margin=0.15)
    for p, w in zip(plain, withm):
        dp, dw = p.to_dict(), w.to_dict()
        assert not set(MARGIN_FIELDS) & set(dp)
        assert list(dw)[: len(dp)] == list(dp) and {k: dw[k] for k in dp} == dp  # the old fields first, unchanged


def test_binary_metric_gets_the_exact_score_test(tmp_path):
    rng = np.random.default_rng(8)
    a = (rng.random(150) < 0.4).astype(float)
    b = np.where(rng.random(150) < 0.85, a, 1 - a)
    write_run(tmp_path / "r" / "a", {"hr@10": a.tolist()}, method="a", info={"hr@10": BINARY})
    write_run(tmp_path / "r" / "b", {"hr@10": b.tolist()}, method="b", info={"hr@10": BINARY})
    (c,) = compare_runs([tmp_path / "r"], slices=False, margin=0.1)
    only_a, only_b = int(((a == 1) & (b == 0)).sum()), int(((a == 0) & (b == 1)).sum())
    lo, up = score_tost(only_a, only_b, 150, 0.1)
    assert c.test == "mcnemar" and c.equivalence_test == "score-exact"
    assert c.p_equivalence == max(float(lo), float(up)) and c.p_noninferior == float(up)
    assert f"discordant {only_a}/{only_b}" in c.margin_note
    assert c.p_equivalence < 0.05 and c.equivalent  # 15% discordant pairs, balanced: within +-0.1


@pytest.mark.parametrize("bad", ["0", "-0.1", "nan", "inf", "abc"])
def test_bad_margin_is_one_recbench_line_and_exit_2(bad, capsys):
    assert main(["a", "b", f"--margin={bad}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("recbench: --margin must be a positive finite number"), err


# ---- type I error at the margin and power at 0, by simulation -------------------------------------------
DRAWS = 4000
#: Monte Carlo slack: 3 standard errors of a rejection rate of 5% over DRAWS draws (1.0 point)
SLACK = 3 * math.sqrt(0.05 * 0.95 / DRAWS)


def _rates(p_lower_at_minus, p_upper_at_plus, tost_at_minus, tost_at_plus, p_power_tost, p_power_ni):
    """Rejection rates at alpha 0.05: non-inferiority at each margin, TOST at each margin, TOST and NI power at 0."""
    return [float(np.mean(np.asarray(p) < 0.05)) for p in
            (p_upper_at_plus, p_lower_at_minus, tost_at_plus, tost_at_minus, p_power_tost, p_power_ni)]


@pytest.mark.full  # several seconds: 4,000 simulated samples per case
def test_type_one_error_at_the_margin_is_at_most_alpha_and_power_at_zero():
    rng = np.random.default_rng(2021)
    rows = []

    def t_case(name, draw, n, margin):
        lo_m, up_m = tost_t(draw(-margin, n), margin)  # true difference exactly -margin
        lo_p, up_p = tost_t(draw(margin, n), margin)  # exactly +margin
        lo_0, up_0 = tost_t(draw(0.0, n), margin)
        rows.append((name, n, margin, *_rates(lo_m, up_p, np.maximum(lo_m, up_m), np.maximum(lo_p, up_p),
                                               np.maximum(lo_0, up_0), up_0)))

    def normal(mu, n):
        return rng.normal(mu, 1.0, (DRAWS, n))

    def binary_case(n, margin, q01):
        """0/1 units: a 1 and b 0 with prob q10, a 0 and b 1 with prob q01; at +margin q10 = q01 + margin."""
        def counts(q10, q01_):
            m = rng.multinomial(n, [q10, q01_, 1 - q10 - q01_], DRAWS)
            return m[:, 0], m[:, 1]
        lo_p, up_p = score_tost(*counts(q01 + margin, q01), n, margin)
        lo_m, up_m = score_tost(*counts(q01, q01 + margin), n, margin)
        lo_0, up_0 = score_tost(*counts(q01 + margin / 2, q01 + margin / 2), n, margin)
        rows.append((f"0/1, q01 {q01}", n, margin, *_rates(lo_m, up_p, np.maximum(lo_m, up_m), np.maximum(lo_p, up_p),
                                                            np.maximum(lo_0, up_0), up_0)))

    t_case("normal", normal, 40, 0.5)
    t_case("normal", normal, 200, 0.25)
    for n, margin in ((40, 0.2), (200, 0.1)):
        for q01 in (0.02, 0.1, 0.3):
            binary_case(n, margin, q01)
    valid = list(rows)
    # a documented limit, not a claim: strongly skewed units (centered exponential, skewness 2) and the t
    t_case("exponential (skew 2)", lambda mu, n: rng.exponential(1.0, (DRAWS, n)) - 1.0 + mu, 40, 0.5)
    t_case("exponential (skew 2)", lambda mu, n: rng.exponential(1.0, (DRAWS, n)) - 1.0 + mu, 200, 0.25)

    print(f"\n{'units':22} {'n':>4} {'D':>5}  NI@+D  NI@-D  TOST@+D TOST@-D  power TOST@0  NI@0")
    for name, n, d, *r in rows:
        print(f"{name:22} {n:4d} {d:5.2f}  {r[0]:.3f}  {r[1]:.3f}  {r[2]:.3f}   {r[3]:.3f}    {r[4]:.3f}       {r[5]:.3f}")
    for name, n, d, *r in valid:
        assert max(r[:4]) <= 0.05 + SLACK, (name, n, r)
    # power at a true difference of 0: high for normal units with the margin at 0.5 sd (n 40) or 0.25 sd (n 200),
    # and for 0/1 units at n 200 unless a quarter or more of the units are discordant each way (then +-0.1 is
    # within the noise: docs/verdicts.md)
    assert all(r[4] > 0.8 and r[5] > 0.9 for name, n, d, *r in valid if name == "normal")
    assert all(r[4] > 0.5 and r[5] > 0.75 for name, n, d, *r in valid if n == 200 and not name.endswith("0.3"))
    assert all(r[5] > 0.35 for name, n, d, *r in valid if name.startswith("0/1"))
    # the skewed case: the t's one-sided size exceeds alpha on one side by about what the note predicts
    rng2 = np.random.default_rng(7)
    for name, n, d, *r in rows[len(valid):]:
        predicted = np.mean([skew_excess(rng2.exponential(1.0, n)) for _ in range(200)])
        assert 0.05 + SLACK < max(r[0], r[1]) <= 0.05 + predicted + 0.03 and min(r[0], r[1]) <= 0.05
        assert predicted > 0.01  # so such records carry the skewness note
