"""PerRecBench strata on the bundled data, checked against counts made here from the raw files: popularity tercile
of the query item's rating count, history-length tercile; PTC's random expectation in metrics.json."""
from __future__ import annotations

import csv
import gzip
import json
import statistics
from collections import Counter
from pathlib import Path

import pytest

from recbench.run.construct import bundled_data

from recbench.run.evaluate import run_from_config
from recbench.tasks.perrec.data import tercile
from tests.llmrec.llmrec_helpers import compose_cfg

pytestmark = pytest.mark.fast


def _raw():
    root = Path(bundled_data("perrec_sample"))
    with gzip.open(root / "ratings.csv.gz", "rt") as f:
        counts = Counter(row["item_id"] for row in csv.DictReader(f))
    groups = [json.loads(line) for line in (root / "groups.jsonl").read_text().splitlines() if line.strip()]
    return counts, groups


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("perrec_strata")
    cfg = compose_cfg("task=perrec", "method=random", f"cache.path={d / 'c.sqlite'}")
    return run_from_config(cfg, d / "run").to_dict()


def test_popularity_terciles_from_the_ratings_file(run):
    from recbench.run.construct import build_task

    counts, groups = _raw()
    per_group = {g["group_id"]: counts[g["query_item"]] for g in groups}
    # np.quantile's default (linear) is statistics.quantiles(method="inclusive") at n=3
    cuts = statistics.quantiles(list(per_group.values()), n=3, method="inclusive")
    task = build_task(compose_cfg("task=perrec"))
    ex = task.load()
    assert task.strata["popularity"]["cuts"] == pytest.approx(cuts)
    for e in ex:
        assert e.meta["query_ratings"] == per_group[e.id]
        want = "low" if per_group[e.id] <= cuts[0] else "mid" if per_group[e.id] <= cuts[1] else "high"
        assert e.meta["popularity"] == want
    # the synthetic sample: most query items have the same count, so the two cuts coincide and 'mid' is empty
    labels = Counter(e.meta["popularity"] for e in ex)
    assert sum(labels.values()) == len(groups) and labels["low"] == sum(v <= cuts[0] for v in per_group.values())
    # metrics.json: difficulty stays the primary slice; the strata follow, with their sizes
    assert list(run["breakdown"])[0] == "difficulty"
    assert {v: b["n"] for v, b in run["breakdown"]["popularity"].items()} == {k: v for k, v in labels.items() if v}
    assert run["extra"]["strata"]["popularity"]["cuts"] == pytest.approx(cuts)


def test_history_terciles_of_mean_member_history(run):
    from recbench.run.construct import build_task

    task = build_task(compose_cfg("task=perrec"))
    ex = task.load()
    means = {e.id: sum(u["history_len"] for u in e.data["users"]) / len(e.data["users"]) for e in ex}
    cuts = statistics.quantiles(list(means.values()), n=3, method="inclusive")
    assert task.strata["history"]["cuts"] == pytest.approx(cuts)
    for e in ex:
        assert e.meta["history"] == tercile(means[e.id], cuts, ("short", "mid", "long"))
    sizes = Counter(e.meta["history"] for e in ex)
    assert {v: b["n"] for v, b in run["breakdown"]["history"].items()} == dict(sizes)
    assert max(sizes.values()) - min(sizes.values()) <= 6  # distinct means: terciles near 40/40/40


def test_random_expectation_of_ptc(run):
    assert run["extra"]["random_expectation"] == {"ptc": 0.0}
    # the seeded random ranker lands near it (120 groups)
    lo, hi = run["metrics"]["ptc"]["ci_low"], run["metrics"]["ptc"]["ci_high"]
    assert lo < 0.0 < hi
