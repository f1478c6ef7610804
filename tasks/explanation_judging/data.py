"""Reading the LLMasEvaluator explanation ratings (df_explanation_selected.csv: one row per user-rated explanation,
the user's own 1-5 rating on each aspect) and turning an explanation's HTML into the text a judge is shown.

Every defect is one DataError naming the file, the column (and row) and the fix; nothing is dropped silently."""
from __future__ import annotations

import html
import re
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from recbench.api.datafiles import read_csv, require_columns
from recbench.api.errors import DataError

if TYPE_CHECKING:  # pandas is imported where a file is read: every plan and run registers this task's metrics
    import pandas as pd

#: the columns every row must have besides the aspects' rating columns
ID_COLUMNS = ("user_id", "movie_id", "movie_title", "explanation_type", "explanation")

# a tag, quote-aware: a tooltip's title='<img src="..."/>' holds '>' inside its quotes
_TAG = re.compile(r"""<(?:[^>"']|"[^"]*"|'[^']*')*>""")


def strip_html(text: str) -> str:
    """The explanation as a reader sees it: tags removed (tooltips included), entities decoded, spaces collapsed."""
    return " ".join(html.unescape(_TAG.sub(" ", str(text))).split())


def data_file(data_dir: str, file: str) -> Path:
    """The ratings file under data_dir; a DataError naming the path and the fix when it is not there."""
    p = Path(data_dir) / file
    if not p.is_file():
        raise DataError(f"{p}: no such file. Fix: set task.data_dir to the folder holding {file} (the bundled sample "
                        "is the default; the real data: task.data_dir=../shared/data/llmaseval)")
    return p


def _check_ratings(df: pd.DataFrame, column: str, path: Path) -> None:
    """Refuse a rating that is empty, not a number, not whole or outside 1-5, naming the first such row."""
    import pandas as pd

    vals = pd.to_numeric(df[column], errors="coerce")
    bad = vals.isna() | (vals % 1 != 0) | (vals < 1) | (vals > 5)
    if bad.any():
        i = int(bad.to_numpy().nonzero()[0][0])
        raw = df[column].iloc[i]
        shown = "empty" if pd.isna(raw) or str(raw).strip() == "" else str(raw)
        raise DataError(f"{path}:{i + 2}: column '{column}' is {shown}, not a whole rating from 1 to 5 "
                        f"({int(bad.sum())} such row(s)). Fix the value or remove the row")


def load_ratings(data_dir: str, file: str, aspects: Iterable[str]) -> pd.DataFrame:
    """The rows of the ratings file with ids as text and each aspect's rating as an int; a DataError for a missing
    column, an empty id or text, a rating that is not a whole number 1-5, or an explanation rated twice."""
    import pandas as pd

    path = data_file(data_dir, file)
    aspects = list(aspects)
    df = read_csv(path, dtype={"user_id": str, "movie_id": str}, keep_default_na=True)
    require_columns(df, [*ID_COLUMNS, *aspects], path)
    for c in ID_COLUMNS:
        empty = df[c].isna() | (df[c].astype(str).str.strip() == "")
        if empty.any():
            i = int(empty.to_numpy().nonzero()[0][0])
            raise DataError(f"{path}:{i + 2}: column '{c}' is empty ({int(empty.sum())} such row(s)). Fix the value "
                            "or remove the row")
    for a in aspects:
        _check_ratings(df, a, path)
        df[a] = pd.to_numeric(df[a]).astype(int)
    key = df["user_id"] + ":" + df["movie_id"] + ":" + df["explanation_type"]
    dup = key.duplicated()
    if dup.any():
        i = int(dup.to_numpy().nonzero()[0][0])
        raise DataError(f"{path}:{i + 2}: user {df['user_id'].iloc[i]} rated explanation type "
                        f"'{df['explanation_type'].iloc[i]}' of movie {df['movie_id'].iloc[i]} twice. Fix: keep one "
                        "row per (user_id, movie_id, explanation_type)")
    return df.reset_index(drop=True)
