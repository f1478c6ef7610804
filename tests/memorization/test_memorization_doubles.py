"""The memorization probe against doubles whose memory is planted exactly (recbench.testing.planted): a leaky model
that knows every real title scores 100% coverage and 0% on the fabricated control set; one that knows a seeded 30%
of the titles is flagged at the documented n (limit=50: 25 real + 25 control items) in at least 80% of seeds; doubles
that know nothing (or complete anything) are flagged in at most 5% of seeds. The likelihood probe, at chance 1 in
10 on both sets, is documented at limit=100."""
from __future__ import annotations

import time

import pytest
from scipy.stats import binom, hypergeom

from recbench.testing.planted import PlantedMemory, planted
from tests.memorization.memorization_helpers import bundled_items, probe, rates

pytestmark = pytest.mark.full  # many in-process runs (tens of seconds)

#: the documented n (docs/memorization.md): limit=50, 25 real and 25 control items
N = 50
SEEDS = range(20)


def test_leaky_double_recalls_every_real_title_and_no_control(tmp_path):
    items = bundled_items()
    m, recs = probe(tmp_path, ["method=id_to_title", f"limit={N}"], PlantedMemory(items))
    assert rates(m) == (1.0, 0.0)
    assert m["metrics"]["coverage"]["mean"] == 1.0 and m["metrics"]["false_recall"]["mean"] == 0.0
    assert {r["meta"]["set"] for r in recs} == {"real", "control"} and len(recs) == N
    d = m["extra"]["memorization"]["difference"]
    assert d["estimate"] == 1.0 and d["flagged"] and d["p_value"] < 1e-12
    assert m["extra"]["coverage_minus_control"] == 1.0
    # the whole catalogue: every one of the 240 titles, none of the 240 fabricated ones
    m, _ = probe(tmp_path, ["method=id_to_title"], PlantedMemory(items), name="all")
    assert m["extra"]["memorization"]["real"]["k"] == 240 and m["extra"]["memorization"]["control"]["k"] == 0


def test_leaky_double_on_the_other_probes(tmp_path):
    items = bundled_items()
    m, _ = probe(tmp_path, ["method=prefix_to_title", f"limit={N}"], PlantedMemory(items), name="prefix")
    real, control = rates(m)
    # the prefix is lengthened until it names one title, so a model that knows every title completes (nearly) all
    assert real >= 0.95 and control <= 0.04, (real, control)
    m, _ = probe(tmp_path, ["method=id_to_title_loglik", f"limit={N}"], PlantedMemory(items), name="loglik")
    real, control = rates(m)
    assert real == 1.0 and control <= 0.3  # control at chance (1 in 10 choices)
    assert m["extra"]["memorization"]["chance"] == pytest.approx(0.1)


def test_history_double_recalls_the_users_it_knows(tmp_path):
    from recbench.run.construct import bundled_data
    from recbench.tasks.memorization.catalogue import read_catalogue

    cat = read_catalogue("perrec_sample", bundled_data("perrec_sample"), "item_id")
    nxt = {u: cat.items[h[-1]] for u, h in cat.histories().items()}
    m, recs = probe(tmp_path, ["method=history_to_next", f"limit={N}"], PlantedMemory({}, next_items=nxt))
    assert rates(m) == (1.0, 0.0)
    # the prompt shows the user's items before the target, oldest first, at most history_len of them
    real = next(r for r in recs if r["meta"]["set"] == "real")
    hist = cat.histories()[real["meta"]["user_id"]]
    assert real["truth"]["target"] == hist[-1]


def _flag_rate(tmp_path, make_backend, method: str = "id_to_title", n: int = N) -> tuple[float, list[float]]:
    flags, covers = [], []
    for seed in SEEDS:
        m, _ = probe(tmp_path, [f"method={method}", f"limit={n}"], make_backend(seed), name=f"{method}-{n}-{seed}",
                     seed=seed)
        flags.append(m["extra"]["memorization"]["difference"]["flagged"])
        covers.append(rates(m)[0])
    return sum(flags) / len(flags), covers


def test_thirty_percent_double_is_detected_with_power_at_least_080(tmp_path):
    items = bundled_items()
    t0 = time.time()
    power, covers = _flag_rate(tmp_path, lambda seed: PlantedMemory(planted(items, 0.3, seed)))
    # coverage estimates the planted share (72 of 240 items) without bias: the mean over seeds is near 0.3
    assert abs(sum(covers) / len(covers) - 0.3) < 0.05, covers
    # analytic power at n = 25 + 25: the Fisher test flags k >= 5 recalled of 25 (p(k=4) = 0.055, p(k=5) = 0.025);
    # k is hypergeometric (25 draws from 240 items, 72 remembered)
    assert hypergeom(240, 72, 25).sf(4) == pytest.approx(0.92, abs=0.02)
    assert binom(25, 0.3).sf(4) == pytest.approx(0.91, abs=0.01)
    assert power >= 0.8, (power, covers)
    power, _ = _flag_rate(tmp_path, lambda seed: PlantedMemory(planted(items, 0.3, seed)), "prefix_to_title")
    assert power >= 0.8
    assert time.time() - t0 < 300


def test_thirty_percent_double_under_the_likelihood_probe(tmp_path):
    """Chance is 1 in 10 on both sets (real 0.3 + 0.7 x 0.1 = 0.37 against 0.1), so the documented n is larger:
    limit=100 (50 + 50); at limit=50 the power is about 0.7."""
    items = bundled_items()
    power, covers = _flag_rate(tmp_path, lambda seed: PlantedMemory(planted(items, 0.3, seed)), "id_to_title_loglik",
                               n=100)
    assert abs(sum(covers) / len(covers) - 0.37) < 0.06, covers
    assert power >= 0.8, power


def test_null_doubles_are_flagged_at_most_five_percent(tmp_path):
    items = bundled_items()
    pool = list(items.values())
    # knows nothing and says so
    rate, covers = _flag_rate(tmp_path, lambda seed: PlantedMemory({}))
    assert rate == 0.0 and max(covers) == 0.0
    # knows nothing and completes every prefix with a plausible title: the control set absorbs its lucky hits
    rate, _ = _flag_rate(tmp_path, lambda seed: PlantedMemory({}, confabulate=True, pool=pool), "prefix_to_title")
    assert rate <= 0.05
    # knows nothing, scores choices at random: both sets at chance (1 in 10)
    rate, covers = _flag_rate(tmp_path, lambda seed: PlantedMemory({}), "id_to_title_loglik")
    assert rate <= 0.05 and 0.04 <= sum(covers) / len(covers) <= 0.2, covers
