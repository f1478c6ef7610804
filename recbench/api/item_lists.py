"""List metrics: what every recommended list says beyond accuracy (popularity bias, coverage, novelty, diversity,
calibration) and the LLM answer errors, declared once here for every task whose answer is a list of items.

A task takes part through two hooks (api/task.py): `Task.item_catalogue()` gives the catalogue, the popularity data
the models are shown and the task's cut-off k (an `ItemCatalogue`), and `Task.item_list(example, outcome)` what one
sample named (an `ItemList`). The run scores each sample's list next to `Task.score` (`sample_values`: per-sample
metrics, averaged with bootstrap CIs like any other) and keeps its first k catalogue items on the record; the
aggregate computes the corpus metrics column-wise over all records (`corpus_summaries`: one int matrix, bincounts).

Definitions ("first k" = the first k distinct catalogue items of the answer; invalid names are counted by
`invalid_rate` only):
- pop(i) = interactions with item i in the histories the models are shown; users(i) = users whose history holds i.
- arp@k: mean pop(i) of the first k (RecBole AveragePopularity); aplt@k: share of the first k in the tail, where the
  head is the most popular items (pop descending, ties by item id) whose interactions first reach 80% of all
  interactions and the tail every other catalogue item.
- coverage@k, gini@k, entropy@k (corpus): distinct recommended items / catalogue size (RecBole ItemCoverage); the Gini
  index of the recommendation counts over every catalogue item, zeros included (RecBole GiniIndex); the Shannon
  entropy (nats) of those counts. RecBole's ShannonEntropy divides that entropy by the number of distinct items
  recommended, which makes it fall as lists get more diverse; we report the entropy itself (the test checks both).
- novelty@k: mean of -log2((users(i) + 1) / (n_users + 1)) over the first k.
- ild@k: mean pairwise Jaccard distance of the first k items' category sets (tasks whose items have categories).
- pop_miscalibration@k: Jensen-Shannon divergence (base 2, 0-1) between the head / mid / tail shares of the user's
  history and of the first k (Abdollahpouri et al. 2021, UMAP: head = the most popular items holding the first 20%
  of interactions, tail = the least popular ones holding the last 20%, mid = the rest).
- invalid_rate, duplicate_rate, history_copy_rate, out_of_candidates_rate: shares of the items an answer names that
  are not in the catalogue / name an item again / are first mentions of an item of the user's history / first
  mentions outside the candidates (only where candidates were given).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from recbench.api.metric_spec import MetricSpec, register

HEAD_SHARE = 0.8  # aplt: the head holds the first 80% of interactions
CALIBRATION_SHARES = (0.2, 0.8)  # pop_miscalibration: head = first 20% of interactions, tail = last 20%
#: the corpus metrics' bootstrap resamples at most this many listed items in all (each resample is a bincount of every
#: listed item): the run's n_boot up to 200,000 listed items, then fewer, never below MIN_CORPUS_RESAMPLES (200 at
#: 100,000 users of 10 items: 1-2 s)
CORPUS_BUDGET = 200_000_000
MIN_CORPUS_RESAMPLES = 200
#: cold / warm / heavy: users by history length, cut at the 1/3 and 2/3 quantiles of the loaded users' lengths
ACTIVITY_LEVELS = ("cold", "warm", "heavy")


@dataclass(frozen=True)
class ItemList:
    """What one sample recommended: every item the answer named, in order, as a catalogue id or None (a name that is
    not in the catalogue); the user's history (catalogue ids); the candidates it was given (None: none given)."""

    named: tuple[Optional[str], ...]
    history: tuple[str, ...] = ()
    candidates: Optional[frozenset[str]] = None

    def first(self, k: int) -> list[str]:
        """The first k distinct catalogue items of the answer."""
        out: list[str] = []
        for i in self.named:
            if i is not None and i not in out:
                out.append(i)
                if len(out) == k:
                    break
        return out


def _cut(order: np.ndarray, weights: np.ndarray, share: float) -> np.ndarray:
    """Mask of the items (taken in `order`) whose cumulative weight first reaches `share` of the total."""
    cum = np.cumsum(weights[order])
    total = cum[-1] if len(cum) else 0
    mask = np.zeros(len(weights), dtype=bool)
    if total > 0:
        stop = int(np.searchsorted(cum, share * total - 1e-9 * total)) + 1
        mask[order[:stop]] = True
    return mask


@dataclass
class ItemCatalogue:
    """The catalogue, the popularity data the models are shown, and the cut-off k the list metrics use."""

    items: list[str]
    pop: np.ndarray  # interactions per catalogue item, in `items` order
    holders: np.ndarray  # users whose history holds the item
    n_users: int
    k: int
    categories: Optional[list[frozenset[str]]] = None  # per item; None: the items have none
    index: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def of(items: Iterable[str], histories: Iterable[Sequence[str]], k: int,
           categories: Optional[Mapping[str, Iterable[str]]] = None) -> "ItemCatalogue":
        """A catalogue from its item ids, the users' histories the models are shown (items outside the catalogue
        ignored), the task's k and optional categories per item."""
        ids = list(dict.fromkeys(str(i) for i in items))
        index = {i: j for j, i in enumerate(ids)}
        flat: list[int] = []
        held: list[int] = []
        n_users = 0
        for hist in histories:
            n_users += 1
            js = [index[i] for i in hist if i in index]
            flat += js
            held += set(js)
        pop = np.bincount(np.asarray(flat, dtype=np.int64), minlength=len(ids)).astype(float)
        holders = np.bincount(np.asarray(held, dtype=np.int64), minlength=len(ids)).astype(float)
        cats = None if categories is None else [frozenset(map(str, categories.get(i, ()))) for i in ids]
        return ItemCatalogue(ids, pop, holders, n_users, int(k), cats, index)

    def __post_init__(self) -> None:
        if not self.index:
            self.index = {i: j for j, i in enumerate(self.items)}
        # popularity order: pop descending, ties by item id
        order = np.array(sorted(range(len(self.items)), key=lambda j: (-self.pop[j], self.items[j])), dtype=np.int64)
        self.tail = ~_cut(order, self.pop, HEAD_SHARE)
        head = _cut(order, self.pop, CALIBRATION_SHARES[0])
        low = ~_cut(order, self.pop, CALIBRATION_SHARES[1])  # the items after the first 80%: the last 20%
        self.pop_group = np.where(head, 0, np.where(low, 2, 1))  # 0 head, 1 mid, 2 tail (calibration)
        self.novelty = -np.log2((self.holders + 1) / (self.n_users + 1))

    def positions(self, ids: Sequence[str]) -> np.ndarray:
        """Catalogue positions of ids (all in the catalogue)."""
        return np.fromiter((self.index[i] for i in ids), dtype=np.int64, count=len(ids))


# ---- per sample ---------------------------------------------------------------------------------------------
def error_rates(lst: ItemList) -> dict[str, float]:
    """invalid / duplicate / history-copy / out-of-candidates shares of the named items (NaN: nothing named)."""
    n = len(lst.named)
    if n == 0:
        return {"invalid_rate": math.nan, "duplicate_rate": math.nan, "history_copy_rate": math.nan}
    seen: set[str] = set()
    hist = set(lst.history)
    invalid = dup = copy = out = 0
    for i in lst.named:
        if i is None:
            invalid += 1
        elif i in seen:
            dup += 1
        else:
            seen.add(i)
            copy += i in hist
            out += lst.candidates is not None and i not in lst.candidates
    rates = {"invalid_rate": invalid / n, "duplicate_rate": dup / n, "history_copy_rate": copy / n}
    if lst.candidates is not None:
        rates["out_of_candidates_rate"] = out / n
    return rates


def _jsd(p: np.ndarray, q: np.ndarray) -> float:
    """Jensen-Shannon divergence, base 2 (0 to 1)."""
    m = (p + q) / 2

    def kl(a: np.ndarray) -> float:
        ok = a > 0
        return float(np.sum(a[ok] * np.log2(a[ok] / m[ok])))

    return 0.5 * kl(p) + 0.5 * kl(q)


def ild(cat: ItemCatalogue, pos: np.ndarray) -> float:
    """Mean pairwise Jaccard distance of the items' category sets (NaN below two items or without categories; two
    items without categories are at distance 0)."""
    if cat.categories is None or len(pos) < 2:
        return math.nan
    sets = [cat.categories[j] for j in pos]
    dists = [1 - (len(a & b) / len(a | b) if a | b else 1.0) for x, a in enumerate(sets) for b in sets[x + 1:]]
    return float(np.mean(dists))


def miscalibration(cat: ItemCatalogue, pos: np.ndarray, history: Sequence[str]) -> float:
    """JSD between the head / mid / tail shares of the history and of the list (NaN: either is empty)."""
    hist = [cat.index[i] for i in history if i in cat.index]
    if not hist or not len(pos):
        return math.nan
    p = np.bincount(cat.pop_group[np.asarray(hist)], minlength=3) / len(hist)
    q = np.bincount(cat.pop_group[pos], minlength=3) / len(pos)
    return _jsd(p, q)


def sample_values(cat: ItemCatalogue, lst: ItemList) -> tuple[dict[str, float], list[str]]:
    """(the per-sample list metrics at the catalogue's k, the first k catalogue items)."""
    k = cat.k
    first = lst.first(k)
    out = error_rates(lst)
    pos = cat.positions(first)
    nan = math.nan
    out.update({f"arp@{k}": float(cat.pop[pos].mean()) if len(pos) else nan,
                f"aplt@{k}": float(cat.tail[pos].mean()) if len(pos) else nan,
                f"novelty@{k}": float(cat.novelty[pos].mean()) if len(pos) else nan,
                f"pop_miscalibration@{k}": miscalibration(cat, pos, lst.history)})
    if cat.categories is not None:
        out[f"ild@{k}"] = ild(cat, pos)
    return out, first


# ---- over the run, column-wise --------------------------------------------------------------------------------
def gini(counts: np.ndarray) -> float:
    """Gini index of counts over every catalogue item, zeros included (RecBole GiniIndex); NaN when all are 0."""
    c = np.sort(np.asarray(counts, dtype=float))
    n, total = len(c), c.sum()
    if total <= 0:
        return math.nan
    idx = np.arange(1, n + 1)
    return float(np.sum((2 * idx - n - 1) * c) / (n * total))


def entropy(counts: np.ndarray) -> float:
    """Shannon entropy (natural log) of the recommendation counts; NaN when all are 0."""
    c = np.asarray(counts, dtype=float)
    total = c.sum()
    if total <= 0:
        return math.nan
    p = c[c > 0] / total
    return float(-np.sum(p * np.log(p)))


def coverage(counts: np.ndarray) -> float:
    """Share of catalogue items recommended at least once."""
    return float(np.count_nonzero(counts) / len(counts)) if len(counts) else math.nan


CORPUS = {"coverage": coverage, "gini": gini, "entropy": entropy}


def corpus_summaries(cat: ItemCatalogue, lists: Sequence[Optional[Sequence[str]]], n_boot: int = 1000,
                     level: float = 0.95, seed: int = 0) -> dict[str, dict[str, Any]]:
    """coverage@k, gini@k and entropy@k over the samples' first-k lists (None: a sample without one, left out),
    each with a bias-shifted percentile bootstrap CI over samples (the item counts of a resample are one weighted
    bincount)."""
    rows = [r for r in lists if r is not None]
    n = len(rows)
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=n)
    flat = cat.positions([i for r in rows for i in r if i in cat.index])
    owner = np.repeat(np.arange(n), lengths)
    m = len(cat.items)
    counts = np.bincount(flat, minlength=m)
    k = cat.k
    out = {f"{name}@{k}": {"mean": f(counts), "ci_low": math.nan, "ci_high": math.nan, "n": n, "n_undefined": 0}
           for name, f in CORPUS.items()}
    if n >= 2 and len(flat):
        rng = np.random.default_rng(seed)
        n_boot = min(n_boot, max(MIN_CORPUS_RESAMPLES, CORPUS_BUDGET // len(flat)))
        draws = {name: np.empty(n_boot) for name in CORPUS}
        for b in range(n_boot):
            w = np.bincount(rng.integers(0, n, n), minlength=n)
            c = np.bincount(flat, weights=w[owner], minlength=m)
            for name, f in CORPUS.items():
                draws[name][b] = f(c)
        alpha = (1 - level) / 2
        for name in CORPUS:
            # a resample holds ~63% distinct samples, which lowers coverage and entropy and raises gini: the
            # percentile interval is shifted by that bias (the run's value minus the resamples' mean), so it is
            # centred where the run's value is
            shift = out[f"{name}@{k}"]["mean"] - float(np.nanmean(draws[name]))
            lo, hi = np.clip(np.nanquantile(draws[name], [alpha, 1 - alpha]) + shift, 0.0,
                             math.log(m) if name == "entropy" else 1.0)  # within the metric's range
            out[f"{name}@{k}"].update(ci_low=float(lo), ci_high=float(hi))
    return out


def activity_levels(lengths: Mapping[str, int]) -> tuple[dict[str, str], dict[str, Any]]:
    """Each user's activity level (cold / warm / heavy by history length, cut at the 1/3 and 2/3 quantiles of the
    loaded users' lengths) and the stratum's description for run facts."""
    vals = np.fromiter(lengths.values(), dtype=float, count=len(lengths))
    lo, hi = (float(q) for q in np.quantile(vals, [1 / 3, 2 / 3])) if len(vals) else (0.0, 0.0)
    levels = {u: "cold" if n <= lo else "warm" if n <= hi else "heavy" for u, n in lengths.items()}
    return levels, {"of": "items in the user's history (the 1/3 and 2/3 quantiles of the loaded users)",
                    "cuts": [lo, hi], "labels": f"cold <= {lo:g} < warm <= {hi:g} < heavy"}


#: the old names of the answer-error rates, still read from run dirs written before they were unified
OLD_NAMES = {"share_hallucinated": "invalid_rate", "hallucination_rate": "invalid_rate",
             "share_duplicate": "duplicate_rate", "share_out_of_candidate": "out_of_candidates_rate"}
LIST_METRICS = (
    MetricSpec("arp@k", higher_is_better=False, meaning="average recommendation popularity: mean interactions (in the "
               "histories shown) of the first k items (RecBole AveragePopularity)"),
    MetricSpec("aplt@k", meaning="average percentage of long tail: share of the first k items outside the head (the "
               "most popular items holding 80% of interactions)"),
    MetricSpec("coverage@k", aggregation="corpus", meaning="item coverage: distinct items among all first-k lists / "
               "catalogue size, 0-1 (RecBole ItemCoverage)"),
    MetricSpec("gini@k", higher_is_better=False, aggregation="corpus", meaning="Gini index of how often each catalogue "
               "item is recommended in the first k, zeros included, 0-1 (RecBole GiniIndex)"),
    MetricSpec("entropy@k", aggregation="corpus", meaning="Shannon entropy (nats) of how often each item is "
               "recommended in the first k"),
    MetricSpec("novelty@k", meaning="mean self-information -log2((users(i)+1)/(n_users+1)) of the first k items"),
    MetricSpec("ild@k", meaning="intra-list diversity: mean pairwise Jaccard distance of the first k items' "
               "categories, 0-1", why_n="defined on lists of two or more items"),
    MetricSpec("pop_miscalibration@k", higher_is_better=False, meaning="Jensen-Shannon divergence (0-1) between the "
               "head/mid/tail popularity shares of the user's history and of the first k (Abdollahpouri et al. "
               "2021)", why_n="defined where the list and the user's history hold catalogue items"),
    MetricSpec("invalid_rate", higher_is_better=False, meaning="share of the items an answer names that are not in "
               "the catalogue", why_n="defined on answers naming at least one item"),
    MetricSpec("duplicate_rate", higher_is_better=False, meaning="share of the items an answer names that name an "
               "item already named", why_n="defined on answers naming at least one item"),
    MetricSpec("history_copy_rate", higher_is_better=False, meaning="share of the items an answer names that the "
               "user already had (first mentions)", why_n="defined on answers naming at least one item"),
    MetricSpec("out_of_candidates_rate", higher_is_better=False, meaning="share of the items an answer names that "
               "are catalogue items outside its candidates (first mentions)",
               why_n="defined where candidates were given, on answers naming at least one item"),
    *(MetricSpec(old, higher_is_better=False, meaning=f"old name of {new} (run dirs written before the list "
                 "metrics were unified)") for old, new in OLD_NAMES.items()),
)
register(*LIST_METRICS)


# ---- the run's two call sites (run/loop.py), naming no task --------------------------------------------------
def list_scores(task: Any, example: Any, outcome: Any, metrics: dict[str, float]) -> Optional[list[str]]:
    """Add one sample's list metrics to `metrics` and return its first k catalogue items (None: no list)."""
    cat = task.item_catalogue()
    if cat is None:
        return None
    lst = task.item_list(example, outcome)
    if lst is None:
        return None
    values, first = sample_values(cat, lst)
    metrics.update(values)
    return first


def list_corpus(task: Any, records: Sequence[Any], n_boot: int, level: float, seed: int) -> dict[str, Any]:
    """The corpus list metrics of a run's records, each as MetricSummary's fields, by name ({}: no record has a
    list)."""
    if not any(r.items is not None for r in records):
        return {}
    cat = task.item_catalogue()
    if cat is None:
        return {}
    return corpus_summaries(cat, [r.items for r in records], n_boot, level, seed)
