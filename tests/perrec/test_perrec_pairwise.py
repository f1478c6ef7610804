"""Pairwise: heapsort comparison counts, the both-order rule, and batching of all groups' comparisons per round."""
import math
import re
import random

import pytest
from omegaconf import OmegaConf

from recbench.store.response_cache import ResponseCache
from recbench.run.loop import EvalLoop
from recbench.store.runstore import RunStore
from recbench.tasks.perrec.methods import heapsort_desc
from recbench.tasks.perrec.task import PerRecTask
from recbench.run.construct import bundled_data
from tests.doubles import ScriptedBackend

pytestmark = pytest.mark.fast


def run_heapsort(items, key):
    calls = []

    def greater(a, b):
        calls.append((a, b))
        return key(a) > key(b)
        yield  # pragma: no cover

    gen = heapsort_desc(items, greater)
    try:
        while True:
            next(gen)
    except StopIteration as s:
        return s.value, len(calls)


@pytest.mark.parametrize("n", [2, 3, 4, 8, 16, 64])
def test_heapsort_sorts_with_n_log_n_comparisons(n):
    rng = random.Random(n)
    items = list(range(n))
    rng.shuffle(items)
    ranked, comparisons = run_heapsort(items, key=lambda x: x)
    assert ranked == sorted(items, reverse=True)
    assert comparisons <= 2 * n * math.log2(n) + 1
    if n >= 16:
        assert comparisons < n * (n - 1) / 2  # fewer than all pairs


def test_heapsort_exact_counts_small_groups():
    # hand-traced: 2 users -> 1 comparison; 3 users -> 3 (build: child vs child, child vs root; then one sift)
    assert run_heapsort([1, 2], key=lambda x: x)[1] == 1
    assert run_heapsort([3, 1, 2], key=lambda x: x)[1] == 3


def _task():
    cfg = OmegaConf.create({"name": "perrec", "data_dir": bundled_data("perrec_sample"), "difficulties": ["hard"],
                            "retrieval_k": 4, "history_max": 200, "profile": False, "profile_max_tokens": 32,
                            "profile_history": 30, "legacy_tau": False})
    return PerRecTask(cfg)


def _answer_by_truth(examples, consistent=True):
    """Scripted model: prefers the user whose true relative rating is higher; or always says [User A]."""
    rel = {(f"{u['avg_rating']:.2f}", u["history_len"]): u["relative_rating"] for e in examples for u in e.data["users"]}

    def answer(req):
        if not consistent:
            return "[User A]"
        found = re.findall(r"Average rating: ([0-9.]+);.*?number of ratings: (\d+)", req.messages[-1][1])
        a, b = (rel[(avg, int(n))] for avg, n in found)
        return "[User A]" if a > b else "[User B]"

    return answer


def _run(tmp_path, answer_fn, n=10):
    task = _task()
    examples = task.load()[:n]
    method = task.make_method(OmegaConf.create({"name": "pairwise", "max_tokens": 8, "constrained": False}),
                              OmegaConf.create({"temperature": 0.0, "top_p": 1.0, "seed": 0}))
    backend = ScriptedBackend(answer_fn(examples), batch_size=64)
    loop = EvalLoop(task, method, backend, ResponseCache(tmp_path / "c.sqlite"), RunStore(tmp_path / "run"),
                    chunk_size=1000, progress=False)
    loop.run(examples)
    return examples, backend, loop, [r.to_dict() for r in loop.store.records()]


def test_consistent_oracle_ranks_perfectly(tmp_path):
    examples, backend, loop, recs = _run(tmp_path, _answer_by_truth)
    assert all(r["metrics"]["ptc"] == 1.0 for r in recs)
    assert all(r["details"]["inconsistent"] == 0 for r in recs)
    # heapsort on 4 users: at most 2 * 4 * log2(4) + 1 comparisons, each asked in both orders
    assert all(1 <= r["details"]["comparisons"] <= 17 for r in recs)
    assert all(len(r["calls"]) == 2 * r["details"]["comparisons"] for r in recs)


def test_both_orders_and_batching(tmp_path):
    examples, backend, loop, recs = _run(tmp_path, lambda exs: _answer_by_truth(exs, consistent=False))
    # a model that always says "[User A]" contradicts itself in every pair: no comparison counts as consistent
    assert all(r["details"]["consistent"] == 0 and r["details"]["inconsistent"] == r["details"]["comparisons"] for r in recs)
    # each comparison = 2 requests (both orders); every round batches all groups' comparisons together
    assert all(len(r["calls"]) == 2 * r["details"]["comparisons"] for r in recs)
    # repeated identical comparisons are served by the cache, never asked twice
    assert backend.calls == loop.stats.cache_misses <= sum(len(r["calls"]) for r in recs)
    assert backend.batches[0] == 2 * len(examples)
    assert len(backend.batches) <= max(r["details"]["comparisons"] for r in recs)
    assert all(c <= 2 * 4 * 2 + 1 for c in (r["details"]["comparisons"] for r in recs))
