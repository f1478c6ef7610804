"""Resampling in bounded batches gives the numbers of the one-block implementation, for the same seed.

REFERENCE holds the outputs of every public resampling function of recbench.stats on the small inputs below, recorded
with the implementation that drew all resamples in one (resamples x units) block (commit 1a24e84, before batching).
To regenerate after a deliberate change of the numbers: check out that commit, copy this file there and run
`PYTHONPATH=. python tests/stats/record_batching_reference.py` (it prints the dict), then paste it here.
The tests run with a tiny block (BLOCK_FLOATS patched to a few rows' worth), so many batches are exercised.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

pytestmark = pytest.mark.fast


def inputs() -> dict[str, np.ndarray]:
    """Small seeded inputs: values, paired values, PTC-like thirds (ties in the null), a template table."""
    rng = np.random.default_rng(2024)
    a = rng.normal(0.2, 1.0, 121)
    b = a + rng.normal(-0.05, 0.6, 121)
    thirds = rng.choice([-1.0, -1 / 3, 1 / 3, 1.0], size=(2, 301))
    table = rng.normal(0.0, 1.0, (23, 3, 2)) + np.array([0.0, 0.3, 0.1])[None, :, None]
    return {"v": rng.normal(0.5, 0.3, 64), "a": a, "b": b, "ta": thirds[0], "tb": thirds[1], "table": table}


def corpus_and_mean_runs(tmp):
    """Two run dirs of 90 examples with a per-example 's', squared errors and the corpus 'rmse' over them, two slices."""
    from tests.stats.test_stats_compare import write_run

    rng = np.random.default_rng(77)
    x = rng.normal(0.0, 1.0, 90)
    meta = [{"difficulty": ("easy", "hard")[i % 2]} for i in range(90)]
    runs = []
    for name, shift in (("a", 0.0), ("b", 0.22)):
        d = write_run(tmp / name, {"s": (x + shift + rng.normal(0, 0.8, 90)).tolist(),
                                   "squared_error": (rng.random(90) * 2 + shift).tolist()}, method=name, meta=meta)
        m = json.loads((d / "metrics.json").read_text())
        m["metrics"]["rmse"] = {"mean": 0.0, "n": 90}
        (d / "metrics.json").write_text(json.dumps(m))
        runs.append(d)
    return runs


REFERENCE = {
    'bootstrap_ci': [(0.33230312503216136, 0.7859847826656997), (0.3375612353044857, 0.5389724118648357), (0.3922758079681138, 0.5292619221917754)],
    'summarize': {'mean': 0.4344636471666787, 'ci_low': 0.33500756755835887, 'ci_high': 0.5377837006886065, 'n': 31, 'n_undefined': 1},
    'paired_bootstrap_ci': [(-0.03424836306938789, 0.5510572187901922), (-0.026857952389020306, 0.3262335943322205), (-0.024808400290585633, 0.1958321866671344)],
    'sign_flip': [(0.14057295136575615, 3001), (0.6819318068193181, 10000), (0.1187762447510498, 5000)],
    'sign_flip_refined': (0.009900243736965098, 79593),
    'sign_flip_thirds': [(0.5283471652834717, 10000), (0.5389461053894611, 10000)],
    'template_share_ci': (0.0, 0.057108709563067246),
    'template_effect': (0.001782327544799448, 0.8995),
    'corpus_and_mean': [('rmse', -0.1895114676411341, -0.0251680163284803, 0.008), ('s', -0.6308432708541278, -0.14407553802825715, 0.004)],
    'compare_runs': [('all', -0.62523296296901, -0.1485919285410647, 0.0018999050047497626, 20000, 0.9380296944868682), ('difficulty=easy', -0.8529550323886118, -0.08992404818552852, 0.021971979677568348, 181867, 0.9100213674330754), ('difficulty=hard', -0.5773244453997918, -0.03226712879359294, 0.03673299770418764, 293577, 0.773757847416616)],
}


def outputs() -> dict:
    """Every public resampling function of recbench.stats on inputs(): what REFERENCE pins."""
    from recbench.stats.bootstrap import bootstrap_ci, summarize
    from recbench.stats.paired import paired_bootstrap_ci, sign_flip_test
    from recbench.stats.variance import template_effect_test, template_share_ci

    x = inputs()
    out: dict = {}
    out["bootstrap_ci"] = [bootstrap_ci(x["v"][:n], n_boot=b, seed=s) for n, b, s in ((7, 500, 0), (31, 1000, 3),
                                                                                      (64, 999, 5))]
    out["summarize"] = summarize(list(x["v"][:31]) + [math.nan], n_boot=700, seed=2)
    out["paired_bootstrap_ci"] = [paired_bootstrap_ci(x["a"][:n], x["b"][:n], n_resamples=r, seed=s, level=lv)
                                  for n, r, s, lv in ((9, 999, 0, 0.95), (33, 4999, 4, 0.9), (121, 9999, 1, 0.95))]
    out["sign_flip"] = [(r.p_value, r.n_resamples) for r in (
        sign_flip_test(x["a"][:n], x["b"][:n], n_resamples=b, seed=s) for n, b, s in ((25, 3001, 0), (40, 10000, 2),
                                                                                       (121, 5000, 7)))]
    r = sign_flip_test(x["a"][:60] + 0.15, x["b"][:60], seed=3)
    out["sign_flip_refined"] = (r.p_value, r.n_resamples)
    # thirds lie on a lattice, where the adaptive test is exact (recbench.stats.lattice): the Monte Carlo draws with ties
    # in the null are pinned with the adaptive path's first 10,000 asked for explicitly
    out["sign_flip_thirds"] = [(r.p_value, r.n_resamples) for r in (
        sign_flip_test(x["ta"], x["tb"], n_resamples=10_000, seed=s) for s in (0, 1))]
    out["template_share_ci"] = template_share_ci(x["table"], n_boot=300, seed=4)
    t = template_effect_test(x["table"], n_resamples=1999, seed=6)
    out["template_effect"] = (t.statistic, t.p_value)
    return out


def compare_outputs(tmp) -> dict:
    """compare_runs on corpus_and_mean_runs: a corpus metric, slices, Monte Carlo refinement and a margin."""
    from recbench.stats.verdicts import compare_runs

    ra, rb = corpus_and_mean_runs(tmp)
    comps = compare_runs([ra, rb], metrics=["rmse", "s"], n_resamples=499, seed=5, slices=False)
    out = {"corpus_and_mean": [(c.metric, c.ci_low, c.ci_high, c.p_value) for c in comps]}
    comps = compare_runs([ra, rb], metrics=["s"], seed=1, margin=0.2)
    out["compare_runs"] = [(c.slice, c.ci_low, c.ci_high, c.p_value, c.n_resamples, c.p_equivalence) for c in comps]
    return out


@pytest.fixture
def small_blocks(monkeypatch):
    """A block of 1,000 floats: a few rows per batch, so every function runs through many batches."""
    from recbench.stats import resample

    monkeypatch.setattr(resample, "BLOCK_FLOATS", 1000)


@pytest.mark.parametrize("blocks", [pytest.param("default", marks=pytest.mark.full), "small"])
def test_resampling_functions_give_the_pre_batching_numbers(blocks, request):
    if blocks == "small":
        request.getfixturevalue("small_blocks")
    got = outputs()
    for key, ref in REFERENCE.items():
        if key in got:
            assert got[key] == ref, key  # bit-identical, not approximately equal


@pytest.mark.full
def test_compare_runs_gives_the_pre_batching_numbers(tmp_path, small_blocks):
    got = compare_outputs(tmp_path)
    for key in ("corpus_and_mean", "compare_runs"):
        assert got[key] == REFERENCE[key], key


@pytest.mark.parametrize("n", [1, 2, 7, 20001, 60000, 2 ** 31 + 12345, 3_000_000_000, 2 ** 40 + 3])
@pytest.mark.parametrize("rows", [1, 3, 7])
def test_integer_blocks_equal_one_integers_call_and_leave_its_state(n, rows):
    """Batches drawn by separate native calls are the one call's matrix, and the generator ends where it ends (the
    held 32-bit half of PCG64 included), also when a draw before them left a half held."""
    from recbench.stats.resample import integer_blocks

    width = n if n <= 60000 else 11  # above, rows of 11 draws from [0, n): the stream integer_blocks relies on

    for held in (False, True):
        one, batched = np.random.default_rng(n % 1000), np.random.default_rng(n % 1000)
        if held:
            one.integers(0, 2 ** 32, dtype=np.uint32), batched.integers(0, 2 ** 32, dtype=np.uint32)
            assert one.bit_generator.state["has_uint32"] == 1
        want = one.integers(0, n, (17, width)) if width == n else one.integers(0, n, (17 * width,)).reshape(17, width)
        if width == n:
            got = np.concatenate(list(integer_blocks(batched, n, 17, rows)))
        else:  # the same stream: rows of `width` draws from [0, n), drawn a batch at a time
            got = np.concatenate([batched.integers(0, n, (min(rows, 17 - k) * width,)).reshape(-1, width)
                                  for k in range(0, 17, rows)])
        assert got.dtype == np.int64 and np.array_equal(got, want)
        assert batched.bit_generator.state == one.bit_generator.state
        assert one.integers(0, 2 ** 32) == batched.integers(0, 2 ** 32)  # and the next draw agrees


@pytest.mark.parametrize("n,b,seed", [(5, 7, 0), (25, 301, 3), (64, 999, 8), (301, 40, 1)])
def test_sign_flip_null_is_scipys_null_with_and_without_a_held_word(n, b, seed, small_blocks):
    """The null of sum(d) under sign flips equals scipy.stats.permutation_test's (samples) value for value, in tiny
    blocks, when the generator starts fresh and when an earlier draw left a 32-bit half in its state."""
    from scipy import stats

    from recbench.stats.resample import sign_flip_null

    d = np.random.default_rng(seed).choice([-1.0, -1 / 3, 1 / 3, 1.0, 0.7], n) * np.linspace(0.5, 1.5, n)
    for held in (False, True):
        ours, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
        if held:
            ours.integers(0, 2 ** 32, dtype=np.uint32), theirs.integers(0, 2 ** 32, dtype=np.uint32)
        got = sign_flip_null(d, b, ours)
        want = stats.permutation_test((d,), lambda x, axis=-1: np.sum(x, axis=axis), permutation_type="samples",
                                      vectorized=True, n_resamples=b, random_state=theirs).null_distribution
        assert np.array_equal(got, want)


def test_summarize_many_shares_draws_and_equals_summarize_per_column(small_blocks):
    """Columns with as many defined values share one draw of the index rows; every column's summary is the one
    summarize gives it alone (NaN left out, a column of one value and an empty one included)."""
    from recbench.stats.bootstrap import summarize, summarize_many

    x = inputs()
    cols = {"v": list(x["v"][:40]), "a": list(x["a"][:40]), "nan": list(x["b"][:41]) + [math.nan],
            "short": list(x["ta"][:9]), "one": [0.5], "none": [math.nan], "bin": [float(v > 0) for v in x["b"][:40]]}
    got = summarize_many(cols, n_boot=613, seed=11)
    assert list(got) == list(cols)
    for name, col in cols.items():
        assert got[name] == summarize(col, n_boot=613, seed=11), name
    assert got["nan"]["n"] == 41 and got["nan"]["n_undefined"] == 1 and math.isnan(got["one"]["ci_low"])
