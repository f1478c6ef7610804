"""LLMRec data: the P5 Beauty format (sequences, datamaps, titles) and the Amazon Reviews 2023 review format."""
from __future__ import annotations

import functools
import html
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from recbench.api.datafiles import check_unique, finite, jsonl_records, read_csv, read_json, text_lines
from recbench.api.errors import DataError
from recbench.api.types import file_sha256


def _first(root: Path, names: list[str], what: str, fix: str) -> Path:
    for n in names:
        if (root / n).exists():
            return root / n
    raise FileNotFoundError(f"{what} not found in {root} (looked for {', '.join(names)}). Fix: {fix}")


# ---- P5 Beauty (sequential / direct recommendation) -------------------------------------------
@dataclass(frozen=True)
class P5Data:
    """User sequences (chronological item ids; last = test, second-to-last = validation) and item titles."""

    sequences: dict[str, tuple[str, ...]]
    titles: dict[str, str]
    source_sha256: str  # of sequential_data.txt: ties frozen candidates to the data they were drawn from

    @property
    def items(self) -> list[str]:
        """Every item id of the catalogue, in numeric order where ids are numbers."""
        ids = set(self.titles) | {i for s in self.sequences.values() for i in s}
        return sorted(ids, key=lambda x: (len(x), x))


@functools.lru_cache(maxsize=4)
def load_p5(data_dir: str) -> P5Data:
    """Read sequential_data.txt (+ *items.tsv titles, or datamaps.json asins as a fallback) from a P5-format folder."""
    root = Path(data_dir)
    seq_p = _first(root, ["sequential_data.txt"], "P5 sequences file",
                   "point task.data_dir at a P5-format folder (e.g. ../shared/data/beauty_p5 or data/llmrec_sample/p5)")
    sequences: dict[str, tuple[str, ...]] = {}
    lines = [(no, line.split()) for no, line in text_lines(seq_p)]  # DataError: empty, not UTF-8 (naming the line)
    check_unique(((parts[0], f"{seq_p}:{no}") for no, parts in lines), "user",
                 "keep one line per user (each line is one user's whole sequence)")
    for line_no, parts in lines:
        if len(parts) < 3:
            raise DataError(f"{seq_p}:{line_no}: user {parts[0]} has {len(parts) - 1} item(s); the P5 split "
                             "needs at least 2 (history + test target)")
        sequences[parts[0]] = tuple(parts[1:])
    titles: dict[str, str] = {}
    tsv = next(iter(sorted(root.glob("*items.tsv"))), None)
    if tsv is not None:
        df = read_csv(tsv, sep="\t", dtype=str, keep_default_na=False, quoting=3)
        id_col = "p5_item_id" if "p5_item_id" in df.columns else df.columns[0]
        if "title" not in df.columns:
            raise DataError(f"{tsv}: no 'title' column; present: {list(df.columns)}. Fix the file's header")
        titles = dict(zip(df[id_col], df["title"].str.strip()))
    elif (root / "datamaps.json").exists():
        dm = read_json(root / "datamaps.json")
        titles = {k: f"item {v}" for k, v in (dm.get("id2item", {}) if isinstance(dm, dict) else {}).items()}
    if titles:  # a catalogue is given: every item of a sequence must be in it
        known = {no: parts for no, parts in lines}
        for line_no, parts in known.items():
            unknown = next((i for i in parts[1:] if i not in titles), None)
            if unknown is not None:
                table = tsv if tsv is not None else root / "datamaps.json"
                raise DataError(f"{seq_p}:{line_no}: user {parts[0]}'s sequence names item {unknown}, which {table.name} "
                                f"does not list. Fix the line, or add the item to {table}")
    for s in sequences.values():
        for i in s:
            titles.setdefault(i, f"item {i}")
    return P5Data(sequences, titles, file_sha256(seq_p))


# ---- Amazon Reviews 2023 (rating prediction, explanation, summarization) -----------------------
_BR = re.compile(r"<br\s*/?>", re.I)
RATING_SCALE = (1.0, 5.0)  # Amazon's star ratings: a review outside it is refused
REVIEW_COLUMNS = ["user_id", "item_id", "rating", "title", "text", "timestamp", "item_title"]


def _meta_titles(root: Path) -> dict[str, str]:
    for name in ("filterd_meta_items.csv", "meta_items.csv"):
        if (root / name).exists():
            m = read_csv(root / name, dtype=str, keep_default_na=False)
            if not {"parent_asin", "title"} <= set(m.columns):
                raise DataError(f"{root / name}: needs columns parent_asin and title; present: {list(m.columns)}")
            return dict(zip(m["parent_asin"], m["title"]))
    for name in ("meta.jsonl.gz", "meta.jsonl"):
        if (root / name).exists():
            out = {}
            for no, r in jsonl_records(root / name):
                if "parent_asin" not in r:
                    raise DataError(f"{root / name}:{no}: the item has no field 'parent_asin'. Fix the line")
                out[r["parent_asin"]] = r.get("title") or ""
            return out
    return {}


@functools.lru_cache(maxsize=4)
def load_reviews(data_dir: str) -> pd.DataFrame:
    """Reviews as one table (user_id, item_id, rating, title, text, timestamp, item_title), sorted per user by time.

    Reads either the per-user grouped JSON (`filtered_user_reviews.json`: [{user_id, reviews: [...]}]) or the raw
    Amazon Reviews 2023 JSONL (`reviews.jsonl[.gz]`: one review per line with parent_asin), plus optional item
    metadata (`filterd_meta_items.csv` or `meta.jsonl[.gz]`: parent_asin, title).
    """
    root = Path(data_dir)
    src = _first(root, ["filtered_user_reviews.json", "reviews.jsonl.gz", "reviews.jsonl"], "Amazon 2023 reviews",
                 "point task.data_dir at ../shared/data/amazon2023_all_beauty or data/llmrec_sample/reviews")
    rows: list[dict[str, Any]] = []
    where: list[str] = []  # each row's place in the file, for errors
    if src.name.endswith(".json"):
        users = read_json(src)
        if not isinstance(users, list):
            raise DataError(f"{src}: expected a JSON list of {{user_id, reviews: [...]}} records, got {type(users).__name__}")
        for k, u in enumerate(users):
            if not isinstance(u, dict) or "user_id" not in u or not isinstance(u.get("reviews"), list):
                raise DataError(f"{src}: record {k + 1} is not a {{user_id, reviews: [...]}} object. Fix the record")
            for j, r in enumerate(u["reviews"]):
                rows.append({"user_id": u["user_id"], **r} if isinstance(r, dict) else {"user_id": u["user_id"]})
                where.append(f"{src}: user {u['user_id']} review {j + 1}")
    else:
        for no, r in jsonl_records(src):
            rows.append(r)
            where.append(f"{src}:{no}")
    fields = ("user_id", "parent_asin", "rating", "title", "text", "timestamp")
    for w, r in zip(where, rows):
        missing = [c for c in fields if c not in r]
        if missing:
            raise DataError(f"{w}: the review lacks field(s) {missing}; present: {sorted(r)}. Fix the record")
        r["rating"] = finite(r["rating"], w, "rating")
        if not RATING_SCALE[0] <= r["rating"] <= RATING_SCALE[1]:
            raise DataError(f"{w}: field 'rating' = {r['rating']:g} is outside the {RATING_SCALE[0]:g}-{RATING_SCALE[1]:g} "
                            "star scale (it would be scored as ground truth). Fix the value or remove the review")
        r["timestamp"] = finite(r["timestamp"], w, "timestamp")
    df = pd.DataFrame(rows)
    meta = _meta_titles(root)
    df["item_id"] = df["parent_asin"].astype(str)
    if meta:
        warn_unknown_items(df["item_id"].tolist(), where, meta, src)
    names = df["product_name"] if "product_name" in df.columns else pd.Series("", index=df.index)
    df["item_title"] = [meta.get(a) or (n if isinstance(n, str) else "") or a for a, n in zip(df["item_id"], names)]
    df["rating"] = df["rating"].astype(float)
    df["timestamp"] = df["timestamp"].astype("int64")
    df["title"] = df["title"].fillna("").astype(str).map(clean_review_text)
    df["text"] = df["text"].fillna("").astype(str).map(clean_review_text)
    df = df[REVIEW_COLUMNS].drop_duplicates(["user_id", "item_id", "timestamp"])
    return df.sort_values(["user_id", "timestamp"], kind="stable").reset_index(drop=True)


def warn_unknown_items(items: list[str], where: list[str], meta: dict[str, str], src: Path) -> int:
    """Count the reviews whose item the item metadata lacks and say so in one `recbench: warning:` line (their titles
    fall back to the review's product_name, else the item id); returns the count. A warning, not a refusal: public
    metadata dumps miss a few items of a category."""
    missing = [k for k, i in enumerate(items) if i not in meta]
    if missing:
        k = missing[0]
        print(f"recbench: warning: {src}: {len(missing)} of {len(items)} reviews name an item the item metadata lacks "
              f"(first: '{items[k]}' at {where[k]}); their titles fall back to the product_name, else the item id",
              file=sys.stderr)
    return len(missing)


def clean_review_text(s: str) -> str:
    """Review text as plain text: HTML line breaks to spaces, entities unescaped, whitespace collapsed."""
    return " ".join(html.unescape(_BR.sub(" ", s)).split())


def leave_last_out(reviews: pd.DataFrame, min_history: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(train, test): each user's most recent review is the test row; users with < min_history earlier reviews are left out of test."""
    pos = reviews.groupby("user_id", sort=False).cumcount(ascending=False)
    size = reviews.groupby("user_id", sort=False)["item_id"].transform("size")
    is_test = (pos == 0) & (size > min_history)
    return reviews[~is_test].reset_index(drop=True), reviews[is_test].reset_index(drop=True)


def first_sentence(text: str) -> str:
    """The first sentence of a text (split on . ! ? followed by a space or the end; falls back to the whole text)."""
    t = " ".join(text.split())
    m = re.match(r"(.+?[.!?])(\s|$)", t)
    return (m.group(1) if m else t).strip()
