"""PerRecBench methods: pointwise, pairwise (heapsort, both orders), listwise, and model-free reference rows."""
from __future__ import annotations

import dataclasses
import functools
import json
import re
import string
from collections import Counter
from typing import Any, Callable, Generator, Optional, Protocol, Sequence

import numpy as np

from recbench.api.parsing import Parsed, parse_choice, parse_json, parse_number
from recbench.api.prompts import get_template, render
from recbench.api.task import Method, ReferenceMethod, TaskView
from recbench.tasks.perrec import settings
from recbench.api.types import Constraint, Display, Example, MethodGen, Outcome, Request, Response

PKG = "recbench.tasks.perrec"
PAIR_CHOICES = ("[User A]", "[User B]")
PAIR_CONSTRAINT = Constraint(kind="choice", choices=PAIR_CHOICES)
#: constrained pointwise answers and the rating each stands for. "N stars", not bare digits: scored by likelihood,
#: SmolLM2-135M picks a bare "1" for every prompt (the start of a numbered list) but spreads over "2 stars".."4 stars".
RATING_CHOICES = {"1 star": 1.0, "2 stars": 2.0, "3 stars": 3.0, "4 stars": 4.0, "5 stars": 5.0}
RATING_CONSTRAINT = Constraint(kind="choice", choices=tuple(RATING_CHOICES))
_LABEL_SLOT = "\x00label\x00"  # stands for the label while a user block is rendered once for every label
_BLOCKS: dict[tuple, tuple[dict, str]] = {}  # (id(user), profile, query) -> (user, block with _LABEL_SLOT)
_MAX_BLOCKS = 200_000


def _fill(skeleton: str, slots: dict[str, str], variables: dict[str, Any]) -> str:
    """A template skeleton with each placeholder replaced by its variable's value."""
    for k, slot in slots.items():
        skeleton = skeleton.replace(slot, variables[k])
    return skeleton


def worst_status(statuses: list[str]) -> str:
    """failed > repaired > ok."""
    return "failed" if "failed" in statuses else "repaired" if "repaired" in statuses else "ok"


def presentation_order(example: Example, seed: int, order: int = 0) -> list[dict[str, Any]]:
    """The group's users in a seeded shuffled order, so position never leaks the ground truth; `order` k > 0 is the
    order audit's k-th alternative display order (order 0 is the usual one, so caches and results do not change)."""
    users = example.data["users"]
    return [users[i] for i in _permutation(seed, example.id, int(order or 0), len(users))]


@functools.lru_cache(maxsize=65536)
def _permutation(seed: int, example_id: str, order: int, n: int) -> tuple[int, ...]:
    """The seeded display permutation of presentation_order (computed once per example, shared by the methods)."""
    rng = np.random.default_rng([seed, *example_id.encode()] if not order else [seed, 9, order, *example_id.encode()])
    return tuple(int(i) for i in rng.permutation(n))


class PerRecTaskView(TaskView, Protocol):
    """What PerRecBench's prompted methods need of their task (recbench.tasks.perrec.task.PerRecTask provides it)."""

    @property
    def released(self) -> bool:
        """True when the data is the official released JSON files."""

    def heldout(self) -> list[Example]:
        """Held-out groups for few-shot demonstrations ([] when the data has none)."""

    def profile_table(self) -> dict[str, str]:
        """Profiles by 'user' or 'user@query_item' (task.profile_file or the released profiles)."""


class PerRecMethod(Method[PerRecTaskView]):
    """Shared pieces: sampling, system prompt, optional profiles, and the prompting variants (method config):
    `cot` (chain-of-thought templates; the answer follows "Answer:"), `shots` (few-shot from held-out groups,
    seeded), `samples` + `temperature` (self-consistency: n samples aggregated), `template` (a template file),
    `adapter` (a LoRA adapter name/path sent with every answer request, for backends that switch adapters per request).

    Config values are read once per method (cached properties); each user block is rendered once per example
    and query (`user_block`), so pairwise comparisons only fill the outer template."""

    base_template: str = ""
    settings_rules = settings.PROMPTED  # valid values of the method keys, checked before anything is loaded
    conf_defaults = True  # every key is read (conf/method/perrec/<name>.yaml): a hand-built config gets the rest there
    _skeleton: Optional[tuple] = ()  # () = not built yet, None = render every prompt (see render_prompt)

    # ---- variants (read once) -------------------------------------------------------------------
    @functools.cached_property
    def cot(self) -> bool:
        """Chain-of-thought prompting on."""
        return bool(self.cfg.cot)

    @functools.cached_property
    def n_samples(self) -> int:
        """Self-consistency sample count (1 = off)."""
        return int(self.cfg.samples)

    @functools.cached_property
    def n_shots(self) -> int:
        """Few-shot demonstrations per prompt (0 = zero-shot)."""
        return int(self.cfg.shots)

    @functools.cached_property
    def _template_name(self) -> str:
        return self.cfg.template or f"{self.base_template}{'_cot' if self.cot else ''}.j2"

    @functools.cached_property
    def _opts(self) -> dict[str, Any]:
        """The method and task settings the hot path needs, read once."""
        t = self.cfg.temperature
        tcfg = self.task.cfg
        return {"temperature": None if t is None else float(t), "max_tokens": self.cfg.max_tokens,
                "constrained": bool(self.cfg.constrained) and not self.cot,
                "adapter": self.cfg.adapter, "system": render(PKG, "system.j2"),
                "profile": bool(tcfg.profile), "profile_file": tcfg.profile_file,
                "released": bool(self.task.released)}

    def template(self) -> str:
        """The configured template file, else <method>.j2 or <method>_cot.j2."""
        return self._template_name

    def template_files(self) -> list[str]:
        """The template and its shipped paraphrases (<stem>_t1.j2, ...): audit.templates=K asks with the first K."""
        from recbench.audits.templates import variant_files

        return variant_files(PKG, self._template_name)

    def render_prompt(self, _fast: tuple[str, ...] = (), _variant: int = 0, **variables: Any) -> str:
        """The method's prompt template rendered with the given variables. `_fast` names string variables the
        packaged template only prints: the template is then rendered once per method with placeholders for them
        and filled in by string replacement (checked against a real render on first use; any mismatch, a custom
        template or a placeholder-like value falls back to rendering). `_variant` k > 0: the template audit's k-th
        paraphrase (<stem>_tk.j2), always rendered."""
        if _variant:
            from recbench.audits.templates import variant_name

            return render(PKG, variant_name(self._template_name, _variant), **variables)
        skel = self._skeleton if _fast and not self.cfg.template else None
        if skel is not None and not any("\x00" in variables[k] for k in _fast):
            if not skel:  # first use: build, then check against a real render
                slots = {k: f"\x00{k}\x00" for k in _fast}
                text = render(PKG, self._template_name, **{**variables, **slots})
                real = render(PKG, self._template_name, **variables)
                ok = _fill(text, slots, variables) == real
                self._skeleton = (text, slots) if ok else None
                return real
            text, slots = skel
            return _fill(text, slots, variables)
        return render(PKG, self._template_name, **variables)

    def user_block(self, user: dict[str, Any], label: str, profile: Optional[str], query_title: str) -> str:
        """One user's block (_user_block.j2, without its final newline) under `label`. Rendered once per (user,
        profile, query) with a label placeholder and relabelled, so an example renders each user once and the
        pointwise, pairwise and listwise methods of one process share the blocks."""
        key = (id(user), profile, query_title)
        got = _BLOCKS.get(key)
        if got is None or got[0] is not user:  # the user object itself is kept, so an id is never reused
            if len(_BLOCKS) > _MAX_BLOCKS:
                _BLOCKS.clear()
            body = get_template(PKG, "_user_block.j2").render(label=_LABEL_SLOT, user=user, profile=profile,
                                                               query_title=query_title)
            got = _BLOCKS[key] = (user, body)
        body = got[1]
        if body.startswith(_LABEL_SLOT):
            text = label + body[len(_LABEL_SLOT):]
        else:  # a template that does not open with the label: render it with the real one
            text = get_template(PKG, "_user_block.j2").render(label=label, user=user, profile=profile,
                                                               query_title=query_title)
        return text[:-1] if text.endswith("\n") else text

    def answer_part(self, text: str) -> str:
        """With chain of thought, the text after the last 'Answer:' (the whole text if there is none)."""
        if not self.cot:
            return text
        m = list(re.finditer(r"(?:final\s+)?answer\s*[:：]", text, flags=re.I))
        return text[m[-1].end():] if m else text

    def shot_answer(self, answer: str) -> str:
        """How a demonstration's gold answer is written (matches the template's requested format)."""
        return f"Answer: {answer}" if self.cot else answer

    def shot_examples(self, example: Example) -> list[Example]:
        """n held-out groups drawn with a seed (per example), for few-shot demonstrations."""
        if not self.n_shots:
            return []
        pool = self.task.heldout()
        if not pool:
            raise ValueError("few-shot prompting needs held-out groups: set task.heldout_file (recbench format) "
                             "or provide held_out-*.json (released format)")
        rng = np.random.default_rng([self.seed, 2, *example.id.encode()])
        return [pool[i] for i in rng.choice(len(pool), size=min(self.n_shots, len(pool)), replace=False)]

    # ---- requests ---------------------------------------------------------------------------
    def _sampling(self, max_tokens: int, seed_offset: int = 0):
        sp = self.sampling(max_tokens, seed_offset)
        t = self._opts["temperature"]
        return sp if t is None else dataclasses.replace(sp, temperature=t)

    def _messages(self, user_prompt: str, shots: Sequence[tuple[str, str]] = ()) -> list[dict[str, str]]:
        msgs = [{"role": "system", "content": self._opts["system"]}]
        for q, a in shots:
            msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
        return msgs + [{"role": "user", "content": user_prompt}]

    def _request(self, prompt: str, max_tokens: int, constraint: Optional[Constraint] = None,
                 purpose: str = "answer", seed_offset: int = 0, shots: Sequence[tuple[str, str]] = ()) -> Request:
        o = self._opts
        return Request.chat(self._messages(prompt, shots), self._sampling(max_tokens, seed_offset),
                            constraint=constraint if o["constrained"] else None, purpose=purpose,
                            adapter=o["adapter"])  # per-request LoRA (vllm); hf: model.backend.adapter

    def _samples(self, prompt: str, max_tokens: int, constraint: Optional[Constraint] = None,
                 shots: Sequence[tuple[str, str]] = ()) -> list[Request]:
        """The prompt once, or n times with seeds seed+0..n-1 for self-consistency."""
        return [self._request(prompt, max_tokens, constraint, seed_offset=j, shots=shots) for j in range(self.n_samples)]

    def profile_text(self, user: dict[str, Any], example: Example) -> Optional[str]:
        """A profile from task.profile_file (written by another model, or the released userid2profile.json)."""
        table = self.task.profile_table()
        return table.get(f"{user['user_id']}@{example.data['query_item']}") or table.get(user["user_id"])

    def profiles(self, users: list[dict[str, Any]], example: Optional[Example] = None
                 ) -> Generator[list[Request], list[Response], dict[str, str]]:
        """Profiles per user: from task.profile_file (or the released userid2profile.json), else one request per user to this model
        (cached, so shared across methods and runs); {} when profiles are off."""
        o = self._opts
        if not o["profile"]:
            return {}
        tcfg = self.task.cfg
        if (o["profile_file"] or o["released"]) and example is not None:
            return {u["user_id"]: p for u in users if (p := self.profile_text(u, example))}
        reqs = [Request.chat([{"role": "user", "content": render(PKG, "profile.j2", history=u["history"][-tcfg.profile_history:])}],
                             self.sampling(tcfg.profile_max_tokens), purpose="profile") for u in users]
        resps = yield reqs
        return {u["user_id"]: r.text.strip() for u, r in zip(users, resps)}


def aggregate_status(parsed: list[Parsed]) -> str:
    """Status of an aggregated answer: ok if every sample parsed cleanly, failed if none parsed, else repaired."""
    if all(p.status == "ok" for p in parsed):
        return "ok"
    return "failed" if not any(p.ok for p in parsed) else "repaired"


def majority(values: list[Any]) -> Optional[Any]:
    """The strict plurality value among non-None values (None on a tie or when empty)."""
    c = Counter(v for v in values if v is not None).most_common()
    if not c or (len(c) > 1 and c[0][1] == c[1][1]):
        return None
    return c[0][0]


def borda(rankings: list[list[str]], labels: list[str]) -> list[str]:
    """Borda count over full rankings (n-1 points for first place ...); ties keep label order."""
    points = {lab: 0 for lab in labels}
    for rk in rankings:
        for pos, lab in enumerate(rk):
            points[lab] += len(labels) - 1 - pos
    return sorted(labels, key=lambda lab: (-points[lab], labels.index(lab)))


class Pointwise(PerRecMethod):
    """Predict each user's rating; rank users by predicted rating minus their own average."""

    name = "pointwise"
    single_round = True  # one round of requests whatever the answers
    base_template = "pointwise"

    def prompt(self, example: Example, user: dict[str, Any], profile: Optional[str], template: int = 0) -> str:
        """The pointwise prompt for one user (`template` k > 0: the k-th paraphrase)."""
        q = example.data["query_title"]
        return self.render_prompt(("query_title", "block"), template, label="User", user=user, profile=profile,
                                  query_title=q, block=self.user_block(user, "User", profile, q))

    def parse_rating(self, text: str) -> Parsed:
        """A constrained choice ("4 stars") as its rating (ok), else the first number of the answer, clamped to 1-5."""
        choice = RATING_CHOICES.get(text.strip())
        return Parsed(choice, "ok") if choice is not None else parse_number(self.answer_part(text), lo=1, hi=5)

    def run(self, example: Example, template: Optional[int] = None) -> MethodGen:
        t = int(template or 0)  # the template audit's paraphrase (0 = the method's template)
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
                       details={"notes": notes})


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
        return self.render_prompt(("query_title", "block_a", "block_b"), template, query_title=query_title,
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

    def run(self, example: Example, template: Optional[int] = None) -> MethodGen:
        t = int(template or 0)  # the template audit's paraphrase (0 = the method's template)
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
    """The whole group in one prompt; the model returns a JSON ranking of user labels (self-consistency: Borda)."""

    name = "listwise"
    single_round = True  # one round of requests whatever the answers
    base_template = "listwise"
    order_auditable = True  # audit.orders=K re-asks with K display orders (recbench.audits.order)

    def prompt(self, example: Example, users: list[dict], profiles: dict[str, str],
               template: int = 0) -> tuple[str, list[str]]:
        """The listwise prompt over users in the given order, and their labels (`template` k > 0: the k-th
        paraphrase)."""
        labels = LABELS[: len(users)]
        q = example.data["query_title"]
        shown = [{"label": lab, "user": u, "profile": (p := profiles.get(u["user_id"])),
                  "block": self.user_block(u, lab, p, q)} for lab, u in zip(labels, users)]
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

    def run(self, example: Example, order: Optional[int] = None, template: Optional[int] = None) -> MethodGen:
        order_k, t = order, int(template or 0)  # t: the template audit's paraphrase (0 = the method's template)
        users = presentation_order(example, self.seed, order_k or 0)
        profiles = yield from self.profiles(users, example)
        prompt, labels = self.prompt(example, users, profiles, t)
        schema = {"type": "object", "properties": {"ranking": {"type": "array", "items": {"enum": labels},
                                                               "minItems": len(labels), "maxItems": len(labels)}},
                  "required": ["ranking"]}
        resps = yield self._samples(prompt, self.cfg.max_tokens, Constraint.json_schema(schema),
                                    self.demonstrations(example, t))
        parsed_all = [parse_ranking(self.answer_part(r.text), labels) for r in resps]
        if len(parsed_all) == 1:
            parsed = parsed_all[0]
        else:  # self-consistency: Borda count over the parsed rankings
            good = [p.value for p in parsed_all if p.ok]
            parsed = Parsed(borda(good, labels) if good else None, aggregate_status(parsed_all),  # type: ignore[arg-type]
                            f"borda over {len(good)}/{len(parsed_all)} parsed samples")
        by_label = dict(zip(labels, users))
        order = [by_label[lab]["user_id"] for lab in parsed.value] if parsed.ok else None
        # audited: the display order (slot order) and the ranking, for recbench.audits.order
        display = Display([u["user_id"] for u in users], order) if order_k is not None else None
        return Outcome(prediction={"order": order, "labels": dict(zip(labels, [u["user_id"] for u in users]))},
                       parse_status=parsed.status, details={"note": parsed.note}, display=display)


class RandomOrder(ReferenceMethod[TaskView]):
    """Reference row: a seeded random ranking (expected PTC 0); method.seed, or the run seed when null."""

    name = "random"
    settings_rules = settings.RANDOM
    conf_defaults = True  # a hand-built {"name": "random"} gets seed: null from conf/method/perrec/random.yaml

    def predict(self, example: Example) -> Outcome:
        """The group's users in a seeded random order."""
        seed = self.cfg.seed
        rng = np.random.default_rng([self.seed if seed is None else int(seed), 1, *example.id.encode()])
        users = example.data["users"]
        return Outcome(prediction={"order": [users[i]["user_id"] for i in rng.permutation(len(users))]})


class BM25History(ReferenceMethod[TaskView]):
    """Reference row without an LLM: the user's relative ratings of the BM25-retrieved history items predict the preference."""

    name = "bm25_history"

    def predict(self, example: Example) -> Outcome:
        """Users by the mean relative rating of their BM25-retrieved history items, highest first."""
        users = example.data["users"]

        def score(u: dict) -> float:
            items = u["retrieved"]
            return float(np.mean([h["rating"] - u["avg_rating"] for h in items])) if items else 0.0

        scores = {u["user_id"]: score(u) for u in users}
        order = [u["user_id"] for u in sorted(users, key=lambda u: -scores[u["user_id"]])]
        return Outcome(prediction={"order": order, "scores": scores})


class AverageRating(ReferenceMethod[TaskView]):
    """Rating reference row without a model: predict one average for every user, either the user's own average
    (`source="user"`: the rank order is then a seeded tie-break) or the query item's average rating by users
    outside the group (`source="item"`)."""

    source: str = "user"  # "user" | "item"

    def predict(self, example: Example) -> Outcome:
        """One average rating for every user; users by predicted minus own average rating (seeded tie order)."""
        users = presentation_order(example, self.seed)
        if self.source == "user":
            preds = {u["user_id"]: float(u["avg_rating"]) for u in users}
        else:
            item_avg = float(example.data["item_avg_rating"])
            preds = {u["user_id"]: item_avg for u in users}
        order = [u["user_id"] for u in sorted(users, key=lambda u: -(preds[u["user_id"]] - u["avg_rating"]))]
        return Outcome(prediction={"order": order, "ratings": preds})


class UserAverage(AverageRating):
    """Rating reference row: predict each user's own average rating (method `user_avg`)."""

    name = "user_avg"
    source = "user"


class ItemAverage(AverageRating):
    """Rating reference row: predict the query item's average rating for every user (method `item_avg`)."""

    name = "item_avg"
    source = "item"
