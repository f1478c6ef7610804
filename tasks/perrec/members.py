"""Group members as columns: each member's prior-history slice of the sorted ratings, its averages and its BM25
top-k, computed once per load (and kept by the derived-data cache) so examples can be built from them on demand."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from recbench.api.errors import DataError
from recbench.tasks.perrec.bm25 import TokenTable, top_k
from recbench.tasks.perrec.columnar import Ratings, item_rows
from recbench.tasks.perrec.lazy import Members


class MemberBuilder:
    """Collects the members of every group, in order, as the columns of lazy.Members."""

    def __init__(self, ratings: Ratings, tokens: TokenTable, retrieval_k: int, history_max: int):
        self.r, self.tokens, self.k, self.hmax = ratings, tokens, int(retrieval_k), int(history_max)
        self.codes = {u: i for i, u in enumerate(ratings.users.tolist())}
        self.cols: dict[str, list] = {c: [] for c in ("user", "shown_start", "end", "rating", "avg", "rel",
                                                       "common", "history_len", "retrieved")}
        self._query: tuple[str, list[int]] = ("", [])
        self._items: Optional[tuple[np.ndarray, np.ndarray]] = None
        self._items_code: Optional[dict[str, int]] = None
        self._mean: Optional[float] = None

    @property
    def count(self) -> int:
        """Members added so far."""
        return len(self.cols["user"])

    def add(self, m: dict[str, Any], group_time: Any, query_title: str, where: str, ratings_p: Any,
            domain: Optional[str] = None) -> int:
        """Add one checked member record (see data.group_members); returns its user code. With a `domain` (ratings
        with a domain column), the member's history is its ratings in that domain only."""
        uid = str(m["user_id"])
        uc = self.codes.get(uid)
        if uc is None:
            raise DataError(f"{where}: user {uid} has no ratings in {ratings_p}")
        t_query = m.get("timestamp", group_time)  # the user's own rating time of the query item
        t_query = group_time if t_query is None else t_query
        lo, hi = self.r.rows(uc, domain) or (0, 0)
        if lo == hi:
            raise DataError(f"{where}: user {uid} has no ratings in domain '{domain}' in {ratings_p}")
        end = lo + int(np.searchsorted(self.r.timestamp[lo:hi], t_query, side="left"))
        if end == lo:
            raise DataError(f"{where}: user {uid} has no history before the query time")
        before = self.r.rating[lo:end]
        avg = m["avg_rating"] if m.get("avg_rating") is not None else float(np.mean(before))
        rel = m["relative_rating"] if m.get("relative_rating") is not None else m["rating"] - avg
        start = max(lo, end - self.hmax)
        if self._query[0] != query_title:
            self._query = (query_title, self.tokens.query_ids(query_title))
        top = top_k(self.tokens, self._query[1], self.r.item[start:end].astype(np.int64), self.k)
        c = self.cols
        for key, v in (("user", uc), ("shown_start", start), ("end", end), ("rating", m["rating"]), ("avg", avg),
                       ("rel", rel), ("common", self.r.most_common(lo, end)), ("history_len", end - lo)):
            c[key].append(v)
        padded = np.full(self.k, -1, np.int64)
        padded[:len(top)] = top
        c["retrieved"].append(padded)
        return uc

    def item_average(self, item: str, exclude: set[int]) -> float:
        """Mean rating of an item by users outside the group (the item-average reference predictor); the mean of all
        ratings when nobody else rated it."""
        if self._items is None:
            self._items = item_rows(self.r)
            self._items_code = {it: i for i, it in enumerate(self.r.items.tolist())}
        c = self._items_code.get(item) if self._items_code is not None else None
        vals = np.zeros(0)
        if c is not None:
            rows = self._items[0][self._items[1][c]:self._items[1][c + 1]]
            users = np.searchsorted(self.r.user_ptr, rows, side="right") - 1
            vals = self.r.rating[rows[~np.isin(users, list(exclude))]]
        if len(vals):
            return round(float(np.mean(vals)), 4)
        if self._mean is None:
            self._mean = self.r.mean()
        return round(float(self._mean), 4)

    def columns(self) -> Members:
        """The collected members as arrays."""
        c = self.cols
        ret = np.stack(c["retrieved"]) if c["retrieved"] else np.zeros((0, self.k), np.int64)
        return Members(np.asarray(c["user"], np.int64), np.asarray(c["shown_start"], np.int64),
                       np.asarray(c["end"], np.int64), list(c["rating"]), list(c["avg"]), list(c["rel"]),
                       np.asarray(c["common"], np.float64), np.asarray(c["history_len"], np.int64),
                       ret.astype(np.int32))
