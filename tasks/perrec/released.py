"""The released PerRecBench layout (Tan et al. 2025): load it into the same Examples as the recbench format, and write it.

Files in one folder (JSON objects):
  userid2history.json                       {user_id: [{parent_asin, rating, relative_rating, [timestamp]}, ...]}  oldest first
  item2group_avg_diff_sample-{level}.json   {parent_asin: [[{user_id, history_len, relative_rating, avg_rating}, ...], ...]}
  held_out-{level}.json                     same layout as the groups, disjoint query items (few-shot / fine-tuning)
  parentasin2item.json                      {parent_asin: {title, [author: {name}]}}
  userid2profile.json                       {user_id: profile text}  (optional)
A member's history is userid2history[user_id][:history_len]; its rating is avg_rating + relative_rating.
Optional extra member keys written by recbench (ignored by the official code): rating, timestamp, item_avg_rating.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Iterator, Optional

import numpy as np

from recbench.api.datafiles import check_unique, finite, read_json
from recbench.tasks.perrec.data import DIFFICULTY_BY_SIZE, group_example, user_record
from recbench.api.errors import DataError
from recbench.api.types import Example

LEVELS = ("easy", "medium", "hard")
GROUP_FILE = "item2group_avg_diff_sample-{level}.json"
HELDOUT_FILE = "held_out-{level}.json"


class ReleasedFormatError(DataError):
    """A malformed or missing field in a released PerRecBench file (names file, record and field)."""


def _read(path: Path) -> Any:
    if not path.exists():
        raise FileNotFoundError(f"released PerRecBench file missing: {path}")
    return read_json(path)  # DataError naming the line: not UTF-8, not JSON, a key given twice


def _field(rec: Any, name: str, path: Path, where: str, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(rec, dict):
        raise ReleasedFormatError(f"{path}: record {where} is {type(rec).__name__}, expected an object")
    if name not in rec or rec[name] is None:
        raise ReleasedFormatError(f"{path}: record {where}: missing field '{name}'")
    v = rec[name]
    if isinstance(v, bool) or not isinstance(v, kind):
        raise ReleasedFormatError(f"{path}: record {where}: field '{name}' = {v!r} is not {getattr(kind, '__name__', kind)}")
    if isinstance(v, float):  # NaN and Infinity parse as JSON numbers
        finite(v, f"{path}: record {where}", name)
    return v


def item_title(items: dict[str, Any], asin: str, path: Path, where: str) -> str:
    """An item's title, with ' by <author.name>' when the item has an author."""
    rec = items.get(asin)
    if rec is None:
        raise ReleasedFormatError(f"{path}: item '{asin}' (needed by {where}) missing")
    title = str(_field(rec, "title", path, f"'{asin}'", str))
    author = rec.get("author")
    if isinstance(author, dict) and author.get("name"):
        title = f"{title} by {author['name']}"
    return title


@functools.lru_cache(maxsize=8)
def load_released(data_dir: str, retrieval_k: int, history_max: int, split: str = "test",
                  levels: tuple[str, ...] = LEVELS) -> tuple[Example, ...]:
    """Examples (same shape as data.load_examples) from the released files; split 'test' or 'heldout'."""
    root = Path(data_dir)
    items_p, hist_p = root / "parentasin2item.json", root / "userid2history.json"
    items, histories = _read(items_p), _read(hist_p)
    for name, obj in ((items_p, items), (hist_p, histories)):
        if not isinstance(obj, dict):
            raise ReleasedFormatError(f"{name}: expected a JSON object keyed by id, got {type(obj).__name__}")
    src = _Released(items, histories, items_p, hist_p, retrieval_k, history_max)
    examples = []
    for level in levels:
        gp = root / (GROUP_FILE if split == "test" else HELDOUT_FILE).format(level=level)
        if not gp.exists():
            continue
        for j, (asin, where, members) in enumerate(_level_groups(gp)):
            examples.append(src.group(gp, level, split, j, asin, where, members))
    return tuple(examples)


def _level_groups(gp: Path) -> Iterator[tuple[str, str, list]]:
    """(parent_asin, where, members) of every group in one released group file, checked to be a list of at least
    two members, each user once."""
    groups = _read(gp)
    if not isinstance(groups, dict):
        raise ReleasedFormatError(f"{gp}: expected {{parent_asin: [group, ...]}}, got {type(groups).__name__}")
    for asin, glist in groups.items():
        if not isinstance(glist, list) or (glist and isinstance(glist[0], dict)):
            glist = [glist]  # tolerate {asin: group} as well as {asin: [group, ...]}
        for gi, members in enumerate(glist):
            where = f"'{asin}' group {gi}"
            if not isinstance(members, list) or len(members) < 2:
                raise ReleasedFormatError(f"{gp}: record {where}: a group must be a list of at least 2 members")
            check_unique(((str(m.get("user_id")) if isinstance(m, dict) else f"#{mi}", f"{gp}: record {where} "
                           f"member {mi}") for mi, m in enumerate(members)), "user", "list each member of a group once")
            yield asin, where, members


@dataclass
class _Released:
    """The released item and history tables, and how examples are built from their groups."""

    items: dict
    histories: dict
    items_p: Path
    hist_p: Path
    retrieval_k: int
    history_max: int

    def group(self, gp: Path, level: str, split: str, j: int, asin: str, where: str, members: list) -> Example:
        """One released group as an example."""
        q_title = item_title(self.items, asin, self.items_p, f"{gp.name} {where}")
        users = [self.member(gp, f"{where} member {mi}", m, q_title) for mi, m in enumerate(members)]
        ts = [m.get("timestamp") for m in members]
        item_avg = members[0].get("item_avg_rating")
        if item_avg is None:  # mean of the item's ratings by users outside the group, from all histories
            member_ids = {u["user_id"] for u in users}
            vals = [float(b["rating"]) for u, bs in self.histories.items() if u not in member_ids
                    for b in bs if isinstance(b, dict) and b.get("parent_asin") == asin]
            item_avg = round(float(np.mean(vals)), 4) if vals else round(float(np.mean([u["avg_rating"] for u in users])), 4)
        difficulty = level if level in LEVELS else DIFFICULTY_BY_SIZE.get(len(users), level)
        prefix = "" if split == "test" else "heldout-"
        return group_example(f"{prefix}{difficulty}-{j:04d}", str(asin), q_title,
                             min(ts) if all(t is not None for t in ts) else None,
                             finite(item_avg, f"{gp}: record {where}", "item_avg_rating"), users, difficulty)

    def member(self, gp: Path, w: str, m: Any, q_title: str) -> dict[str, Any]:
        """One group member's record, with its history from userid2history.json."""
        hist_p = self.hist_p
        uid = str(_field(m, "user_id", gp, w, (str, int)))
        hlen = int(_field(m, "history_len", gp, w, int))
        rel = float(_field(m, "relative_rating", gp, w, (int, float)))
        avg = float(_field(m, "avg_rating", gp, w, (int, float)))
        beh = self.histories.get(uid)
        if beh is None:
            raise ReleasedFormatError(f"{hist_p}: user '{uid}' (member of {gp.name} {w.rsplit(' member ', 1)[0]}) missing")
        if not isinstance(beh, list) or hlen < 1 or hlen > len(beh):
            raise ReleasedFormatError(f"{gp}: record {w}: field 'history_len' = {hlen} outside the user's "
                                      f"history of {len(beh) if isinstance(beh, list) else '?'} entries in {hist_p.name}")
        hist = []
        for k, b in enumerate(beh[:hlen]):
            hw = f"'{uid}' entry {k}"
            a = str(_field(b, "parent_asin", hist_p, hw, str))
            r = float(_field(b, "rating", hist_p, hw, (int, float)))
            _field(b, "relative_rating", hist_p, hw, (int, float))
            hist.append({"item_id": a, "title": item_title(self.items, a, self.items_p, f"{hist_p.name} {hw}"), "rating": r})
        shown = hist[-self.history_max:]
        rating = finite(m["rating"], f"{gp}: record {w}", "rating") if m.get("rating") is not None \
            else round(avg + rel, 4)
        return user_record(uid, rating, avg, rel, [h["rating"] for h in hist], hlen, shown, q_title, self.retrieval_k)


def load_profiles(data_dir: str) -> dict[str, str]:
    """userid2profile.json as {user_id: profile} ({} when absent)."""
    p = Path(data_dir) / "userid2profile.json"
    return {str(k): str(v) for k, v in _read(p).items()} if p.exists() else {}


def write_released(out: str | Path, test: list[Example], heldout: list[Example], ratings, items,
                   profiles: Optional[dict[str, str]] = None) -> Path:
    """Write examples (from a recbench-format build) plus the users' full histories in the released layout."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    r = ratings.astype({"user_id": str, "item_id": str}).sort_values(["user_id", "timestamp"], kind="stable")
    users = {u["user_id"] for e in list(test) + list(heldout) for u in e.data["users"]}
    r = r[r["user_id"].isin(users)]
    whole = r.groupby("user_id")["rating"].transform("mean")
    hist: dict[str, list] = {}
    for uid, a, x, t, w in zip(r["user_id"], r["item_id"], r["rating"], r["timestamp"], whole):
        hist.setdefault(uid, []).append({"parent_asin": a, "rating": float(x), "relative_rating": round(float(x - w), 4),
                                         "timestamp": int(t)})
    titles = dict(zip(items["item_id"].astype(str), items["title"].astype(str)))
    needed = set(r["item_id"]) | {e.data["query_item"] for e in list(test) + list(heldout)}
    (out / "parentasin2item.json").write_text(json.dumps({a: {"title": titles.get(a, a)} for a in sorted(needed)}))
    (out / "userid2history.json").write_text(json.dumps(hist))
    for split, exs, pattern in (("test", test, GROUP_FILE), ("heldout", heldout, HELDOUT_FILE)):
        for level in LEVELS:
            by_item: dict[str, list] = {}
            for e in exs:
                if e.meta["difficulty"] != level:
                    continue
                by_item.setdefault(e.data["query_item"], []).append([
                    {"user_id": u["user_id"], "history_len": u["history_len"], "relative_rating": u["relative_rating"],
                     "avg_rating": u["avg_rating"], "rating": u["rating"], "item_avg_rating": e.data["item_avg_rating"],
                     **({"timestamp": e.data["timestamp"]} if e.data.get("timestamp") is not None else {})}
                    for u in e.data["users"]])
            if by_item:
                (out / pattern.format(level=level)).write_text(json.dumps(by_item))
    if profiles:
        (out / "userid2profile.json").write_text(json.dumps(profiles))
    return out
