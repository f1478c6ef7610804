"""The catalogues the memorization probe asks about: item id -> title as each data set writes it, and the ratings
(time-ordered) that give item popularity and user histories.

One reader per file format (`task.data.format`): the MovieLens variants (ml-100k RecBole atomic files, ml-latest-small
CSVs, ML-1M `.dat`), Amazon Beauty (the P5 split, Amazon Reviews 2023 All_Beauty) and the bundled synthetic samples
(perrec_sample, recbench_plus_sample, llmrec_sample/p5). Ids are each file's own (ml-100k ids are not ML-1M ids)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import pandas as pd

from recbench.api.datafiles import check_unique, jsonl_records, numeric_columns, read_csv, require_columns, text_lines
from recbench.api.errors import ConfigError, DataError


@dataclass
class Catalogue:
    """Items (id -> title, in file order) and, where the data set has them, interactions (user, item, order)."""

    items: dict[str, str]
    #: user_id, item_id, t (time or position: sorts each user's interactions oldest first); None = no ratings
    interactions: Optional[pd.DataFrame] = None
    source: str = ""
    _deciles: Optional[dict[str, int]] = field(default=None, repr=False)

    @property
    def numeric_ids(self) -> bool:
        """True when every item id is a whole number (MovieLens), so fabricated ids can continue the range."""
        return all(i.isdigit() for i in self.items)

    def popularity(self) -> dict[str, int]:
        """Interactions per catalogue item (0 for an item nobody rated); empty without interactions."""
        if self.interactions is None:
            return {}
        counts = self.interactions["item_id"].value_counts()
        return {i: int(counts.get(i, 0)) for i in self.items}

    def deciles(self) -> dict[str, int]:
        """Popularity decile per item, 1 (least rated tenth) .. 10 (most rated tenth): items ranked by interaction
        count, ties in file order; empty without interactions."""
        if self._deciles is None:
            pop = self.popularity()
            ids = list(self.items)
            order = sorted(range(len(ids)), key=lambda k: (pop[ids[k]], k)) if pop else []
            self._deciles = {ids[k]: decile_of(rank, len(ids)) for rank, k in enumerate(order)}
        return self._deciles

    def histories(self) -> dict[str, list[str]]:
        """Each user's items oldest first (ties keep file order); empty without interactions."""
        if self.interactions is None:
            return {}
        df = self.interactions[self.interactions["item_id"].isin(self.items)]
        df = df.sort_values(["t"], kind="stable")
        return {str(u): list(g["item_id"]) for u, g in df.groupby("user_id", sort=False)}


def _titles(df: pd.DataFrame, id_col: str, title_col: str, where: Path) -> dict[str, str]:
    """id -> title (stripped), items without a title left out (nothing to probe); an id given twice is refused."""
    require_columns(df, [id_col, title_col], where)
    ids = df[id_col].astype(str).str.strip()
    check_unique(((i, f"{where}: row {k + 2}") for k, i in enumerate(ids)), "item id")
    titles = df[title_col].fillna("").astype(str).str.strip()
    return {i: t for i, t in zip(ids, titles) if t}


def _interactions(df: pd.DataFrame, user: str, item: str, t: Optional[str], where: Path) -> pd.DataFrame:
    require_columns(df, [user, item] + ([t] if t else []), where)
    if t:
        numeric_columns(df, [t], where)
    out = pd.DataFrame({"user_id": df[user].astype(str), "item_id": df[item].astype(str).str.strip(),
                        "t": df[t].astype(float) if t else range(len(df))})
    return out


def _first(root: Path, names: list[str]) -> Path:
    for n in names:
        if (root / n).exists():
            return root / n
    raise DataError(f"{root}: none of {', '.join(names)} found. Fix: point task.data.path at the data set's folder")


def read_ml100k(root: Path, id_field: str) -> Catalogue:
    """ml-100k as RecBole atomic files: ml-100k.item (item_id, movie_title, release_year), ml-100k.inter."""
    from recbench.kg.loaders import read_atomic

    p = _first(root, ["ml-100k.item"])
    items = read_atomic(p)
    require_columns(items, ["item_id", "movie_title", "release_year"], p)
    items["title"] = [f"{t} ({y})" if str(y).strip() else str(t) for t, y in zip(items["movie_title"], items["release_year"])]
    inter_p = _first(root, ["ml-100k.inter"])
    inter = _interactions(read_atomic(inter_p), "user_id", "item_id", "timestamp", inter_p)
    return Catalogue(_titles(items, "item_id", "title", p), inter, str(root))


def read_movielens_csv(root: Path, id_field: str) -> Catalogue:
    """MovieLens latest (movies.csv: movieId, title with year; ratings.csv: userId, movieId, timestamp)."""
    p = _first(root, ["movies.csv"])
    items = _titles(read_csv(p, dtype=str, keep_default_na=False), "movieId", "title", p)
    r = _first(root, ["ratings.csv"])
    return Catalogue(items, _interactions(read_csv(r, dtype=str), "userId", "movieId", "timestamp", r), str(root))


def read_movielens_dat(root: Path, id_field: str) -> Catalogue:
    """MovieLens-1M `.dat` files (movies.dat: id::title::genres; ratings.dat if present: user::item::rating::time)."""
    p = _first(root, ["movies.dat"])
    rows = []
    for no, line in text_lines(p):
        parts = line.split("::")
        if len(parts) < 2:
            raise DataError(f"{p}:{no}: expected 'MovieID::Title::Genres', got {line[:60]!r}. Fix the line")
        rows.append({"id": parts[0].strip(), "title": parts[1]})
    items = _titles(pd.DataFrame(rows), "id", "title", p)
    inter = None
    if (root / "ratings.dat").exists():
        r = root / "ratings.dat"
        df = pd.DataFrame([ln.split("::")[:4] for _, ln in text_lines(r)], columns=["u", "i", "rating", "t"])
        inter = _interactions(df, "u", "i", "t", r)
    return Catalogue(items, inter, str(root))


def read_p5(root: Path, id_field: str) -> Catalogue:
    """The P5 Amazon split: *items.tsv (p5_item_id, asin, title) and sequential_data.txt (user then items, oldest
    first). Items are keyed by `id_field` (asin: the product id the web knows; p5_item_id: the split's number)."""
    tsv = next(iter(sorted(root.glob("*items.tsv"))), None)
    if tsv is None:
        raise DataError(f"{root}: no *items.tsv (p5_item_id, asin, title). Fix: point task.data.path at a P5 folder")
    df = read_csv(tsv, sep="\t", dtype=str, keep_default_na=False, quoting=3)
    require_columns(df, ["p5_item_id", "asin", "title"], tsv)
    if id_field not in ("asin", "p5_item_id"):
        raise ConfigError(f"task.data.id_field={id_field}: must be one of asin, p5_item_id for data.format=p5")
    to_key = dict(zip(df["p5_item_id"].str.strip(), df[id_field].str.strip()))
    items = _titles(df, id_field, "title", tsv)
    seq = _first(root, ["sequential_data.txt"])
    rows = [(parts[0], to_key.get(i, i), k) for _, line in text_lines(seq)
            for parts in [line.split()] for k, i in enumerate(parts[1:])]
    return Catalogue(items, pd.DataFrame(rows, columns=["user_id", "item_id", "t"]), str(root))


def read_amazon2023(root: Path, id_field: str) -> Catalogue:
    """Amazon Reviews 2023 (filterd_meta_items.csv: parent_asin, title; All_Beauty.5core.csv.gz: user_id,
    parent_asin, rating, timestamp in ms)."""
    p = _first(root, ["filterd_meta_items.csv", "meta_items.csv"])
    items = _titles(read_csv(p, dtype=str, keep_default_na=False), "parent_asin", "title", p)
    r = next(iter(sorted(root.glob("*5core.csv*"))), None)
    if r is None:
        raise DataError(f"{root}: no *5core.csv[.gz] (user_id, parent_asin, rating, timestamp). Fix: restore the file")
    return Catalogue(items, _interactions(read_csv(r, dtype=str), "user_id", "parent_asin", "timestamp", r), str(root))


def read_perrec_sample(root: Path, id_field: str) -> Catalogue:
    """The bundled PerRecBench sample (items.jsonl: item_id, title; ratings.csv.gz: user_id, item_id, timestamp)."""
    p = _first(root, ["items.jsonl"])
    rows = [r for _, r in jsonl_records(p)]
    items = _titles(pd.DataFrame(rows), "item_id", "title", p)
    r = _first(root, ["ratings.csv.gz", "ratings.csv"])
    return Catalogue(items, _interactions(read_csv(r, dtype=str), "user_id", "item_id", "timestamp", r), str(root))


def read_recbench_plus_sample(root: Path, id_field: str) -> Catalogue:
    """The bundled RecBench+ sample (items.csv: item_id, title, year; ratings.csv: user_id, item_id, timestamp)."""
    p = _first(root, ["items.csv"])
    df = read_csv(p, dtype=str, keep_default_na=False)
    require_columns(df, ["item_id", "title", "year"], p)
    df["full"] = [f"{t} ({y})" if str(y).strip() else t for t, y in zip(df["title"], df["year"])]
    r = _first(root, ["ratings.csv"])
    inter = _interactions(read_csv(r, dtype=str), "user_id", "item_id", "timestamp", r)
    return Catalogue(_titles(df, "item_id", "full", p), inter, str(root))


READERS: dict[str, Callable[[Path, str], Catalogue]] = {
    "ml100k": read_ml100k, "movielens_csv": read_movielens_csv, "movielens_dat": read_movielens_dat,
    "p5": read_p5, "amazon2023": read_amazon2023, "perrec_sample": read_perrec_sample,
    "recbench_plus_sample": read_recbench_plus_sample,
}


#: the files that hold a format's item titles (what the control set is drawn from: its derived-cache key)
ITEM_FILES: dict[str, tuple[str, ...]] = {
    "ml100k": ("ml-100k.item",), "movielens_csv": ("movies.csv",), "movielens_dat": ("movies.dat",),
    "p5": ("*items.tsv",), "amazon2023": ("filterd_meta_items.csv", "meta_items.csv"),
    "perrec_sample": ("items.jsonl",), "recbench_plus_sample": ("items.csv",),
}


def item_files(fmt: str, path: str) -> list[Path]:
    """The item-title files of a data set folder in the given format (those that exist)."""
    root = Path(path)
    return sorted(p for pattern in ITEM_FILES.get(fmt, ()) for p in root.glob(pattern) if p.is_file())


def read_catalogue(fmt: str, path: str, id_field: str) -> Catalogue:
    """The catalogue of one data set folder in the given format (ConfigError for an unknown format or a missing
    folder, DataError naming the file for bad content)."""
    if fmt not in READERS:
        from recbench.api.errors import suggest

        raise ConfigError(f"Unknown task.data.format '{fmt}'.{suggest(fmt, list(READERS))} Valid choices: "
                          f"{', '.join(READERS)}")
    root = Path(path)
    if not root.is_dir():
        raise ConfigError(f"task.data.path '{root}' is not a folder (set RECBENCH_SHARED_DATA or task.data.path)")
    cat = READERS[fmt](root, id_field)
    if not cat.items:
        raise DataError(f"{root}: the catalogue holds no item with a title. Fix: check the item file")
    if cat.interactions is not None and cat.interactions.empty:
        raise DataError(f"{root}: the ratings file holds no interaction. Fix: restore the file")
    return cat


def decile_of(rank: int, n: int) -> int:
    """The decile (1..10) of the item at 0-based popularity rank `rank` (least rated first) among n items."""
    return min(10, 1 + (10 * rank) // n) if n else 0


