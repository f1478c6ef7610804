"""What the list metrics (api/item_lists.py) and the fairness gaps (stats/group_gaps.py) add to the aggregate.

    .venv/bin/python benchmarks/bench_list_metrics.py --users 100000 [--items 12101] [--repeats 3] [--out FILE]

Builds LLMRec-like records for N users (12,101 Beauty-sized catalogue, Zipf popularity, 5-20 history items, a
first-k list of 10 items per user, hr@k / ndcg@k per sample, the history / popularity / activity slices), scores
each sample's list once (what the loop does as each sample finishes), then times `run/loop.py aggregate` with the
list metrics and the fairness gaps (the task's catalogue, items on the records, fairness_by) and without them (the
same task and records without a catalogue, items or list columns), in the same process, alternating, and prints the
added seconds, the ratio, the added peak traced memory (tracemalloc: numpy's buffers included) and the load average.
Target: under 10 s and 1 GB added at 100,000 users.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import time
import tracemalloc
from typing import Any

import numpy as np

from recbench.api.item_lists import ItemCatalogue, ItemList, activity_levels, sample_values
from recbench.api.metrics import MetricSpec
from recbench.api.task import Task
from recbench.api.types import Example, Outcome
from recbench.run.loop import aggregate
from recbench.store.records import SampleRecord


class BenchTask(Task):
    """A ranking task whose records are built by hand: hr@10, ndcg@10 and the three LLMRec-like slices."""

    name = "bench_lists"
    headline_metric = "ndcg@10"
    breakdown_by = ("history", "popularity", "activity")
    metric_specs = (MetricSpec("n_named", higher_is_better=None, meaning="items named"),)

    def __init__(self, catalogue: ItemCatalogue | None):
        self.cfg = {}
        self.cat = catalogue
        self.fairness_by = ("activity",) if catalogue is not None else ()

    def load(self) -> list[Example]:
        return []

    def score(self, example: Example, outcome: Outcome) -> dict[str, float]:
        return {}

    def item_catalogue(self) -> ItemCatalogue | None:
        return self.cat


def build(n_users: int, n_items: int, seed: int = 0) -> tuple[ItemCatalogue, list[SampleRecord], list[SampleRecord]]:
    """(catalogue, records with list metrics and items, the same records without them)."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, n_items + 1) ** 0.9
    p /= p.sum()
    lengths = rng.integers(5, 21, n_users)
    flat = rng.choice(n_items, size=int(lengths.sum()), p=p)
    ids = [str(i) for i in range(1, n_items + 1)]
    cuts = np.cumsum(lengths)[:-1]
    histories = [[ids[j] for j in h] for h in np.split(flat, cuts)]
    cat = ItemCatalogue.of(ids, histories, k=10)
    levels, _ = activity_levels({str(u): len(h) for u, h in enumerate(histories)})
    lists = rng.choice(n_items, size=(n_users, 10), p=p)
    hits = rng.random(n_users) < 0.3
    with_lists, plain = [], []
    for u in range(n_users):
        meta = {"history": ("<=4", "5-9", "10+")[min(2, len(histories[u]) // 5)],
                "popularity": ("low", "mid", "high")[u % 3], "activity": levels[str(u)]}
        metrics = {"hr@10": float(hits[u]), "ndcg@10": float(hits[u]) / np.log2(2 + u % 10), "n_named": 10.0}
        plain.append(SampleRecord(id=f"{u:07d}", meta=meta, prediction=None, metrics=dict(metrics)))
        values, first = sample_values(cat, ItemList(tuple(ids[j] for j in lists[u]), tuple(histories[u])))
        with_lists.append(SampleRecord(id=f"{u:07d}", meta=meta, prediction=None, metrics={**metrics, **values},
                                       items=first))
    return cat, with_lists, plain


def measure(task: Task, records: list[SampleRecord]) -> tuple[float, float]:
    """(seconds of one aggregate, peak traced MB of another: tracing slows allocation, so it is not timed)."""
    t0 = time.perf_counter()
    aggregate(task, records)
    dt = time.perf_counter() - t0
    tracemalloc.start()
    aggregate(task, records)
    peak = tracemalloc.get_traced_memory()[1] / 2 ** 20
    tracemalloc.stop()
    return dt, peak


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", type=int, default=100_000)
    ap.add_argument("--items", type=int, default=12_101)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    cat, with_lists, plain = build(args.users, args.items)
    build_s = time.perf_counter() - t0
    rows: dict[str, list[tuple[float, float]]] = {"with": [], "without": []}
    for _ in range(args.repeats):  # alternating, so a load spike hits both
        rows["without"].append(measure(BenchTask(None), copy.copy(plain)))
        rows["with"].append(measure(BenchTask(cat), copy.copy(with_lists)))
    t_with, t_without = (float(np.median([r[0] for r in rows[k]])) for k in ("with", "without"))
    m_with, m_without = (float(np.median([r[1] for r in rows[k]])) for k in ("with", "without"))
    out: dict[str, Any] = {
        "users": args.users, "items": args.items, "repeats": args.repeats, "build_and_score_s": round(build_s, 2),
        "aggregate_without_s": round(t_without, 2), "aggregate_with_s": round(t_with, 2),
        "added_s": round(t_with - t_without, 2), "ratio": round(t_with / t_without, 2),
        "peak_mb_without": round(m_without, 1), "peak_mb_with": round(m_with, 1),
        "added_peak_mb": round(m_with - m_without, 1), "loadavg": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(), "target": "added_s < 10 and added_peak_mb < 1024"}
    print(json.dumps(out, indent=1))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=1)
    return 0 if out["added_s"] < 10 and out["added_peak_mb"] < 1024 else 1


if __name__ == "__main__":
    raise SystemExit(main())
