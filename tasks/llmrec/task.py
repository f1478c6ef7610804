"""The five LLMRec tasks (Liu et al. 2023): rating, sequential, direct, explanation, summary on Amazon Beauty.
This module holds the review tasks (rating, explanation, summary); the ranking tasks live in
recbench.tasks.llmrec.rank and the shared base in recbench.tasks.llmrec.base (both re-exported here)."""
from __future__ import annotations

import re
from typing import Any, Iterable, Optional, Sequence

import pandas as pd

from recbench.api.metrics import MetricSpec
from recbench.api.parsing import parse_number
from recbench.store.schema import SampleRecord
from recbench.tasks.llmrec import methods as m
from recbench.tasks.llmrec import metrics as M
from recbench.tasks.llmrec import settings
from recbench.tasks.llmrec.base import HISTORY_BUCKETS, PKG, LLMRecTask, _clip, history_bucket  # noqa: F401
from recbench.tasks.llmrec.data import first_sentence, leave_last_out, load_reviews
from recbench.tasks.llmrec.rank import DirectTask, SequentialTask, items_named, named_share  # noqa: F401
from recbench.api.types import Example, Outcome, Response


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
        return Outcome(p.value, p.status, notes=[p.note, "scale echo removed" if text != response.text else ""])

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
    #: judge=<model>: the four aspects real users rated explanations on (Zhang et al., RecSys 2024)
    judge_rubric = {
        "persuasiveness": "how convincing the explanation is about the item for this user",
        "transparency": "how well it lets the user understand why the item gets this rating",
        "satisfaction": "how satisfied the user would be with the explanation",
        "interest_accuracy": "how well it matches the interests the user's history shows",
    }

    def judge_context(self, example: Example) -> str:
        """The user's earlier items and ratings, the item and the rating the explanation is for."""
        d = example.data
        seen = "; ".join(f"{h['title']} ({h['rating']:g}/5)" for h in d["history"]) or "none"
        return (f"A user's earlier reviewed items: {seen}.\nThe user rated the item \"{d['item_title']}\" "
                f"{d['rating']:g}/5. The text below should explain that rating to the user.")

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
    #: judge=<model>: what a summary of a review is judged on
    judge_rubric = {
        "faithfulness": "states only what the review says, inventing nothing",
        "coverage": "captures the review's main points",
        "conciseness": "says it briefly, without needless words",
    }

    def judge_context(self, example: Example) -> str:
        """The review (clipped as the prompt clips it), its item and rating."""
        d = example.data
        review = _clip(d["review_text"], self.cfg.review_max_chars)
        return (f"A review of \"{d['item_title']}\" ({d['rating']:g}/5):\n\"\"\"{review}\"\"\"\n"
                "The text below should summarize this review in one short sentence.")

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


__all__ = ["RatingTask", "ExplanationTask", "SummaryTask", "SequentialTask", "DirectTask"]
