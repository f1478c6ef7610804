"""RecBench+-style query generation from a KG and user histories, in the released record format.

Explicit, implicit (multi-hop references), misinformed (a false premise), interest-based (a user's dominant
attributes) and demographics-based (user groups) queries. Texts come from Jinja templates (deterministic) and,
optionally, are rewritten by an LLM through the backend layer (`write_situational`).
"""
from __future__ import annotations

import functools
import math
import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Iterable, Mapping, Optional, Sequence

import pandas as pd
from jinja2 import FileSystemLoader, StrictUndefined
from jinja2.sandbox import ImmutableSandboxedEnvironment

from recbench.kg.conditions import Condition, ExtractionConfig, SharedRelations, shared_relations
from recbench.kg.graph import PERSON_RELATIONS, KnowledgeGraph

QUERY_TYPES = ("explicit", "implicit", "misinformed", "interest", "demographics")
#: the released file name of each query type (movie domain; book uses ItemBasedQuery for interest)
RELEASED_NAMES = {"explicit": "ExplicitQuery", "implicit": "ImplicitQuery", "misinformed": "MisinformedQuery",
                  "interest": "InterestBasedQuery", "demographics": "DemographicsBasedQuery"}
ML_AGE_GROUPS = [(0, 17, "Under 18"), (18, 24, "18-24"), (25, 34, "25-34"), (35, 44, "35-44"), (45, 49, "45-49"),
                 (50, 55, "50-55"), (56, 200, "56+")]


@functools.lru_cache(maxsize=1)
def _env() -> ImmutableSandboxedEnvironment:
    folder = str(resources.files("recbench.kg").joinpath("templates"))
    return ImmutableSandboxedEnvironment(loader=FileSystemLoader(folder), undefined=StrictUndefined,
                                         trim_blocks=True, lstrip_blocks=True)


def render_query(name: str, **variables: Any) -> str:
    """Render a query template of recbench.kg/templates (sandboxed), whitespace-collapsed."""
    return " ".join(_env().get_template(name).render(**variables).split())


@dataclass
class BuildConfig:
    """What to generate: queries per type, ground-truth scope, and the extraction knobs."""

    per_type: int = 20
    seed: int = 0
    scope: str = "history"  # history: GT = matching items of the source user's history (official); catalogue: all items
    noun: str = "movie"
    extraction: ExtractionConfig = field(default_factory=ExtractionConfig)
    refs_per_condition: int = 2
    interest_min_support: int = 3
    interest_attributes: int = 2
    interest_relations: Sequence[str] = ("Genre", "Directed_by", "Starring", "Written_by")
    demo_group_types: Sequence[str] = ("age", "gender", "occupation", "age_gender", "gender_occupation")
    demo_min_users: int = 15
    demo_top_n: int = 20
    demo_queries_per_group: int = 3
    demo_relations: Sequence[str] = ("Genre", "Directed_by", "Starring")
    max_users: Optional[int] = 150  # users scanned for condition queries (seeded sample); None = all


class QueryBuilder:
    """Builds every query type from a KG plus user histories (and user demographics for group queries)."""

    def __init__(self, kg: KnowledgeGraph, histories: Mapping[str, Sequence[str]], cfg: Optional[BuildConfig] = None,
                 users: Optional[pd.DataFrame] = None):
        self.kg, self.cfg, self.users = kg, cfg or BuildConfig(), users
        self.histories = {str(u): [str(i) for i in h if kg.has_item(i)] for u, h in histories.items()}
        self.noun = self.cfg.noun
        self.subset_key = f"{self.noun}Subset"

    # ---- helpers ----------------------------------------------------------------------------
    def _rng(self, kind: str) -> random.Random:
        return random.Random(f"{self.cfg.seed}:{kind}")

    def _users(self, kind: str) -> list[str]:
        users = sorted(self.histories, key=lambda u: (len(u), u))
        self._rng(kind).shuffle(users)
        return users[: self.cfg.max_users] if self.cfg.max_users else users

    def ground_truth(self, user: str, conditions: Sequence[Condition]) -> list[str]:
        """Items satisfying all conditions: within the user's history (official) or the whole catalogue."""
        among = self.histories[user] if self.cfg.scope == "history" else None
        return self.kg.items_satisfying(conditions, among)

    def _base(self, user: str, sr: SharedRelations) -> dict[str, Any]:
        gt = self.ground_truth(user, sr.conditions)
        return {"source_user": user, "condition_num": sr.condition_num, f"{self.noun}Count": len(gt),
                self.subset_key: [self.kg.display(i) for i in gt], f"{self.subset_key}Id": [_id(i) for i in gt],
                "sharedRelationships": [list(c) for c in sr.conditions]}

    def _candidates(self, kind: str) -> Iterable[tuple[str, list[SharedRelations]]]:
        for u in self._users(kind):
            srs = shared_relations(self.kg, self.histories[u], self.cfg.extraction)
            if srs:
                rng = self._rng(f"{kind}:{u}")
                rng.shuffle(srs)
                yield u, srs

    def _take(self, kind: str, make) -> list[dict[str, Any]]:
        """Round-robin over users and condition counts until per_type records exist."""
        out: list[dict[str, Any]] = []
        want_num = 0
        seen = set()
        for u, srs in self._candidates(kind):
            by_num = defaultdict(list)
            for sr in srs:
                by_num[sr.condition_num].append(sr)
            nums = sorted(by_num)
            order = nums[want_num % len(nums):] + nums[: want_num % len(nums)]
            for n in order:
                rec = None
                for sr in by_num[n][:25]:
                    sig = (u, sr.conditions)
                    if sig in seen:
                        continue
                    rec = make(u, sr)
                    if rec is not None:
                        seen.add(sig)
                        break
                if rec is not None:
                    rec["data_idx"] = len(out)
                    out.append(rec)
                    want_num += 1
                    break
            if len(out) >= self.cfg.per_type:
                break
        return out

    def _references(self, relation: str, person: str, exclude: set[str], ref_relation: Optional[str] = None) -> list[str]:
        """Other catalogue items that identify `person` under ref_relation (default: the same relation)."""
        rel = ref_relation or relation
        cands = [i for i in self.kg.items_with(rel, person) if i not in exclude and self.kg.title(i, False)]
        if not cands:
            return []
        # prefer references whose shared targets under `rel` are exactly {person}: the hop is then unambiguous
        best: list[str] = []
        for i in cands:
            trial = best + [i]
            shared = set.intersection(*(set(self.kg.targets(j, rel)) for j in trial))
            if len(best) < self.cfg.refs_per_condition and (not best or shared == {person} or len(shared) < len(
                    set.intersection(*(set(self.kg.targets(j, rel)) for j in best)))):
                best = trial
            if len(best) == self.cfg.refs_per_condition and set.intersection(*(set(self.kg.targets(j, rel)) for j in best)) == {person}:
                break
        return best

    # ---- condition-based queries ------------------------------------------------------------
    def explicit(self) -> list[dict[str, Any]]:
        """Explicit condition queries: the shared relations stated directly."""

        def make(u: str, sr: SharedRelations):
            rec = self._base(u, sr)
            rec["direct_description_query"] = render_query("explicit.j2", noun=self.noun, conditions=sr.conditions)
            rec["situational_description_query"] = rec["direct_description_query"]
            return rec

        return self._take("explicit", make)

    def implicit(self) -> list[dict[str, Any]]:
        """Implicit queries: each person condition named through other items (multi-hop), GT unchanged."""

        def make(u: str, sr: SharedRelations):
            if not any(r in PERSON_RELATIONS for r, _ in sr.conditions):
                return None
            rec = self._base(u, sr)
            gt = set(rec[f"{self.subset_key}Id"]) | set(self.histories[u])
            gt = {str(x) for x in gt}
            parts, info = [], []
            for r, t in sr.conditions:
                refs = self._references(r, t, gt) if r in PERSON_RELATIONS else []
                if r in PERSON_RELATIONS and not refs:
                    return None
                parts.append({"relation": r, "target": t, "refs": [self.kg.display(i) for i in refs]})
                info += [{self.noun: self.kg.display(i), "relation": r, "person": t} for i in refs]
            rec["multihop_info"] = info
            rec["direct_description_query"] = render_query("implicit.j2", noun=self.noun, parts=parts)
            rec["situational_description_query"] = rec["direct_description_query"]
            return rec

        return self._take("implicit", make)

    def misinformed(self) -> list[dict[str, Any]]:
        """Misinformed queries: a person condition described with a false premise (a wrong person for a real item)."""
        people: dict[str, set[str]] = defaultdict(set)  # one pass over the catalogue's facts
        for i in self.kg.items():
            for r, t in self.kg.facts(i):
                if r in PERSON_RELATIONS:
                    people[r].add(t)
        people_by_rel: dict[str, list[str]] = defaultdict(list, {r: sorted(ts) for r, ts in people.items()})

        def make(u: str, sr: SharedRelations):
            persons = [(r, t) for r, t in sr.conditions if r in PERSON_RELATIONS]
            if not persons:
                return None
            rng = self._rng(f"misinformed:{u}:{sr.conditions}")
            r, p = persons[0]
            if sum(t == p for _, t in sr.conditions) > 1:  # another condition would name the true person
                return None
            rec = self._base(u, sr)
            excl = {str(x) for x in rec[f"{self.subset_key}Id"]} | set(self.histories[u])
            # references: the person's other items, under any person relation (the premise names one of them)
            ref_rel, refs = r, []
            for rr in [r] + sorted(PERSON_RELATIONS - {r}):
                refs = self._references(r, p, excl, ref_relation=rr)
                if refs:
                    ref_rel = rr
                    break
            if not refs or not people_by_rel[ref_rel]:
                return None
            wrong = None
            for _ in range(50):
                w = rng.choice(people_by_rel[ref_rel])
                if w != p and all(not self.kg.has_fact(i, ref_rel, w) for i in refs) and not self.kg.items_with(r, w) == self.kg.items_with(r, p):
                    wrong = w
                    break
            if wrong is None:
                return None
            rec["multihop_info"] = [{self.noun: self.kg.display(i), "relation": ref_rel, "person": p} for i in refs]
            rec["misinformed"] = [{self.noun: self.kg.display(i), "relation": ref_rel, "original person": p, "person": wrong}
                                  for i in refs]
            others = [c for c in sr.conditions if tuple(c) != (r, p)]
            rec["query"] = render_query("misinformed.j2", noun=self.noun, others=others,
                                        wrong={"refs": [self.kg.display(i) for i in refs], "person": wrong,
                                               "ref_relation": ref_rel, "relation": r})
            return rec

        return self._take("misinformed", make)

    # ---- profile-based queries --------------------------------------------------------------
    def interest(self) -> list[dict[str, Any]]:
        """Interest-based queries from each user's dominant attributes (support and lift over the catalogue)."""
        base: Counter = Counter()
        n_items = max(len(self.kg.items()), 1)
        for i in self.kg.items():
            base.update((r, t) for r, t in self.kg.facts(i) if r in self.cfg.interest_relations)
        out: list[dict[str, Any]] = []
        ex = set(self.cfg.extraction.exclude_targets)
        for u in self._users("interest"):
            hist = self.histories[u]
            cnt = Counter((r, t) for i in hist for r, t in self.kg.facts(i) if r in self.cfg.interest_relations and t not in ex)
            scored = sorted(((c / len(hist)) / (base[a] / n_items) * math.log1p(c), a) for a, c in cnt.items()
                            if c >= self.cfg.interest_min_support)
            scored.sort(key=lambda x: (-x[0], x[1]))
            chosen: list[Condition] = []
            for _, a in scored:
                trial = chosen + [a]
                if len(self.kg.items_satisfying(trial, hist)) >= self.cfg.interest_min_support:
                    chosen = trial
                if len(chosen) == self.cfg.interest_attributes:
                    break
            if not chosen:
                continue
            gt = self.kg.items_satisfying(chosen, hist)
            lift = ", ".join(f"{t} ({r})" for r, t in chosen)
            out.append({
                "data_idx": len(out), "source_user": u, "dominant_attributes": [list(a) for a in chosen],
                "query & ground true": [{
                    "reason": f"User {u} watched {len(gt)} {self.noun}s sharing {lift}, far above the catalogue rate.",
                    "query": render_query("interest.j2", noun=self.noun, attributes=chosen),
                    f"{self.noun} subset": [self.kg.display(i) for i in gt],
                    f"{self.noun} subset id": [_id(i) for i in gt],
                    "conditions": [list(a) for a in chosen],
                }],
            })
            if len(out) >= self.cfg.per_type:
                break
        return out

    def demographics(self) -> list[dict[str, Any]]:
        """Demographics-based queries: a user group's characteristic items, grouped by a shared KG attribute."""
        if self.users is None:
            return []
        users = self.users.copy()
        users["user_id"] = users["user_id"].astype(str)
        users = users[users["user_id"].isin(self.histories)]
        users["age"] = users["age"].map(age_group)
        n_users = len(users)
        raters: Counter = Counter(i for u in users["user_id"] for i in set(self.histories[u]))
        groups = []
        for gt_name in self.cfg.demo_group_types:
            cols = gt_name.split("_")
            for key, sub in users.groupby(cols, sort=True):
                key = key if isinstance(key, tuple) else (key,)
                if len(sub) >= self.cfg.demo_min_users:
                    groups.append((gt_name, list(zip(cols, map(str, key))), list(sub["user_id"])))
        self._rng("demographics").shuffle(groups)
        out: list[dict[str, Any]] = []
        for gt_name, desc, members in groups:
            cnt = Counter(i for u in members for i in set(self.histories[u]))
            score = {i: (c / len(members)) * math.log(n_users / raters[i]) for i, c in cnt.items() if c >= 3}
            top = sorted(score, key=lambda i: (-score[i], _id(i)))[: self.cfg.demo_top_n]
            if len(top) < 4:
                continue
            attr = Counter((r, t) for i in top for r, t in self.kg.facts(i)
                           if r in self.cfg.demo_relations and t not in self.cfg.extraction.exclude_targets)
            qs, used = [], set()
            for (r, t), c in sorted(attr.items(), key=lambda x: (-x[1], x[0])):
                subset = tuple(i for i in top if self.kg.has_fact(i, r, t))
                if c < 2 or len(subset) > max(2, len(top) // 2) or subset in used:
                    continue
                used.add(subset)
                who = describe_group(desc)
                qs.append({"reason": f"{len(subset)} of the {len(top)} {self.noun}s most characteristic of {who} share {t} ({r}).",
                           "query": render_query("demographics.j2", noun=self.noun, who=who, condition=(r, t)),
                           f"{self.noun} subset": [self.kg.display(i) for i in subset],
                           f"{self.noun} subset id": [_id(i) for i in subset], "conditions": [[r, t]]})
                if len(qs) >= self.cfg.demo_queries_per_group:
                    break
            if not qs:
                continue
            out.append({"data_idx": len(out), "group_type": gt_name, "group": "_".join(v for _, v in desc),
                        "top_10_movies": [[_id(i), round(score[i], 6)] for i in top[:10]],
                        "summary": f"User Group: {[(k.title(), v) for k, v in desc]}\nTotal users in this group: {len(members)}",
                        "query & ground true": qs})
            if sum(len(g["query & ground true"]) for g in out) >= self.cfg.per_type:
                break
        return out

    def build(self, types: Sequence[str] = QUERY_TYPES) -> dict[str, list[dict[str, Any]]]:
        """{query type: released-format records} for the requested types."""
        return {t: getattr(self, t)() for t in types}


def age_group(age: Any) -> str:
    """MovieLens-1M age bucket of an age in years (ML-1M codes are bucket lower bounds already)."""
    a = int(age)
    for lo, hi, name in ML_AGE_GROUPS:
        if lo <= a <= hi:
            return name
    return str(a)


def describe_group(desc: Sequence[tuple[str, str]]) -> str:
    """'a 25-34 year old female student' style description of a user group."""
    d = dict(desc)
    words = []
    if "age" in d:
        words.append({"Under 18": "an under-18", "56+": "a 56+ year old"}.get(d["age"], f"a {d['age']} year old"))
    if "gender" in d:
        words.append({"M": "man", "F": "woman"}.get(d["gender"], d["gender"]) if "occupation" not in d
                     else {"M": "male", "F": "female"}.get(d["gender"], d["gender"]))
    if "occupation" in d:
        words.append(d["occupation"])
    text = " ".join(words)
    if not words[0].startswith(("a ", "an ")):
        text = ("an " if text[0] in "aeiou" else "a ") + text
    return text


def _id(item: str) -> Any:
    return int(item) if str(item).isdigit() else item


def query_text(record: Mapping[str, Any]) -> str:
    """The query a model is asked (situational > query > direct), as in the released files."""
    for k in ("situational_description_query", "query", "direct_description_query"):
        if record.get(k):
            return str(record[k])
    raise KeyError("record has no query text")


def rewrite_requests(records: Iterable[dict[str, Any]], noun: str, sampling) -> list:
    """One backend Request per record asking an LLM to write the situational version of its query."""
    from recbench.api.types import Request

    return [Request.chat([{"role": "user", "content": render_query("write_query.j2", noun=noun, direct=query_text(r))}],
                         sampling, purpose="write_query") for r in records]


def write_situational(records: list[dict[str, Any]], backend, noun: str = "movie", sampling=None) -> int:
    """Rewrite condition-query texts with an LLM (backend layer); a failed/empty answer keeps the template text."""
    from recbench.api.types import SamplingParams

    sampling = sampling or SamplingParams(temperature=0.0, max_tokens=96)
    targets = [r for r in records if "direct_description_query" in r or "query" in r]
    responses = backend.generate(rewrite_requests(targets, noun, sampling)) if targets else []
    n = 0
    for r, resp in zip(targets, responses):
        text = resp.text.strip().strip('"') if resp.ok else ""
        field_ = "situational_description_query" if "direct_description_query" in r else "query"
        r["query_source"] = "llm" if text else "template"
        if text:
            r[field_] = text
            n += 1
    return n
