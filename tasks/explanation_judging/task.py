"""The explanation-judging task: the model under test is a judge. Each example is one explanation a real user rated
and one aspect; the judge's 1-5 score is compared with the user's own rating, per example (abs_error) and over the run
by the paper's correlations at dataset, user and (user, movie) level, per aspect (metrics.json extra `by_aspect`) and
averaged over the run's aspects (the corpus metrics)."""
from __future__ import annotations

import functools
import math
import re
from typing import Any, Iterable, Optional, Sequence

import numpy as np

from recbench.api.metrics import MetricSpec
from recbench.api.parsing import parse_number
from recbench.api.prompts import render
from recbench.api.task import Task
from recbench.api.types import Example, Outcome, Response
from recbench.store.schema import SampleRecord
from recbench.tasks.explanation_judging import methods as m
from recbench.tasks.explanation_judging import settings
from recbench.tasks.explanation_judging.correlations import COEFFICIENTS, LEVELS, metric_names, three_levels
from recbench.tasks.explanation_judging.data import load_ratings, strip_html

PKG = "recbench.tasks.explanation_judging"

_LEVEL_WORDS = {"dataset": "over all rated explanations of an aspect",
                "user": "per user over that user's explanations, mean over users",
                "pair": "per (user, movie) over its explanation types, mean over pairs"}
_COEF_WORDS = {"pearson": "Pearson r", "spearman": "Spearman rho", "kendall": "Kendall tau-b"}
_WHY_N = {"user": "users whose ratings or judge scores are all equal are skipped (n_user_skipped)",
          "pair": "pairs whose ratings or judge scores are all equal are skipped (n_pair_skipped)"}


def _correlation_spec(coef: str, level: str) -> MetricSpec:
    name = f"{coef}_{level}"
    return MetricSpec(
        name, aggregation="corpus", doc=f"{_COEF_WORDS[coef]} judge score vs user rating, {level} level",
        meaning=f"{_COEF_WORDS[coef]} of judge scores against the users' ratings {_LEVEL_WORDS[level]}, averaged over "
                "the run's aspects (per aspect: extra.by_aspect); NaN when undefined (a constant judge)",
        why_n=_WHY_N.get(level, ""), corpus=lambda records, task, _n=name: task.meta_evaluation(records)[_n])


def _count_spec(name: str, key: str, meaning: str) -> MetricSpec:
    return MetricSpec(name, higher_is_better=None, aggregation="corpus", doc=meaning, meaning=meaning,
                      corpus=lambda records, task: task.meta_evaluation(records)[key])


# a scale the judge echoes back ("on a scale of 1 to 5, ...") is not its score
_SCALE_ECHO = re.compile(r"\b1\s*(?:-|–|to)\s*5\b|\(\s*1\s*=[^)]*\)|\b5\s*=\s*strongly agree", re.I)


class ExplanationJudgingTask(Task):
    """A judge scores one aspect of one user-rated explanation 1-5; truth = the user's own rating."""

    name = "explanation_judging"
    settings_rules = settings.TASK
    headline_metric = "spearman_dataset"
    breakdown_by = ("aspect", "explanation_type")
    breakdown_order = {"aspect": settings.ASPECTS}
    cluster_by = "user_id"
    methods = {"judge_score": m.JudgeScore, "constant_judge": m.ConstantJudge, "random_judge": m.RandomJudge}
    metric_specs = (
        MetricSpec("abs_error", higher_is_better=False, doc="|judge score - user rating| (fallback for no score)",
                   meaning="absolute difference between the judge's score and the user's own rating, 0-4 (an "
                           "answer without a score: the fallback rating)"),
        MetricSpec("parsed", binary=True, doc="1 when the answer carried a rating",
                   meaning="share of answers that carried a rating"),
        *(_correlation_spec(c, lv) for lv in LEVELS for c in COEFFICIENTS),
        _count_spec("n_user_skipped", "users_skipped",
                    "(user, aspect) groups without a correlation: the user's ratings or the judge's scores all equal"),
        _count_spec("n_pair_skipped", "pairs_skipped",
                    "(user, movie, aspect) groups without a correlation: ratings or judge scores all equal"),
        MetricSpec("n_fallback", higher_is_better=None, doc="answers scored with task.fallback_rating (a count)",
                   meaning="answers scored with the fallback rating (no rating parsed)",
                   corpus=lambda records, task: sum(1 for r in records if r.prediction is None)),
        MetricSpec("fallback_rating", higher_is_better=None, doc="the rating given to unparsed answers (a setting)",
                   meaning="the rating given to unparsed answers (a setting)",
                   corpus=lambda records, task: float(task.cfg.fallback_rating)),
    )

    def __init__(self, cfg: Any):
        super().__init__(cfg)
        self._examples: Optional[list[Example]] = None
        self._memo: Optional[tuple[Any, dict[str, dict[str, Any]], dict[str, Any]]] = None

    def identity(self) -> dict[str, Any]:
        """Task name, dataset label, data location and the aspects judged."""
        return {"name": self.cfg.name, "benchmark": "explanation_judging", "dataset": self.cfg.dataset,
                "data_dir": str(self.cfg.data_dir), "aspects": list(self.cfg.aspects)}

    def load(self) -> list[Example]:
        """One example per (rated explanation, aspect), in file order, the aspects of a row together (read once)."""
        if self._examples is None:
            self._examples = self._read()
        return self._examples

    def _read(self) -> list[Example]:
        aspects = list(self.cfg.aspects)
        df = load_ratings(str(self.cfg.data_dir), str(self.cfg.file), aspects)
        out = []
        for r in df.itertuples(index=False):
            base = {"user_id": r.user_id, "movie_id": r.movie_id, "explanation_type": r.explanation_type}
            for a in aspects:
                out.append(Example(
                    id=f"{r.user_id}:{r.movie_id}:{r.explanation_type}:{a}",
                    data={**base, "movie_title": str(r.movie_title), "explanation": strip_html(r.explanation),
                          "aspect": a, "rating": int(getattr(r, a))},
                    meta={**base, "aspect": a}))
        return out

    @functools.cached_property
    def by_id(self) -> dict[str, Example]:
        """Examples by id."""
        return {e.id: e for e in self.load()}

    def messages(self, example: Example) -> list[dict[str, str]]:
        """System + user messages: the movie, the explanation (HTML stripped) and the aspect's definition."""
        d = example.data
        user = render(PKG, self.cfg.template, movie_title=d["movie_title"], explanation=d["explanation"],
                      aspect=d["aspect"].replace("_", " "), definition=self.cfg.definitions[d["aspect"]])
        return [{"role": "system", "content": render(PKG, self.cfg.system_template)},
                {"role": "user", "content": user}]

    def parse(self, response: Response, example: Example) -> Outcome:
        """The first number of the answer, clamped to 1-5 ('repaired'); an echoed scale is not a score; no number:
        failed (scored with the fallback rating, counted in n_fallback)."""
        text = _SCALE_ECHO.sub(" ", response.text)
        p = parse_number(text, 1.0, 5.0)
        if p.ok and p.status == "ok" and text != response.text:
            p.status = "repaired"
        return Outcome(p.value, p.status, notes=[p.note, "scale echo removed" if text != response.text else ""])

    def used_score(self, prediction: Any) -> float:
        """The score an answer counts with: its own, else the fallback rating."""
        return float(self.cfg.fallback_rating) if prediction is None else float(prediction)

    def score(self, example: Example, outcome: Outcome) -> dict[str, float]:
        """abs_error = |score - rating| (the fallback rating for an answer without a score) and parsed."""
        return {"abs_error": abs(self.used_score(outcome.prediction) - example.data["rating"]),
                "parsed": 0.0 if outcome.prediction is None else 1.0}

    def truth(self, example: Example) -> dict[str, Any]:
        """The user's own rating of this aspect."""
        return {"rating": example.data["rating"]}

    def rating_of(self, record: SampleRecord) -> float:
        """The user's rating a record was scored against."""
        if isinstance(record.truth, dict) and "rating" in record.truth:
            return float(record.truth["rating"])
        return float(self.by_id[record.id].data["rating"])

    def per_aspect(self, records: Sequence[SampleRecord]) -> dict[str, dict[str, Any]]:
        """Every correlation and group count of each aspect's records, in the task's aspect order."""
        by: dict[str, list[SampleRecord]] = {}
        for r in records:
            by.setdefault(str(r.meta["aspect"]), []).append(r)
        return {a: three_levels([self.used_score(r.prediction) for r in rs], [self.rating_of(r) for r in rs],
                                [str(r.meta["user_id"]) for r in rs], [str(r.meta["movie_id"]) for r in rs])
                for a in self.slice_values("aspect", by) for rs in [by[a]]}

    def evaluated(self, records: Sequence[SampleRecord]) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
        """(per aspect, over the run) for these records, computed once per aggregation: over the run, each
        correlation is the mean over the run's aspects (NaN when it is undefined for any of them: a judge that gives
        one aspect a single score has no correlation there), the skipped groups summed."""
        if self._memo is not None and self._memo[0] is records:
            return self._memo[1], self._memo[2]
        per = self.per_aspect(records)
        out: dict[str, Any] = {name: float(np.mean([v[name] for v in per.values()])) if per else math.nan
                               for name in metric_names()}
        out["users_skipped"] = sum(v["users_skipped"] for v in per.values())
        out["pairs_skipped"] = sum(v["pairs_skipped"] for v in per.values())
        self._memo = (records, per, out)
        return per, out

    def meta_evaluation(self, records: Sequence[SampleRecord]) -> dict[str, Any]:
        """The corpus values over the run (see `evaluated`)."""
        return self.evaluated(records)[1]

    def run_facts(self, records: Iterable[SampleRecord]) -> dict[str, Any]:
        """`by_aspect`: the nine correlations and the group counts of each aspect (the paper's table rows);
        `judged`: what the prediction and the truth are; `summary`: the terminal's lines, one per aspect."""
        recs = records if isinstance(records, list) else list(records)
        per, _ = self.evaluated(recs)
        return {"by_aspect": per,
                "judged": "prediction = the judge's 1-5 score; truth = the user's own rating of that aspect",
                "summary": summary_lines(per)}


def _triple(v: dict[str, Any], level: str) -> str:
    vals = [v[f"{c}_{level}"] for c in COEFFICIENTS]
    return "/".join("NaN" if math.isnan(x) else f"{x:.3f}" for x in vals)


def summary_lines(per: dict[str, dict[str, Any]]) -> list[str]:
    """One terminal line per aspect (Pearson/Spearman/Kendall at each level, groups skipped), and why a NaN is one."""
    lines = ["judge vs users, pearson/spearman/kendall per aspect (metrics.json extra.by_aspect; the corpus metrics "
             "average the aspects):"]
    for a, v in per.items():
        lines.append(f"  {a}: dataset {_triple(v, 'dataset')} | user {_triple(v, 'user')} | pair {_triple(v, 'pair')}"
                     f" (n {v['n']}; skipped: {v['users_skipped']} users, {v['pairs_skipped']} pairs)")
    if any(math.isnan(v["pearson_dataset"]) for v in per.values()):
        lines.append("NaN: undefined, the judge gave every explanation of that aspect the same score (a constant "
                     "judge cannot be correlated with anything)")
    return lines
