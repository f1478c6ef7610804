"""The list metrics (recbench/api/item_lists.py) against a reference implementation on the same lists, to 1e-9.

The reference is RecBole's: recbole/evaluator/metrics.py of RecBole 1.2.1 (RUCAIBox/RecBole; read from the
released wheel recbole-1.2.1-py3-none-any.whl, lines 457-760: ItemCoverage.get_coverage, AveragePopularity.get_pop
and metric_info/topk_result, ShannonEntropy.get_entropy, GiniIndex.get_gini, TailPercentage.get_tail). RecBole itself
cannot be a test dependency here: installing it pulls ray 2.6, tensorboard and scikit-learn, and importing its
evaluator imports torch and tensorboard through recbole.utils. So its formulas are rewritten below as plain functions
over an (users x k) item matrix, the form RecBole's evaluator hands them, loop for loop.
"""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from recbench.api.item_lists import (
    ItemCatalogue,
    ItemList,
    corpus_summaries,
    error_rates,
    miscalibration,
    sample_values,
)
from recbench.api.metrics import find_spec

pytestmark = pytest.mark.fast


# ---- RecBole 1.2.1's formulas (recbole/evaluator/metrics.py), over an item matrix ---------------------------
def recbole_coverage(item_matrix: np.ndarray, num_items: int) -> float:
    """ItemCoverage.get_coverage: distinct items / num_items."""
    return np.unique(item_matrix).shape[0] / num_items


def recbole_average_popularity(item_matrix: np.ndarray, item_count: dict, k: int) -> float:
    """AveragePopularity: per user the cumulative mean of item_count.get(item, 0) at position k, averaged."""
    value = np.zeros(item_matrix.shape, dtype=float)
    for i in range(item_matrix.shape[0]):
        for j in range(item_matrix.shape[1]):
            value[i][j] = item_count.get(item_matrix[i, j], 0)
    per_k = value.cumsum(axis=1) / np.arange(1, value.shape[1] + 1)
    return float(per_k.mean(axis=0)[k - 1])


def recbole_entropy(item_matrix: np.ndarray) -> float:
    """ShannonEntropy.get_entropy: -sum p log p over the recommended items, DIVIDED by the number of distinct ones."""
    item_count = Counter(item_matrix.flatten().tolist())
    total = item_matrix.shape[0] * item_matrix.shape[1]
    result = 0.0
    for cnt in item_count.values():
        p = cnt / total
        result += -p * np.log(p)
    return result / len(item_count)


def recbole_gini(item_matrix: np.ndarray, num_items: int) -> float:
    """GiniIndex.get_gini: sorted counts of the recommended items placed at the top of num_items ranks."""
    sorted_count = np.array(sorted(Counter(item_matrix.flatten().tolist()).values()))
    n_rec = sorted_count.shape[0]
    total = item_matrix.shape[0] * item_matrix.shape[1]
    idx = np.arange(num_items - n_rec + 1, num_items + 1)
    return float(np.sum((2 * idx - num_items - 1) * sorted_count) / total / num_items)


def recbole_tail_percentage(item_matrix: np.ndarray, count_items: dict, tail: int, k: int) -> float:
    """TailPercentage with an integer tail_ratio: tail items are those with count <= tail; the share at position k."""
    tail_items = {item for item, cnt in count_items.items() if cnt <= tail}
    value = np.array([[1.0 if x in tail_items else 0.0 for x in row] for row in item_matrix])
    per_k = value.cumsum(axis=1) / np.arange(1, value.shape[1] + 1)
    return float(per_k.mean(axis=0)[k - 1])


# ---- fixtures -------------------------------------------------------------------------------------------------
def _world(seed: int, n_items: int = 60, n_users: int = 300, k: int = 10):
    """A catalogue with skewed popularity and every user's list of k distinct items, drawn by popularity."""
    rng = np.random.default_rng(seed)
    items = [str(i) for i in range(1, n_items + 1)]
    weights = 1.0 / np.arange(1, n_items + 1) ** 1.1
    weights /= weights.sum()
    histories = [list(rng.choice(items, size=int(rng.integers(2, 15)), p=weights)) for _ in range(n_users)]
    cat = ItemCatalogue.of(items, histories, k=k)
    lists = [list(rng.choice(items, size=k, replace=False, p=weights)) for _ in range(n_users)]
    return cat, histories, lists


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_recbole_metrics_on_the_same_lists(seed):
    cat, _, lists = _world(seed)
    k = cat.k
    matrix = np.array([[int(i) for i in r] for r in lists])
    count = {int(i): c for i, c in zip(cat.items, cat.pop) if c > 0}  # RecBole's data.count_items
    per = [sample_values(cat, ItemList(tuple(r)))[0] for r in lists]
    ours = corpus_summaries(cat, lists, n_boot=10)
    assert np.mean([p[f"arp@{k}"] for p in per]) == pytest.approx(recbole_average_popularity(matrix, count, k),
                                                                 abs=1e-9)
    assert ours[f"coverage@{k}"]["mean"] == pytest.approx(recbole_coverage(matrix, len(cat.items)), abs=1e-9)
    assert ours[f"gini@{k}"]["mean"] == pytest.approx(recbole_gini(matrix, len(cat.items)), abs=1e-9)
    distinct = len(np.unique(matrix))  # RecBole divides the entropy by the distinct items recommended; we do not
    assert ours[f"entropy@{k}"]["mean"] / distinct == pytest.approx(recbole_entropy(matrix), abs=1e-9)
    for m in ("coverage", "gini", "entropy"):
        s = ours[f"{m}@{k}"]
        assert s["ci_low"] <= s["mean"] <= s["ci_high"] and s["n"] == len(lists)


def test_aplt_is_recbole_tail_percentage_at_the_80_percent_head():
    # worlds without a tie at the head's edge (a tie is split by item id, which RecBole's count threshold cannot say)
    worlds = [w for w in (_world(s, n_users=600) for s in range(12))
              if w[0].pop[w[0].tail].max() < w[0].pop[~w[0].tail].min()]
    assert len(worlds) >= 2
    for cat, _, lists in worlds:
        _check_aplt(cat, lists)


def _check_aplt(cat, lists):
    k = cat.k
    tail_pops, head_pops = cat.pop[cat.tail], cat.pop[~cat.tail]
    threshold = tail_pops.max()
    count = {int(i): c for i, c in zip(cat.items, cat.pop)}  # every catalogue item, zeros too (the tail has them)
    matrix = np.array([[int(i) for i in r] for r in lists])
    ours = np.mean([sample_values(cat, ItemList(tuple(r)))[0][f"aplt@{k}"] for r in lists])
    assert ours == pytest.approx(recbole_tail_percentage(matrix, count, int(threshold), k), abs=1e-9)
    # the head holds the first 80% of interactions: dropping its least popular item leaves less than 80%
    assert head_pops.sum() >= 0.8 * cat.pop.sum() > head_pops.sum() - head_pops.min()


def test_novelty_ild_and_the_answer_errors_by_hand():
    items = ["a", "b", "c", "d"]
    cat = ItemCatalogue.of(items, [["a", "b"], ["a"], ["a", "c"]], k=3,
                           categories={"a": ["x"], "b": ["x", "y"], "c": ["z"]})
    vals, first = sample_values(cat, ItemList(("a", None, "a", "b", "d", "c"), history=("b",),
                                              candidates=frozenset({"a", "b", "c"})))
    assert first == ["a", "b", "d"]
    assert vals["invalid_rate"] == 1 / 6 and vals["duplicate_rate"] == 1 / 6
    assert vals["history_copy_rate"] == 1 / 6 and vals["out_of_candidates_rate"] == 1 / 6  # b; d
    assert vals["novelty@3"] == pytest.approx(np.mean([-math.log2(4 / 4), -math.log2(2 / 4), -math.log2(1 / 4)]))
    # Jaccard distances: a-b 1 - 1/2, a-d 1 (d has none), b-d 1
    assert vals["ild@3"] == pytest.approx((0.5 + 1 + 1) / 3)
    assert vals["arp@3"] == pytest.approx((3 + 1 + 0) / 3)
    assert all(math.isnan(v) for v in error_rates(ItemList(())).values())  # nothing named: undefined


def test_pop_miscalibration_is_the_jensen_shannon_divergence_of_the_profiles():
    from scipy.spatial.distance import jensenshannon

    cat, histories, lists = _world(3)
    for h, r in zip(histories[:50], lists[:50]):
        pos = cat.positions(r)
        p = np.bincount(cat.pop_group[cat.positions(h)], minlength=3) / len(h)
        q = np.bincount(cat.pop_group[pos], minlength=3) / len(pos)
        assert miscalibration(cat, pos, h) == pytest.approx(jensenshannon(p, q, base=2) ** 2, abs=1e-9)


def test_every_list_metric_is_declared_with_a_direction_and_the_old_names_stay_readable():
    for name, direction, aggregation in [("arp@10", "lower", "mean"), ("aplt@5", "higher", "mean"),
                                         ("coverage@10", "higher", "corpus"), ("gini@10", "lower", "corpus"),
                                         ("entropy@10", "higher", "corpus"), ("novelty@10", "higher", "mean"),
                                         ("ild@10", "higher", "mean"), ("pop_miscalibration@10", "lower", "mean"),
                                         ("invalid_rate", "lower", "mean"), ("duplicate_rate", "lower", "mean"),
                                         ("history_copy_rate", "lower", "mean"),
                                         ("out_of_candidates_rate", "lower", "mean"),
                                         ("share_hallucinated", "lower", "mean"), ("hallucination_rate", "lower", "mean"),
                                         ("share_duplicate", "lower", "mean"), ("share_out_of_candidate", "lower", "mean")]:
        spec = find_spec(name)
        assert spec is not None and spec.direction == direction and spec.aggregation == aggregation, name
        assert spec.meaning
    assert find_spec("coverage").binary  # memorization's own 'coverage' keeps its name: no clash with coverage@k
