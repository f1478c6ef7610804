"""PerRecBench examples from the recbench group format: items, raw ratings, groups -> user-group Examples."""
from __future__ import annotations

import functools
import json
import re
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from recbench.api.datafiles import check_unique, finite, jsonl_records, numeric_columns, read_csv
from recbench.store.derived_cache import disk_cached
from recbench.api.errors import DataError
from recbench.api.types import Example
from recbench.tasks.perrec.bm25 import TokenTable, bm25_top_k, tokenize  # noqa: F401 - tokenize: the loaders' word rule
from recbench.tasks.perrec.columnar import Ratings, read_ratings
from recbench.tasks.perrec.lazy import LazyGroup, Store, lazy_history_lens, lazy_store
from recbench.tasks.perrec.members import MemberBuilder

if TYPE_CHECKING:
    import pandas as pd

DIFFICULTY_BY_SIZE = {2: "easy", 3: "medium", 4: "hard"}


def _read_table(path: Path) -> pd.DataFrame:
    """items.jsonl or ratings.csv(.gz) as a table; ratings and timestamps must be finite numbers on every line."""
    if not path.exists():
        raise FileNotFoundError(f"PerRecBench data file missing: {path}. Fix: set task.data_dir to a folder with "
                                "items.jsonl, ratings.csv(.gz) and groups.jsonl (see data/README.md)")
    import pandas as pd  # only when a table is parsed (the derived-data cache usually answers)

    if path.suffix == ".jsonl":
        return pd.DataFrame([r for _, r in jsonl_records(path)])
    df = read_csv(path)
    return numeric_columns(df, [c for c in ("rating", "timestamp") if c in df.columns], path)


def _require(df: pd.DataFrame, cols: list[str], path: Path) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise DataError(f"{path}: missing field(s) {missing}; present: {list(df.columns)}. "
                         "Fix the file or regenerate it with `python -m recbench.tasks.perrec.build.synth`")


def item_average(ratings: pd.DataFrame, item: str, exclude: set[str], fallback: float) -> float:
    """Mean rating of an item by users outside the group (the item-average reference predictor); fallback if none."""
    r = ratings.loc[(ratings["item_id"] == item) & ~ratings["user_id"].isin(exclude), "rating"]
    return round(float(r.mean()), 4) if len(r) else round(float(fallback), 4)


def _ratings_path(root: Path) -> Path:
    return next((p for p in (root / "ratings.csv.gz", root / "ratings.csv") if p.exists()), root / "ratings.csv")


def _example_inputs(data_dir: str, retrieval_k: int, history_max: int, groups_file: str = "groups.jsonl") -> list[Path]:
    root = Path(data_dir)
    here = Path(__file__).parent  # the modules the examples are built with key the cache entry too
    return [root / "items.jsonl", _ratings_path(root), root / groups_file,
            *(here / f"{m}.py" for m in ("bm25", "columnar", "lazy", "members"))]


@functools.lru_cache(maxsize=8)
@disk_cached("perrec_examples", _example_inputs)
def load_examples(data_dir: str, retrieval_k: int, history_max: int, groups_file: str = "groups.jsonl") -> tuple[Example, ...]:
    """User-group examples with per-user history (before the query time), averages and BM25-retrieved items.

    A member record may carry avg_rating / relative_rating (the builder writes them; with `--avg whole` they
    differ from the prior-history average) and a group record item_avg_rating; otherwise they are computed.
    The ratings stay columnar: each group's members (and their histories) are built when the example is read
    (recbench.tasks.perrec.lazy). Where the ratings file has a `domain` column (a multi-category build), a member's
    history is its ratings in the group's `domain` only."""
    root = Path(data_dir)
    items_p, ratings_p, groups_p = root / "items.jsonl", _ratings_path(root), root / groups_file
    items = _read_table(items_p)
    _require(items, ["item_id", "title"], items_p)
    titles = dict(zip(items["item_id"].astype(str), items["title"].astype(str)))
    del items
    ratings = read_ratings(ratings_p, _read_table)
    records = list(jsonl_records(groups_p))
    check_unique(((str(g.get("group_id")), f"{groups_p}:{no}") for no, g in records), "group_id",
                 "give every group its own group_id (or rebuild the groups: python -m recbench.build perrec)")
    code_titles = [titles.get(i, i) for i in ratings.items.tolist()]
    builder = MemberBuilder(ratings, TokenTable.build(code_titles), retrieval_k, history_max)
    fields = []
    for line_no, g in records:
        fields.append(_group_fields(g, f"{groups_p}:{line_no}", titles, items_p, ratings_p, builder))
    ratings.timestamp, ratings.value, ratings.domain = np.zeros(0), None, None  # only the builder reads them
    store = Store(ratings, code_titles, builder.columns())
    return tuple(group_example(gid, q, qt, ts, ia, LazyGroup, diff, domain, store=store, rows=rows)
                 for gid, q, qt, ts, ia, diff, domain, rows in fields)


def _group_fields(g: dict[str, Any], where: str, titles: dict[str, str], items_p: Path, ratings_p: Path,
                  builder: "MemberBuilder") -> tuple:
    """One group line checked and its members added to the builder: (id, query item, title, time, item average,
    difficulty, domain (a multi-category build's category, else None), member rows)."""
    for field in ("group_id", "query_item", "timestamp", "users"):
        if field not in g:
            raise DataError(f"{where}: the group has no field '{field}'. Fix the line or rebuild the groups "
                            "(python -m recbench.build perrec)")
    q_title = titles.get(str(g["query_item"]))
    if q_title is None:
        raise DataError(f"{where}: query_item {g['query_item']} not in {items_p}")
    members = group_members(g, where)
    finite(g["timestamp"], where, "timestamp")
    domain = history_domain(builder.r, g.get("domain"), where, ratings_p)
    first = builder.count
    codes = [builder.add(m, g["timestamp"], q_title, where, ratings_p, domain) for m in members]
    difficulty = check_difficulty(g.get("difficulty"), where) or DIFFICULTY_BY_SIZE.get(len(members), f"size{len(members)}")
    item_avg = g.get("item_avg_rating")
    if item_avg is None:
        item_avg = builder.item_average(str(g["query_item"]), set(codes))
    return (str(g["group_id"]), str(g["query_item"]), q_title, g["timestamp"], finite(item_avg, where, "item_avg_rating"),
            difficulty, g.get("domain"), range(first, builder.count))


def history_domain(ratings: Ratings, domain: Any, where: str, ratings_p: Path) -> Optional[str]:
    """The domain a group's member histories are sliced by: the group's `domain` where the ratings file has a domain
    column (a multi-category build), else None (each member's every rating, as in data without one); DataError naming
    the ratings file when the group's domain is missing there."""
    if ratings.domains is None:
        return None
    known = ratings.domains.tolist()
    if domain is None or str(domain) not in known:
        got = "the group has no domain" if domain is None else f"it has no value {json.dumps(str(domain))}"
        raise DataError(f"{ratings_p}: field 'domain' does not match {where} ({got}; the file's domains: "
                        f"{', '.join(map(str, known[:10]))}{' ...' if len(known) > 10 else ''}). Fix: load the "
                        "ratings and groups written by one build (python -m recbench.build perrec --category "
                        "NAME=PATH ...), or drop the ratings' 'domain' column to describe members by all their ratings")
    return str(domain)


def check_difficulty(value: Any, where: str) -> Any:
    """A group's difficulty as given (None when absent): easy, medium, hard, or sizeN for a built group of N > 4 users;
    DataError naming the line otherwise (an unknown one would be dropped by every difficulty filter without a word)."""
    if value is None or value == "" or value in DIFFICULTY_BY_SIZE.values() or re.fullmatch(r"size\d+", str(value)):
        return value
    raise DataError(f"{where}: difficulty {json.dumps(value)} is not one of {', '.join(DIFFICULTY_BY_SIZE.values())} "
                    "(or sizeN for a built group of N > 4 users). Fix the line, or leave the field out to take it from "
                    "the group size")


def group_members(g: dict[str, Any], where: str) -> list[dict[str, Any]]:
    """A group record's members, checked: at least two objects, each user once, with a finite rating (and finite
    avg_rating / relative_rating / timestamp where given, as floats); DataError naming the line otherwise."""
    members = g.get("users")
    if not isinstance(members, list) or len(members) < 2:
        n = len(members) if isinstance(members, list) else type(members).__name__
        raise DataError(f"{where}: field 'users' must list at least 2 members to rank (got {n}). Fix the line or "
                        "remove the group")
    out = []
    for k, m in enumerate(members):
        if not isinstance(m, dict) or m.get("user_id") is None:
            raise DataError(f"{where}: member {k + 1} is not an object with a 'user_id'. Fix the line")
        m = dict(m)
        for field in ("rating", "avg_rating", "relative_rating", "timestamp"):
            if field == "rating" or m.get(field) is not None:
                m[field] = finite(m.get(field), f"{where}: member {m['user_id']}", field)
        out.append(m)
    check_unique(((str(m["user_id"]), f"{where}: member {k + 1}") for k, m in enumerate(out)), "user",
                 "list each member of a group once")
    return out


def user_record(uid: str, rating: float, avg: float, rel: float, all_ratings: list[float], history_len: int,
                shown: list[dict[str, Any]], query_title: str, retrieval_k: int) -> dict[str, Any]:
    """One group member as every loader builds it: rating, average, relative rating, most common rating, the
    shown history and its BM25 top-k for the query title."""
    top = bm25_top_k(query_title, [h["title"] for h in shown], retrieval_k)
    return {"user_id": uid, "rating": rating, "avg_rating": round(avg, 4), "relative_rating": round(rel, 4),
            "most_common_rating": float(Counter(all_ratings).most_common(1)[0][0]), "history_len": history_len,
            "history": shown, "retrieved": [shown[i] for i in top]}


def group_example(group_id: str, query_item: str, query_title: str, timestamp: Any, item_avg: float,
                  users: Any, difficulty: str, domain: Optional[str] = None, store: Any = None,
                  rows: Optional[range] = None) -> Example:
    """A PerRecBench example (one user group) from its members (a list of records), or lazily: `users` the
    LazyGroup class, with the store and the group's member rows; a multi-category build's group keeps its domain."""
    fields = {"query_item": query_item, "query_title": query_title, "timestamp": timestamp, "item_avg_rating": item_avg}
    size = len(rows) if rows is not None else len(users)
    meta = {"difficulty": difficulty, "group_size": size, **({"domain": str(domain)} if domain else {})}
    if rows is not None:
        return Example(id=group_id, data=users(fields, store, rows), meta=meta)
    return Example(id=group_id, data={**fields, "users": users}, meta=meta)


def true_order(users: list[dict[str, Any]]) -> list[str]:
    """Ground truth: user ids ordered by relative rating, highest first."""
    return [u["user_id"] for u in sorted(users, key=lambda u: -u["relative_rating"])]


STRATA_LABELS = ("low", "mid", "high")
HISTORY_LABELS = ("short", "mid", "long")


def tercile_cuts(values: list[float]) -> list[float]:
    """The 1/3 and 2/3 quantiles (np.quantile, linear) of the values: tercile thresholds."""
    return [float(q) for q in np.quantile(np.asarray(values, dtype=float), [1 / 3, 2 / 3])]


def tercile(value: float, cuts: list[float], labels: tuple[str, str, str] = STRATA_LABELS) -> str:
    """low (<= first cut), mid (<= second cut) or high."""
    return labels[0] if value <= cuts[0] else labels[1] if value <= cuts[1] else labels[2]


@functools.lru_cache(maxsize=8)
@disk_cached("perrec_item_counts", lambda data_dir: [_ratings_path(Path(data_dir))])
def item_rating_counts(data_dir: str) -> dict[str, int]:
    """Ratings per item in the data folder's ratings file (the popularity of a query item)."""
    return rating_counts(read_ratings(_ratings_path(Path(data_dir)), _read_table))


def rating_counts(r: Ratings) -> dict[str, int]:
    """Ratings per item id of a columnar ratings table (items without ratings left out)."""
    counts = np.bincount(r.item, minlength=len(r.items))
    return {str(i): int(n) for i, n in zip(r.items.tolist(), counts.tolist()) if n}


def query_item_counts(examples: list[Example], data_dir: str) -> dict[str, int]:
    """item_rating_counts(data_dir), counted from the ratings the examples were built from when they hold them
    (lazy groups of load_examples), so a first load reads the ratings file once."""
    store = lazy_store(examples[0].data) if examples else None
    return rating_counts(store.ratings) if store is not None else item_rating_counts(data_dir)


def history_item_counts(examples: list[Example]) -> dict[str, int]:
    """Ratings per item counted from the members' histories (for data without a ratings file: the released format);
    each (user, item) counts once however many groups show that user."""
    seen: set[tuple[str, str]] = set()
    for e in examples:
        for u in e.data["users"]:
            seen.update((u["user_id"], str(h["item_id"])) for h in u["history"])
    return dict(Counter(i for _, i in seen))


def add_strata(examples: list[Example], item_counts: dict[str, int], source: str) -> dict[str, Any]:
    """Set meta 'popularity' (tercile of the query item's rating count) and 'history' (tercile of the members' mean
    history length) on every example; returns the thresholds, so a reader can see where the terciles fall."""
    if not examples:
        return {}
    pop = [float(item_counts.get(e.data["query_item"], 0)) for e in examples]
    hist = [float(np.mean(lazy_history_lens(e.data, lambda d: [u["history_len"] for u in d["users"]])))
            for e in examples]
    pop_cuts, hist_cuts = tercile_cuts(pop), tercile_cuts(hist)
    for e, p, h in zip(examples, pop, hist):
        e.meta.update(query_ratings=int(p), popularity=tercile(p, pop_cuts),
                      history_mean=round(h, 2), history=tercile(h, hist_cuts, HISTORY_LABELS))
    return {"popularity": {"of": f"ratings of the query item ({source})", "cuts": pop_cuts,
                           "labels": f"low <= {pop_cuts[0]:g} < mid <= {pop_cuts[1]:g} < high"},
            "history": {"of": "mean number of prior ratings of the group's members", "cuts": hist_cuts,
                        "labels": f"short <= {hist_cuts[0]:g} < mid <= {hist_cuts[1]:g} < long"},
            "groups": len(examples)}
