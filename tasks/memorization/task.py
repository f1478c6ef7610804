"""The memorization probe task: does a model recall the catalogue a benchmark is built on (item titles from ids or
prefixes, a user's next item), beyond what it "recalls" of fabricated items asked the same way?

Examples are the catalogue's items (or its users, for history_to_next) and as many fabricated control items (users)
as `control.n`, interleaved real / control, the real ones in round-robin order over popularity deciles, so that
`limit=N` (run.limit_strategy=stratified over `set`) probes N/2 real items spread over the deciles and N/2 controls.
Per example: `recalled` (0/1); `coverage` is it on real examples only (the headline: the share of the catalogue
recalled), `false_recall` on control examples only. metrics.json's `extra.memorization` holds coverage minus control
with a two-sample interval and test; breakdowns `set` and `popularity_decile` give the rest."""
from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any, Iterable, Optional, Sequence

from omegaconf import DictConfig

from recbench.api.errors import ConfigError
from recbench.api.metrics import MetricSpec
from recbench.api.task import Method, Task
from recbench.api.types import Example, Outcome
from recbench.store.schema import SampleRecord
from recbench.tasks.memorization import settings
from recbench.tasks.memorization.catalogue import Catalogue, read_catalogue
from recbench.tasks.memorization.control import control_catalogue, fabricate_ids, history_lengths, seeded
from recbench.tasks.memorization.matching import base_title, similarity, title_forms
from recbench.tasks.memorization.probes import PROBES, Probe
from recbench.tasks.memorization.stats import difference_summary, two_sample_power

SETS = ("real", "control")


class MemorizationTask(Task):
    """Probes of a catalogue's items (id -> title, prefix -> title, likelihood) or users (history -> next item)."""

    name = "memorization"
    methods = dict(PROBES)
    breakdown_by = ("set", "popularity_decile")
    breakdown_order = {"set": SETS}
    headline_metric = "coverage"
    settings_rules = settings.TASK  # valid values of the task keys, checked before anything is loaded
    conf_defaults = True  # a hand-built config gets the keys it leaves out from conf/task/<name>.yaml
    #: per example (score): recalled on every example, coverage / false_recall on the real / control ones, the
    #: answer's similarity; over the run (corpus): coverage minus the control rate
    metric_specs = (
        MetricSpec("recalled",
                   meaning="share of probes whose answer recalls the true title or choice, real and control items "
                           "together",
                   binary=True, doc="1 when the answer matches the true title (fuzzy) or the true choice "
                                                "scores highest, on real and control examples (higher = more recalled)"),
        MetricSpec("coverage",
                   meaning="share of real catalogue items the model recalls (more = more memorized, not a better "
                           "model)",
                   why_n="defined on real catalogue items only",
                   binary=True, doc="recalled, on real catalogue items only: the share of the catalogue "
                                                "the model recalls (higher = more memorized, not a better model)"),
        MetricSpec("false_recall",
                   meaning="share of fabricated control items the model 'recalls': the probe's false-positive rate",
                   why_n="defined on fabricated control items only",
                   higher_is_better=False, binary=True,
                   doc="recalled, on fabricated control items only: the probe's false-positive rate"),
        MetricSpec("similarity",
                   meaning="best fuzzy similarity (0-100) of the answer to a form of the true title",
                   doc="best rapidfuzz similarity (0-100) of the answer to a form of the true title"),
        MetricSpec("copied",
                   meaning="share of answers that repeat a title the prompt showed rather than the true one",
                   higher_is_better=None, binary=True,
                   doc="the answer repeats a title the prompt showed (a few-shot record, a history item) at least as "
                       "closely as it matches the true title: never a recall (a rate: no direction)"),
        MetricSpec("coverage_minus_control",
                   meaning="coverage minus the control items' false-recall rate",
                   aggregation="corpus",
                   doc="coverage minus the control set's false-recall rate (interval and test: extra.memorization)",
                   corpus=lambda records, task: task.contrast(records)["difference"]["estimate"]),
    )

    def __init__(self, cfg: DictConfig):
        super().__init__(cfg)
        self.name = str(self.cfg.name)
        self.seed = int(self.cfg.seed)
        self.probe: Optional[Probe] = None
        self._catalogue: Optional[Catalogue] = None
        self._control: Optional[dict[str, str]] = None
        self._order: dict[str, list[str]] = {}
        self._position: dict[str, dict[str, int]] = {}
        self._prefixes: dict[str, Counter] = {}

    def make_method(self, method_cfg: DictConfig, sampling_cfg: Optional[DictConfig] = None) -> Method:
        """The probe; the task then builds the examples that probe asks about (items with a title prefix, users)."""
        m = super().make_method(method_cfg, sampling_cfg)
        self.probe = m  # type: ignore[assignment]
        return m

    # ---- data -------------------------------------------------------------------------------
    @property
    def dataset_name(self) -> str:
        """The data set as prompts name it."""
        return str(self.cfg.data.name)

    @property
    def key_name(self) -> str:
        """What prompts call an item id (MovieID, ASIN)."""
        return str(self.cfg.data.key_name)

    @property
    def catalogue(self) -> Catalogue:
        """The real catalogue, read once."""
        if self._catalogue is None:
            d = self.cfg.data
            self._catalogue = read_catalogue(str(d.format), str(d.path), str(d.id_field))
        return self._catalogue

    @property
    def control(self) -> dict[str, str]:
        """The fabricated control items (id -> title), drawn once from the task seed."""
        if self._control is None:
            m = self.cfg.match
            try:
                d = self.cfg.data
                self._control = control_catalogue(str(d.format), str(d.path), str(d.id_field), int(self.cfg.control.n),
                                                  self.seed, str(m.scorer), float(m.threshold))
            except ValueError as e:
                raise ConfigError(f"task.control.n={self.cfg.control.n}: {e}") from None
        return self._control

    def items_of(self, which: str) -> dict[str, str]:
        """id -> title of one set (real | control)."""
        return self.catalogue.items if which == "real" else self.control

    def title_of(self, item_id: str, which: str) -> str:
        """The title of an item of one set."""
        return self.items_of(which)[item_id]

    def split_title(self, title: str, which: str) -> tuple[str, str]:
        """(prefix, rest) of a title's words (year dropped, article in front): the first prefix_fraction of them
        (at least one), lengthened word by word until no other title of its set starts with the same words (while
        one word is left to complete), so that the prefix names one title; ('', '') for a one-word title and for one
        whose prefix stays shared (another title starts with all but its last word): no memory could complete it."""
        w = base_title(title).split()
        if len(w) < 2:
            return "", ""
        counts = self._prefix_counts(which)
        low = [x.casefold() for x in w]
        cut = max(1, int(len(w) * float(self.probe.cfg.prefix_fraction)))  # type: ignore[union-attr]
        cut = min(cut, len(w) - 1)
        while cut < len(w) - 1 and counts[tuple(low[:cut])] > 1:
            cut += 1
        if counts[tuple(low[:cut])] > 1:
            return "", ""  # another title starts with all but its last word: no prefix names it
        return " ".join(w[:cut]), " ".join(w[cut:])

    def _prefix_counts(self, which: str) -> Counter:
        """How many titles of a set start with each word sequence (case-folded), counted once per set."""
        if which not in self._prefixes:
            c: Counter = Counter()
            for t in self.items_of(which).values():
                low = [x.casefold() for x in base_title(t).split()]
                c.update(tuple(low[:j]) for j in range(1, len(low) + 1))
            self._prefixes[which] = c
        return self._prefixes[which]

    def load(self) -> list[Example]:
        """Real and control examples of the probe's unit (items, or users with a history), interleaved."""
        kind = self.probe.probe if self.probe is not None else "id"
        unit = self.probe.unit if self.probe is not None else "item"
        if unit == "user":
            real, control = self._user_examples()
        else:
            real, control = self._item_examples(kind)
        if unit == "item":  # the rolling few-shot window walks each set in catalogue order
            for which in SETS:
                keys = [k for k in self.items_of(which) if kind != "prefix" or self.split_title(self.items_of(which)[k], which)[0]]
                self._order[which] = keys
                self._position[which] = {k: n for n, k in enumerate(keys)}
        out: list[Example] = []
        for k in range(max(len(real), len(control))):
            out += ([real[k]] if k < len(real) else []) + ([control[k]] if k < len(control) else [])
        return out

    def _spread(self, keys: list[str], decile: dict[str, int], purpose: str) -> list[str]:
        """keys in round-robin order over popularity deciles (most rated first), each decile in seeded order."""
        groups: dict[int, list[str]] = defaultdict(list)
        for k in keys:
            groups[decile.get(k, 0)].append(k)
        rng = seeded(self.seed, purpose)
        queues = []
        for d in sorted(groups, reverse=True):
            rng.shuffle(groups[d])
            queues.append(groups[d])
        out: list[str] = []
        while any(queues):
            for q in queues:
                if q:
                    out.append(q.pop(0))
        return out

    def _item_examples(self, kind: str) -> tuple[list[Example], list[Example]]:
        decile = self.catalogue.deciles()
        sets: dict[str, list[Example]] = {}
        for which in SETS:
            items = self.items_of(which)
            keys = list(items) if which == "control" else self._spread(list(items), decile, "items")
            exs = []
            for key in keys:
                title = items[key]
                data: dict[str, Any] = {"key": key, "title": title, "set": which, "truths": title_forms(title)}
                if kind == "prefix":
                    prefix, rest = self.split_title(title, which)
                    if not prefix:
                        continue  # a one-word title has no prefix to complete
                    data.update(prefix=prefix, rest=rest, truths=[rest])
                meta: dict[str, Any] = {"set": which, "item_id": key}
                if which == "real" and key in decile:
                    meta["popularity_decile"] = decile[key]
                exs.append(Example(id=f"{'item' if which == 'real' else 'control'}:{key}", data=data, meta=meta))
            sets[which] = exs
        return sets["real"], sets["control"]

    def _user_examples(self) -> tuple[list[Example], list[Example]]:
        hist = {u: h for u, h in self.catalogue.histories().items() if len(h) >= 2}
        if not hist:
            raise ConfigError(f"task {self.name}: method history_to_next needs ratings with users of 2+ interactions; "
                              f"{self.cfg.data.path} ({self.cfg.data.format}) has none. Pick an item probe "
                              "(method=id_to_title) or a data set with ratings")
        decile = self.catalogue.deciles()
        target_decile = {u: decile.get(h[-1], 0) for u, h in hist.items()}
        real = []
        for u in self._spread(list(hist), target_decile, "users"):
            h = hist[u]
            title = self.catalogue.items[h[-1]]
            meta = {"set": "real", "user_id": u, "item_id": h[-1], "popularity_decile": target_decile[u]}
            real.append(Example(id=f"user:{u}", meta=meta, data={"key": u, "user": u, "history": h[:-1],
                                                                 "target": h[-1], "title": title, "set": "real",
                                                                 "truths": title_forms(title)}))
        pool = list(self.control)
        n = int(self.cfg.control.n)
        lengths = history_lengths([len(h) - 1 for h in hist.values()], n, self.seed, cap=len(pool) - 1)
        control = []
        for u, length in zip(fabricate_ids(list(hist), n, self.seed, "user"), lengths):
            items = seeded(self.seed, "control_user", u).sample(pool, length + 1)
            title = self.control[items[-1]]
            control.append(Example(id=f"control_user:{u}", meta={"set": "control", "user_id": u, "item_id": items[-1]},
                                   data={"key": u, "user": u, "history": items[:-1], "target": items[-1],
                                         "title": title, "set": "control", "truths": title_forms(title)}))
        return real, control

    def neighbors(self, example: Example, k: int) -> list[tuple[str, str]]:
        """The rolling few-shot window: the k records before this item in its set's catalogue order (for the first
        items of a set, the next ones fill the window); never the item itself."""
        which = example.data["set"]
        order, pos = self._order.get(which, []), self._position.get(which, {})
        if not order or k <= 0:
            return []
        at = pos.get(example.data["key"], 0)
        before = order[max(0, at - k):at]
        keys = before + order[at + 1: at + 1 + k - len(before)]
        items = self.items_of(which)
        return [(key, items[key]) for key in keys]

    def distractors(self, example: Example, k: int) -> list[str]:
        """k other titles of the same set, drawn with a seed per example (never a form of the true title)."""
        items = self.items_of(example.data["set"])
        own = {t.casefold() for t in title_forms(example.data["title"])}
        rng = seeded(self.seed, "distractors", example.id)
        out: list[str] = []
        seen = set(own)
        for key in rng.sample(list(items), min(len(items), 4 * k + 8)):
            t = items[key]
            if t.casefold() not in seen:
                seen.add(t.casefold())
                out.append(t)
            if len(out) == k:
                break
        return out

    # ---- scoring ----------------------------------------------------------------------------
    def score(self, example: Example, outcome: Outcome) -> dict[str, float]:
        """recalled (0/1), coverage (real items) or false_recall (control items), and the answer's similarity."""
        real = example.data["set"] == "real"
        if "recalled" in outcome.details:  # the likelihood probe decides by the choice scores
            rec, sim, copied = float(bool(outcome.details["recalled"])), math.nan, math.nan
        else:
            m = self.cfg.match
            d = outcome.details
            sim = similarity(d.get("answers") or [], example.data["truths"], str(m.scorer), int(m.max_chars))
            # an answer at least as close to a title the prompt showed as to the true title is a copy, not a recall
            line = [d.get("line") or ""]
            shown = similarity(line, [f for t in d.get("shown") or [] for f in title_forms(t)], str(m.scorer),
                               int(m.max_chars))
            whole = similarity(line, title_forms(example.data["title"]), str(m.scorer), int(m.max_chars))
            copied = float(shown >= float(m.threshold) and shown >= whole)
            rec = float(sim >= float(m.threshold) and not copied)
        return {"recalled": rec, "coverage": rec if real else math.nan, "false_recall": math.nan if real else rec,
                "similarity": sim, "copied": copied}

    def truth(self, example: Example) -> dict[str, Any]:
        """The set, the key asked about, the true title and the forms an answer was matched against."""
        d = example.data
        out = {"set": d["set"], "key": d["key"], "title": d["title"], "matched_against": d["truths"]}
        if "prefix" in d:
            out["prefix"] = d["prefix"]
        if "target" in d:
            out["target"] = d["target"]
        return out

    def contrast(self, records: Iterable[SampleRecord]) -> dict[str, Any]:
        """Real against control: both rates (Wilson intervals), coverage minus control with a Newcombe interval and a
        one-sided Fisher exact test (recbench.tasks.memorization.stats), the match rule and the chance level."""
        recs = list(records)
        vals = {s: [v for r in recs if r.meta.get("set") == s and not math.isnan(v := r.value("recalled"))]
                for s in SETS}
        s = difference_summary(int(sum(vals["real"])), len(vals["real"]), int(sum(vals["control"])),
                               len(vals["control"]), alpha=float(self.cfg.stats.alpha))
        m = self.cfg.match
        s["match"] = {"scorer": str(m.scorer), "threshold": float(m.threshold), "max_chars": int(m.max_chars)}
        s["chance"] = (1.0 / int(self.probe.cfg.n_choices)
                       if self.probe is not None and "n_choices" in self.probe.cfg else None)
        return s

    def plan_power(self, examples: Sequence[Example], alpha: float, power: float, effect: float) -> Optional[dict]:
        """The probe compares two independent samples (real and control items), not two runs over paired units."""
        n = {s: sum(1 for e in examples if e.meta.get("set") == s) for s in SETS}
        chance = (1.0 / int(self.probe.cfg.n_choices)
                  if self.probe is not None and "n_choices" in self.probe.cfg else 0.0)
        return {"metric": "coverage - control",
                **two_sample_power(n["real"], n["control"], chance, alpha, power, effect)}

    def run_facts(self, records: Iterable[SampleRecord]) -> dict[str, Any]:
        """extra.memorization (the contrast of real and control) and the lines the terminal summary prints."""
        s = self.contrast(records)
        return {"memorization": s, "summary": summary_lines(s)}

    def identity(self) -> dict[str, Any]:
        """Task name, data set, seed and the settings that change prompts or scores."""
        from recbench.api.task import to_plain

        return {"name": self.name, "data": to_plain(self.cfg.data), "seed": self.seed,
                "control": to_plain(self.cfg.control), "match": to_plain(self.cfg.match)}


def summary_lines(s: dict[str, Any]) -> list[str]:
    """The probe's verdict in two lines for the terminal: both rates, their difference with its interval and test."""
    r, c, d = s["real"], s["control"], s["difference"]

    def rate(x: dict[str, Any]) -> str:
        if not x["n"]:
            return "— (none probed)"
        return f"{x['rate']:.3f} ({x['k']}/{x['n']}; Wilson {x['ci_level']:.0%} [{x['ci_low']:.3f}, {x['ci_high']:.3f}])"

    lines = [f"memorization: coverage {rate(r)} | control (fabricated items) {rate(c)}"
             + (f" | chance {s['chance']:.3f}" if s.get("chance") else "")]
    if d["estimate"] is not None:
        verdict = "FLAGGED: recalls beyond the control" if d["flagged"] else "not flagged"
        lines.append(f"coverage - control {d['estimate']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}] "
                     f"({d['ci_method']}); {d['test']} p = {d['p_value']:.3g}: {verdict} at alpha {d['alpha']:g}")
    m = s["match"]
    if s.get("chance"):
        lines.append(f"recalled: the true record has the highest log-likelihood of {round(1 / s['chance'])} records")
    else:
        lines.append(f"match: rapidfuzz {m['scorer']} >= {m['threshold']:g} on the first {m['max_chars']} characters;"
                     " a copy of a title the prompt showed is never a recall")
    return lines
