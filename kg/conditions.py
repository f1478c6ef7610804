"""Shared-relation extraction: subsets of a user's history that share 1..3 (relation, target) pairs become conditions."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence

from recbench.kg.graph import KnowledgeGraph

Condition = tuple[str, str]  # (relation, target name)


@dataclass(frozen=True)
class SharedRelations:
    """A set of conditions and the history items that satisfy all of them."""

    conditions: tuple[Condition, ...]
    items: tuple[str, ...]

    @property
    def condition_num(self) -> int:
        """Number of conditions."""
        return len(self.conditions)


@dataclass
class ExtractionConfig:
    """Knobs of shared-relation extraction (paper: 1-3 shared conditions, a minimum subset size)."""

    min_conditions: int = 1
    max_conditions: int = 3
    min_subset: int = 2
    max_subset: int = 10
    relations: Optional[Sequence[str]] = None  # None = every relation in the graph
    exclude_relations: Sequence[str] = ()
    exclude_targets: Sequence[str] = ("unknown",)
    max_genre_conditions: int = 1  # a query of only genres is vague: at most this many Genre conditions
    genre_relations: Sequence[str] = ("Genre", "BELONGS_TO", "Age_rating")
    max_candidates_per_level: int = 2000  # bound on the Apriori frontier per condition count
    extra: dict = field(default_factory=dict)


def _usable(rel: str, target: str, cfg: ExtractionConfig) -> bool:
    if cfg.relations is not None and rel not in cfg.relations:
        return False
    return rel not in cfg.exclude_relations and target not in cfg.exclude_targets


def shared_relations(kg: KnowledgeGraph, history: Iterable[str], cfg: Optional[ExtractionConfig] = None) -> list[SharedRelations]:
    """All condition sets (1..max_conditions pairs) shared by >= min_subset history items, Apriori style, stable order."""
    cfg = cfg or ExtractionConfig()
    hist = [str(i) for i in dict.fromkeys(history) if kg.has_item(i)]
    holders: dict[Condition, set[str]] = defaultdict(set)
    for i in hist:
        for rel, tgt in kg.facts(i):
            if _usable(rel, tgt, cfg):
                holders[(rel, tgt)].add(i)
    frequent = sorted((c for c, s in holders.items() if len(s) >= cfg.min_subset), key=lambda c: (-len(holders[c]), c))
    order = {i: n for n, i in enumerate(hist)}
    genre_rel = set(cfg.genre_relations)

    def ok_combo(conds: tuple[Condition, ...]) -> bool:
        return len(conds) == 1 or sum(r in genre_rel for r, _ in conds) <= cfg.max_genre_conditions

    out: list[SharedRelations] = []
    level: list[tuple[tuple[Condition, ...], frozenset[str]]] = [((c,), frozenset(holders[c])) for c in frequent]
    level = level[: cfg.max_candidates_per_level]
    for size in range(1, cfg.max_conditions + 1):
        if size >= cfg.min_conditions:
            for conds, items in level:
                if len(items) <= cfg.max_subset and ok_combo(conds):
                    out.append(SharedRelations(conds, tuple(sorted(items, key=order.__getitem__))))
        if size == cfg.max_conditions:
            break
        nxt: dict[tuple[Condition, ...], frozenset[str]] = {}
        idx = {c: n for n, c in enumerate(frequent)}
        for conds, items in level:
            last = idx[conds[-1]]
            for c in frequent[last + 1:]:
                inter = items & holders[c]
                if len(inter) >= cfg.min_subset:
                    key = conds + (c,)
                    if key not in nxt:
                        nxt[key] = frozenset(inter)
                if len(nxt) >= cfg.max_candidates_per_level:
                    break
            if len(nxt) >= cfg.max_candidates_per_level:
                break
        level = list(nxt.items())
        if not level:
            break
    return out


def condition_signature(conds: Sequence[Condition]) -> tuple[Condition, ...]:
    """Order-free identity of a condition set."""
    return tuple(sorted(tuple(c) for c in conds))
