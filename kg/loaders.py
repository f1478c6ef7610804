"""Build a KnowledgeGraph from triples: named TSV triples, RecBole atomic .kg + .link files, item attribute tables."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

import pandas as pd

from recbench.kg.graph import KnowledgeGraph

#: ml-100k.named_kg.tsv relation -> canonical relation (has_genre_imdb is known to be shifted: left out by default)
ML100K_NAMED_RELATIONS: dict[str, str] = {
    "directed_by": "Directed_by", "written_by": "Written_by", "starring": "Starring",
    "has_genre_ml": "Genre", "age_rating": "Age_rating",
}
#: RecBole Freebase relation (head = film) -> canonical relation
RECBOLE_FREEBASE_RELATIONS: dict[str, str] = {
    "film.film.actor": "Starring", "film.film.directed_by": "Directed_by", "film.film.written_by": "Written_by",
    "film.film.genre": "Genre", "film.film.language": "Language", "film.film.country": "Production_Country",
    "film.film.cinematography": "Cinematography", "film.film.production_companies": "Produced_by",
    "film.film.produced_by": "Producer", "film.film.rating": "Age_rating", "film.film.subjects": "Subject",
}


def read_atomic(path: str | Path, **kw: Any) -> pd.DataFrame:
    """A RecBole atomic file (tab-separated, header 'name:type') with the ':type' suffixes dropped."""
    df = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False, quoting=3, **kw)
    df.columns = [c.split(":")[0] for c in df.columns]
    return df


def add_item_table(kg: KnowledgeGraph, table: pd.DataFrame, *, id_col: str, title_col: str,
                   year_col: Optional[str] = None, attributes: Optional[Mapping[str, str]] = None,
                   sep: Optional[str] = None) -> KnowledgeGraph:
    """Add items from a table; `attributes` maps columns to relations (values split on `sep`, e.g. genres)."""
    for row in table.itertuples(index=False):
        r = row._asdict()
        kg.add_item(r[id_col], str(r[title_col]), r.get(year_col) if year_col else None)
        for col, rel in (attributes or {}).items():
            val = r.get(col)
            if val is None or (isinstance(val, float) and pd.isna(val)) or str(val) == "":
                continue
            vals = val if isinstance(val, (list, tuple)) else (str(val).split(sep) if sep else [str(val)])
            for v in vals:
                if str(v).strip():
                    kg.add_fact(r[id_col], rel, str(v).strip())
    return kg


def add_triples(kg: KnowledgeGraph, triples: Iterable[tuple[Any, str, str]],
                relation_map: Optional[Mapping[str, str]] = None) -> KnowledgeGraph:
    """Add (item id, relation, target name) triples; with relation_map, unmapped relations are skipped."""
    def kept() -> Iterable[tuple[Any, str, str]]:
        for item, rel, target in triples:
            if relation_map is not None:
                if rel not in relation_map:
                    continue
                rel = relation_map[rel]
            target = str(target).strip()
            if target:
                yield item, rel, target

    kg.add_facts(kept())
    return kg


def add_named_tsv(kg: KnowledgeGraph, path: str | Path, relation_map: Optional[Mapping[str, str]] = None,
                  columns: tuple[str, str, str] = ("ml100k_item_id", "relation", "entity_name")) -> KnowledgeGraph:
    """Add the triples of a TSV with named entities (default columns: ml-100k.named_kg.tsv)."""
    df = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False, quoting=3)
    rmap = ML100K_NAMED_RELATIONS if relation_map is None else relation_map
    return add_triples(kg, df[list(columns)].itertuples(index=False, name=None), rmap)


def add_recbole_kg(kg: KnowledgeGraph, kg_path: str | Path, link_path: str | Path,
                   relation_map: Optional[Mapping[str, str]] = None,
                   entity_names: Optional[Mapping[str, str]] = None) -> KnowledgeGraph:
    """Add RecBole atomic `.kg` triples whose head is an item linked in `.link` (tails keep their ids unless named)."""
    link = read_atomic(link_path)
    ent2item = dict(zip(link["entity_id"], link["item_id"]))
    rmap = RECBOLE_FREEBASE_RELATIONS if relation_map is None else relation_map
    triples = read_atomic(kg_path)
    names = entity_names or {}
    for h, r, t in triples[["head_id", "relation_id", "tail_id"]].itertuples(index=False, name=None):
        if h in ent2item and r in rmap:
            kg.add_fact(ent2item[h], rmap[r], names.get(t, t))
    return kg


def load_ml100k(folder: str | Path, *, named: bool = True, recbole: bool = False) -> KnowledgeGraph:
    """The ml-100k KG: items from .item (title, year, genres), plus named triples and/or the RecBole Freebase triples."""
    folder = Path(folder)
    kg = KnowledgeGraph("movie")
    items = read_atomic(folder / "ml-100k.item")
    items["class"] = items["class"].str.split(" ")
    add_item_table(kg, items, id_col="item_id", title_col="movie_title", year_col="release_year",
                   attributes={"class": "Genre"})
    if named and (folder / "ml-100k.named_kg.tsv").exists():
        add_named_tsv(kg, folder / "ml-100k.named_kg.tsv")
    if recbole:
        add_recbole_kg(kg, folder / "ml-100k.kg", folder / "ml-100k.link")
    return kg


def load_movielens_dat(path: str | Path, kg: Optional[KnowledgeGraph] = None) -> KnowledgeGraph:
    """A MovieLens-1M style `movies.dat` (id::Title (Year)::Genre|Genre) as items with Genre facts."""
    kg = kg or KnowledgeGraph("movie")
    rows = [line.rstrip("\n").split("::") for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    df = pd.DataFrame(rows, columns=["item_id", "title", "genres"])
    df["genres"] = df["genres"].str.split("|")
    return add_item_table(kg, df, id_col="item_id", title_col="title", attributes={"genres": "Genre"})
