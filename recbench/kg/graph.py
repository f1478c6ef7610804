"""A knowledge graph of catalogue items and their typed entities (networkx MultiDiGraph), with title resolution."""
from __future__ import annotations

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
    """Items and entities as typed nodes, relations as labelled edges item -> entity (MultiDiGraph)."""

    def __init__(self, domain: str = "movie"):
        self.domain = domain
        self.g = nx.MultiDiGraph()
        self._by_title: dict[tuple[str, Optional[int]], list[str]] = defaultdict(list)  # (norm title, year) -> ids
        self._by_norm: dict[str, list[str]] = defaultdict(list)  # norm title -> ids
        self._facts: dict[str, dict[tuple[str, str], None]] = defaultdict(dict)  # item id -> ordered fact set
        self._holders: dict[tuple[str, str], dict[str, None]] = defaultdict(dict)  # (relation, target) -> item ids

    # ---- building ---------------------------------------------------------------------------
    def add_item(self, item_id: Any, title: str, year: Optional[int] = None, **attrs: Any) -> str:
        """Add (or update) a catalogue item; a year inside the title is split off when `year` is not given."""
        iid = str(item_id)
        base, y = split_year(title)
        year = int(year) if year not in (None, "") and str(year).isdigit() else y
        node = item_node(iid)
        if node in self.g and self.g.nodes[node].get("title") is not None:
            old = self.g.nodes[node]
            for key in {(normalize_title(old["title"]), old.get("year")), (normalize_title(old["title"]), None)}:
                if iid in self._by_title.get(key, []):
                    self._by_title[key].remove(iid)
            if iid in self._by_norm.get(normalize_title(old["title"]), []):
                self._by_norm[normalize_title(old["title"])].remove(iid)
        self.g.add_node(node, type="item", id=iid, title=base, year=year, **attrs)
        n = normalize_title(base)
        self._by_title[(n, year)].append(iid)
        if year is not None:
            self._by_title[(n, None)].append(iid)
        self._by_norm[n].append(iid)
        return node

    def add_fact(self, item_id: Any, relation: str, target: str, target_type: Optional[str] = None) -> None:
        """Add the edge item --relation--> target (target node typed by the relation unless given)."""
        node = item_node(item_id)
        if node not in self.g:
            self.g.add_node(node, type="item", id=str(item_id), title=None, year=None)
        kind = target_type or RELATION_TARGET_TYPES.get(relation, "thing")
        tnode = entity_node(kind, str(target))
        if tnode not in self.g:
            self.g.add_node(tnode, type=kind, name=str(target))
        if not self.g.has_edge(node, tnode, key=relation):
            self.g.add_edge(node, tnode, key=relation, relation=relation)
            self._facts[str(item_id)][(relation, str(target))] = None
            self._holders[(relation, str(target))][str(item_id)] = None

    # ---- reading ----------------------------------------------------------------------------
    def items(self) -> list[str]:
        """Ids of all catalogue items with a title, in insertion order."""
        return [d["id"] for _, d in self.g.nodes(data=True) if d.get("type") == "item" and d.get("title") is not None]

    def has_item(self, item_id: Any) -> bool:
        """True when the item is in the graph."""
        return item_node(item_id) in self.g

    def title(self, item_id: Any, with_year: bool = True) -> str:
        """'Title (Year)' (or the bare title) of an item."""
        d = self.g.nodes[item_node(item_id)]
        return f"{d['title']} ({d['year']})" if with_year and d.get("year") else str(d["title"])

    def display(self, item_id: Any, with_year: bool = True) -> str:
        """Reader-facing title: 'The Usual Suspects (1995)' for MovieLens 'Usual Suspects, The'."""
        d = self.g.nodes[item_node(item_id)]
        t = display_title(str(d["title"]))
        return f"{t} ({d['year']})" if with_year and d.get("year") else t

    def title_year(self, item_id: Any) -> tuple[str, Optional[int]]:
        """(title, year) of an item."""
        d = self.g.nodes[item_node(item_id)]
        return d["title"], d.get("year")

    def relations(self) -> list[str]:
        """All relation names used in the graph, sorted."""
        return sorted({k for _, _, k in self.g.edges(keys=True)})

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
        return [d["name"] for _, d in self.g.nodes(data=True) if d.get("type") != "item" and (kind is None or d["type"] == kind)]

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
        for _, d in self.g.nodes(data=True):
            if d.get("type") == "item" and d.get("title") is not None:
                yield d["id"], d

    def stats(self) -> dict[str, Any]:
        """Counts of nodes per type and edges per relation."""
        types: dict[str, int] = defaultdict(int)
        for _, d in self.g.nodes(data=True):
            types[d.get("type", "?")] += 1
        rels: dict[str, int] = defaultdict(int)
        for _, _, k in self.g.edges(keys=True):
            rels[k] += 1
        return {"nodes": dict(types), "edges": dict(rels)}
