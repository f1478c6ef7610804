"""The template audit's variance decomposition (recbench.stats.variance) against statsmodels and hand values: sums of
squares equal statsmodels' ANOVA table (two-way, and three-way with orders nested in examples), components equal the
hand-solved expected mean squares and statsmodels MixedLM REML on a balanced table, the permutation test equals a
brute-force enumeration."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from recbench.stats.variance import decompose, template_effect_test, template_share_ci

pytestmark = pytest.mark.fast


def _long(y: np.ndarray) -> pd.DataFrame:
    n, t, o = y.shape
    return pd.DataFrame([{"y": y[e, j, k], "e": e, "t": j, "o": k} for e in range(n) for j in range(t)
                         for k in range(o)])


def test_two_way_sums_of_squares_equal_statsmodels_anova_lm():
    from statsmodels.formula.api import ols
    from statsmodels.stats.anova import anova_lm

    y = np.random.default_rng(3).normal(size=(12, 3)) + np.array([0.0, 0.4, -0.3]) + np.arange(12)[:, None] * 0.1
    d = decompose(y)
    table = anova_lm(ols("y ~ C(e) + C(t)", _long(y[:, :, None])).fit())
    assert d.ss["example"] == pytest.approx(table.loc["C(e)", "sum_sq"], rel=1e-10)
    assert d.ss["template"] == pytest.approx(table.loc["C(t)", "sum_sq"], rel=1e-10)
    assert d.ss["residual"] == pytest.approx(table.loc["Residual", "sum_sq"], rel=1e-10)
    assert (d.df["example"], d.df["template"], d.df["residual"]) == (11, 2, 22)
    # components from the expected mean squares, solved by hand: MS_t = s2 + n s2_t, MS_e = s2 + T s2_e
    ms = table["sum_sq"] / table["df"]
    assert d.components["template"] == pytest.approx(max(0.0, (ms["C(t)"] - ms["Residual"]) / 12))
    assert d.components["example"] == pytest.approx(max(0.0, (ms["C(e)"] - ms["Residual"]) / 3))
    assert d.components["residual"] == pytest.approx(ms["Residual"])
    assert sum(d.shares.values()) == pytest.approx(1.0)


def test_three_way_with_orders_nested_in_examples_equals_statsmodels():
    from statsmodels.formula.api import ols
    from statsmodels.stats.anova import anova_lm

    rng = np.random.default_rng(7)
    n, t, o = 8, 3, 4
    y = (rng.normal(size=(n, 1, 1)) + np.array([0.0, 0.5, -0.5])[None, :, None] + rng.normal(size=(n, 1, o)) * 0.7
         + rng.normal(size=(n, t, o)) * 0.3)
    d = decompose(y)
    table = anova_lm(ols("y ~ C(e) + C(t) + C(e):C(t) + C(e):C(o)", _long(y)).fit())
    for ours, theirs in (("example", "C(e)"), ("template", "C(t)"), ("example:template", "C(e):C(t)"),
                         ("order(example)", "C(e):C(o)"), ("residual", "Residual")):
        assert d.ss[ours] == pytest.approx(table.loc[theirs, "sum_sq"], rel=1e-9), ours
        assert d.df[ours] == pytest.approx(table.loc[theirs, "df"]), ours
    ms = d.ms
    assert d.components["order(example)"] == pytest.approx(max(0.0, (ms["order(example)"] - ms["residual"]) / t))
    assert d.components["template"] == pytest.approx(max(0.0, (ms["template"] - ms["example:template"]) / (n * o)))
    assert d.components["example"] == pytest.approx(max(0.0, (ms["example"] - ms["example:template"]
                                                              - ms["order(example)"] + ms["residual"]) / (t * o)))


def test_components_equal_mixedlm_reml_on_a_balanced_table():
    """Balanced and no estimate truncated: the ANOVA estimators are the REML estimates (statsmodels MixedLM with
    crossed variance components for example and template)."""
    import statsmodels.formula.api as smf

    rng = np.random.default_rng(11)
    n, t = 30, 4
    y = rng.normal(size=(n, 1)) * 1.0 + rng.normal(size=(1, t)) * 0.8 + rng.normal(size=(n, t)) * 0.5
    d = decompose(y)
    assert not d.truncated
    df = _long(y[:, :, None])
    df["g"] = 1
    fit = smf.mixedlm("y ~ 1", df, groups="g", re_formula="0",
                      vc_formula={"e": "0 + C(e)", "t": "0 + C(t)"}).fit(reml=True)
    vc = dict(zip(fit.model.exog_vc.names, fit.vcomp))
    assert d.components["example"] == pytest.approx(vc["e"], rel=1e-3)
    assert d.components["template"] == pytest.approx(vc["t"], rel=1e-3)
    assert d.components["residual"] == pytest.approx(fit.scale, rel=1e-3)


def test_hand_table_and_truncation():
    # 3 examples x 2 templates; template 1 always 1 higher: no residual, template share from MS by hand
    y = np.array([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])
    d = decompose(y)
    assert d.ss == pytest.approx({"example": 16.0, "template": 1.5, "residual": 0.0})
    assert d.components == pytest.approx({"example": 4.0, "template": 0.5, "residual": 0.0})
    assert d.shares["template"] == pytest.approx(0.5 / 4.5)
    # example means equal and templates differ by noise only: the example component is negative, set to 0
    flat = decompose(np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]))
    assert "example" in flat.truncated and flat.components["example"] == 0.0
    assert math.isnan(decompose(np.ones((3, 2))).shares["template"])  # no variance at all: shares undefined


def test_permutation_test_equals_brute_force_enumeration():
    y = np.array([[1.0, 0.0, 0.0], [1.0, 0.5, 0.0], [1.0, 1.0, 0.0], [0.5, 0.0, 0.0]])
    res = template_effect_test(y)
    assert res.n_resamples is None  # (3!)^4 = 1296 <= 9999: exact
    obs = np.var(y.mean(axis=0))
    perms = list(itertools.permutations(range(3)))
    count = sum(np.var(np.array([y[i, list(p)] for i, p in enumerate(ps)]).mean(axis=0)) >= obs - 1e-12
                for ps in itertools.product(perms, repeat=4))
    assert res.p_value == pytest.approx(count / 6 ** 4)
    assert res.p_value == pytest.approx(48 / 1296)
    assert template_effect_test(np.tile([[0.3], [0.7]], (1, 3))).p_value == 1.0  # every template equal: no effect


def test_template_share_ci_brackets_the_estimate_and_bad_tables_are_refused():
    rng = np.random.default_rng(2)
    y = rng.normal(size=(40, 3)) + np.array([0.0, 1.0, 2.0])
    lo, hi = template_share_ci(y, n_boot=300)
    share = decompose(y).shares["template"]
    assert 0 <= lo <= share <= hi <= 1
    with pytest.raises(ValueError, match="NaN"):
        decompose(np.array([[1.0, np.nan], [0.0, 1.0]]))
    with pytest.raises(ValueError, match=">= 2 templates"):
        decompose(np.ones((5, 1)))
