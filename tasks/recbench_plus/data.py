"""RecBench+ data: the released record format (Explicit/Implicit/Misinformed/Interest/Demographics, movie and
book; queries_all.jsonl.gz records), bundled sample folders and KG-built benchmarks, all as Examples."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

import pandas as pd

from recbench.kg.graph import RELATION_TARGET_TYPES, KnowledgeGraph
from recbench.kg.loaders import add_item_table, add_triples
from recbench.kg.queries import QUERY_TYPES, RELEASED_NAMES, query_text
from recbench.api.datafiles import check_unique, jsonl_records, read_csv, read_json, require_columns
from recbench.api.errors import ConfigError, DataError
from recbench.api.types import Example

#: released file stem / queries_all `task` -> query type
TYPE_ALIASES = {
    "explicitquery": "explicit", "implicitquery": "implicit", "misinformedquery": "misinformed",
    "interestbasedquery": "interest", "itembasedquery": "interest", "demographicsbasedquery": "demographics",
    "userbasedquery": "demographics", **{t: t for t in QUERY_TYPES},
}
CONDITION_TYPES = ("explicit", "implicit", "misinformed")


def query_type_of(name: str) -> Optional[str]:
    """Query type named in a file name or a `task` field (e.g. 'movie-UserBasedQuery' -> 'demographics')."""
    low = re.sub(r"[^a-z]", "", name.lower())
    for alias in sorted(TYPE_ALIASES, key=len, reverse=True):
        if alias.endswith("query") and alias in low:
            return TYPE_ALIASES[alias]
    return TYPE_ALIASES.get(low)


def _guess_type(records: Sequence[dict[str, Any]]) -> str:
    r = next((x for x in records if x), {})
    if "query & ground true" in r:
        return "demographics" if "group_type" in r or "group" in r else "interest"
    if "misinformed" in r:
        return "misinformed"
    if "multihop_info" in r:
        return "implicit"
    return "explicit"


def _domain_of(rec: dict[str, Any], default: str) -> str:
    keys = set(rec) | {k for q in rec.get("query & ground true", []) if isinstance(q, dict) for k in q}
    if any(k.startswith("book") for k in keys):
        return "book"
    if any(k.startswith("movie") for k in keys):
        return "movie"
    return default


def released_examples(records: Sequence[dict[str, Any]], query_type: Optional[str] = None, domain: str = "movie",
                      id_prefix: str = "") -> list[Example]:
    """Examples from released-format records; ids follow the official predictions: data_idx, or 'group-query'."""
    qtype = query_type or _guess_type(records)
    out: list[Example] = []
    for pos, rec in enumerate(records):
        dom = _domain_of(rec, domain)
        if qtype in CONDITION_TYPES:
            sub = rec.get(f"{dom}Subset", [])
            data = {"query": query_text(rec), "gt_titles": list(sub), "gt_ids": list(rec.get(f"{dom}SubsetId", [])),
                    "conditions": [list(c) for c in rec.get("sharedRelationships", [])],
                    "source_user": str(rec.get("source_user", "")), "condition": True}
            meta = {"query_type": qtype, "domain": dom, "condition_num": int(rec.get("condition_num", len(data["conditions"])))}
            out.append(Example(id=f"{id_prefix}{rec.get('data_idx', pos)}", data=data, meta=meta))
        else:
            qs = [q for q in rec.get("query & ground true", []) if q != {}]
            for j, q in enumerate(qs):
                data = {"query": q["query"], "gt_titles": list(q.get(f"{dom} subset", [])),
                        "gt_ids": list(q.get(f"{dom} subset id", [])), "conditions": q.get("conditions", []),
                        "source_user": str(rec.get("source_user", "")), "condition": False, "reason": q.get("reason", "")}
                meta = {"query_type": qtype, "domain": dom}
                if "group_type" in rec:
                    meta["group_type"] = rec["group_type"]
                out.append(Example(id=f"{id_prefix}{pos}-{j}", data=data, meta=meta))
    return out


def load_released(path: str | Path, query_type: Optional[str] = None, domain: Optional[str] = None,
                  id_prefix: str = "") -> list[Example]:
    """Examples of one released RecBench+ JSON file (type and domain from the file name unless given)."""
    p = Path(path)
    records = read_json(p)  # DataError naming the line: empty, not UTF-8, not JSON
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise DataError(f"{p}: expected a JSON list of query records (objects), got "
                        f"{type(records).__name__ if not isinstance(records, list) else 'a list with other values'}. "
                        "Fix the file (the released RecBench+ format)")
    qtype = query_type or query_type_of(p.stem) or _guess_type(records)
    dom = domain or ("book" if p.name.lower().startswith("book") else "movie")
    if qtype in CONDITION_TYPES:  # one example per record, its id the record's data_idx
        check_unique(((str(r.get("data_idx", k)), f"{p}: record {k + 1}") for k, r in enumerate(records)), "data_idx",
                     "give every record its own data_idx")
    return released_examples(records, qtype, dom, id_prefix)


def load_query_records(path: str | Path, domain: Optional[str] = None, query_type: Optional[str] = None) -> list[Example]:
    """Examples from queries_all.jsonl(.gz)-style records {domain, task, custom_id, query} (no ground truth)."""
    out = []
    where: list[str] = []
    for no, r in jsonl_records(path):  # DataError naming the line: empty, not gzip, not UTF-8, not JSON
        missing = [k for k in ("task", "domain", "custom_id", "query") if k not in r]
        if missing:
            raise DataError(f"{path}:{no}: the record lacks field(s) {missing}. Fix the line")
        qtype = query_type_of(r["task"]) or r["task"]
        if (domain and r["domain"] != domain) or (query_type and qtype != query_type):
            continue
        out.append(Example(id=str(r["custom_id"]),
                           data={"query": r["query"], "gt_titles": [], "gt_ids": [], "conditions": [],
                                 "source_user": "", "condition": qtype in CONDITION_TYPES},
                           meta={"query_type": qtype, "domain": r["domain"], "released_task": r["task"]}))
        where.append(f"{path}:{no}")
    # custom_id is unique within one domain and task (the released file repeats it across them)
    check_unique(((f"{e.meta['domain']}/{e.meta['released_task']}/{e.id}", w) for e, w in zip(out, where)),
                 "domain/task/custom_id", "give every query of a domain and task its own custom_id")
    return out


def check_query_ids(examples: Sequence[Example], path: Any) -> None:
    """Refuse queries of several domains or tasks whose custom_ids collide (they would be scored as one example):
    one ConfigError naming the id and the filters that keep one domain and task."""
    seen: dict[str, Example] = {}
    for e in examples:
        other = seen.setdefault(e.id, e)
        if other is not e:
            raise ConfigError(f"task.data.path: custom_id '{e.id}' of {path} is used by {other.meta['domain']}/"
                              f"{other.meta['released_task']} and {e.meta['domain']}/{e.meta['released_task']}: run one "
                              "domain and task at a time (set task.data.domain and task.data.query_type)")


# ---- bundles: a folder with a KG, ratings, users and released-format query files -----------------
def write_bundle(folder: str | Path, kg: KnowledgeGraph, ratings: pd.DataFrame, users: Optional[pd.DataFrame],
                 queries: dict[str, list[dict[str, Any]]], meta: Optional[dict[str, Any]] = None) -> None:
    """Write items.csv, kg.tsv, ratings.csv, users.csv and <domain>-<Type>.json files (released format)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    items = pd.DataFrame([{"item_id": i, "title": d["title"], "year": d.get("year") or ""} for i, d in kg.iter_items()])
    items.to_csv(folder / "items.csv", index=False)
    triples = pd.DataFrame([(i, r, t) for i, _ in kg.iter_items() for r, t in kg.facts(i)], columns=["item_id", "relation", "target"])
    triples.to_csv(folder / "kg.tsv", sep="\t", index=False)
    ratings.to_csv(folder / "ratings.csv", index=False)
    if users is not None:
        users.to_csv(folder / "users.csv", index=False)
    for qtype, recs in queries.items():
        (folder / f"{kg.domain}-{RELEASED_NAMES[qtype]}.json").write_text(json.dumps(recs, indent=1, ensure_ascii=False) + "\n")
    if meta is not None:
        (folder / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")


def read_bundle_kg(folder: str | Path, domain: str = "movie") -> KnowledgeGraph:
    """The KG of a bundle folder (items.csv + kg.tsv)."""
    folder = Path(folder)
    kg = KnowledgeGraph(domain)
    path = folder / "items.csv"
    items = read_csv(path, dtype=str, keep_default_na=False)
    require_columns(items, ["item_id", "title"], path)
    if items.empty:
        raise DataError(f"{path}: a header but no items; the catalogue cannot be empty. Fix: restore the file")
    check_unique(((i, f"{path}:{n + 2}") for n, i in enumerate(items["item_id"])), "item_id",
                 "give each item one row (one title per id)")
    add_item_table(kg, items, id_col="item_id", title_col="title", year_col="year")
    path = folder / "kg.tsv"
    triples = read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    require_columns(triples, ["item_id", "relation", "target"], path)
    if triples.empty:  # else every condition query fails through its first relation, which no fact uses
        raise DataError(f"{path}: kg.tsv holds no facts (a header only); the queries' conditions and the KG metrics "
                        "need them. Fix: restore the file, or rebuild the bundle from its KG")
    empty = (triples[["item_id", "relation", "target"]].apply(lambda c: c.str.strip()) == "").any(axis=1).to_numpy()
    if empty.any():
        raise DataError(f"{path}:{int(empty.argmax()) + 2}: a fact needs an item_id, a relation and a target (tab-"
                        "separated); this line lacks one. Fix the line or remove it")
    known = set(items["item_id"])
    stray = ~triples["item_id"].isin(known).to_numpy()
    if stray.any():
        k = int(stray.argmax())
        raise DataError(f"{path}:{k + 2}: a fact about item '{triples['item_id'].iloc[k]}', which {folder / 'items.csv'} "
                        "does not list. Fix the line, or add the item to items.csv")
    warn_unknown_relations(triples["relation"], path)
    return add_triples(kg, zip(*(triples[c].tolist() for c in ("item_id", "relation", "target"))))


def warn_unknown_relations(relations: pd.Series, path: Path) -> int:
    """Count the facts whose relation is outside the RecBench+ schema (RELATION_TARGET_TYPES) and say so in one
    `recbench: warning:` line: they are kept, their targets typed 'thing' (no condition type asks about them)."""
    unknown = relations[~relations.isin(list(RELATION_TARGET_TYPES))]
    if len(unknown):
        names = ", ".join(sorted(set(unknown))[:5])
        print(f"recbench: warning: {path}: {len(unknown)} of {len(relations)} facts use relations outside the RecBench+ "
              f"schema ({names}); kept, their targets typed 'thing'", file=sys.stderr)
    return len(unknown)


def check_conditions(kg: KnowledgeGraph, examples: Sequence[Example], folder: Path, domain: str) -> None:
    """Refuse a bundle query whose condition (relation, entity) no item of the KG holds: the query and the KG
    disagree, and the KG metrics (cmr, kg_existence) would score it against facts that are not there."""
    relations = set(kg.relations())
    for e in examples:
        for cond in e.data.get("conditions") or []:
            if not (isinstance(cond, (list, tuple)) and len(cond) == 2):
                continue
            rel, ent = str(cond[0]), str(cond[1])
            if kg.items_with(rel, ent):
                continue
            qtype, idx = e.id.split(":", 1) if ":" in e.id else (e.meta.get("query_type", ""), e.id)
            where = f"{folder / f'{domain}-{RELEASED_NAMES.get(qtype, qtype)}.json'}: record data_idx {idx}"
            what = (f"relation '{rel}', which no fact of kg.tsv uses (relations: {', '.join(sorted(relations))})"
                    if rel not in relations else f"entity '{ent}' under {rel}, which no item of kg.tsv has")
            raise DataError(f"{where}: the query's condition names {what}. Fix the record, or rebuild the bundle "
                            "from its KG")


def check_subset_ids(examples: Sequence[Example], kg: KnowledgeGraph, path: Any, catalogue: Any,
                     id_prefix: str = "") -> None:
    """Refuse a query whose ground-truth ids (`movieSubsetId`, `movie subset id`) name items the catalogue does not
    list: its strict_* metrics would score every answer against ids no title resolves to. One DataError naming the
    file, the record, the unknown ids (the first five and their count) and the fix."""
    for e in examples:
        if e.meta.get("domain") != kg.domain:
            continue
        unknown = [str(i) for i in e.data.get("gt_ids") or [] if not kg.has_item(str(i))]
        if not unknown:
            continue
        dom = e.meta["domain"]
        idx = e.id[len(id_prefix):]
        if e.data.get("condition"):
            where, field = f"record data_idx {idx}", f"{dom}SubsetId"
        else:
            pos, _, j = idx.rpartition("-")
            where, field = f"record {int(pos) + 1} query {int(j) + 1}", f"'{dom} subset id'"
        shown = ", ".join(unknown[:5]) + (", ..." if len(unknown) > 5 else "")
        raise DataError(f"{path}: {where}: {field} lists {len(unknown)} id(s) that {catalogue} does not list "
                        f"({shown}). Fix the record's ids, or add the items to {catalogue}")


def histories_from_ratings(ratings: pd.DataFrame, min_rating: Optional[float] = None) -> dict[str, list[str]]:
    """{user: items in time order} from a ratings table (user_id, item_id, rating, timestamp)."""
    r = ratings.copy()
    if min_rating is not None:
        r = r[r["rating"].astype(float) >= min_rating]
    r = r.sort_values(["user_id", "timestamp", "item_id"], kind="stable")
    return {str(u): [str(i) for i in g["item_id"]] for u, g in r.groupby("user_id", sort=False)}


def bundle_examples(folder: str | Path, types: Iterable[str], domain: str = "movie",
                    kg: Optional[KnowledgeGraph] = None) -> list[Example]:
    """Examples of the released-format query files in a bundle folder, ids prefixed by type; with the bundle's KG,
    their ground-truth ids are checked against items.csv (`check_subset_ids`)."""
    out = []
    for t in types:
        p = Path(folder) / f"{domain}-{RELEASED_NAMES[t]}.json"
        if p.exists():
            examples = load_released(p, t, domain, id_prefix=f"{t}:")
            if kg is not None:
                check_subset_ids(examples, kg, p, Path(folder) / "items.csv", id_prefix=f"{t}:")
            out += examples
    return out


def interleave(examples: Sequence[Example], key: str = "query_type") -> list[Example]:
    """Round-robin over the values of meta[key] (stable), so `limit=N` samples every query type."""
    groups: dict[Any, list[Example]] = {}
    for e in examples:
        groups.setdefault(e.meta.get(key), []).append(e)
    out, lists = [], list(groups.values())
    for i in range(max((len(g) for g in lists), default=0)):
        out += [g[i] for g in lists if i < len(g)]
    return out
