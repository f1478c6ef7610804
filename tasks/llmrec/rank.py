"""LLMRec sequential and direct recommendation: rank a frozen candidate list; HR@k / NDCG@k and the named-item counts."""
from __future__ import annotations

import functools
from collections import Counter
from typing import Any, ClassVar, Iterable, Optional, Sequence

import numpy as np

from recbench.api.item_lists import ItemCatalogue, ItemList, activity_levels
from recbench.api.metrics import MetricSpec
from recbench.api.types import Example, Outcome, Response
from recbench.stats.baselines import expected_hr_at_k, expected_ndcg_at_k
from recbench.store.schema import SampleRecord
from recbench.tasks.llmrec import methods as m
from recbench.tasks.llmrec import metrics as M
from recbench.tasks.llmrec import settings
from recbench.tasks.llmrec.base import LLMRecTask, _clip, history_bucket
from recbench.tasks.llmrec.candidates import ensure_frozen, load_candidates
from recbench.tasks.llmrec.data import load_p5
from recbench.tasks.llmrec.resolve import ItemResolver


# ---- sequential and direct recommendation -----------------------------------------------------
class _RankTask(LLMRecTask):
    """Rank a frozen candidate list (1 held-out positive + sampled negatives); HR@k / NDCG@k."""

    headline_metric = "ndcg@10"
    breakdown_by = ("history", "popularity", "activity")
    ordered_history: ClassVar[bool] = True
    settings_rules = settings.RANK  # valid values of the task keys, checked before anything is loaded

    methods = {"zero_shot": m.ZeroShot, "popularity": m.Popularity, "item_knn": m.ItemKNN, "mf": m.PureSVD,
               "random": m.RandomRank}
    #: per answer (score): the share of its named items among its candidates and the candidates it named (besides
    #: the standard hr@k / ndcg@k and the list metrics of api/item_lists.py: invalid_rate, duplicate_rate, arp@k,
    #: ...); over the run: the same share over all items named, and the answers naming fewer than n_recommend
    #: candidates. Model answers only.
    metric_specs = (
        MetricSpec("share_in_candidates",
                   meaning="share of the items an answer names that are among its candidates",
                   doc="share of named items among the candidates",
                   corpus=lambda records, task: named_share(records, "in_candidates")),
        MetricSpec("n_valid_items",
                   meaning="candidate items named in the answer",
                   doc="candidate items named in the answer"),
        MetricSpec("answers_with_fewer_than_n_valid",
                   meaning="answers naming fewer than n_recommend candidates",
                   higher_is_better=None,
                   doc="answers naming fewer than n_recommend candidates (a count: no direction)",
                   corpus=lambda records, task: task.short_answers(records)),
    )
    fairness_by = ("activity",)

    @property
    def ks(self) -> tuple[int, ...]:
        """Cut-offs of HR@k / NDCG@k."""
        return tuple(int(k) for k in self.cfg.ks)

    @functools.cached_property
    def data(self):
        """The P5-format data (sequences + titles)."""
        return load_p5(str(self.cfg.data_dir))

    @functools.cached_property
    def resolver(self) -> ItemResolver:
        """Item-name resolver over the whole catalogue."""
        return ItemResolver(self.data.titles, float(self.cfg.fuzzy_cutoff))

    def train_sequences(self) -> dict[str, tuple[str, ...]]:
        """Every user's items except the held-out test item (train + validation): what baselines are fit on."""
        return {u: s[:-1] for u, s in self.data.sequences.items()}

    def load(self) -> list[Example]:
        """One example per user with a frozen candidate list, in the data file's user order."""
        if getattr(self, "_loaded", None) is None:
            self._loaded = self._load()
        return self._loaded

    def _load(self) -> list[Example]:
        cc = self.cfg.candidates
        # first use: freeze the file (deterministic, progress bar); load_candidates then verifies the recorded hash
        ensure_frozen(cc.path, cc.sha256, self.data, kind=self.subtask, seed=int(cc.seed),
                      n_negatives=int(cc.negatives), progress=bool(cc.progress))
        cands = load_candidates(cc.path, cc.sha256, self.data)
        counts = Counter(i for seq in self.train_sequences().values() for i in seq)  # training interactions per item
        activity, self.activity_facts = activity_levels({u: len(s) - 1 for u, s in self.data.sequences.items()})
        targets = [float(counts.get(seq[-1], 0)) for seq in self.data.sequences.values()]
        cuts = [float(q) for q in np.quantile(targets, [1 / 3, 2 / 3])] if targets else [0.0, 0.0]
        self.strata = {"popularity": {"of": "training interactions of the target item (train_sequences)", "cuts": cuts,
                                      "labels": f"low <= {cuts[0]:g} < mid <= {cuts[1]:g} < high"},
                       "history": {"of": "items in the user's history", "labels": "<=4, 5-9, 10+"},
                       "activity": self.activity_facts}
        out = []
        for u, seq in self.data.sequences.items():
            c = cands.get(u)
            if c is None:
                raise ValueError(f"user {u} has no frozen candidates in {self.cfg.candidates.path}")
            hist = seq[:-1]
            n = len(hist)
            pop = counts.get(seq[-1], 0)
            out.append(Example(id=u, data={"user_id": u, "history": hist, "target": seq[-1],
                                           "candidates": c["candidates"]},
                               meta={"history": history_bucket(n), "target_interactions": pop, "activity": activity[u],
                                     "popularity": "low" if pop <= cuts[0] else "mid" if pop <= cuts[1] else "high"}))
        return out

    @functools.cached_property
    def catalogue(self) -> ItemCatalogue:
        """The catalogue and the popularity the models are shown: every user's items but the held-out one."""
        return ItemCatalogue.of(self.data.items, self.train_sequences().values(), k=max(self.ks))

    def item_catalogue(self) -> ItemCatalogue:
        """The list metrics' catalogue (popularity from every loaded user's history without the test target), at the
        largest cut-off of ks."""
        return self.catalogue

    def item_list(self, example: Example, outcome: Outcome) -> ItemList:
        """Every item the answer named (a model answer: as resolved, None where no catalogue item; a reference row:
        its ranking), the user's history and candidates."""
        items = outcome.details.get("items")
        named = [it["item"] for it in items] if items is not None else list(outcome.prediction or [])
        return ItemList(tuple(named), tuple(example.data["history"]), frozenset(example.data["candidates"]))

    def prompt_vars(self, example: Example) -> dict[str, Any]:
        """History (last history_max items; chronological or sorted by title) and candidates with titles."""
        t, tmax = self.data.titles, self.cfg.title_max_chars
        n = int(self.cfg.history_max)
        hist = [{"id": i, "title": _clip(t[i], tmax)} for i in example.data["history"][-n:]]
        if not self.ordered_history:
            hist = sorted(hist, key=lambda h: (h["title"].lower(), h["id"]))
        return {"history": hist, "candidates": [{"id": i, "title": _clip(t[i], tmax)} for i in example.data["candidates"]],
                "n": int(self.cfg.n_recommend)}

    def parse(self, response: Response, example: Example) -> Outcome:
        """Resolve the named items against the candidates; record hallucinated / out-of-candidate / duplicate counts."""
        res = self.resolver.resolve(response.text, example.data["candidates"])
        return Outcome(res.ranked, res.status, res.details())

    def score(self, example: Example, outcome: Outcome) -> dict[str, float]:
        """hr@k / ndcg@k of the ranked list (a failed parse is an empty list: a miss), plus per-answer item shares."""
        out = M.ranking_metrics(outcome.prediction or [], example.data["target"], self.ks)
        d = outcome.details
        if "named" in d:  # model answers: what the named items were
            out["n_valid_items"] = float(d["in_candidates"])
        return out

    def contamination_items(self, example: Example) -> dict[str, Optional[str]]:
        """The contamination split looks at the held-out target item, with its catalogue title."""
        target = str(example.data["target"])
        return {target: self.data.titles.get(target)}

    def truth(self, example: Example) -> dict[str, Any]:
        """The held-out target item (id and title)."""
        target = example.data["target"]
        return {"target": target, "title": self.data.titles.get(target, "")}

    def short_answers(self, records: Sequence[SampleRecord]) -> Optional[int]:
        """Model answers naming fewer than n_recommend candidates (None when no record is a model answer)."""
        recs = [r for r in records if "named" in r.details]
        return sum(1 for r in recs if r.details["in_candidates"] < int(self.cfg.n_recommend)) if recs else None

    def run_facts(self, records: Iterable[SampleRecord]) -> dict[str, Any]:
        """The strata thresholds, the exact expectation of a random ranker (1 positive among each
        example's C candidates) and, for model answers, the counts of named items by kind."""
        records = list(records)
        sizes = [len(self.by_id[r.id].data["candidates"]) for r in records if r.id in self.by_id]
        base: dict[str, Any] = {"strata": getattr(self, "strata", {})}
        if sizes:
            rnd = {}
            for k in self.ks:
                rnd[f"hr@{k}"] = float(np.mean([expected_hr_at_k(k, c) for c in sizes]))
                rnd[f"ndcg@{k}"] = float(np.mean([expected_ndcg_at_k(k, c) for c in sizes]))
            base["random_expectation"] = rnd
            base["random_expectation_candidates"] = sorted(set(sizes))
        tot = items_named(records)
        return {**base, "items_named": tot} if tot is not None else base


NAMED_KINDS = ("named", "in_candidates", "out_of_candidate", "hallucinated", "duplicate", "fuzzy")


def items_named(records: Sequence[SampleRecord]) -> Optional[dict[str, int]]:
    """Items named over all model answers, by kind (None when no record is a model answer: a reference row)."""
    recs = [r for r in records if "named" in r.details]
    return {k: sum(r.details[k] for r in recs) for k in NAMED_KINDS} if recs else None


def named_share(records: Sequence[SampleRecord], kind: str) -> Optional[float]:
    """The share of all items named in model answers that were of `kind` (None for a reference row)."""
    tot = items_named(records)
    return None if tot is None else tot[kind] / (tot["named"] or 1)


class SequentialTask(_RankTask):
    """Sequential recommendation: history in chronological order, pick n_recommend from the candidates."""

    name = "llmrec_sequential"
    subtask = "sequential"
    template = "sequential.j2"
    ordered_history = True


class DirectTask(_RankTask):
    """Direct recommendation: history as an unordered set, top n_recommend from the candidates."""

    name = "llmrec_direct"
    subtask = "direct"
    template = "direct.j2"
    ordered_history = False
