"""The two judge protocols: a rubric of aspects scored 1-5 per answer (`Pointwise`), and one answer against a
reference run's answer to the same example, asked in both orders (`Pairwise`). Each renders its packaged template
(recbench/judges/templates/<protocol>.j2, or the user's `judge.template`), asks with a JSON-schema constraint (guided
decoding where the backend has it), and reads the answer with a parse status: a malformed verdict is recorded as
failed with its problems, never turned into a score. A protocol's config name is its class name in lower case."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar, Optional

from recbench.api.errors import ConfigError
from recbench.api.judge_metrics import WIN_RATE, judge_metric_name
from recbench.api.parsing import parse_json
from recbench.api.prompts import get_template, render
from recbench.api.types import Constraint, Example, MethodGen, Outcome, Request, Response, SamplingParams
from recbench.stats.judging import both_orders_verdict

PKG = "recbench.judges"
#: the labels a pairwise judge may answer
LABELS = ("A", "B", "tie")
#: a pairwise verdict (both orders combined) as the judged answer's per-example win rate: ties count half
WIN_VALUE = {"win": 1.0, "tie": 0.5, "loss": 0.0}


@dataclass(frozen=True)
class Setup:
    """What one judge is asked with: the rubric (aspect -> definition), the template (a packaged name or a path) and
    the sampling parameters of every judge request."""

    rubric: tuple[tuple[str, str], ...]
    template: str
    sampling: SamplingParams

    @property
    def aspects(self) -> list[str]:
        """The rubric's aspects, in order."""
        return [a for a, _ in self.rubric]


def words(text: str) -> int:
    """An answer's length in words (what the length-bias audit correlates with)."""
    return len(str(text or "").split())


class Protocol:
    """How one answer is put to the judge and its answers read; `ask` is the judge method's request generator."""

    #: the variables its template gets besides `rubric` and `aspects`
    variables: ClassVar[tuple[str, ...]] = ()

    def __init__(self, setup: Setup):
        self.setup = setup

    @classmethod
    def key(cls) -> str:
        """The protocol's name in the config (judge.protocol)."""
        return cls.__name__.lower()

    def render(self, **variables: Any) -> str:
        """The judge prompt from the template."""
        return render(PKG, self.setup.template, rubric=dict(self.setup.rubric), aspects=self.setup.aspects,
                      **variables)

    def check_template(self) -> None:
        """Refuse a template that cannot be read, or that does not name every aspect of the rubric (rendered with
        placeholder texts): before anything runs."""
        try:
            get_template(PKG, self.setup.template)
            text = self.render(**{v: f"<{v}>" for v in self.variables})
        except Exception as e:  # noqa: BLE001 - a missing file, a syntax error, an unknown variable: one line
            raise ConfigError(f"judge.template={self.setup.template}: {type(e).__name__}: {e}") from None
        missing = [a for a in self.setup.aspects if not re.search(rf"\b{re.escape(a)}\b", text)]
        if missing:
            raise ConfigError(f"judge.template={self.setup.template} does not name the rubric aspect(s) "
                              f"{', '.join(missing)}: the judge would never be asked about them. Name them in the "
                              "template (e.g. loop over `rubric`), or drop them with judge.rubric=[...]")

    def request(self, text: str, purpose: str, example_id: str) -> Request:
        """One judge request: the prompt as one user message, the judge's sampling, the answer's JSON schema."""
        return Request.chat([{"role": "user", "content": text}], self.setup.sampling,
                            constraint=Constraint.json_schema(self.schema()), purpose=purpose, example_id=example_id)

    def schema(self) -> dict[str, Any]:
        """The JSON schema of a judge answer."""
        raise NotImplementedError

    def ask(self, example: Example) -> MethodGen:
        """Generator: the judge requests of one example, then its Outcome."""
        raise NotImplementedError

    def metrics(self, outcome: Outcome) -> dict[str, float]:
        """The judged metrics of one example (NaN where the judge's answer failed)."""
        raise NotImplementedError


def _json_object(text: str) -> tuple[Optional[dict], str, list[str]]:
    """(the answer's JSON object or None, its parse status, problems)."""
    p = parse_json(text, dict)
    if not p.ok:
        return None, "failed", [f"not JSON: {str(text).strip()[:60]!r}"]
    return p.value, p.status, []


def _score(v: Any) -> Optional[int]:
    """A whole score 1-5 from a JSON value (4, 4.0 or '4'), else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, str) and v.strip().isdigit():
        v = int(v.strip())
    if isinstance(v, (int, float)) and float(v) == int(v) and 1 <= int(v) <= 5:
        return int(v)
    return None


def parse_scores(text: str, aspects: list[str]) -> tuple[dict[str, Optional[int]], str, str, list[str]]:
    """(scores by aspect, None where unread; reason; parse status; problems) of a pointwise judge answer: failed when
    it is not a JSON object, an aspect is missing, or a score is not a whole number 1-5."""
    d, status, problems = _json_object(text)
    if d is None:
        return dict.fromkeys(aspects), "", status, problems
    scores: dict[str, Optional[int]] = {}
    for a in aspects:
        scores[a] = _score(d.get(a))
        if a not in d:
            problems.append(f"aspect '{a}' missing")
        elif scores[a] is None:
            problems.append(f"{a}: {d[a]!r} is not a whole score 1-5")
    return scores, str(d.get("reason") or ""), "failed" if problems else status, problems


def parse_winner(text: str) -> tuple[Optional[str], str, str, list[str]]:
    """(label A / B / tie or None; reason; parse status; problems) of a pairwise judge answer."""
    d, status, problems = _json_object(text)
    if d is None:
        return None, "", status, problems
    raw = d.get("winner")
    label = next((x for x in LABELS if isinstance(raw, str) and raw.strip().lower() == x.lower()), None)
    if label is None:
        problems.append(f"winner: {raw!r} is not one of A, B, tie" if "winner" in d else "winner missing")
    return label, str(d.get("reason") or ""), "failed" if problems else status, problems


class Pointwise(Protocol):
    """Each answer scored 1-5 on every aspect of the rubric, with a reason."""

    variables = ("context", "answer")

    def schema(self) -> dict[str, Any]:
        """{aspect: integer 1-5, ..., reason: string}, all required."""
        props = {a: {"type": "integer", "minimum": 1, "maximum": 5} for a in self.setup.aspects}
        return {"type": "object", "properties": {**props, "reason": {"type": "string"}},
                "required": [*self.setup.aspects, "reason"]}

    def ask(self, example: Example) -> MethodGen:
        """One request; the scores, reason and problems."""
        answer = example.data["answer"]
        [resp] = yield [self.request(self.render(context=example.data["context"], answer=answer), "judge",
                                     example.id)]
        scores, reason, status, problems = parse_scores(resp.text, self.setup.aspects)
        return Outcome(scores, status, notes=problems,  # type: ignore[arg-type]
                       details={"reason": reason, "problems": problems, "answer": answer,
                                "answer_length": words(answer)})

    def metrics(self, outcome: Outcome) -> dict[str, float]:
        """judge_<aspect> per aspect; all NaN when the answer failed (never a partial verdict)."""
        ok = outcome.parse_status != "failed"
        return {judge_metric_name(a): float(v) if ok and v is not None else float("nan")
                for a, v in (outcome.prediction or {}).items()}


class Pairwise(Protocol):
    """The run's answer against the reference run's, asked in both orders (the run's answer as A, then as B); a win
    only when both orders agree, else a tie."""

    variables = ("context", "answer_a", "answer_b")

    def schema(self) -> dict[str, Any]:
        """{winner: A | B | tie, reason: string}, both required."""
        return {"type": "object", "properties": {"winner": {"type": "string", "enum": list(LABELS)},
                                                 "reason": {"type": "string"}}, "required": ["winner", "reason"]}

    def ask(self, example: Example) -> MethodGen:
        """Two requests in one round (first and swapped order); the combined verdict and each order's reading."""
        ctx, answer, ref = example.data["context"], example.data["answer"], example.data["reference_answer"]
        first = self.render(context=ctx, answer_a=answer, answer_b=ref)
        swapped = self.render(context=ctx, answer_a=ref, answer_b=answer)
        resps: list[Response] = yield [self.request(first, "judge_first", example.id),
                                       self.request(swapped, "judge_swapped", example.id)]
        orders = []
        for name, at, resp in (("first", "A", resps[0]), ("swapped", "B", resps[1])):
            label, reason, status, problems = parse_winner(resp.text)
            orders.append({"order": name, "run_answer_at": at, "winner": label, "reason": reason,
                           "parse_status": status, "problems": problems})
        problems = [f"{o['order']} order: {p}" for o in orders for p in o["problems"]]
        failed = any(o["winner"] is None for o in orders)
        verdict = None if failed else both_orders_verdict(orders[0]["winner"], orders[1]["winner"])
        status = "failed" if failed else ("repaired" if "repaired" in {o["parse_status"] for o in orders} else "ok")
        return Outcome(verdict, status, notes=problems,  # type: ignore[arg-type]
                       details={"reason": " / ".join(o["reason"] for o in orders), "problems": problems,
                                "answer": answer, "answer_length": words(answer), "orders": orders,
                                "reference_answer": ref, "reference_length": words(ref)})

    def metrics(self, outcome: Outcome) -> dict[str, float]:
        """judge_win_rate: 1 win, 0.5 tie, 0 loss; NaN when either order failed."""
        return {WIN_RATE.name: WIN_VALUE.get(outcome.prediction, float("nan"))}  # type: ignore[arg-type]


#: the protocols by config name (judge.protocol)
PROTOCOLS: dict[str, type[Protocol]] = {p.key(): p for p in (Pointwise, Pairwise)}
