"""Examples whose heavy parts are built when read: a group's members, and each member's history and retrieved items,
are sliced from the columnar ratings on first access and dropped again once many other groups have been read, so
memory follows the examples in use, not the ratings."""
from __future__ import annotations

import functools
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from recbench.tasks.perrec.columnar import Ratings

KEEP_GROUPS = 4096  # groups whose built members stay in memory (least recently built are dropped first)
RETRIEVED_CHUNK = 4096  # members whose retrieved items are gathered from the ratings together
_BUILT: "OrderedDict[int, LazyGroup]" = OrderedDict()


@dataclass
class Members:
    """Every member of every group as flat columns (member m of group g is row group_ptr[g] + m)."""

    user: np.ndarray         # int64 user code
    shown_start: np.ndarray  # int64 first shown history row (ratings table)
    end: np.ndarray          # int64 one past the last history row (strictly before the query time)
    rating: list             # the member's rating of the query item, as given (floats)
    avg: list                # avg_rating as given or the prior-history mean (floats)
    rel: list                # relative_rating as given or rating - avg (floats)
    common: np.ndarray       # float64 most common prior rating
    history_len: np.ndarray  # int64 prior ratings
    retrieved: np.ndarray    # int64 (members x k) BM25 top-k positions in the shown history, -1 padded


@dataclass
class Store:
    """What the lazy groups read from: the ratings, the item titles by code and the member columns."""

    ratings: Ratings
    titles: list      # title by item code (the item id where items.jsonl has none)
    members: Members

    @functools.cached_property
    def user_ids(self) -> list[str]:
        """User id by user code, as Python strings (built on first use, never pickled)."""
        return [str(u) for u in self.ratings.users.tolist()]

    @functools.cached_property
    def item_ids(self) -> list[str]:
        """Item id by item code, as Python strings (built on first use, never pickled)."""
        return [str(i) for i in self.ratings.items.tolist()]

    @functools.cached_property
    def _retrieved_chunks(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """retrieved_row's gathered chunks by chunk number."""
        return {}

    def retrieved_row(self, m: int) -> tuple[list[int], list[float]]:
        """Member m's retrieved items as (item codes, ratings), code -1 past its top-k; gathered from the ratings
        for RETRIEVED_CHUNK members at once, on first use (never pickled)."""
        c, i = divmod(m, RETRIEVED_CHUNK)
        got = self._retrieved_chunks.get(c)
        if got is None:
            mem, r, lo, hi = self.members, self.ratings, c * RETRIEVED_CHUNK, (c + 1) * RETRIEVED_CHUNK
            pos = np.asarray(mem.retrieved[lo:hi], np.int64)
            rows = np.where(pos >= 0, mem.shown_start[lo:hi, None] + pos, 0)
            got = self._retrieved_chunks[c] = (np.where(pos >= 0, r.item[rows], -1), r.rating[rows])
        return got[0][i].tolist(), got[1][i].tolist()

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k in ("ratings", "titles", "members")}


class LazyMember(dict):
    """A member record whose 'history' and 'retrieved' lists are built on first access (then kept)."""

    __slots__ = ("_store", "_row")

    def __missing__(self, key: str) -> Any:
        if key not in ("history", "retrieved"):
            raise KeyError(key)
        s, m = self._store, self._row
        if key == "history":
            value = _items(s, np.arange(int(s.members.shown_start[m]), int(s.members.end[m])))
        else:
            ids, titles = s.item_ids, s.titles
            value = [{"item_id": ids[c], "title": titles[c], "rating": v}
                     for c, v in zip(*s.retrieved_row(m)) if c >= 0]
        self[key] = value
        return value

    def retrieved_pairs(self) -> list[tuple[str, float]]:
        """(title, rating) of each item of 'retrieved', in order, read from the columns (no item records built)."""
        if "retrieved" in self:
            return [(h["title"], h["rating"]) for h in self["retrieved"]]
        titles = self._store.titles
        return [(titles[c], v) for c, v in zip(*self._store.retrieved_row(self._row)) if c >= 0]

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        """dict.get that builds the lazy lists too."""
        return self[key] if key in self or key in ("history", "retrieved") else default

    def materialize(self) -> dict[str, Any]:
        """A plain dict with every field built."""
        return {**self, "history": self["history"], "retrieved": self["retrieved"]}

    def __reduce__(self):
        return dict, (self.materialize(),)


def _items(s: Store, rows: np.ndarray) -> list[dict[str, Any]]:
    """The rated items of these ratings rows: item id, title and rating."""
    ids, titles = s.item_ids, s.titles
    return [{"item_id": ids[c], "title": titles[c], "rating": v}
            for c, v in zip(s.ratings.item[rows].tolist(), s.ratings.rating[rows].tolist())]


class LazyGroup(dict):
    """Example.data of a group: the small fields held, 'users' built on first access and dropped after KEEP_GROUPS
    other groups have been built (it is rebuilt, identical, if read again)."""

    __slots__ = ("_store", "_rows", "__weakref__")

    def __init__(self, fields: dict[str, Any], store: Store, rows: range):
        super().__init__(fields)
        self._store, self._rows = store, rows

    def __missing__(self, key: str) -> Any:
        if key != "users":
            raise KeyError(key)
        rows = self._rows
        users = (group_members(self._store, rows.start, rows.stop) if isinstance(rows, range) and rows.step == 1
                 else [member(self._store, m) for m in rows])
        self["users"] = users
        _BUILT[id(self)] = self
        while len(_BUILT) > KEEP_GROUPS:
            _, old = _BUILT.popitem(last=False)
            dict.pop(old, "users", None)
        return users

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        """dict.get that builds the members too."""
        return self[key] if key in self or key == "users" else default

    def history_lens(self) -> list[int]:
        """Each member's number of prior ratings, without building the members."""
        return [int(self._store.members.history_len[m]) for m in self._rows]

    def materialize(self) -> dict[str, Any]:
        """A plain dict with every member built (as plain dicts)."""
        return {**self, "users": [u.materialize() for u in self["users"]]}

    def __eq__(self, other: object) -> bool:
        if isinstance(other, dict):
            return self.materialize() == (other.materialize() if isinstance(other, (LazyGroup, LazyMember)) else other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self):
        return _rebuild, ({k: v for k, v in self.items() if k != "users"}, self._store, self._rows)


def _rebuild(fields: dict[str, Any], store: Store, rows: range) -> LazyGroup:
    return LazyGroup(fields, store, rows)


def member(s: Store, m: int) -> LazyMember:
    """Member row m as a record (history and retrieved built when read)."""
    return group_members(s, m, m + 1)[0]


def group_members(s: Store, a: int, b: int) -> list[LazyMember]:
    """Member rows a..b-1 as records (history and retrieved built when read), read from column slices at once."""
    mem, uids = s.members, s.user_ids
    out = []
    for m, uc, rating, avg, rel, common, n in zip(range(a, b), mem.user[a:b].tolist(), mem.rating[a:b],
                                                  mem.avg[a:b], mem.rel[a:b], mem.common[a:b].tolist(),
                                                  mem.history_len[a:b].tolist()):
        u = LazyMember({"user_id": uids[uc], "rating": rating, "avg_rating": round(avg, 4),
                        "relative_rating": round(rel, 4), "most_common_rating": common, "history_len": n})
        u._store, u._row = s, m
        out.append(u)
    return out


def lazy_history_lens(data: Any, fallback: Callable[[Any], list[int]]) -> list[int]:
    """Members' prior-rating counts of an example's data (without building a lazy group's members)."""
    return data.history_lens() if isinstance(data, LazyGroup) else fallback(data)


def lazy_store(data: Any) -> "Store | None":
    """The store a lazy group's members are built from (None for a plain example's data)."""
    return data._store if isinstance(data, LazyGroup) else None
