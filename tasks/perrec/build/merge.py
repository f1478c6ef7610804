"""Finish a `duckdb`-engine build from its prepared categories: one seeded selection over every category's chains
(the same draws as the pandas engine), then the members' columns, the items' prior means and the members' ratings
fetched from each category's database, and the build written (build_write) through a staging folder."""
from __future__ import annotations

import functools
import json
import shutil
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd

from recbench.api.errors import DataError
from recbench.tasks.perrec.build.config import BuildConfig
from recbench.tasks.perrec.build.duckdb_engine import Category, Engine, connect
from recbench.tasks.perrec.build.member_ratings import DuckRatings
from recbench.tasks.perrec.build.select import draw_windows, group_records
from recbench.tasks.perrec.build.stats import input_summary


def work_folder(out: Optional[str], work: Optional[str]) -> Path:
    """The build's own scratch folder (removed when done): OUT.work, or a `perrec-build` folder inside --work-dir
    (never --work-dir itself, which may hold other files)."""
    return Path(work) / "perrec-build" if work else Path(str(out) + ".work")


def category_folder(work: Path, i: int, cat: Category) -> Path:
    """The work folder of the i-th category."""
    return Path(work) / f"{i:03d}-{cat.domain or 'ratings'}"


def load_prepared(work: Path, cats: list[Category]) -> list[dict[str, Any]]:
    """Each category's prepared.json and chains; DataError naming the first category that is not prepared."""
    out = []
    for i, cat in enumerate(cats):
        folder = category_folder(work, i, cat)
        info_path = folder / "prepared.json"
        if not info_path.is_file():
            raise DataError(f"{folder}: category '{cat.domain or cat.input}' was not prepared (its job failed or did "
                            "not run). Fix: rerun the build; prepared categories are kept")
        info = json.loads(info_path.read_text())
        if info["category"] != cat.__dict__:
            raise DataError(f"{info_path}: prepared from {info['category']}, not {cat.__dict__}. Fix: rerun the build")
        with np.load(folder / "chains.npz") as z:
            info.update(folder=folder, members=z["members"], lengths=z["lengths"], chain_items=z["items"])
        out.append(info)
    return out


def combined_chains(prep: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]:
    """Every category's chains, in category order: members as global row ids (a category's `a` rowid plus the rows of
    the categories before it), lengths, item codes (offset per category), and each category's first global id."""
    width = max([p["members"].shape[1] for p in prep], default=2)
    mems, lens, items, offsets = [], [], [], []
    row0 = item0 = 0
    for p in prep:
        m = p["members"]
        mems.append(np.pad(np.where(m >= 0, m + row0, -1), ((0, 0), (0, width - m.shape[1])), constant_values=-1))
        lens.append(p["lengths"])
        items.append(p["chain_items"] + item0)
        offsets.append(row0)
        row0 += int(p["n"])
        item0 += int(p["n_eligible_items"])
    return (np.concatenate(mems) if mems else np.full((0, width), -1), np.concatenate(lens) if lens else np.zeros(0, int),
            np.concatenate(items) if items else np.zeros(0, int), offsets)


def drawn_labels(drawn: list[dict[int, list[np.ndarray]]], offsets: list[int]
                 ) -> tuple[list[dict[int, list[np.ndarray]]], list[np.ndarray], np.ndarray]:
    """The drawn members (global row ids) as labels: positions among every drawn id in sorted order; also each
    category's `a` rowids behind its labels and each category's first label."""
    ids = np.unique(np.concatenate([m for d in drawn for ms in d.values() for m in ms] + [np.zeros(0, np.int64)]))
    bounds = np.searchsorted(ids, list(offsets) + [np.iinfo(np.int64).max])
    rids = [ids[bounds[c]:bounds[c + 1]] - offsets[c] for c in range(len(offsets))]
    labelled = [{s: [np.searchsorted(ids, m) for m in ms] for s, ms in d.items()} for d in drawn]
    return labelled, rids, bounds[:-1]


def member_columns(cons: list[Any], rids: list[np.ndarray], cats: list[Category]) -> dict[str, np.ndarray]:
    """The columns of the drawn members, by label (the rows of `a` behind each category's rowids), with the count
    `ib_n` and sum `ib_s` of the item's ratings strictly before each (a group's item mean)."""
    frames = []
    for con, ids, cat in zip(cons, rids, cats):
        ids_frame = pd.DataFrame({"rid": ids})  # noqa: F841 (read by name in the query)
        con.execute("""CREATE OR REPLACE TEMP TABLE d AS SELECT a.rowid AS rid, uc.user_id, ic.item_id, a.i, a.rating,
            a.ts, a.n_prior, a.avg FROM a JOIN user_codes uc USING (u) JOIN item_codes ic USING (i)
            WHERE a.rowid IN (SELECT rid FROM ids_frame)""")
        df = con.execute("""SELECT d.user_id, d.item_id, d.rating, d.ts AS timestamp, d.n_prior, d.avg, b.ib_n, b.ib_s
            FROM d JOIN (SELECT d.rid, count(x.ts) AS ib_n, sum(x.rating) AS ib_s
                         FROM d LEFT JOIN a x ON x.i = d.i AND x.ts < d.ts GROUP BY d.rid) b USING (rid)
            ORDER BY d.rid""").df()
        con.execute("DROP TABLE d")
        if len(df) != len(ids):
            raise RuntimeError(f"{len(ids) - len(df)} drawn member(s) are not in the category's ratings")
        frames.append(df.assign(domain=cat.domain))
    df = pd.concat(frames, ignore_index=True)
    col = {c: df[c].to_numpy() for c in ("user_id", "item_id", "rating", "timestamp", "n_prior", "avg", "ib_n", "ib_s")}
    col["timestamp"], col["n_prior"] = col["timestamp"].astype(np.int64), col["n_prior"].astype(np.int64)
    if any(c.domain for c in cats):
        col["domain"] = df["domain"].to_numpy()
    return col


def totals_before(con: Any, times: list[int], rows: int = 1_000_000) -> dict[int, tuple[int, float]]:
    """(count, sum) of all ratings strictly before each time (sorted, distinct): each rating is counted at the first
    time after it (a binary search over the few times, batch by batch), then running totals over the times."""
    t = np.asarray(times, np.int64)
    n, s = np.zeros(len(t) + 1, np.int64), np.zeros(len(t) + 1)
    for batch in con.execute("SELECT ts, rating FROM a").to_arrow_reader(rows):
        at = np.searchsorted(t, batch.column(0).to_numpy(), side="right")  # the first time after each rating
        n += np.bincount(at, minlength=len(t) + 1)
        s += np.bincount(at, weights=batch.column(1).to_numpy(), minlength=len(t) + 1)
    return {int(x): (int(cn), float(cs)) for x, cn, cs in zip(t, np.cumsum(n[:-1]), np.cumsum(s[:-1]))}


def item_means(cons: list[Any], col: dict[str, np.ndarray], starts: np.ndarray, keys: list[tuple[int, int]]
               ) -> list[float]:
    """Each (label, time)'s item mean over the category's ratings strictly before the time (the label's rating is at
    the time: its ib_n, ib_s from member_columns); the mean of all ratings before the time when the item has none; of
    all ratings when nothing is earlier."""
    cat_of = np.searchsorted(starts, [k for k, _ in keys], side="right") - 1
    out = np.zeros(len(keys))
    for c, con in enumerate(cons):
        idx = np.flatnonzero(cat_of == c)
        if not len(idx):
            continue
        item = [(j, col["ib_s"][keys[j][0]], col["ib_n"][keys[j][0]]) for j in idx]
        before = dict.fromkeys((j for j, _, n in item if not n), (0, 0.0))
        if before:  # no earlier rating of the item: all ratings before the time
            totals = totals_before(con, sorted({keys[j][1] for j in before}))
            before = {j: totals[keys[j][1]] for j in before}
        n_all, s_all = con.execute("SELECT count(*), sum(rating) FROM a").fetchone()
        for j, s, n in item:
            cn, cs = before.get(j, (0, 0.0))
            out[j] = s / n if n else (cs / cn if cn else s_all / max(n_all, 1))
    return out.tolist()


def member_ratings(dbs: list[Path], groups: list[dict[str, Any]], cats: list[Category], eng: Engine) -> DuckRatings:
    """All ratings of the groups' users (per category, of the users in its groups), left in the databases; with named
    categories each rating keeps its category (the `domain` column), so a member's history is its group's category."""
    users = [sorted({u["user_id"] for g in groups if g.get("domain", "") == cat.domain for u in g["users"]})
             for cat in cats]
    domains = [c.domain for c in cats] if any(c.domain for c in cats) else None
    return DuckRatings(dbs, users, functools.partial(connect, eng=eng, read_only=True), domains)


def select(work: Path, cats: list[Category], cfg: BuildConfig, eng: Engine) -> dict[str, Any]:
    """The groups, held-out groups, members' ratings and counts of a prepared build (what build_groups returns)."""
    t0 = time.perf_counter()
    prep = load_prepared(work, cats)
    members, lengths, items, offsets = combined_chains(prep)
    test, held, windows = draw_windows(members, lengths, items, cfg)
    del members
    (test, held), rids, starts = drawn_labels([test, held], offsets)
    cons = [connect(p["folder"] / "db.duckdb", eng, read_only=True) for p in prep]
    try:
        col = member_columns(cons, rids, cats)

        def means(keys: list[tuple[int, int]]) -> list[float]:
            return item_means(cons, col, starts, keys)

        groups = group_records(test, "", col, cfg.sizes, means)
        heldout = group_records(held, "heldout-", col, cfg.sizes, means)
    finally:
        for con in cons:
            con.close()
    rated = member_ratings([p["folder"] / "db.duckdb" for p in prep], groups + heldout, cats, eng)
    inp = input_summary(sum(p["n_raw"] for p in prep), sum(p["n"] for p in prep), sum(p["users"] for p in prep),
                        sum(p["items"] for p in prep), min((p["t_min"] for p in prep if p["n"]), default=None),
                        max((p["t_max"] for p in prep if p["n"]), default=None))
    return {"groups": groups, "heldout": heldout, "n_eligible": sum(p["n_eligible"] for p in prep),
            "n_chains": int(len(lengths)), "windows": windows, "units_per_second": prep[0]["units_per_second"],
            "input": inp, "member_ratings": rated, "build_seconds": time.perf_counter() - t0,
            "domains": {c.domain: {k: p[k] for k in ("n_raw", "n", "users", "items", "n_eligible")}
                        for c, p in zip(cats, prep) if c.domain}}


def staged(out: Path) -> Path:
    """A fresh staging folder next to `out` (the build is written there, then moved into place)."""
    stage = out.parent / f".{out.name}.partial"
    shutil.rmtree(stage, ignore_errors=True)
    return stage


def publish(stage: Path, out: Path, files: Optional[list[str]] = None) -> None:
    """Move the staged files into `out`, stats.json last (a folder without it is not a finished build)."""
    import os

    out.mkdir(parents=True, exist_ok=True)
    names = sorted(p.name for p in stage.iterdir())
    for name in [n for n in names if n != "stats.json"] + [n for n in names if n == "stats.json"]:
        os.replace(stage / name, out / name)
    stage.rmdir()
