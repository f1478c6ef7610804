"""Item lists in a YAML benchmark (task.items): the catalogue file, each row's history and candidates, the list
metrics' hooks (api/item_lists.py), and two reference rows that rank items without a model (popularity, random)."""
from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any, Optional, Protocol, Sequence

from recbench.api.config import whole
from recbench.api.errors import ConfigError, DataError
from recbench.api.item_lists import ItemCatalogue, ItemList, activity_levels
from recbench.api.task import ReferenceMethod, TaskView
from recbench.api.types import Example, Outcome


def _norm(s: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", str(s).lower()).split())


def as_items(value: Any) -> list[str]:
    """A row field holding items (a list, or a JSON list / '|'-separated text) as item ids."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        text = value.strip()
        value = json.loads(text) if text.startswith("[") else text.split("|")
    return [str(v).strip() for v in value]


class ItemLists:
    """A YAML task's item lists: the catalogue (task.items.catalogue: id, title, optional '|'-separated categories)
    and the row fields holding the user's history (items.history), candidates (items.candidates) and user
    (items.user)."""

    def __init__(self, conf: Any, read_records: Any):
        self.conf = conf
        path = Path(str(conf.catalogue)).expanduser()
        if not path.is_file():
            raise ConfigError(f"task.items.catalogue: no such file: {path}")
        rows = read_records(path)
        if not rows or "id" not in rows[0]:
            raise DataError(f"{path}: the catalogue needs an 'id' column (and optional title, categories)")
        self.ids = [str(r["id"]) for r in rows]
        self.by_title = {_norm(r.get("title", "")): str(r["id"]) for r in rows if r.get("title")}
        has_cats = "categories" in rows[0]
        self.categories = {str(r["id"]): as_items(r.get("categories")) for r in rows} if has_cats else None
        self.known = set(self.ids)
        self._catalogue: Optional[ItemCatalogue] = None

    def history(self, example: Example) -> list[str]:
        """The row's history items."""
        return as_items(example.data.get(str(self.conf.history))) if self.conf.history else []

    def candidates(self, example: Example) -> Optional[list[str]]:
        """The row's candidates (None: the task gives none)."""
        return as_items(example.data.get(str(self.conf.candidates))) if self.conf.candidates else None

    def label(self, examples: list[Example]) -> dict[str, Any]:
        """Each example's user and activity level (history length) in its meta; the activity stratum."""
        users = {self.user(e): len(self.history(e)) for e in examples}
        levels, facts = activity_levels(users)
        for e in examples:
            e.meta["user"] = self.user(e)
            e.meta["activity"] = levels[self.user(e)]
        return facts

    def user(self, example: Example) -> str:
        """The row's user (items.user), else the example id."""
        return str(example.data.get(str(self.conf.user), example.id)) if self.conf.user else example.id

    def catalogue(self, examples: list[Example]) -> ItemCatalogue:
        """The catalogue with popularity from every user's history (each user once)."""
        if self._catalogue is None:
            hist = {self.user(e): self.history(e) for e in examples}
            self._catalogue = ItemCatalogue.of(self.ids, hist.values(), k=int(self.conf.k),
                                               categories=self.categories)
        return self._catalogue

    def resolve(self, name: Any) -> Optional[str]:
        """A named item as a catalogue id: the id itself, else the exact (normalised) title; None: not in it."""
        s = str(name).strip().strip("'\"`")
        return s if s in self.known else self.by_title.get(_norm(s))

    def item_list(self, example: Example, outcome: Outcome) -> Optional[ItemList]:
        """What the answer named (a list parser's items), resolved against the catalogue."""
        pred = outcome.prediction
        named: Sequence[Any] = pred if isinstance(pred, (list, tuple)) else ([] if pred is None else [pred])
        cands = self.candidates(example)
        return ItemList(tuple(self.resolve(x) for x in named), tuple(self.history(example)),
                        None if cands is None else frozenset(cands))


class ItemsTaskView(TaskView, Protocol):
    """What the item reference rows need of a YAML task (GenericTask provides it)."""

    items: Optional[ItemLists]

    def item_catalogue(self) -> Optional[ItemCatalogue]:
        """The catalogue with popularity (None without task.items)."""


class _ItemsReference(ReferenceMethod[ItemsTaskView]):
    settings_rules = {"seed": whole(null=True), "n": whole(1, null=True)}

    def _pool(self, example: Example) -> list[str]:
        items = self.task.items
        if items is None:
            raise ConfigError(f"method={self.name} ranks items: the task needs task.items.catalogue")
        seen = set(items.history(example))
        return [i for i in (items.candidates(example) or items.ids) if i not in seen]

    def _n(self) -> int:
        return int(self.cfg.get("n") or self.task.items.conf.k)


class PopularItems(_ItemsReference):
    """Reference row: the most popular items (in every user's history) among the candidates (else the catalogue),
    the user's own left out; ties by catalogue order."""

    name = "popularity"

    def predict(self, example: Example) -> Outcome:
        """The n most popular items of the pool."""
        cat = self.task.item_catalogue()
        pool = self._pool(example)
        ranked = sorted(pool, key=lambda i: (-cat.pop[cat.index[i]], cat.index[i]))
        return Outcome(ranked[: self._n()], "ok", {})


class RandomItems(_ItemsReference):
    """Reference row: n items of the pool in a random order (seeded by `seed` and the example id)."""

    name = "random_items"

    def predict(self, example: Example) -> Outcome:
        """A seeded sample of the pool."""
        pool = self._pool(example)
        rng = random.Random(f"{self.cfg.get('seed') if self.cfg.get('seed') is not None else self.seed}:{example.id}")
        return Outcome(rng.sample(pool, min(self._n(), len(pool))), "ok", {})
