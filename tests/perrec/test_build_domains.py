"""A build over several categories: every group carries its category as `domain`, each category's chains and
priors are its own (the same groups as building that category alone, when it is the only one drawn from), and a
run over the build reports PTC per domain next to the per-difficulty breakdown."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from recbench.run.construct import bundled_data
from recbench.tasks.perrec.build import main

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def two_categories(tmp_path_factory) -> tuple[Path, Path]:
    """The bundled sample's ratings as two Amazon-style categories: the second with item ids prefixed 'X'."""
    d = tmp_path_factory.mktemp("cats")
    r = pd.read_csv(Path(bundled_data("perrec_sample")) / "ratings.csv.gz").rename(columns={"item_id": "parent_asin"})
    r.to_json(d / "A.jsonl", orient="records", lines=True)
    r.assign(parent_asin="X" + r["parent_asin"]).to_json(d / "B.jsonl", orient="records", lines=True)
    return d / "A.jsonl", d / "B.jsonl"


def test_groups_carry_their_domain_and_a_run_breaks_ptc_down_by_it(tmp_path, two_categories, capsys):
    a, b = two_categories
    main(["--source", "amazon-jsonl", "--category", f"A={a}", "--category", f"B={b}", "--out", str(tmp_path / "ab"),
          "--per-size", "12", "--heldout-per-size", "2", "--window-days", "60"])
    groups = [json.loads(x) for x in (tmp_path / "ab" / "groups.jsonl").read_text().splitlines()]
    assert {g["domain"] for g in groups} == {"A", "B"} and len(groups) == 36
    assert all(g["query_item"].startswith("X") == (g["domain"] == "B") for g in groups)
    # priors are per category: B is a copy of A, so across both a user's history would count twice
    r = pd.read_json(a, lines=True, dtype=False)
    for g in groups:
        for u in g["users"]:
            before = r[(r["user_id"] == u["user_id"]) & (r["timestamp"] < u["timestamp"])]["rating"]
            assert u["history_len"] == len(before) and u["avg_rating"] == round(before.mean(), 4), (g["domain"], u)
    stats = json.loads((tmp_path / "ab" / "stats.json").read_text())
    assert stats["domains"]["A"]["n"] == stats["domains"]["B"]["n"] == 8960
    assert stats["candidate_windows"] % 2 == 0  # each category's chains, once per category

    from recbench.run.evaluate import run_from_config
    from tests.helpers import compose_cfg

    cfg = compose_cfg(["task=perrec_built", f"task.data_dir={tmp_path / 'ab'}", "method=user_avg",
                       "run.progress=false", "cache.enabled=false"])
    m = run_from_config(cfg, tmp_path / "run").to_dict()
    by_domain = m["breakdown"]["domain"]
    assert set(by_domain) == {"A", "B"} and sum(v["n"] for v in by_domain.values()) == 36
    assert list(m["breakdown"])[0] == "difficulty"
    from recbench.report import build_report

    table = next(t for t in build_report([tmp_path / "run"]).tables if t.id == "perrec-domains")
    cells = dict(zip(table.columns, table.rows[0][1]))
    assert set(cells) == {("A",), ("B",)}
    assert [cells[(d,)].mean for d in "AB"] == [by_domain[d]["metrics"]["ptc"]["mean"] for d in "AB"]


def test_the_loader_describes_each_member_by_its_groups_category(tmp_path, two_categories, capsys):
    """ratings.csv.gz keeps each rating's category: the loaded histories are the builder's per-category priors (users
    in groups of both categories included), holding only their group's category's items."""
    import gzip

    from recbench.tasks.perrec.data import load_examples

    a, b = two_categories
    main(["--source", "amazon-jsonl", "--category", f"A={a}", "--category", f"B={b}", "--out", str(tmp_path / "ab"),
          "--per-size", "12", "--heldout-per-size", "2", "--window-days", "60"])
    with gzip.open(tmp_path / "ab" / "ratings.csv.gz", "rt") as f:
        assert f.readline() == "user_id,item_id,rating,timestamp,domain\n"
    records = {g["group_id"]: g for g in map(json.loads, (tmp_path / "ab" / "groups.jsonl").read_text().splitlines())}
    exs = load_examples.__wrapped__.uncached(str(tmp_path / "ab"), 4, 10_000)
    both = {u["user_id"] for e in exs if e.meta["domain"] == "A" for u in e.data["users"]} & {
        u["user_id"] for e in exs if e.meta["domain"] == "B" for u in e.data["users"]}
    assert len(both) >= 3  # the case this is about: users in groups of both categories
    for e in exs:
        for u, rec in zip(e.data["users"], records[e.id]["users"]):
            assert (u["history_len"], u["avg_rating"]) == (rec["history_len"], rec["avg_rating"]), (e.id, u["user_id"])
            assert len(u["history"]) == u["history_len"]
            assert all(h["item_id"].startswith("X") == (e.meta["domain"] == "B") for h in u["history"]), e.id
