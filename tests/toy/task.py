"""The toy task the core tests run on: rank a listener's albums (2, 3 or 4 per example) by the rating the listener
gave them. 36 examples in tests/toy/data/examples.jsonl, one model method (`toy_rank`: one prompt, a JSON ranking;
order-auditable; `rounds: 2` asks a second round to check the answer) and one model-free method (`toy_popular`:
most popular first). It names nothing of any benchmark: what the core does with it, it does with every task."""
from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

from recbench.api.config import flag, list_of, one_of, text, whole
from recbench.api.datafiles import jsonl_records
from recbench.api.errors import ConfigError, DataError
from recbench.api.metrics import MetricSpec
from recbench.api.parsing import Parsed, parse_json
from recbench.api.task import Method, ReferenceMethod, Task
from recbench.api.variant import PLAIN, Variant
from recbench.api.types import Constraint, Display, Example, MethodGen, Outcome, Request
from recbench.stats.bootstrap import kendall_tau_ranks

LEVELS = ("easy", "medium", "hard")
LABELS = [f"Item {chr(65 + i)}" for i in range(26)]


def true_order(example: Example) -> list[str]:
    """Item ids, highest rated first (ratings within an example are distinct)."""
    return [it["id"] for it in sorted(example.data["items"], key=lambda it: -it["score"])]


def display_order(example: Example, seed: int, order: int = 0) -> list[dict]:
    """The items as shown: the data order for order 0, a seeded permutation of it for order k > 0."""
    items = list(example.data["items"])
    if order:
        random.Random(f"{seed}-{example.id}-{order}").shuffle(items)
    return items


def parse_ranking(text: str, labels: list[str]) -> Parsed:
    """{"ranking": [labels]} -> the labels best first; a partial ranking is completed in display order (repaired)."""
    p = parse_json(text, expect=dict)
    if not p.ok:
        return p
    raw = p.value.get("ranking")
    if not isinstance(raw, list):
        return Parsed(None, "failed", "no 'ranking' list")
    ranked = list(dict.fromkeys(x for x in raw if x in labels))
    if not ranked:
        return Parsed(None, "failed", "no known label")
    status = p.status if len(ranked) == len(raw) == len(labels) else "repaired"
    return Parsed(ranked + [lab for lab in labels if lab not in ranked], status, p.note)


class ToyRank(Method):
    """Ask for a JSON ranking of the shown items (method.rounds=2: then ask the model to check it, once)."""

    name = "toy_rank"
    single_round = True
    variants = frozenset({"order"})  # honours Variant.order (the order audit)
    settings_rules = {"max_tokens": whole(1), "rounds": whole(1, 2), "constrained": flag()}

    def asks_one_round(self) -> bool:
        """One round unless method.rounds asks for a second."""
        return int(self.cfg.rounds) == 1 and super().asks_one_round()

    def run(self, example: Example, variant: Variant = PLAIN) -> MethodGen:
        """Yield the ranking request (and the check), return the ranking of item ids (`variant.order` k: the k-th
        display order, and what was shown)."""
        order = variant.order
        items = display_order(example, self.seed, order or 0)
        labels = LABELS[: len(items)]
        lines = [f"{lab}: {it['title']} ({it['genre']})" for lab, it in zip(labels, items)]
        messages = [{"role": "system", "content": "You rank albums for a listener."},
                    {"role": "user", "content": f"A listener who likes {example.data['likes']} rated these "
                                                f"{len(items)} albums:\n" + "\n".join(lines) +
                                                "\nRank all of them, highest rated first. Answer with JSON: "
                                                '{"ranking": ["Item A", ...]}'}]
        schema = {"type": "object", "properties": {"ranking": {"type": "array", "items": {"enum": labels}}},
                  "required": ["ranking"]}
        constraint = Constraint.json_schema(schema) if self.cfg.constrained else None
        sp = self.sampling(int(self.cfg.max_tokens))
        (resp,) = yield [Request.chat(messages, sp, constraint=constraint, example_id=example.id)]
        if int(self.cfg.rounds) == 2 and resp.ok:
            check = messages + [{"role": "assistant", "content": resp.text},
                                {"role": "user", "content": "Check your ranking. Answer with the JSON again."}]
            (resp,) = yield [Request.chat(check, sp, constraint=constraint, example_id=example.id)]
        parsed = parse_ranking(resp.text, labels)
        by_label = {lab: it["id"] for lab, it in zip(labels, items)}
        ranked = [by_label[lab] for lab in parsed.value] if parsed.ok else None
        # audited: display order and ranking for recbench.audits.order
        display = Display([it["id"] for it in items], ranked) if order is not None else None
        return Outcome(prediction={"order": ranked}, parse_status=parsed.status, notes=[parsed.note],
                       display=display)


class ToyPopular(ReferenceMethod):
    """Reference row without a model: the most popular item first."""

    name = "toy_popular"

    def predict(self, example: Example) -> Outcome:
        """The items by popularity, most popular first."""
        return Outcome(prediction={"order": [it["id"] for it in sorted(example.data["items"],
                                                                        key=lambda it: -it["popularity"])]})


def root_mean_square(values: list[float]) -> float:
    """sqrt(mean(x^2))."""
    return math.sqrt(sum(v * v for v in values) / len(values))


class ToyTask(Task):
    """36 examples (12 per level; levels easy/medium/hard show 2/3/4 items), six listeners (the cluster unit)."""

    name = "toy"
    methods = {m.name: m for m in (ToyRank, ToyPopular)}
    breakdown_by = ("level",)
    breakdown_order = {"level": LEVELS}
    headline_metric = "toy_tau"
    cluster_by = "user"
    metric_specs = (
        MetricSpec("toy_tau", doc="Kendall tau of the true vs the predicted order (a failed answer scores 0)"),
        MetricSpec("toy_hit", binary=True, doc="1 when the item ranked first is the one rated highest"),
        MetricSpec("toy_miss", higher_is_better=False, doc="rank (0 = first) given to the item rated highest; "
                                                           "undefined when the answer failed"),
        MetricSpec("toy_miss_rms", higher_is_better=False, aggregation="corpus", corpus=root_mean_square,
                   per_example_name="toy_miss", doc="root mean square of toy_miss over the run"),
    )
    settings_rules = {"data_dir": text(), "levels": list_of(one_of(*LEVELS))}

    def __init__(self, cfg: Any):
        super().__init__(cfg)
        self.name = str(self.cfg.name)

    def identity(self) -> dict[str, Any]:
        """Task name, data folder and levels."""
        return {"name": self.name, "data_dir": str(self.cfg.data_dir), "levels": list(self.cfg.levels)}

    def load(self) -> list[Example]:
        """The examples of the configured levels from task.data_dir/examples.jsonl, in file order."""
        path = Path(str(self.cfg.data_dir)) / "examples.jsonl"
        if not path.is_file():
            raise ConfigError(f"task.data_dir: no file examples.jsonl in {path.parent}")
        out = []
        for line, rec in jsonl_records(path):
            for key in ("id", "level", "user", "likes", "items"):
                if key not in rec:
                    raise DataError(f"{path}:{line}: the example has no field '{key}'")
            if rec["level"] in self.cfg.levels:
                out.append(Example(id=str(rec["id"]), data=rec, meta={"level": rec["level"], "user": rec["user"]}))
        return out

    def truth(self, example: Example) -> Any:
        """The item ids, highest rated first."""
        return true_order(example)

    def score(self, example: Example, outcome: Outcome) -> dict[str, float]:
        """toy_tau, toy_hit and toy_miss of the predicted order."""
        truth = true_order(example)
        pred = (outcome.prediction or {}).get("order")
        if outcome.parse_status == "failed" or not pred:
            return {"toy_tau": 0.0, "toy_hit": 0.0, "toy_miss": math.nan}
        return {"toy_tau": kendall_tau_ranks(truth, pred), "toy_hit": float(pred[0] == truth[0]),
                "toy_miss": float(pred.index(truth[0]))}


def examples() -> list[dict]:
    """The toy data file's records."""
    return [json.loads(x) for x in DATA.read_text().splitlines()]


DATA = Path(__file__).resolve().parent / "data" / "examples.jsonl"
