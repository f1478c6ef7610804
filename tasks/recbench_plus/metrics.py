"""RecBench+ metrics: the official evaluator's title matching and metrics (reproduced exactly), CMR, and a
stricter catalogue-resolved variant.

Official behaviour kept on purpose (jiani-huang/RecAssistBench eval/eval_movie.py, eval_book.py):
- movies: the answer is split on "[SEP]", each title stripped of spaces and quotes and of a trailing " (YYYY)";
  books: the answer is stripped of the CHARACTERS of "Recommended books (separated by [SEP]):" at both ends
  (str.strip with a character set), then split on "[SEP]" with no further cleaning;
- a predicted title is replaced by the first ground-truth title with difflib SequenceMatcher ratio >= threshold
  (movies 0.8; books: `is_similar` defaults to 0.65 but `preprocess_matching` passes 0.8, so 0.8 is what runs);
- recall = hits / |GT|, precision = hits / |predicted list|, where hits counts GT titles present in the list;
- NDCG: DCG of the list (a GT title repeated in the list counts every time) over the DCG of |GT| ones;
- FTR: the raw answer contains no "[SEP]";
- fixed K (movies): the list is cut to K and padded with 'none';
- condition queries: each metric is the max of the title-matched value and an id-matched value (titles resolved
  to KG ids), and CMR (satisfied_ratio) = share of KG-found items satisfying all true conditions, -1 if none found.
"""
from __future__ import annotations

import math
import re
from difflib import SequenceMatcher, get_close_matches
from typing import Any, Callable, Optional, Sequence

import numpy as np

from recbench.kg.graph import KnowledgeGraph, normalize_title

SEP = "[SEP]"
#: strict_scores' answer-error shares that the run records under the core's list-metric names (invalid_rate, ...)
LIST_ERRORS = ("hallucination_rate", "duplicate_rate")
_TRAILING_YEAR = re.compile(r"\s\(\d{4}\)$")
_BOOK_PREFIX = "Recommended books (separated by [SEP]):"


def is_similar(a: str, b: str, threshold: float) -> bool:
    """Official fuzzy match: difflib SequenceMatcher(None, a, b).ratio() >= threshold."""
    return SequenceMatcher(None, a, b).ratio() >= threshold


def ftr(response: str) -> bool:
    """Official 'failed to recommend': True when the raw answer has no [SEP]."""
    return SEP not in response


def split_titles(response: str, domain: str = "movie") -> list[str]:
    """The official parsing of an answer into titles (movie: cleaned and year-stripped; book: raw pieces)."""
    if domain == "book":
        return response.strip().strip(_BOOK_PREFIX).split(SEP)
    titles = [t.strip().strip("'").strip('"') for t in response.split(SEP)]
    return [_TRAILING_YEAR.sub("", t.strip()).strip() for t in titles]


def preprocess_matching(recommended: Sequence[str], actual: Sequence[str], threshold: float) -> list[str]:
    """Replace each recommended title by the first ground-truth title it fuzzy-matches (official)."""
    out = []
    for rec in recommended:
        for act in actual:
            if is_similar(rec, act, threshold):
                out.append(act)
                break
        else:
            out.append(rec)
    return out


def recall(recommended: Sequence[Any], actual: Sequence[Any]) -> float:
    """Official recall: GT entries found in the list / |GT| (0 when GT is empty)."""
    hits = sum(1 for a in actual if a in recommended)
    return hits / len(actual) if actual else 0


def precision(recommended: Sequence[Any], actual: Sequence[Any]) -> float:
    """Official precision: GT entries found in the list / |list| (0 when the list is empty)."""
    hits = sum(1 for a in actual if a in recommended)
    return hits / len(recommended) if recommended else 0


def _dcg(rel: Sequence[int]) -> float:
    return np.sum([r / np.log2(i + 2) for i, r in enumerate(rel)])


def ndcg(prediction: Sequence[Any], ground_truth: Sequence[Any]) -> float:
    """Official NDCG: binary DCG of the list over the DCG of |GT| ones (repeats of a GT item all count)."""
    ideal = _dcg([1 if g in ground_truth else 0 for g in ground_truth])
    if ideal == 0:
        return 0.0
    return _dcg([1 if p in ground_truth else 0 for p in prediction]) / ideal


def official_scores(response: str, gt_titles: Sequence[str], *, domain: str = "movie", k: int = 0,
                    threshold: float = 0.8, gt_ids: Optional[Sequence[Any]] = None,
                    name2id: Optional[Callable[[str], Any]] = None,
                    check: Optional[Callable[[Any], bool]] = None) -> dict[str, Any]:
    """The official per-query metrics; with name2id (condition queries) also the id-matched max and CMR."""
    res: dict[str, Any] = {"ftr": ftr(response)}
    titles = split_titles(response, domain)
    if k and domain == "movie":
        titles = titles[:k]
        if len(titles) < k:
            titles += ["none"] * (k - len(titles))
    matched = preprocess_matching(titles, gt_titles, threshold)
    r, p, n = recall(matched, gt_titles), precision(matched, gt_titles), ndcg(matched, gt_titles)
    if name2id is not None:
        ids = [name2id(t) for t in titles]
        gt_ref = list(gt_ids) if domain == "movie" and gt_ids is not None else list(gt_titles)
        r, p, n = max(r, recall(ids, gt_ref)), max(p, precision(ids, gt_ref)), max(n, ndcg(ids, gt_ref))
        found = [i for i in ids if i is not None]
        if check is not None:
            satisfied = sum(1 for i in ids if i not in gt_ref and i and check(i))
            satisfied += len([g for g in gt_ref if g in ids])
            res["cmr"] = satisfied / len(found) if found else -1
        res["kg_existence"] = len(found) / len(titles) if titles else 0.0
    res.update(recall=r, precision=p, ndcg=n)
    return res


class CatalogueResolver:
    """Resolves free-text titles to catalogue item ids: exact (normalized) title, then close fuzzy match."""

    def __init__(self, kg: KnowledgeGraph, cutoff: float = 0.9):
        self.kg, self.cutoff = kg, cutoff
        self._norm: dict[str, str] = {}
        for iid, d in kg.iter_items():
            self._norm.setdefault(normalize_title(str(d["title"])), iid)
        self._keys = list(self._norm)
        self._memo: dict[str, Optional[str]] = {}

    def __call__(self, title: str) -> Optional[str]:
        """Catalogue id of a title, or None (hallucinated / unknown)."""
        if title in self._memo:
            return self._memo[title]
        hit = self.kg.resolve(title)
        if hit is None:
            n = normalize_title(title)
            if n in self._norm:
                hit = self._norm[n]
            elif n and self.cutoff < 1:
                close = get_close_matches(n, self._keys, n=1, cutoff=self.cutoff)
                hit = self._norm[close[0]] if close else None
        self._memo[title] = hit
        return hit


def strict_scores(titles: Sequence[str], gt_ids: Sequence[Any], resolve: Callable[[str], Optional[str]],
                  k: int = 0) -> dict[str, float]:
    """Catalogue-resolved metrics: each answer -> item id; duplicates and unresolved titles count as misses."""
    titles = [t for t in titles if t.strip()]
    if k:
        titles = titles[:k]
    gt = {str(g) for g in gt_ids}
    ids = [resolve(t) for t in titles]
    seen: set[str] = set()
    rel, dup, unresolved = [], 0, 0
    for i in ids:
        if i is None:
            unresolved += 1
            rel.append(0)
        elif i in seen:
            dup += 1
            rel.append(0)
        else:
            seen.add(i)
            rel.append(1 if i in gt else 0)
    hits = sum(rel)
    n = len(titles)
    ideal = _dcg([1] * min(len(gt), n)) if n else 0.0
    return {
        "strict_recall": hits / len(gt) if gt else math.nan,
        "strict_precision": hits / n if n else 0.0,
        "strict_ndcg": float(_dcg(rel) / ideal) if ideal else 0.0,
        "hallucination_rate": unresolved / n if n else math.nan,
        "duplicate_rate": dup / n if n else math.nan,
        "n_recommended": float(n),
    }
