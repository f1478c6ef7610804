"""Resolve the items a model names (ids or titles, fuzzily) against the candidate list and the catalogue."""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from recbench.api.parsing import parse_list
from recbench.api.types import ParseStatus

_ID = re.compile(r"^(?:item[\s_#:-]*)?(\d+)$", re.I)
_LEAD_ID = re.compile(r"^(?:item[\s_#:-]*)?(\d+)\s*[:.)\-]\s*(.+)$", re.I)


def norm_title(s: str) -> str:
    """Lower-case alphanumeric words of a title (for exact and fuzzy matching)."""
    return " ".join(re.sub(r"[^a-z0-9]+", " ", s.lower()).split())


@dataclass
class Resolution:
    """The ranked candidate ids read from an answer, and what happened to every named item."""

    ranked: list[str]
    status: ParseStatus
    named: int = 0
    in_candidates: int = 0
    out_of_candidate: int = 0  # a real catalogue item that is not in this example's candidate list
    hallucinated: int = 0  # matches no catalogue item at all
    duplicate: int = 0
    fuzzy: int = 0  # matched by approximate title
    note: str = ""
    items: list[dict] = field(default_factory=list)

    def details(self) -> dict:
        """Counts for the run record."""
        return {k: getattr(self, k) for k in ("named", "in_candidates", "out_of_candidate", "hallucinated",
                                              "duplicate", "fuzzy", "note")} | {"items": self.items}


class ItemResolver:
    """Maps strings to item ids: by id, by exact normalised title, then by fuzzy title (difflib ratio >= cutoff)."""

    def __init__(self, titles: Mapping[str, str], cutoff: float = 0.85):
        self.titles = titles
        self.cutoff = cutoff
        self._by_title: dict[str, str] = {}
        for i, t in titles.items():
            self._by_title.setdefault(norm_title(t), i)

    def _match(self, s: str, cands: Sequence[str], cand_titles: dict[str, str]) -> tuple[str | None, str]:
        """(item id, how) for one named string; how in id|title|fuzzy|''."""
        s = s.strip().strip("'\"`").strip()
        m = _ID.match(s)
        if m and m.group(1) in self.titles:
            return m.group(1), "id"
        m = _LEAD_ID.match(s)  # "123: Some title" -> trust the id when it is real
        if m and m.group(1) in self.titles:
            return m.group(1), "id"
        n = norm_title(s)
        if not n:
            return None, ""
        for i, t in cand_titles.items():
            if t == n:
                return i, "title"
        if n in self._by_title:
            return self._by_title[n], "title"
        best = difflib.get_close_matches(n, list(cand_titles.values()), n=1, cutoff=self.cutoff)
        if best:
            return next(i for i, t in cand_titles.items() if t == best[0]), "fuzzy"
        return None, ""

    def resolve(self, text: str, candidates: Sequence[str]) -> Resolution:
        """Parse a list answer and resolve each entry; failed parse -> empty ranking (scored as a miss, not dropped).

        Readings tried: the answer as a list (JSON/python, or numbered lines), then the catalogue ids mentioned
        anywhere in the text, then comma-separated items; the first reading with the most valid candidates wins, and
        any reading but a clean list is 'repaired'.
        """
        readings = []
        parsed = parse_list(text)
        if parsed.ok:
            readings.append((parsed.value, parsed.status, parsed.note))
        ids = [t for t in re.findall(r"\b\d+\b", text) if t in self.titles]
        if ids:
            readings.append((ids, "repaired", "item ids read from free text"))
        if "," in text:
            items = [x for x in (p.strip() for p in text.split(",")) if x]
            readings.append((items, "repaired", "comma-separated items instead of a list"))
        if not readings:
            return Resolution([], "failed", note=parsed.note)
        best = None
        for items, status, note in readings:
            res = self._resolve_items(items, status, note, candidates)
            if best is None or res.in_candidates > best.in_candidates:
                best = res
        assert best is not None
        return best

    def _resolve_items(self, values: Sequence, status: ParseStatus, note: str, candidates: Sequence[str]) -> Resolution:
        cand_set = set(candidates)
        cand_titles = {i: norm_title(self.titles.get(i, "")) for i in candidates}
        res = Resolution([], status, note=note)
        for s in values:
            item, how = self._match(str(s), candidates, cand_titles)
            res.named += 1
            kind = ("hallucinated" if item is None else "duplicate" if item in res.ranked
                    else "in_candidates" if item in cand_set else "out_of_candidate")
            setattr(res, kind, getattr(res, kind) + 1)
            if how == "fuzzy":
                res.fuzzy += 1
            if kind == "in_candidates":
                res.ranked.append(item)  # type: ignore[arg-type]
            res.items.append({"text": str(s)[:120], "item": item, "match": how, "kind": kind})
        if res.in_candidates == 0:
            res.status = "failed"
            res.note = (res.note + "; " if res.note else "") + "no named item is a candidate"
        elif res.status == "ok" and (res.in_candidates != res.named or res.fuzzy or
                                     any(it["match"] == "title" for it in res.items)):
            res.status = "repaired"
        return res
