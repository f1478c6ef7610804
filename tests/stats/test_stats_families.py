"""One family rule (issue 20, item 2): recbench.stats.verdicts corrects within each (task, metric, slice) over its pairs of
runs, names the family and its size in every record and on screen, says which CI it prints, and gives no verdict for
a metric without a direction. Hand-written run dirs; every adjusted p against statsmodels' multipletests."""
from __future__ import annotations

import io
import itertools
import logging

import numpy as np
import pytest
from rich.console import Console
from statsmodels.stats.multitest import multipletests
from test_stats_compare import write_run

from recbench.cli.compare import print_table
from recbench.stats.verdicts import CompareError, ci_disagrees, compare_runs, letters

pytestmark = pytest.mark.full

HIGHER = {"higher_is_better": True, "direction": "higher", "binary": False, "aggregation": "mean"}
LOWER = {"higher_is_better": False, "direction": "lower", "binary": False, "aggregation": "mean"}


def _three(tmp_path):
    """Three systems, 80 examples in two slices (g=x, g=y), a higher-is-better score and a lower-is-better loss."""
    rng = np.random.default_rng(12)
    base = rng.normal(0, 1, 80)
    meta = [{"g": "x" if i % 2 else "y"} for i in range(80)]
    for name, shift in (("a", 0.0), ("b", 0.3), ("c", 0.35)):
        s = base + shift + rng.normal(0, 0.6, 80)
        write_run(tmp_path / "r" / name, {"score": s.tolist(), "loss": (-s).tolist()}, method=name, meta=meta,
                  info={"score": HIGHER, "loss": LOWER})
    return tmp_path / "r"


def test_holm_within_each_metric_and_slice_over_the_pairs(tmp_path):
    root = _three(tmp_path)
    comps = compare_runs([root], seed=3)
    fams: dict = {}
    for c in comps:
        fams.setdefault((c.metric, c.slice), []).append(c)
    assert sorted(fams) == [(m, s) for m in ("loss", "score") for s in ("all", "g=x", "g=y")]
    for (metric, sl), recs in fams.items():
        assert len(recs) == 3 and {(c.run_a, c.run_b) for c in recs} == set(itertools.combinations("abc", 2))
        ref = multipletests([c.p_value for c in recs], method="holm")[1]
        assert [c.p_adjusted for c in recs] == pytest.approx(ref, abs=1e-12)
        assert {(c.family, c.family_size, c.correction) for c in recs} == {(f"toy · {metric} · {sl}", 3, "holm")}
        for c in recs:
            assert c.significant == (c.p_adjusted < 0.05)
            if c.significant:  # lower loss and higher score name the same winner
                assert c.better == (c.run_a if c.mean_a > c.mean_b else c.run_b) if metric == "score" else \
                    c.better == (c.run_a if c.mean_a < c.mean_b else c.run_b)
                assert c.verdict == f"{c.better} better"
            else:
                assert c.better is None and c.verdict == "n.s."
    # a family does not depend on what else the invocation compares
    only = {(c.run_a, c.run_b, c.slice): c for c in compare_runs([root], metrics=["score"], seed=3)}
    for c in fams[("score", "all")] + fams[("score", "g=x")]:
        o = only[(c.run_a, c.run_b, c.slice)]
        assert (o.p_value, o.p_adjusted, o.significant, o.better, o.family_size) == \
            (c.p_value, c.p_adjusted, c.significant, c.better, c.family_size)
    assert any(c.significant for c in fams[("score", "all")])  # the data really separate a from b and c


def _table(comps, correction="holm") -> str:
    buf = io.StringIO()
    print_table(comps, correction, console=Console(file=buf, width=250))
    return buf.getvalue()


def test_a_ci_excluding_zero_beside_ns_has_its_reason_on_screen(tmp_path):
    """b - a is about 0.2 on 100 units: uncorrected p near 0.02 and a CI excluding 0, but Holm over the 6 pairs of
    4 systems (c and d sit near b) leaves it n.s.: the row is starred and the footnote says why."""
    rng = np.random.default_rng(5)
    base = rng.normal(0, 1, 100)
    for name, shift, noise in (("a", 0.0, 0.0), ("b", 0.2, 0.75), ("c", 0.2, 0.75), ("d", 0.2, 0.75)):
        write_run(tmp_path / "r" / name, {"score": (base + shift + rng.normal(0, noise, 100)).tolist()}, method=name,
                  info={"score": HIGHER})
    comps = compare_runs([tmp_path / "r"], slices=False)
    starred = [c for c in comps if ci_disagrees(c)]
    assert starred, [(c.run_a, c.run_b, c.p_value, c.p_adjusted, c.ci_low, c.ci_high) for c in comps]
    for c in starred:
        assert (c.ci_low > 0 or c.ci_high < 0) and not c.significant and c.p_value < 0.05 <= c.p_adjusted
    out = " ".join(_table(comps).split())
    assert "n.s. *" in out
    assert "* the CI is the unadjusted 95% paired bootstrap CI" in out and "holm over 'fam' pairs" in out
    assert "95% CI = unadjusted paired bootstrap" in out
    assert "family = one task, metric and slice; holm over its pairs of runs (score: 6 pairs x 1 slice)" in out


def test_metrics_without_a_direction_get_p_values_but_never_a_verdict(tmp_path, caplog):
    """n_recommended is registered without a direction (a count); 'issue20_mystery' is recorded by nobody. Both
    differ hugely between the runs: p-values yes, 'better' and letters no; the terminal says why."""
    caplog.set_level(logging.WARNING, logger="recbench.api.metrics")
    rng = np.random.default_rng(6)
    for name, k in (("a", 2.0), ("b", 9.0)):
        vals = {"n_recommended": (k + rng.integers(0, 2, 60)).tolist(), "issue20_mystery": (k + rng.random(60)).tolist(),
                "score": rng.random(60).tolist()}
        write_run(tmp_path / "r" / name, vals, method=name, info={"score": HIGHER})
    comps = {c.metric: c for c in compare_runs([tmp_path / "r"], slices=False)}
    count, mystery = comps["n_recommended"], comps["issue20_mystery"]
    assert count.direction == "none" and mystery.direction == "unknown"
    for c in (count, mystery):
        assert c.p_value < 1e-3 and c.significant and c.better is None and c.higher_is_better is None
    assert count.verdict == "no direction (descriptive)" and mystery.verdict == "direction unknown"
    assert any("issue20_mystery" in r.getMessage() and "direction unknown" in r.getMessage() for r in caplog.records)
    for m in ("n_recommended", "issue20_mystery"):
        with pytest.raises(CompareError, match="no direction"):
            letters(list(comps.values()), m)
    out = " ".join(_table(list(comps.values())).split())
    assert "no direction (descriptive): n_recommended: differences and p-values only" in out
    assert "direction unknown (not registered): issue20_mystery" in out
    assert "significance groups (toy score" in out and "significance groups (toy n_recommended" not in out
    rec = count.to_dict()
    assert rec["direction"] == "none" and rec["better"] is None and rec["family_size"] == 1
