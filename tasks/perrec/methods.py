"""PerRecBench methods: pointwise, pairwise (heapsort, both orders), listwise; the model-free reference rows live in
recbench.tasks.perrec.reference and the prompted base in recbench.tasks.perrec.prompting (both re-exported here)."""
from __future__ import annotations

import functools
import json
import re
import string
from typing import TYPE_CHECKING, Any, Callable, Generator, Optional, Sequence

import numpy as np

from recbench.api.parsing import Parsed, parse_choice, parse_json, parse_number
from recbench.api.types import Ahead, Constraint, Display, Example, MethodGen, Outcome, Request, Response
from recbench.api.variant import PLAIN, Variant
from recbench.tasks.perrec.prompting import (PAIR_CHOICES, PAIR_CONSTRAINT, PKG, RATING_CHOICES,  # noqa: F401
                                             RATING_CONSTRAINT, PerRecMethod, PerRecTaskView, aggregate_status,
                                             borda, majority, presentation_order, worst_status)
from recbench.tasks.perrec.reference import (AverageRating, BM25History, ItemAverage, RandomOrder,  # noqa: F401
                                             UserAverage)

if TYPE_CHECKING:
    from recbench.tasks.perrec.prefetch import Prefetch


class Pointwise(PerRecMethod):
    """Predict each user's rating; rank users by predicted rating minus their own average."""

    name = "pointwise"
    single_round = True  # one round of requests whatever the answers
    base_template = "pointwise"

    def prompt(self, example: Example, user: dict[str, Any], profile: Optional[str], template: int = 0) -> str:
        """The pointwise prompt for one user (`template` k > 0: the k-th paraphrase)."""
        q = example.data["query_title"]
        return self.render_prompt(template, label="User", user=user, profile=profile,
                                  query_title=q, block=self.user_block(user, "User", profile, q))

    def parse_rating(self, text: str) -> Parsed:
        """A constrained choice ("4 stars") as its rating (ok), else the first number of the answer, clamped to 1-5."""
        choice = RATING_CHOICES.get(text.strip())
        return Parsed(choice, "ok") if choice is not None else parse_number(self.answer_part(text), lo=1, hi=5)

    def run(self, example: Example, variant: Variant = PLAIN) -> MethodGen:
        t = variant.template  # the template audit's paraphrase (0 = the method's template)
        users = example.data["users"]
        profiles = yield from self.profiles(users, example)
        rng = np.random.default_rng([self.seed, 3, *example.id.encode()])
        shots = []
        for sx in self.shot_examples(example):
            su = sx.data["users"][int(rng.integers(len(sx.data["users"])))]
            shots.append((self.prompt(sx, su, self.profile_text(su, sx) if self._opts["profile"] and self._opts["profile_file"] else None, t),
                          self.shot_answer(f"{su['rating']:g}")))
        reqs = [r for u in users for r in self._samples(self.prompt(example, u, profiles.get(u["user_id"]), t),
                                                          self.cfg.max_tokens, RATING_CONSTRAINT, shots)]
        resps = yield reqs
        n = self.n_samples
        preds, statuses, notes = {}, [], []
        for k, u in enumerate(users):
            parsed = [self.parse_rating(r.text) for r in resps[k * n:(k + 1) * n]]
            vals = [p.value for p in parsed if p.ok]
            preds[u["user_id"]] = float(np.mean(vals)) if vals else None  # self-consistency: mean rating
            statuses.append(parsed[0].status if n == 1 else aggregate_status(parsed))
            notes += [p.note for p in parsed if p.note]
        status = worst_status(statuses)
        order = None
        if status != "failed":
            order = [u["user_id"] for u in sorted(users, key=lambda u: -(preds[u["user_id"]] - u["avg_rating"]))]
        return Outcome(prediction={"order": order, "ratings": preds}, parse_status=status,  # type: ignore[arg-type]
                       notes=notes)


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
    """Heapsort over the group; each comparison asks both orders and counts only when they agree
    (with self-consistency, each order's answer is the majority vote of its samples)."""

    name = "pairwise"
    base_template = "pairwise"

    def prompt(self, query_title: str, a: dict, b: dict, profile_a: Optional[str], profile_b: Optional[str],
               template: int = 0) -> str:
        """The pairwise prompt for users a ([User A]) and b ([User B]) (`template` k > 0: the k-th paraphrase)."""
        return self.render_prompt(template, query_title=query_title,
                                  user_a=a, user_b=b,
                                  profile_a=profile_a, profile_b=profile_b,
                                  block_a=self.user_block(a, PAIR_CHOICES[0], profile_a, query_title),
                                  block_b=self.user_block(b, PAIR_CHOICES[1], profile_b, query_title))

    def demonstrations(self, example: Example, template: int = 0) -> list[tuple[str, str]]:
        """Few-shot pairs from held-out groups: two random members and the gold choice."""
        rng = np.random.default_rng([self.seed, 3, *example.id.encode()])
        shots = []
        for sx in self.shot_examples(example):
            i, j = rng.choice(len(sx.data["users"]), size=2, replace=False)
            a, b = sx.data["users"][int(i)], sx.data["users"][int(j)]
            gold = PAIR_CHOICES[0] if a["relative_rating"] > b["relative_rating"] else PAIR_CHOICES[1]
            shots.append((self.prompt(sx.data["query_title"], a, b, None, None, template), self.shot_answer(gold)))
        return shots

    def run(self, example: Example, variant: Variant = PLAIN) -> MethodGen:
        t = variant.template  # the template audit's paraphrase (0 = the method's template)
        users = presentation_order(example, self.seed)
        profiles = yield from self.profiles(users, example)
        q = example.data["query_title"]
        shots = self.demonstrations(example, t)
        stats = {"comparisons": 0, "consistent": 0, "inconsistent": 0, "unparsed_answers": 0}
        order_pairs: list[list[bool]] = []  # per comparison with both answers read: did the first-shown user win, in order AB and BA
        statuses: list[str] = []
        constraint = PAIR_CONSTRAINT
        n, max_tokens = self.n_samples, self.cfg.max_tokens
        prompts_by_pair: dict[tuple[str, str], str] = {}

        def pair_prompt(a: dict, b: dict) -> str:
            key = (a["user_id"], b["user_id"])
            if key not in prompts_by_pair:
                prompts_by_pair[key] = self.prompt(q, a, b, profiles.get(a["user_id"]), profiles.get(b["user_id"]), t)
            return prompts_by_pair[key]

        def greater(u: dict, v: dict) -> Generator[list[Request], list[Response], bool]:
            prompts = [pair_prompt(u, v), pair_prompt(v, u)]
            resps = yield [r for p in prompts for r in self._samples(p, max_tokens, constraint, shots)]
            votes = []
            for half in (resps[:n], resps[n:]):
                parsed = [parse_choice(self.answer_part(r.text), PAIR_CHOICES) for r in half]
                statuses.append(parsed[0].status if n == 1 else aggregate_status(parsed))
                stats["unparsed_answers"] += sum(not p.ok for p in parsed)
                votes.append(majority([p.value for p in parsed]))
            first, second = votes
            stats["comparisons"] += 1
            if first is not None and second is not None:
                order_pairs.append([first == PAIR_CHOICES[0], second == PAIR_CHOICES[0]])
            if first == "[User A]" and second == "[User B]":
                stats["consistent"] += 1
                return True
            if first == "[User B]" and second == "[User A]":
                stats["consistent"] += 1
                return False
            stats["inconsistent"] += 1
            return False  # no consistent preference: keep the current order

        ranked = yield from heapsort_desc(users, greater)
        status = worst_status(statuses)
        order = None if status == "failed" else [u["user_id"] for u in ranked]
        return Outcome(prediction={"order": order}, parse_status=status,  # type: ignore[arg-type]
                       details=stats, order_pairs=order_pairs)


LABELS = [f"User {c}" for c in string.ascii_uppercase]


_NOT_ALNUM = re.compile(r"[^a-z0-9]")


@functools.lru_cache(maxsize=256)
def _label_keys(labels: tuple[str, ...]) -> tuple[dict[str, str], dict[str, str], Optional[frozenset]]:
    """How parse_ranking reads these labels: by normalised text, by last word, and (where every label reads as
    itself, so an answer that lists exactly the labels is taken as written) the set of labels."""
    norm = {_NOT_ALNUM.sub("", lab.lower()): lab for lab in labels}
    letters = {lab.split()[-1].lower(): lab for lab in labels}
    itself = all(norm[_NOT_ALNUM.sub("", lab.lower())] == lab for lab in labels) and len(set(labels)) == len(labels)
    return norm, letters, frozenset(labels) if itself else None


def _exact_ranking(text: str, labels: tuple[str, ...]) -> Optional[Parsed]:
    """What parse_ranking returns for a well-formed answer, read directly: the whole text is JSON {"ranking": [...]}
    (or a JSON list) naming every label once, exactly as written; None for any other answer."""
    wanted = _label_keys(labels)[2]
    if wanted is None:
        return None
    try:
        v = json.loads(text.strip())
    except ValueError:  # json.JSONDecodeError included: the general path reads it
        return None
    raw = v.get("ranking") if isinstance(v, dict) else v
    try:  # the labels, each once (equal sets of as many items): the general path maps each to itself
        if type(raw) is not list or len(raw) != len(labels) or set(raw) != wanted:
            return None
    except TypeError:  # an unhashable item (a JSON list or object)
        return None
    return Parsed(raw, "ok", "")


def parse_ranking(text: str, labels: list[str]) -> Parsed:
    """A ranking of user labels from JSON {"ranking": [...]}, a JSON list, or label mentions in order."""
    key = tuple(labels)
    exact = _exact_ranking(text, key)
    return exact if exact is not None else _read_ranking(text, key)


def _read_ranking(text: str, labels: tuple[str, ...]) -> Parsed:
    """parse_ranking for any answer: JSON read leniently, labels matched loosely, missing ones appended."""
    norm, letters, _ = _label_keys(labels)

    def to_label(x: Any) -> Optional[str]:
        k = _NOT_ALNUM.sub("", str(x).lower())
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


@functools.lru_cache(maxsize=256)
def ranking_constraint(labels: tuple[str, ...]) -> Constraint:
    """The JSON-schema constraint of a ranking of these labels, built once per label list (Constraint is frozen)."""
    schema = {"type": "object", "properties": {"ranking": {"type": "array", "items": {"enum": list(labels)},
                                                           "minItems": len(labels), "maxItems": len(labels)}},
              "required": ["ranking"]}
    return Constraint.json_schema(schema)


class Listwise(PerRecMethod):
    """The whole group in one prompt; the model returns a JSON ranking of user labels (self-consistency: Borda)."""

    name = "listwise"
    single_round = True  # one round of requests whatever the answers
    base_template = "listwise"
    variants = frozenset({"order", "template"})  # audit.orders=K re-asks with K display orders, audit.templates=K
    # with K paraphrases
    _ahead: Optional["Prefetch"] = None  # the prompts built ahead, from the loop's last call of prefetch()

    def prompt(self, example: Example, users: list[dict], profiles: dict[str, str],
               template: int = 0) -> tuple[str, list[str]]:
        """The listwise prompt over users in the given order, and their labels (`template` k > 0: the k-th
        paraphrase)."""
        labels = LABELS[: len(users)]
        q = example.data["query_title"]
        shown_profiles = [profiles.get(u["user_id"]) for u in users] if profiles else [None] * len(users)
        shown = [{"label": lab, "user": u, "profile": p, "block": self.user_block(u, lab, p, q)}
                 for lab, u, p in zip(labels, users, shown_profiles)]
        if not template and self._plain is not None:  # render_prompt's own first choice, called without its frame
            return self._plain(users=shown, query_title=q), labels
        return self.render_prompt(_variant=template, users=shown, query_title=q), labels

    def demonstrations(self, example: Example, template: int = 0) -> list[tuple[str, str]]:
        """Few-shot held-out groups (seeded presentation order) with their gold JSON ranking."""
        shots = []
        for sx in self.shot_examples(example):
            su = presentation_order(sx, self.seed)
            prompt, labels = self.prompt(sx, su, {}, template)
            by_id = {u["user_id"]: lab for u, lab in zip(su, labels)}
            gold = [by_id[u["user_id"]] for u in sorted(su, key=lambda u: -u["relative_rating"])]
            shots.append((prompt, self.shot_answer(json.dumps({"ranking": gold}))))
        return shots

    def built(self, example: Example) -> tuple[str, list[str], list[str]]:
        """The plain prompt of an example, its labels and its users' ids in display order (what prefetch builds)."""
        users = presentation_order(example, self.seed)
        prompt, labels = self.prompt(example, users, {}, 0)
        return prompt, labels, [u["user_id"] for u in users]

    def prefetch(self, examples: Sequence[Example]) -> Optional[Ahead]:
        """The plain prompts of these examples built ahead in a forked child (prefetch.py), where it pays: enough
        examples and no per-user profiles to ask; the loop closes it. Taken by the plain runs (`_ahead`)."""
        from recbench.tasks.perrec import prefetch

        pays = not self._opts["profile"] and prefetch.available(len(examples))
        self._ahead = prefetch.Prefetch(self.built, examples, 0) if pays else None
        return self._ahead

    def run(self, example: Example, variant: Variant = PLAIN) -> MethodGen:
        order_k, t = variant.order, variant.template  # t: the template audit's paraphrase (0 = the method's template)
        pre = self._ahead.take(example.id) if self._ahead is not None and order_k is None and not t else None
        if pre is not None:
            prompt, labels, ids = pre
        else:
            users = presentation_order(example, self.seed, order_k or 0)
            profiles = (yield from self.profiles(users, example)) if self._opts["profile"] else {}
            prompt, labels = self.prompt(example, users, profiles, t)
            ids = [u["user_id"] for u in users]
        resps = yield self._samples(prompt, self._opts["max_tokens"], ranking_constraint(tuple(labels)),
                                    self.demonstrations(example, t) if self.n_shots else [])
        return self.outcome(resps, labels, ids, order_k is not None)

    def outcome(self, resps: list[Response], labels: list[str], ids: list[str], audited: bool) -> Outcome:
        """The Outcome of the answers to one listwise prompt over users `ids` in display order (`audited`: with the
        display order, for the order audit). Outside run, so run's frame holds no closure cells while it waits
        for the answers."""
        parsed_all = [parse_ranking(self.answer_part(r.text), labels) for r in resps]
        if len(parsed_all) == 1:
            parsed = parsed_all[0]
        else:  # self-consistency: Borda count over the parsed rankings
            good = [p.value for p in parsed_all if p.ok]
            parsed = Parsed(borda(good, labels) if good else None, aggregate_status(parsed_all),  # type: ignore[arg-type]
                            f"borda over {len(good)}/{len(parsed_all)} parsed samples")
        by_label = dict(zip(labels, ids))
        order = [by_label[lab] for lab in parsed.value] if parsed.ok else None
        # audited: the display order (slot order) and the ranking, for the order audit
        display = Display(ids, order) if audited else None
        return Outcome(prediction={"order": order, "labels": by_label}, parse_status=parsed.status,
                       notes=[parsed.note], display=display)
