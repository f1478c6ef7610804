"""A knowledge graph of catalogue items and their typed entities, with title resolution (plain dicts; a networkx
MultiDiGraph view on demand)."""
from __future__ import annotations

import gc
import re
import unicodedata
from collections import defaultdict
from typing import Any, Iterable, Iterator, Optional, Sequence

import networkx as nx

# Canonical relation name -> type of its target node (movies follow the RecBench+ movie schema, books the book schema).
RELATION_TARGET_TYPES: dict[str, str] = {
    "Directed_by": "person", "Written_by": "person", "Starring": "person", "Screenplay_by": "person",
    "Music_by": "person", "Cinematography": "person", "Edited_by": "person", "Narrated_by": "person",
    "Produced_by": "company", "Distributed_by": "company", "Genre": "genre", "Language": "language",
    "Production_Country": "country", "Age_rating": "rating", "Color_process": "thing", "Based_on": "book",
    "WRITTEN_BY": "person", "BELONGS_TO": "genre",
}
#: relations whose targets are people (the ones implicit / misinformed conditions refer to)
PERSON_RELATIONS = frozenset(r for r, t in RELATION_TARGET_TYPES.items() if t == "person")

_YEAR = re.compile(r"\s*\((\d{4})\)\s*$")
_ARTICLE_SUFFIX = re.compile(r"^(.*?),\s*(the|a|an|les|la|le|il|el|das|der|die|l')$", re.I)
_AKA = re.compile(r"\s*\([^)]*\)")


def split_year(title: str) -> tuple[str, Optional[int]]:
    """'Toy Story (1995)' -> ('Toy Story', 1995); a title without a trailing year -> (title, None)."""
    m = _YEAR.search(title)
    if not m:
        return title.strip(), None
    return title[: m.start()].strip(), int(m.group(1))


def display_title(title: str) -> str:
    """MovieLens 'Usual Suspects, The' -> 'The Usual Suspects' (trailing article moved to the front)."""
    t = title.strip()
    m = _ARTICLE_SUFFIX.match(t)
    if m:
        art = m.group(2)
        return f"{art}{'' if art.endswith(chr(39)) else ' '}{m.group(1)}"
    return t


def normalize_title(title: str) -> str:
    """Matching key of a title: year and aka-parentheses dropped, article moved, accents/punctuation/case folded."""
    t, _ = split_year(title)
    t = _AKA.sub("", t).strip() or t
    t = display_title(t)
    t = unicodedata.normalize("NFKD", t).encode("ascii", "ignore").decode()
    t = re.sub(r"&", " and ", t.lower())
    t = re.sub(r"[^a-z0-9]+", " ", t).strip()
    return re.sub(r"^(the|a|an) ", "", t)


def item_node(item_id: Any) -> str:
    """Node key of a catalogue item."""
    return f"item:{item_id}"


def entity_node(kind: str, name: str) -> str:
    """Node key of a typed entity (person, genre, company ...)."""
    return f"{kind}:{name}"


class KnowledgeGraph:
    """Items and entities as typed nodes, relations as labelled edges item -> entity. Stored as plain dicts (a
    million facts fit in a few hundred MB and load in seconds); `g` gives the networkx MultiDiGraph view on demand."""

    def __init__(self, domain: str = "movie"):
        self.domain = domain
        self._nodes: dict[str, dict[str, Any]] = {}  # node key -> attributes, in insertion order (as networkx keeps them)
        self._types: dict[str, int] = {}  # node type -> node count, in order of first appearance
        self._relations: set[str] = set()
        self._items: Optional[list[str]] = None  # cache of items(); reset when an item is added or titled
        self._graph: Optional[nx.MultiDiGraph] = None  # cache of the networkx view; reset on every change
        self._by_title: dict[tuple[str, Optional[int]], list[str]] = defaultdict(list)  # (norm title, year) -> ids
        self._by_norm: dict[str, list[str]] = defaultdict(list)  # norm title -> ids
        self._facts: dict[str, dict[tuple[str, str], str]] = defaultdict(dict)  # item id -> ordered facts -> target type
        self._holders: dict[tuple[str, str], dict[str, None]] = defaultdict(dict)  # (relation, target) -> item ids

    # ---- building ---------------------------------------------------------------------------
    def _new_node(self, node: str, attrs: dict[str, Any]) -> None:
        self._nodes[node] = attrs
        self._types[attrs["type"]] = self._types.get(attrs["type"], 0) + 1

    def add_item(self, item_id: Any, title: str, year: Optional[int] = None, **attrs: Any) -> str:
        """Add (or update) a catalogue item; a year inside the title is split off when `year` is not given."""
        iid = str(item_id)
        base, y = split_year(title)
        year = int(year) if year not in (None, "") and str(year).isdigit() else y
        node = item_node(iid)
        old = self._nodes.get(node)
        if old is not None and old.get("title") is not None:
            for key in {(normalize_title(old["title"]), old.get("year")), (normalize_title(old["title"]), None)}:
                if iid in self._by_title.get(key, []):
                    self._by_title[key].remove(iid)
            if iid in self._by_norm.get(normalize_title(old["title"]), []):
                self._by_norm[normalize_title(old["title"])].remove(iid)
        new = {"type": "item", "id": iid, "title": base, "year": year, **attrs}
        if old is None:
            self._new_node(node, new)
        else:
            old.update(new)
        self._items = self._graph = None
        n = normalize_title(base)
        self._by_title[(n, year)].append(iid)
        if year is not None:
            self._by_title[(n, None)].append(iid)
        self._by_norm[n].append(iid)
        return node

    def add_fact(self, item_id: Any, relation: str, target: str, target_type: Optional[str] = None) -> None:
        """Add the edge item --relation--> target (target node typed by the relation unless given)."""
        self.add_facts(((item_id, relation, target),), target_type)

    def add_facts(self, triples: Iterable[tuple[Any, str, str]], target_type: Optional[str] = None) -> None:
        """add_fact for each (item id, relation, target) triple, in one loop (a million facts in seconds)."""
        was_on = gc.isenabled()
        gc.disable()  # the millions of small dicts and tuples would trigger full collections costing as much as the adding
        try:
            self._add_facts(triples, target_type)
        finally:
            if was_on:
                gc.enable()
        self._graph = None

    def _add_facts(self, triples: Iterable[tuple[Any, str, str]], target_type: Optional[str]) -> None:
        nodes, all_facts, holders, relations = self._nodes, self._facts, self._holders, self._relations
        canon: dict[tuple[str, str], tuple[str, str]] = {}
        for item, relation, target in triples:
            iid, target = str(item), str(target)
            node = item_node(iid)
            if node not in nodes:
                self._new_node(node, {"type": "item", "id": iid, "title": None, "year": None})
            kind = target_type or RELATION_TARGET_TYPES.get(relation, "thing")
            tnode = entity_node(kind, target)
            if tnode not in nodes:
                self._new_node(tnode, {"type": kind, "name": target})
            facts, key = all_facts[iid], (relation, target)
            key = canon.setdefault(key, key)  # one tuple (and target string) per distinct fact, shared by every item
            if key not in facts:
                facts[key] = kind
                holders[key][iid] = None
                relations.add(relation)

    @property
    def g(self) -> nx.MultiDiGraph:
        """The graph as a networkx MultiDiGraph (built on first use after a change): for graph algorithms."""
        if self._graph is None:
            g = nx.MultiDiGraph()
            g.add_nodes_from((n, dict(d)) for n, d in self._nodes.items())
            g.add_edges_from((item_node(i), entity_node(kind, t), r, {"relation": r})
                             for i, facts in self._facts.items() for (r, t), kind in facts.items())
            self._graph = g
        return self._graph

    # ---- reading ----------------------------------------------------------------------------
    def items(self) -> list[str]:
        """Ids of all catalogue items with a title, in insertion order."""
        if self._items is None:
            self._items = [d["id"] for d in self._nodes.values() if d["type"] == "item" and d.get("title") is not None]
        return list(self._items)

    def has_item(self, item_id: Any) -> bool:
        """True when the item is in the graph."""
        return item_node(item_id) in self._nodes

    def title(self, item_id: Any, with_year: bool = True) -> str:
        """'Title (Year)' (or the bare title) of an item."""
        d = self._nodes[item_node(item_id)]
        return f"{d['title']} ({d['year']})" if with_year and d.get("year") else str(d["title"])

    def display(self, item_id: Any, with_year: bool = True) -> str:
        """Reader-facing title: 'The Usual Suspects (1995)' for MovieLens 'Usual Suspects, The'."""
        d = self._nodes[item_node(item_id)]
        t = display_title(str(d["title"]))
        return f"{t} ({d['year']})" if with_year and d.get("year") else t

    def title_year(self, item_id: Any) -> tuple[str, Optional[int]]:
        """(title, year) of an item."""
        d = self._nodes[item_node(item_id)]
        return d["title"], d.get("year")

    def relations(self) -> list[str]:
        """All relation names used in the graph, sorted."""
        return sorted(self._relations)
    def facts(self, item_id: Any) -> list[tuple[str, str]]:
        """All (relation, target name) pairs of an item, in insertion order."""
        return list(self._facts.get(str(item_id), {}))

    def targets(self, item_id: Any, relation: str) -> list[str]:
        """Names of the item's targets under a relation."""
        return [t for r, t in self.facts(item_id) if r == relation]

    def items_with(self, relation: str, target: str) -> list[str]:
        """Ids of the items linked to target by relation."""
        return list(self._holders.get((relation, str(target)), {}))

    def has_fact(self, item_id: Any, relation: str, target: str) -> bool:
        """True when item --relation--> target is in the graph."""
        return (relation, str(target)) in self._facts.get(str(item_id), {})

    def satisfies(self, item_id: Any, conditions: Iterable[Sequence[str]]) -> bool:
        """True when the item has every (relation, target) condition."""
        facts = self._facts.get(str(item_id), {})
        return all((r, str(t)) in facts for r, t in conditions)

    def items_satisfying(self, conditions: Sequence[Sequence[str]], among: Optional[Iterable[Any]] = None) -> list[str]:
        """Items (of `among`, or of the whole catalogue) that satisfy all conditions."""
        conds = [tuple(c) for c in conditions]
        if among is None:
            pools = [set(self.items_with(r, t)) for r, t in conds]
            cand = set.intersection(*pools) if pools else set(self.items())
            return [i for i in self.items() if i in cand]
        return [str(i) for i in among if self.has_item(i) and self.satisfies(i, conds)]

    def entities(self, kind: Optional[str] = None) -> list[str]:
        """Names of entity nodes (of one type if given)."""
        return [d["name"] for d in self._nodes.values() if d["type"] != "item" and (kind is None or d["type"] == kind)]

    # ---- title resolution -------------------------------------------------------------------
    def resolve(self, title: str, year: Optional[int] = None) -> Optional[str]:
        """Item id of a title ('Title (Year)', 'Title, The', or a bare title); None when unknown or ambiguous."""
        base, y = split_year(title)
        year = year if year is not None else y
        n = normalize_title(base)
        ids = self._by_title.get((n, year), []) if year is not None else []
        if not ids:
            ids = self._by_norm.get(n, [])
        if not ids:
            return None
        return ids[0]

    def resolve_all(self, titles: Iterable[str]) -> list[Optional[str]]:
        """resolve() for each title."""
        return [self.resolve(t) for t in titles]

    def iter_items(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """(item id, node attributes) of every item."""
        for d in self._nodes.values():
            if d["type"] == "item" and d.get("title") is not None:
                yield d["id"], d

    def stats(self) -> dict[str, Any]:
        """Counts of nodes per type and edges per relation (in the order networkx walks its nodes and edges)."""
        rels: dict[str, int] = defaultdict(int)
        for node, d in self._nodes.items():
            if d["type"] != "item":
                continue
            by_target: dict[tuple[str, str], list[str]] = {}  # an item's edges grouped by target node, as networkx
            for (r, t), kind in self._facts.get(d["id"], {}).items():
                by_target.setdefault((kind, t), []).append(r)
            for rs in by_target.values():
                for r in rs:
                    rels[r] += 1
        return {"nodes": dict(self._types), "edges": dict(rels)}
