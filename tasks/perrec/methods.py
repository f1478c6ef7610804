"""PerRecBench methods: pointwise, pairwise (heapsort, both orders), listwise, and model-free reference rows."""
from __future__ import annotations

import re
import string
from typing import Any, Callable, Generator, Optional

import numpy as np

from recbench.parsing import Parsed, parse_choice, parse_json, parse_number
from recbench.prompts import render
from recbench.task import Method
from recbench.types import Constraint, Example, MethodGen, Outcome, Request, Response

PKG = "recbench.tasks.perrec"
PAIR_CHOICES = ("[User A]", "[User B]")
RATING_CHOICES = ("1", "2", "3", "4", "5")


def worst_status(statuses: list[str]) -> str:
    """failed > repaired > ok."""
    return "failed" if "failed" in statuses else "repaired" if "repaired" in statuses else "ok"


def presentation_order(example: Example, seed: int) -> list[dict[str, Any]]:
    """The group's users in a seeded shuffled order, so position never leaks the ground truth."""
    users = example.data["users"]
    rng = np.random.default_rng([seed, *example.id.encode()])
    return [users[i] for i in rng.permutation(len(users))]


class PerRecMethod(Method):
    """Shared pieces: sampling, the system prompt, optional LLM-written user profiles."""

    def _messages(self, user_prompt: str) -> list[dict[str, str]]:
        return [{"role": "system", "content": render(PKG, "system.j2")}, {"role": "user", "content": user_prompt}]

    def _request(self, prompt: str, max_tokens: int, constraint: Optional[Constraint] = None,
                 purpose: str = "answer", seed_offset: int = 0) -> Request:
        return Request.chat(self._messages(prompt), self.sampling(max_tokens, seed_offset),
                            constraint=constraint if self.cfg.get("constrained", False) else None, purpose=purpose)

    def profiles(self, users: list[dict[str, Any]]) -> Generator[list[Request], list[Response], dict[str, str]]:
        """One profile request per user (cached, so shared across methods and runs); {} when profiles are off."""
        tcfg = self.task.cfg
        if not tcfg.profile:
            return {}
        reqs = [Request.chat([{"role": "user", "content": render(PKG, "profile.j2", history=u["history"][-tcfg.profile_history:])}],
                             self.sampling(tcfg.profile_max_tokens), purpose="profile") for u in users]
        resps = yield reqs
        return {u["user_id"]: r.text.strip() for u, r in zip(users, resps)}


class Pointwise(PerRecMethod):
    """Predict each user's rating; rank users by predicted rating minus their own average."""

    name = "pointwise"

    def run(self, example: Example) -> MethodGen:
        users = example.data["users"]
        profiles = yield from self.profiles(users)
        reqs = [self._request(render(PKG, "pointwise.j2", label="User", user=u, profile=profiles.get(u["user_id"]),
                                     query_title=example.data["query_title"]),
                              self.cfg.max_tokens, Constraint(kind="choice", choices=RATING_CHOICES)) for u in users]
        resps = yield reqs
        parsed = [parse_number(r.text, lo=1, hi=5) for r in resps]
        preds = {u["user_id"]: p.value for u, p in zip(users, parsed)}
        status = worst_status([p.status for p in parsed])
        order = None
        if status != "failed":
            order = [u["user_id"] for u in sorted(users, key=lambda u: -(preds[u["user_id"]] - u["avg_rating"]))]
        return Outcome(prediction={"order": order, "ratings": preds}, parse_status=status,  # type: ignore[arg-type]
                       details={"notes": [p.note for p in parsed if p.note]})


def heapsort_desc(items: list[Any], greater: Callable[[Any, Any], Generator]) -> Generator:
    """Heapsort whose comparisons are sub-generators (`yield from greater(a, b)` -> a ranks above b); best first."""
    a = list(items)

    def sift(root: int, end: int) -> Generator:
        while 2 * root + 1 < end:
            child = 2 * root + 1
            if child + 1 < end and (yield from greater(a[child + 1], a[child])):
                child += 1
            if (yield from greater(a[child], a[root])):
                a[root], a[child] = a[child], a[root]
                root = child
            else:
                return

    n = len(a)
    for start in range(n // 2 - 1, -1, -1):
        yield from sift(start, n)
    for end in range(n - 1, 0, -1):
        a[0], a[end] = a[end], a[0]
        yield from sift(0, end)
    return a[::-1]


class Pairwise(PerRecMethod):
    """Heapsort over the group; each comparison asks both orders and counts only when they agree."""

    name = "pairwise"

    def run(self, example: Example) -> MethodGen:
        users = presentation_order(example, self.seed)
        profiles = yield from self.profiles(users)
        q = example.data["query_title"]
        stats = {"comparisons": 0, "consistent": 0, "inconsistent": 0, "unparsed_answers": 0}
        statuses: list[str] = []
        constraint = Constraint(kind="choice", choices=PAIR_CHOICES)

        def greater(u: dict, v: dict) -> Generator[list[Request], list[Response], bool]:
            prompts = [render(PKG, "pairwise.j2", query_title=q, user_a=a, user_b=b,
                              profile_a=profiles.get(a["user_id"]), profile_b=profiles.get(b["user_id"]))
                       for a, b in ((u, v), (v, u))]
            resps = yield [self._request(p, self.cfg.max_tokens, constraint) for p in prompts]
            first, second = (parse_choice(r.text, PAIR_CHOICES) for r in resps)
            statuses.extend([first.status, second.status])
            stats["comparisons"] += 1
            stats["unparsed_answers"] += (not first.ok) + (not second.ok)
            if first.value == "[User A]" and second.value == "[User B]":
                stats["consistent"] += 1
                return True
            if first.value == "[User B]" and second.value == "[User A]":
                stats["consistent"] += 1
                return False
            stats["inconsistent"] += 1
            return False  # no consistent preference: keep the current order

        ranked = yield from heapsort_desc(users, greater)
        status = worst_status(statuses)
        order = None if status == "failed" else [u["user_id"] for u in ranked]
        return Outcome(prediction={"order": order}, parse_status=status, details=stats)  # type: ignore[arg-type]


LABELS = [f"User {c}" for c in string.ascii_uppercase]


def parse_ranking(text: str, labels: list[str]) -> Parsed:
    """A ranking of user labels from JSON {"ranking": [...]}, a JSON list, or label mentions in order."""
    norm = {re.sub(r"[^a-z0-9]", "", lab.lower()): lab for lab in labels}
    letters = {lab.split()[-1].lower(): lab for lab in labels}

    def to_label(x: Any) -> Optional[str]:
        k = re.sub(r"[^a-z0-9]", "", str(x).lower())
        return norm.get(k) or letters.get(k)

    js = parse_json(text, expect=(dict, list))
    raw: Optional[list] = None
    status, notes = js.status, [js.note] if js.note else []
    if js.ok:
        raw = js.value.get("ranking") if isinstance(js.value, dict) else js.value
        if isinstance(js.value, dict) and raw is None:
            raw = next((v for v in js.value.values() if isinstance(v, list)), None)
    if not isinstance(raw, list):
        found = sorted((m.start(), norm[re.sub(r"[^a-z0-9]", "", m.group(0).lower())])
                       for m in re.finditer(r"user\s*[a-z]\b", text, flags=re.I)
                       if re.sub(r"[^a-z0-9]", "", m.group(0).lower()) in norm)
        raw, status = [lab for _, lab in found], "repaired"
        notes.append("ranking read from label mentions")
    ranked: list[str] = []
    for x in raw:
        lab = to_label(x)
        if lab and lab not in ranked:
            ranked.append(lab)
    if not ranked:
        return Parsed(None, "failed", "no user label found")
    if len(ranked) < len(labels) or len(raw) != len(labels):
        status = "repaired"
        notes.append(f"incomplete or duplicated ranking ({len(ranked)}/{len(labels)} users): missing appended")
        ranked += [lab for lab in labels if lab not in ranked]
    return Parsed(ranked, status, "; ".join(notes))  # type: ignore[arg-type]


class Listwise(PerRecMethod):
    """The whole group in one prompt; the model returns a JSON ranking of user labels."""

    name = "listwise"

    def run(self, example: Example) -> MethodGen:
        users = presentation_order(example, self.seed)
        profiles = yield from self.profiles(users)
        labels = LABELS[: len(users)]
        shown = [{"label": lab, "user": u, "profile": profiles.get(u["user_id"])} for lab, u in zip(labels, users)]
        schema = {"type": "object", "properties": {"ranking": {"type": "array", "items": {"enum": labels},
                                                               "minItems": len(labels), "maxItems": len(labels)}},
                  "required": ["ranking"]}
        prompt = render(PKG, "listwise.j2", users=shown, query_title=example.data["query_title"])
        (resp,) = yield [self._request(prompt, self.cfg.max_tokens, Constraint.json_schema(schema))]
        parsed = parse_ranking(resp.text, labels)
        by_label = dict(zip(labels, users))
        order = [by_label[lab]["user_id"] for lab in parsed.value] if parsed.ok else None
        return Outcome(prediction={"order": order, "labels": dict(zip(labels, [u["user_id"] for u in users]))},
                       parse_status=parsed.status, details={"note": parsed.note})


class RandomOrder(Method):
    """Reference row: a seeded random ranking (expected PTC 0)."""

    name = "random"
    needs_backend = False

    def run(self, example: Example) -> MethodGen:
        rng = np.random.default_rng([self.seed, 1, *example.id.encode()])
        users = example.data["users"]
        return Outcome(prediction={"order": [users[i]["user_id"] for i in rng.permutation(len(users))]})
        yield  # pragma: no cover - makes this a generator


class BM25History(Method):
    """Reference row without an LLM: the user's relative ratings of the BM25-retrieved history items predict the preference."""

    name = "bm25_history"
    needs_backend = False

    def run(self, example: Example) -> MethodGen:
        users = example.data["users"]

        def score(u: dict) -> float:
            items = u["retrieved"]
            return float(np.mean([h["rating"] - u["avg_rating"] for h in items])) if items else 0.0

        scores = {u["user_id"]: score(u) for u in users}
        order = [u["user_id"] for u in sorted(users, key=lambda u: -scores[u["user_id"]])]
        return Outcome(prediction={"order": order, "scores": scores})
        yield  # pragma: no cover - makes this a generator
