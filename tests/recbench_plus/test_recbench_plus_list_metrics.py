"""RecBench+ takes part in the list metrics (api/item_lists.py) and the user-group fairness gaps: the bundled sample's
reference rows and a scripted model, values recomputed from the raw files and samples.jsonl."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from recbench.run.construct import bundled_data
from recbench.run.evaluate import run_from_config
from tests.doubles import ScriptedBackend
from tests.helpers import compose_cfg

pytestmark = pytest.mark.fast

SAMPLE = Path(bundled_data("recbench_plus_sample"))


def _run(tmp_path: Path, method: str, backend=None) -> tuple[dict, list[dict]]:
    cfg = compose_cfg(["task=recbench_plus", f"method={method}", f"cache.path={tmp_path / 'c.sqlite'}",
                       "run.progress=false", "run.bootstrap_resamples=50"])
    run_from_config(cfg, tmp_path / method, backend=backend)
    m = json.loads((tmp_path / method / "metrics.json").read_text())
    return m, [json.loads(x) for x in (tmp_path / method / "samples.jsonl").read_text().splitlines()]


def test_popular_match_lists_and_user_groups(tmp_path):
    m, recs = _run(tmp_path, "popular_match")
    ratings = pd.read_csv(SAMPLE / "ratings.csv", dtype=str)
    pop = ratings["item_id"].value_counts()  # every loaded user's ratings: what the models are shown
    for r in recs:
        assert r["items"] == r["details"]["item_ids"][:10]
        want = np.mean([pop.get(i, 0) for i in r["items"]])
        assert r["metrics"]["arp@10"] == pytest.approx(want, abs=1e-9)
        assert r["metrics"]["invalid_rate"] == 0.0 and "hallucination_rate" not in r["metrics"]
        assert "out_of_candidates_rate" not in r["metrics"]  # no candidates given
        assert 0 <= r["metrics"]["ild@10"] <= 1  # genres from the KG
    items = set(pd.read_csv(SAMPLE / "items.csv", dtype=str)["item_id"])
    listed = {i for r in recs for i in r["items"]}
    assert m["metrics"]["coverage@10"]["mean"] == pytest.approx(len(listed) / len(items), abs=1e-12)
    users = pd.read_csv(SAMPLE / "users.csv", dtype=str).set_index("user_id")
    asked = [r for r in recs if "user" in r["meta"]]  # queries with a source user (the others have no groups)
    assert len(asked) >= 20
    for r in asked:  # each such query carries its source user's groups
        u = r["meta"]["user"]
        assert r["meta"]["gender"] == users.loc[u, "gender"] and r["meta"]["occupation"] == users.loc[u, "occupation"]
    fair = m["extra"]["fairness"]
    assert {"gender", "age", "occupation"} <= set(fair)
    assert {r["meta"]["activity"] for r in asked} == {"cold"}  # every sample user rated 30 movies: one level, no gap
    assert "activity" not in fair
    gap = fair["gender"]["recall"]
    assert set(gap["groups"]) == {"F", "M"} and gap["test"] == "welch" and gap["cluster_by"] == "user"
    n_users = {g: len({r["meta"]["user"] for r in asked if r["meta"]["gender"] == g}) for g in ("F", "M")}
    assert {g: v["n"] for g, v in gap["groups"].items()} == n_users  # units: users, not queries
    assert gap["worst"] in {"F", "M"} and gap["ci_low"] <= gap["diff"] <= gap["ci_high"]
    assert set(m["breakdown"]["gender"]) == {"F", "M"}


def test_model_answers_name_errors_under_the_one_set_of_names(tmp_path):
    titles = pd.read_csv(SAMPLE / "items.csv", dtype=str)
    first, second = (f"{t.title} ({t.year})" for t in titles.head(2).itertuples())
    answer = f"{first} [SEP] {first} [SEP] The Entirely Invented Film [SEP] {second}"
    m, recs = _run(tmp_path, "assistant", ScriptedBackend(lambda r: answer))
    assert m["metrics"]["invalid_rate"]["mean"] == pytest.approx(0.25)
    assert m["metrics"]["duplicate_rate"]["mean"] == pytest.approx(0.25)
    assert all(r["items"] == ["1", "2"] for r in recs)
