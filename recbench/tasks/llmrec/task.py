"""The five LLMRec tasks (Liu et al. 2023): rating, sequential, direct, explanation, summary on Amazon Beauty."""
from __future__ import annotations

import functools
import math
import re
from collections import Counter
from typing import Any, ClassVar, Iterable, Optional, Sequence

import numpy as np
import pandas as pd

from recbench.api.metrics import MetricSpec
from recbench.api.parsing import parse_number
from recbench.api.prompts import render
from recbench.store.schema import SampleRecord
from recbench.audits.order import audit_aggregates
from recbench.stats.baselines import expected_hr_at_k, expected_ndcg_at_k
from recbench.api.task import Task
from recbench.tasks.llmrec import methods as m
from recbench.tasks.llmrec import metrics as M
from recbench.tasks.llmrec import settings
from recbench.tasks.llmrec.candidates import ensure_frozen, load_candidates
from recbench.tasks.llmrec.data import first_sentence, leave_last_out, load_p5, load_reviews
from recbench.tasks.llmrec.resolve import ItemResolver
from recbench.api.types import Example, Outcome, Response

PKG = "recbench.tasks.llmrec"


#: history length buckets of history_bucket, shortest first
HISTORY_BUCKETS = ("<=4", "5-9", "10+")


def history_bucket(n: int) -> str:
    """History length bucket of a user: <=4, 5-9 or 10+ items."""
    return "<=4" if n <= 4 else "5-9" if n <= 9 else "10+"


def _clip(s: str, n: int | None) -> str:
    s = " ".join(str(s).split())
    return s if not n or len(s) <= n else s[: n - 1].rstrip() + "…"


class LLMRecTask(Task):
    """Shared parts: prompt rendering from templates/, task identity, lazy id -> example lookup."""

    breakdown_order = {"history": HISTORY_BUCKETS, "popularity": ("low", "mid", "high")}

    subtask: ClassVar[str] = ""
    template: ClassVar[str] = ""

    def identity(self) -> dict[str, Any]:
        """Task name, LLMRec sub-task, dataset label and data location."""
        return {"name": self.cfg.name, "benchmark": "llmrec", "subtask": self.subtask,
                "dataset": self.cfg.dataset, "data_dir": str(self.cfg.data_dir)}

    def messages(self, example: Example) -> list[dict[str, str]]:
        """System + user chat messages for the zero-shot prompt."""
        user = render(PKG, self.cfg.template or self.template, **self.prompt_vars(example))
        return [{"role": "system", "content": render(PKG, self.cfg.system_template)},
                {"role": "user", "content": user}]

    def prompt_vars(self, example: Example) -> dict[str, Any]:
        """Template variables for one example."""
        raise NotImplementedError

    def parse(self, response: Response, example: Example) -> Outcome:
        """Turn a model answer into an Outcome with a parse status."""
        raise NotImplementedError

    @functools.cached_property
    def by_id(self) -> dict[str, Example]:
        """Examples by id (for corpus-level aggregates over run records)."""
        return {e.id: e for e in self.load()}


# ---- rating prediction ------------------------------------------------------------------------
class _ReviewTask(LLMRecTask):
    """Tasks on the Amazon Reviews 2023 format: each user's most recent review is held out."""

    def split(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(train, test) reviews: leave-last-out per user by timestamp."""
        return leave_last_out(load_reviews(str(self.cfg.data_dir)), int(self.cfg.min_history))

    def _history(self, train_by_user: dict[str, pd.DataFrame], user: str) -> list[dict[str, Any]]:
        h = train_by_user.get(user)
        if h is None:
            return []
        n = int(self.cfg.history_max)
        tmax = self.cfg.title_max_chars
        return [{"item_id": i, "title": _clip(t, tmax), "rating": float(r)}
                for i, t, r in zip(h["item_id"][-n:], h["item_title"][-n:], h["rating"][-n:])] if n > 0 else []

    def contamination_items(self, example: Example) -> dict[str, Optional[str]]:
        """The contamination split looks at the reviewed item (the one rated, explained or summarized), with its
        title as the prompt shows it (clipped to title_max_chars)."""
        return {str(example.data["item_id"]): example.data.get("item_title")}

    def _examples(self) -> list[Example]:
        train, test = self.split()
        by_user = {u: g for u, g in train.groupby("user_id", sort=False)}
        tmax = self.cfg.title_max_chars
        out = []
        for r in test.itertuples(index=False):
            n_hist = len(by_user[r.user_id]) if r.user_id in by_user else 0  # the user's training reviews
            out.append(Example(
                id=f"{r.user_id}:{r.item_id}",
                data={"user_id": r.user_id, "item_id": r.item_id, "item_title": _clip(r.item_title, tmax),
                      "rating": float(r.rating), "review_title": r.title, "review_text": r.text,
                      "history": self._history(by_user, r.user_id)},
                meta={"rating": int(round(r.rating)), "history": history_bucket(n_hist)}))
        return out


_SCALE_ECHO = re.compile(r"\(?\s*\b[15]\s+being\b[^\n]*", re.I)


class RatingTask(_ReviewTask):
    """Rating prediction (1-5): RMSE and MAE of clamped predictions; unparseable answers get `fallback_rating`."""

    name = "llmrec_rating"
    settings_rules = settings.RATING  # valid values of the task keys, checked before anything is loaded
    subtask = "rating"
    template = "rating.j2"
    headline_metric = "mae"
    breakdown_by = ("rating", "history")

    methods = {"zero_shot": m.ZeroShot, "global_mean": m.GlobalMean, "user_mean": m.UserMean,
               "item_mean": m.ItemMean, "random": m.RandomRating}
    #: per example: 'parsed' (and the standard mae / mse); over the run (corpus_errors): RMSE / MAE with the fallback
    #: for failures and over parsed answers, the count of fallbacks and the fallback rating used
    metric_specs = (
        MetricSpec("parsed",
                   meaning="share of answers that carried a rating",
                   binary=True, doc="1 when the answer carried a rating"),
        MetricSpec("rmse",
                   meaning="root mean squared error of the clamped rating, over all answers (unparsed: the fallback "
                           "rating)",
                   higher_is_better=False, aggregation="corpus", doc="RMSE of clamped ratings, all answers",
                   corpus=lambda records, task: task.corpus_errors(records)["rmse"]),
        MetricSpec("mae",
                   meaning="mean absolute error of the clamped rating, over all answers (unparsed: the fallback "
                           "rating)",
                   higher_is_better=False, doc="MAE of clamped ratings over all answers (per example: mae)",
                   corpus=lambda records, task: task.corpus_errors(records)["mae"]),
        MetricSpec("rmse_parsed",
                   meaning="root mean squared error over the answers that carried a rating",
                   higher_is_better=False, aggregation="corpus", doc="RMSE over parsed answers",
                   corpus=lambda records, task: task.corpus_errors(records)["rmse_parsed"]),
        MetricSpec("mae_parsed",
                   meaning="mean absolute error over the answers that carried a rating",
                   higher_is_better=False, aggregation="corpus", doc="MAE over parsed answers",
                   corpus=lambda records, task: task.corpus_errors(records)["mae_parsed"]),
        MetricSpec("n_fallback",
                   meaning="answers scored with the fallback rating (no rating parsed)",
                   higher_is_better=None, doc="answers scored with task.fallback_rating (a count)",
                   corpus=lambda records, task: task.corpus_errors(records)["n_fallback"]),
        MetricSpec("fallback_rating",
                   meaning="the rating given to unparsed answers (a setting)",
                   higher_is_better=None, doc="the rating given to unparsed answers (a setting)",
                   corpus=lambda records, task: task.corpus_errors(records)["fallback_rating"]),
    )

    def load(self) -> list[Example]:
        """One example per user: the most recent review's rating."""
        return self._examples()

    def prompt_vars(self, example: Example) -> dict[str, Any]:
        """History (title, rating) and the target item's title."""
        return {"history": example.data["history"], "item_title": example.data["item_title"]}

    def parse(self, response: Response, example: Example) -> Outcome:
        """The first number in the answer, clamped to [1, 5]; an echoed scale ("(1 being lowest ...") is not an answer."""
        text = _SCALE_ECHO.sub(" ", response.text)
        p = parse_number(text, 1.0, 5.0)
        if p.ok and text != response.text and p.status == "ok":
            p.status = "repaired"
        return Outcome(p.value, p.status, {"note": p.note + ("; scale echo removed" if text != response.text else "")})

    def score(self, example: Example, outcome: Outcome) -> dict[str, float]:
        """mae = |clamped prediction - rating|, mse = squared error; failed parses use the fallback rating."""
        pred = outcome.prediction
        fb = float(self.cfg.fallback_rating)
        used = fb if pred is None else M.clamp(float(pred))
        err = used - example.data["rating"]
        return {"mae": abs(err), "mse": err * err, "parsed": 0.0 if pred is None else 1.0}

    def truth(self, example: Example) -> dict[str, Any]:
        """The true rating."""
        return {"rating": example.data["rating"]}

    def corpus_errors(self, records: Sequence[SampleRecord]) -> dict[str, Optional[float]]:
        """RMSE/MAE of clamped ratings over all examples (fallback_rating for failures) and over parsed answers only,
        the failures scored with the fallback and the fallback itself; all None for no records."""
        recs = list(records)
        if not recs:
            return dict.fromkeys(("rmse", "mae", "rmse_parsed", "mae_parsed", "n_fallback", "fallback_rating"))
        fb = float(self.cfg.fallback_rating)
        truth = [self.by_id[r.id].data["rating"] for r in recs]
        pred = [fb if r.prediction is None else float(r.prediction) for r in recs]
        ok = [i for i, r in enumerate(recs) if r.prediction is not None]
        return {"rmse": M.rmse(pred, truth), "mae": M.mae(pred, truth),
                "rmse_parsed": M.rmse([pred[i] for i in ok], [truth[i] for i in ok]),
                "mae_parsed": M.mae([pred[i] for i in ok], [truth[i] for i in ok]),
                "n_fallback": len(recs) - len(ok), "fallback_rating": fb}


# ---- explanation generation and review summarization -----------------------------------------
_PREFIX = re.compile(r"^\s*(?:explanation|summary|answer|sentence|review)\s*[:\-]\s*", re.I)


def clean_text_answer(text: str) -> tuple[str, str]:
    """(sentence, status): first non-empty line, without a label prefix or wrapping quotes."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return "", "failed"
    s = _PREFIX.sub("", lines[0]).strip().strip('"“”\'').strip()
    if not s and len(lines) > 1:
        s = lines[1].strip().strip('"“”\'')
    status = "ok" if (s == text.strip() and s) else ("repaired" if s else "failed")
    return s, status


class _TextTask(_ReviewTask):
    headline_metric = "rougeL"
    breakdown_by = ("history",)
    #: per example: bleu4 (and the standard rouge1/2/L); over the run: corpus BLEU-4 and the empty answers
    metric_specs = (
        MetricSpec("bleu4",
                   meaning="sentence BLEU-4 of the generated text against the reference, 0-100",
                   doc="sentence BLEU-4 (sacrebleu, 0-100)"),
        MetricSpec("corpus_bleu4",
                   meaning="corpus BLEU-4 of all generated texts against their references, 0-100",
                   aggregation="corpus", doc="corpus BLEU-4 (sacrebleu, 0-100)",
                   corpus=lambda records, task: task.corpus_bleu4(records)),
        MetricSpec("empty_predictions",
                   meaning="answers with an empty generated text",
                   higher_is_better=None, doc="empty generated texts (a count: no direction)",
                   corpus=lambda records, task: sum(1 for r in records if not (r.prediction or "").strip())),
    )

    methods = {"zero_shot": m.ZeroShot}

    def reference(self, example: Example) -> str:
        """The reference text of an example."""
        raise NotImplementedError

    def load(self) -> list[Example]:
        """Held-out reviews whose reference text is not empty."""
        return [e for e in self._examples() if self.reference(e).strip()]

    def parse(self, response: Response, example: Example) -> Outcome:
        """One sentence of text; empty answers fail (and score 0)."""
        s, status = clean_text_answer(response.text)
        return Outcome(s, status)  # type: ignore[arg-type]

    def score(self, example: Example, outcome: Outcome) -> dict[str, float]:
        """Sentence BLEU-4 and ROUGE-1/2/L F1 (0-100) against the reference."""
        return M.text_metrics(outcome.prediction or "", self.reference(example))

    def truth(self, example: Example) -> dict[str, Any]:
        """The reference text."""
        return {"reference": self.reference(example)}

    def corpus_bleu4(self, records: Sequence[SampleRecord]) -> float:
        """Corpus BLEU-4 over all examples (failed answers count as empty)."""
        recs = list(records)
        return M.corpus_bleu4([r.prediction or "" for r in recs], [self.reference(self.by_id[r.id]) for r in recs])

    def run_facts(self, records: Iterable[SampleRecord]) -> dict[str, Any]:
        """What the reference text is."""
        return {"reference": self.reference_kind()}

    def reference_kind(self) -> str:
        """Words describing what the reference is."""
        return ""


class ExplanationTask(_TextTask):
    """Explanation generation: a short explanation for a given rating; reference = first sentence of the review (or all of it)."""

    name = "llmrec_explanation"
    settings_rules = settings.EXPLANATION
    subtask = "explanation"
    template = "explanation.j2"

    def reference(self, example: Example) -> str:
        """The review's first sentence (task.reference=first_sentence, default) or whole text (=text)."""
        t = example.data["review_text"]
        return first_sentence(t) if self.cfg.reference == "first_sentence" else " ".join(t.split())

    def reference_kind(self) -> str:
        """Which part of the review text is the reference."""
        return f"review text ({self.cfg.reference})"

    def prompt_vars(self, example: Example) -> dict[str, Any]:
        """History, the item title and the rating to explain."""
        return {"history": example.data["history"], "item_title": example.data["item_title"],
                "rating": example.data["rating"]}


class SummaryTask(_TextTask):
    """Review summarization: summarize the review text; reference = the review title (the reviewer's own summary)."""

    name = "llmrec_summary"
    settings_rules = settings.SUMMARY
    subtask = "summary"
    template = "summary.j2"
    methods = {"zero_shot": m.ZeroShot, "lead": m.Lead}

    def reference(self, example: Example) -> str:
        """The review title."""
        return example.data["review_title"]

    def reference_kind(self) -> str:
        """The review title."""
        return "review title"

    def prompt_vars(self, example: Example) -> dict[str, Any]:
        """The review text (clipped to review_max_chars), item title and rating."""
        return {"review": _clip(example.data["review_text"], self.cfg.review_max_chars),
                "item_title": example.data["item_title"], "rating": example.data["rating"]}


# ---- sequential and direct recommendation -----------------------------------------------------
class _RankTask(LLMRecTask):
    """Rank a frozen candidate list (1 held-out positive + sampled negatives); HR@k / NDCG@k."""

    headline_metric = "ndcg@10"
    breakdown_by = ("history", "popularity")
    ordered_history: ClassVar[bool] = True
    settings_rules = settings.RANK  # valid values of the task keys, checked before anything is loaded

    methods = {"zero_shot": m.ZeroShot, "popularity": m.Popularity, "item_knn": m.ItemKNN, "mf": m.PureSVD,
               "random": m.RandomRank}
    #: per answer (score): the shares of its named items that were hallucinated / outside the candidates / named
    #: twice, and the candidates it named (besides the standard hr@k / ndcg@k); over the run (named_items): the same
    #: shares over all items named, and the answers naming fewer than n_recommend candidates. Model answers only.
    metric_specs = (
        MetricSpec("share_in_candidates",
                   meaning="share of the items an answer names that are among its candidates",
                   doc="share of named items among the candidates",
                   corpus=lambda records, task: named_share(records, "in_candidates")),
        MetricSpec("share_out_of_candidate",
                   meaning="share of the items an answer names that are outside its candidates",
                   higher_is_better=False, doc="share of named items outside the candidates",
                   corpus=lambda records, task: named_share(records, "out_of_candidate")),
        MetricSpec("share_hallucinated",
                   meaning="share of the items an answer names that are not in the catalogue",
                   higher_is_better=False, doc="share of named items not in the catalogue",
                   corpus=lambda records, task: named_share(records, "hallucinated")),
        MetricSpec("share_duplicate",
                   meaning="share of the items an answer names that it names twice",
                   higher_is_better=False, doc="share of named items named twice",
                   corpus=lambda records, task: named_share(records, "duplicate")),
        MetricSpec("n_valid_items",
                   meaning="candidate items named in the answer",
                   doc="candidate items named in the answer"),
        MetricSpec("answers_with_fewer_than_n_valid",
                   meaning="answers naming fewer than n_recommend candidates",
                   higher_is_better=None,
                   doc="answers naming fewer than n_recommend candidates (a count: no direction)",
                   corpus=lambda records, task: task.short_answers(records)),
    )

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
        canon = {i: i for i in self.data.items}
        counts = Counter(i for seq in self.train_sequences().values() for i in seq)  # training interactions per item
        targets = [float(counts.get(seq[-1], 0)) for seq in self.data.sequences.values()]
        cuts = [float(q) for q in np.quantile(targets, [1 / 3, 2 / 3])] if targets else [0.0, 0.0]
        self.strata = {"popularity": {"of": "training interactions of the target item (train_sequences)", "cuts": cuts,
                                      "labels": f"low <= {cuts[0]:g} < mid <= {cuts[1]:g} < high"},
                       "history": {"of": "items in the user's history", "labels": "<=4, 5-9, 10+"}}
        out = []
        for u, seq in self.data.sequences.items():
            c = cands.get(u)
            if c is None:
                raise ValueError(f"user {u} has no frozen candidates in {self.cfg.candidates.path}")
            hist = seq[:-1]
            n = len(hist)
            pop = counts.get(seq[-1], 0)
            out.append(Example(id=u, data={"user_id": u, "history": hist, "target": seq[-1],
                                           "candidates": [canon.get(i, i) for i in c["candidates"]]},
                               meta={"history": history_bucket(n), "target_interactions": pop,
                                     "popularity": "low" if pop <= cuts[0] else "mid" if pop <= cuts[1] else "high"}))
        return out

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
            named = d["named"]
            for k in ("hallucinated", "out_of_candidate", "duplicate"):
                out[f"share_{k}"] = d[k] / named if named else math.nan
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
        """The strata thresholds, the order audit, the exact expectation of a random ranker (1 positive among each
        example's C candidates) and, for model answers, the counts of named items by kind."""
        records = list(records)
        sizes = [len(self.by_id[r.id].data["candidates"]) for r in records if r.id in self.by_id]
        base: dict[str, Any] = {"strata": getattr(self, "strata", {})}
        base.update(audit_aggregates(records, self.headline_metric))  # order audit (audit.orders=K)
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


__all__ = ["RatingTask", "ExplanationTask", "SummaryTask", "SequentialTask", "DirectTask"]
