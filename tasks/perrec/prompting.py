"""PerRecBench's prompted-method base: sampling, system prompt, profiles, few-shot, self-consistency, templates and
the shared user blocks; plus the display order of a group and how several answers are combined."""
from __future__ import annotations

import dataclasses
import functools
import re
from collections import Counter
from typing import Any, Generator, Optional, Protocol, Sequence

import numpy as np

from recbench.api.parsing import Parsed
from recbench.api.prompts import get_template, render
from recbench.api.task import Method, TaskView
from recbench.tasks.perrec import settings
from recbench.tasks.perrec.display_order import permutation as _permutation  # noqa: F401
from recbench.tasks.perrec.display_order import presentation_order  # noqa: F401 - the methods' import
from recbench.tasks.perrec.compiled import compiled
from recbench.api.types import Constraint, Example, Request, Response
from recbench.api.variant import variant_files, variant_name
PKG = "recbench.tasks.perrec"
PAIR_CHOICES = ("[User A]", "[User B]")
PAIR_CONSTRAINT = Constraint(kind="choice", choices=PAIR_CHOICES)
#: constrained pointwise answers and the rating each stands for. "N stars", not bare digits: scored by likelihood,
#: SmolLM2-135M picks a bare "1" for every prompt (the start of a numbered list) but spreads over "2 stars".."4 stars".
RATING_CHOICES = {"1 star": 1.0, "2 stars": 2.0, "3 stars": 3.0, "4 stars": 4.0, "5 stars": 5.0}
RATING_CONSTRAINT = Constraint(kind="choice", choices=tuple(RATING_CHOICES))
_LABEL_SLOT = "\x00label\x00"  # stands for the label while a user block is rendered once for every label
_BLOCKS: dict[tuple, tuple] = {}  # (id(user), profile, query) -> (user, text after the label, block with _LABEL_SLOT)
_MAX_BLOCKS = 200_000


def _block_body(user: dict[str, Any], profile: Optional[str], query_title: str) -> str:
    """One user's block labelled _LABEL_SLOT: _user_block.j2 written by its compiled function (compiled.py), or
    rendered by Jinja where the template uses what the compiler does not write."""
    program = compiled(PKG, "_user_block.j2", False)  # positional: the cache's cheapest key
    if program is not None:
        return program(label=_LABEL_SLOT, user=user, profile=profile, query_title=query_title)
    return get_template(PKG, "_user_block.j2").render(label=_LABEL_SLOT, user=user, profile=profile,
                                                       query_title=query_title)


def _after_label(body: str) -> Optional[str]:
    """A block's text after its label placeholder, less the final newline: what follows the label in user_block
    (None where the block does not open with the placeholder or has nothing after it)."""
    if not body.startswith(_LABEL_SLOT) or len(body) == len(_LABEL_SLOT):
        return None
    tail = body[len(_LABEL_SLOT):]
    return tail[:-1] if tail.endswith("\n") else tail


def worst_status(statuses: list[str]) -> str:
    """failed > repaired > ok."""
    return "failed" if "failed" in statuses else "repaired" if "repaired" in statuses else "ok"


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
    variants = frozenset({"template"})  # audit.templates=K asks with the first K of template_files()
    settings_rules = settings.PROMPTED  # valid values of the method keys, checked before anything is loaded
    conf_defaults = True  # every key is read (conf/method/perrec/<name>.yaml): a hand-built config gets the rest there

    # ---- variants (read once) -------------------------------------------------------------------
    @functools.cached_property
    def seed(self) -> int:  # type: ignore[override]
        """The run seed (sampling.seed), read once."""
        return super().seed

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
        return variant_files(PKG, self._template_name)

    def render_prompt(self, _variant: int = 0, **variables: Any) -> str:
        """The method's prompt template (`_variant` k > 0: the template audit's k-th paraphrase, <stem>_tk.j2) with
        the given variables: written by the template's compiled function (compiled.py), or rendered by Jinja where
        the template uses what the compiler does not write."""
        name = variant_name(self._template_name, _variant) if _variant else self._template_name
        program = compiled(PKG, name) if _variant else self._plain
        return program(**variables) if program is not None else render(PKG, name, **variables)

    @functools.cached_property
    def _plain(self) -> Any:
        """The method's template compiled to a Python function (compiled.py: the template's own text, without
        Jinja's per-render cost); None where it uses what the compiler does not write (then rendered every time)."""
        return compiled(PKG, self._template_name)

    def user_block(self, user: dict[str, Any], label: str, profile: Optional[str], query_title: str) -> str:
        """One user's block (_user_block.j2, without its final newline) under `label`. Rendered once per (user,
        profile, query) with a label placeholder and relabelled, so an example renders each user once and the
        pointwise, pairwise and listwise methods of one process share the blocks."""
        key = (id(user), profile, query_title)
        got = _BLOCKS.get(key)
        if got is None or got[0] is not user:  # the user object itself is kept, so an id is never reused
            if len(_BLOCKS) > _MAX_BLOCKS:
                _BLOCKS.clear()
            body = _block_body(user, profile, query_title)
            tail = _after_label(body)
            got = _BLOCKS[key] = (user, tail, body if tail is None else None)
        if got[1] is not None:
            return label + got[1]
        body = got[2]
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
        key = (max_tokens, seed_offset)
        got = self._answer_sampling.get(key)
        if got is None:
            sp = self.sampling(max_tokens, seed_offset)
            t = self._opts["temperature"]
            got = self._answer_sampling[key] = sp if t is None else dataclasses.replace(sp, temperature=t)
        return got

    @functools.cached_property
    def _answer_sampling(self) -> dict[tuple, Any]:
        """The answers' sampling parameters by (max_tokens, seed offset), each built once (they are frozen)."""
        return {}

    def _messages(self, user_prompt: str, shots: Sequence[tuple[str, str]] = ()) -> list[dict[str, str]]:
        msgs = [{"role": "system", "content": self._opts["system"]}]
        for q, a in shots:
            msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
        return msgs + [{"role": "user", "content": user_prompt}]

    def _request(self, prompt: str, max_tokens: int, constraint: Optional[Constraint] = None,
                 purpose: str = "answer", seed_offset: int = 0, shots: Sequence[tuple[str, str]] = ()) -> Request:
        o = self._opts
        messages = [("system", o["system"])]  # as Request.chat makes them of self._messages(prompt, shots)
        for q, a in shots:
            messages += (("user", q), ("assistant", a))
        messages.append(("user", prompt))
        return Request(tuple(messages), self._sampling(max_tokens, seed_offset),
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
