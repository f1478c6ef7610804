"""The builder's bad-input table (docs/fuzz.md, "The builder"): each source format x each kind of bad field, each bad
selection flag and each bad path, for `python -m recbench.build perrec` on both engines. Each case says what is
planted and a substring of the one `recbench:` line; test_fuzz_build runs it on every engine that reads the format
and checks that both engines name the same place."""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

ROWS = 2_000  # the bad row sits in the middle, past the first 1,000 rows
BAD = ROWS // 2


@dataclass(frozen=True)
class Format:
    """One input layout: how rows are written, which engines read it, its header lines and the --source."""

    id: str
    source: str
    engines: tuple[str, ...]
    header: int  # lines before the first row (CSV: 1)
    write: Callable[[Path, list[dict], Optional[str]], str]  # (folder, rows, raw text of the bad line) -> --input


def _row(i: int) -> dict:
    return {"user_id": f"u{i % 97}", "item_id": f"b{i % 101}", "rating": float(1 + i % 5), "timestamp": 1_500_000_000 + i * 60}


def _csv(names: tuple[str, str], gz: bool = False) -> Callable[[Path, list[dict], Optional[str]], str]:
    def write(folder: Path, rows: list[dict], raw: Optional[str]) -> str:
        lines = [f"{r['user_id']},{r['item_id']},{r['rating']},{r['timestamp']}" for r in rows]
        header = f"{names[0]},{names[1]},rating,timestamp"
        if raw is not None and raw.startswith("HEADER:"):
            header, raw = raw[len("HEADER:"):], None
        if raw is not None:
            lines[BAD] = raw
        text = header + "\n" + "".join(f"{x}\n" for x in lines)
        if names[0] == "userId":  # MovieLens: a folder
            folder = folder / "ml"
            folder.mkdir()
            (folder / "movies.csv").write_text("movieId,title,genres\nb1,A,x\n")
            (folder / "ratings.csv").write_text(text)
            return str(folder)
        p = folder / ("ratings.csv.gz" if gz else "ratings.csv")
        p.write_bytes(gzip.compress(text.encode(), mtime=0) if gz else text.encode())
        return str(p)
    return write


def _jsonl(gz: bool = False) -> Callable[[Path, list[dict], Optional[str]], str]:
    def write(folder: Path, rows: list[dict], raw: Optional[str]) -> str:
        lines = [json.dumps({"user_id": r["user_id"], "parent_asin": r["item_id"], "rating": r["rating"],
                             "timestamp": r["timestamp"] * 1000}) for r in rows]
        if raw is not None:
            lines[BAD] = raw
        text = "".join(f"{x}\n" for x in lines) or "\n\n"  # no rows: blank lines only
        p = folder / ("reviews.jsonl.gz" if gz else "reviews.jsonl")
        p.write_bytes(gzip.compress(text.encode(), mtime=0) if gz else text.encode())
        return str(p)
    return write


def _parquet(folder: Path, rows: list[dict], raw: Optional[str]) -> str:
    import pandas as pd

    df = pd.DataFrame(rows).rename(columns={"item_id": "parent_asin"})
    if raw is not None:
        field, value = raw.split("=", 1)
        if field == "drop":
            df = df.drop(columns=[value])
        else:
            df[field] = df[field].astype(object if value == "None" else float)
            df.loc[BAD, field] = None if value == "None" else float(value)
    p = folder / "ratings.parquet"
    df.to_parquet(p)
    return str(p)


FORMATS = (
    Format("movielens", "movielens", ("duckdb", "pandas"), 1, _csv(("userId", "movieId"))),
    Format("amazon-csv", "amazon-csv", ("duckdb", "pandas"), 1, _csv(("user_id", "parent_asin"))),
    Format("amazon-csv-gz", "amazon-csv", ("duckdb", "pandas"), 1, _csv(("user_id", "parent_asin"), gz=True)),
    Format("amazon-jsonl", "amazon-jsonl", ("duckdb", "pandas"), 0, _jsonl()),
    Format("amazon-jsonl-gz", "amazon-jsonl", ("duckdb", "pandas"), 0, _jsonl(gz=True)),
    Format("parquet", "parquet", ("duckdb",), 0, _parquet),
)


@dataclass(frozen=True)
class Defect:
    """One kind of bad field: its raw text per layout ('csv', 'json', 'parquet'; absent = not expressible there) and
    a substring of the refusal (None: the refusal names the bad row's file and line)."""

    id: str
    raw: dict[str, Optional[str]]
    message: Optional[str] = None
    rows: bool = True  # False: the file holds no rows at all


_J = '{{"user_id": "u5", "parent_asin": "b7", "rating": {r}, "timestamp": {t}}}'
DEFECTS = (
    Defect("rating-above-scale", {"csv": "u5,b7,6,1500000000", "json": _J.format(r=6, t=1), "parquet": "rating=6"},
           "is outside the rating scale"),
    Defect("rating-1e300", {"csv": "u5,b7,1e300,1500000000", "json": _J.format(r="1e300", t=1),
                            "parquet": "rating=1e300"}, "is outside the rating scale"),
    Defect("rating-negative", {"csv": "u5,b7,-1,1500000000", "json": _J.format(r=-1, t=1), "parquet": "rating=-1"},
           "is outside the rating scale"),
    Defect("rating-nan", {"csv": "u5,b7,NaN,1500000000", "json": _J.format(r="NaN", t=1), "parquet": "rating=nan"},
           "not a finite number"),
    Defect("rating-inf", {"csv": "u5,b7,inf,1500000000", "json": _J.format(r="Infinity", t=1),
                          "parquet": "rating=inf"}, "not a finite number"),
    Defect("rating-empty", {"csv": "u5,b7,,1500000000", "json": _J.format(r="null", t=1), "parquet": "rating=None"},
           ""),
    Defect("rating-text", {"csv": "u5,b7,four,1500000000", "json": _J.format(r='"four"', t=1)}, "not a finite number"),
    Defect("timestamp-text", {"csv": "u5,b7,4,soon", "json": _J.format(r=4, t='"soon"')}, "not a finite number"),
    Defect("extra-field", {"csv": "u5,b7,4,1500000000,9"}, "not a well-formed line"),
    Defect("malformed-line", {"json": '{"user_id": "u5", broken'}, ""),
    Defect("missing-field", {"json": '{"user_id": "u5", "parent_asin": "b7", "timestamp": 1}'}, ""),
    Defect("missing-column", {"csv": "HEADER:user,item,stars,timestamp", "parquet": "drop=rating"},
           "missing column(s)"),
    Defect("no-rows", {"csv": None, "json": None}, "holds no", rows=False),
)


def layout(fmt: Format) -> str:
    """The raw-text key of a format: csv, json or parquet."""
    return "parquet" if fmt.id == "parquet" else "json" if "jsonl" in fmt.id else "csv"


def matrix() -> list[tuple[Format, Defect]]:
    """Every (format, defect) pair the format can express."""
    return [(f, d) for f in FORMATS for d in DEFECTS if layout(f) in d.raw]


# ---- flags and paths: run on both engines against one good MovieLens folder --------------------------------------
FLAGS = (
    ("per-size-negative", ("--per-size", "-5"), "--per-size -5: a whole number >= 1"),
    ("per-size-zero", ("--per-size", "0"), "--per-size 0: a whole number >= 1"),
    ("heldout-negative", ("--heldout-per-size", "-1"), "--heldout-per-size -1: a whole number >= 0"),
    ("window-zero", ("--window-days", "0"), "a finite number of days > 0"),
    ("window-inf", ("--window-days", "inf"), "a finite number of days > 0"),
    ("lam-nan", ("--lam", "nan"), "--lam nan: a finite number >= 0"),
    ("lam-negative", ("--lam", "-0.1"), "--lam -0.1: a finite number >= 0"),
    ("gamma-negative", ("--gamma", "-1"), "--gamma -1: a whole number >= 0"),
    ("gamma-text", ("--gamma", "many"), "argument --gamma: invalid int value"),
    ("size-one", ("--sizes", "1", "2"), "--sizes 1: a whole number >= 2"),
    ("sizes-repeated", ("--sizes", "2", "2"), "distinct group sizes"),
    ("heldout-fraction-one", ("--heldout-item-fraction", "1"), "0 <= f < 1"),
    ("threads-zero", ("--threads", "0"), "--threads 0: a whole number >= 1"),
    ("memory-limit-text", ("--memory-limit", "lots"), "--memory-limit lots: DuckDB refuses it"),
    ("rating-scale-reversed", ("--rating-scale", "5,1"), "LO < HI"),
    ("rating-scale-text", ("--rating-scale", "low,high"), "is not LO,HI"),
    ("rating-scale-excludes-data", ("--rating-scale", "2,5"), "is outside the rating scale 2-5"),
)

PATHS = (  # (id, planted layout, args after --source; {good} = a good MovieLens folder, {tmp} = the case folder)
    ("input-missing", ("--source", "amazon-jsonl", "--input", "{tmp}/nope.jsonl"), "nope.jsonl: no such file"),
    ("input-a-folder", ("--source", "amazon-jsonl", "--input", "{tmp}"), ": a folder, not a file"),
    ("input-a-file-for-movielens", ("--source", "movielens", "--input", "{good}/ratings.csv"), "a file, not a folder"),
    ("movielens-folder-without-ratings", ("--source", "movielens", "--input", "{tmp}/empty"),
     "ratings.csv: no such file"),
    ("movielens-without-movies", ("--source", "movielens", "--input", "{tmp}/nomovies"), "movies.csv: no such file"),
    ("meta-missing", ("--source", "amazon-jsonl", "--input", "{good}/reviews.jsonl", "--meta", "{tmp}/meta.jsonl"),
     "--meta {tmp}/meta.jsonl: no such file"),
    ("out-a-file", ("--source", "movielens", "--input", "{good}", "--out", "{tmp}/afile"), "a file, not a folder"),
    ("out-unwritable", ("--source", "movielens", "--input", "{good}", "--out", "/proc/recbench-x"), "cannot write in"),
    ("out-under-a-file", ("--source", "movielens", "--input", "{good}", "--out", "{tmp}/afile/x"),
     "is a file, not a folder"),
    ("work-dir-a-file", ("--source", "movielens", "--input", "{good}", "--work-dir", "{tmp}/afile"),
     "--work-dir {tmp}/afile: a file, not a folder"),
)
