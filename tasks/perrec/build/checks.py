"""What a PerRecBench build refuses before (or while) it reads: flags out of range, paths that are missing, of the wrong
kind or not writable, ratings outside the source's scale; and what it warns about: ratings off a binary-exact grid.

Both engines call these, so the same bad input gives the same exit code and the same message shape on either."""
from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any, Iterable, Optional

from recbench.api.errors import ConfigError, DataError
from recbench.store.paths import readable_file, writable_dir

#: each source's rating scale (inclusive): MovieLens half stars, Amazon Reviews 1-5 stars; --rating-scale LO,HI instead
SCALES = {"movielens": (0.5, 5.0), "amazon-csv": (1.0, 5.0), "amazon-jsonl": (1.0, 5.0),
          "amazon-user-json": (1.0, 5.0), "parquet": (1.0, 5.0)}
#: ratings that are multiples of 1/GRID add up exactly in binary in any order, so both engines give the same averages;
#: others (3.1, 4.05) may differ in the 4th decimal between engines (docs/perrec.md, "Fidelity")
GRID = 64


def scale_for(cfg: Any, source: str) -> tuple[float, float]:
    """The build's rating scale: cfg.rating_scale when given, else the source's own."""
    return tuple(cfg.rating_scale) if cfg.rating_scale is not None else SCALES[source]  # type: ignore[return-value]


def parse_scale(text: str) -> tuple[float, float]:
    """--rating-scale LO,HI as two finite numbers with LO < HI (argparse type)."""
    import argparse

    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not LO,HI (e.g. 1,5)") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise argparse.ArgumentTypeError(f"'{text}': LO and HI must be finite numbers with LO < HI (e.g. 1,5)")
    return lo, hi


def out_of_scale(where: str, value: float, n: int, scale: tuple[float, float], source: str) -> DataError:
    """The refusal of a rating outside the scale, naming the file and line (or record)."""
    return DataError(f"{where}: rating {value:g} is outside the rating scale {scale[0]:g}-{scale[1]:g} of --source "
                     f"{source} ({n} such rating(s)). Fix the value or remove the row, or give --rating-scale LO,HI")


def warn_off_grid(where: str, value: float, n: int, total: int) -> None:
    """One `recbench: warning:` line: n of total ratings are off the binary-exact grid (first at `where`)."""
    print(f"recbench: warning: {where}: rating {value:g} and {n - 1} more of {total} are not multiples of 1/{GRID}; "
          "their averages depend on summation order, so the duckdb and pandas engines may differ in the 4th decimal "
          "(docs/perrec.md, \"Fidelity\")", file=sys.stderr)


def check_ratings(values: Any, where_of: Any, scale: Optional[tuple[float, float]], source: str) -> None:
    """Refuse the first rating outside `scale` (where_of(i) names row i), warn once about off-grid ratings; values
    are finite floats (a numpy array). scale None: no check."""
    import numpy as np

    if scale is None or not len(values):
        return
    v = np.asarray(values, dtype=float)
    bad = np.flatnonzero((v < scale[0]) | (v > scale[1]))
    if len(bad):
        raise out_of_scale(where_of(int(bad[0])), float(v[bad[0]]), len(bad), scale, source)
    off = np.flatnonzero(v * GRID != np.round(v * GRID))
    if len(off):
        warn_off_grid(where_of(int(off[0])), float(v[off[0]]), len(off), len(v))


# ---- flags -------------------------------------------------------------------------------------------------------
def _whole(value: Any, flag: str, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError(f"{flag} {value}: a whole number >= {least}. Fix: e.g. {flag} {max(least, 1) * 2}")


def _number(value: Any, flag: str, ok: bool, rule: str, example: str) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and ok):
        raise ConfigError(f"{flag} {value}: {rule}. Fix: e.g. {flag} {example}")


def check_flags(cfg: Any, eng: Any = None) -> None:
    """ConfigError naming the first selection flag (or DuckDB option) out of range, before any work starts."""
    _whole(cfg.gamma, "--gamma", 0)
    _number(cfg.lam, "--lam", cfg.lam >= 0, "a finite number >= 0", "0.6")
    _number(cfg.window_days, "--window-days", cfg.window_days > 0, "a finite number of days > 0", "30")
    for s in cfg.sizes:
        _whole(s, "--sizes", 2)
    if len(set(cfg.sizes)) != len(cfg.sizes) or not cfg.sizes:
        raise ConfigError(f"--sizes {' '.join(map(str, cfg.sizes))}: distinct group sizes >= 2. Fix: e.g. --sizes 2 3 4")
    _whole(cfg.per_size, "--per-size", 1)
    _whole(cfg.heldout_per_size, "--heldout-per-size", 0)
    f = cfg.heldout_item_fraction
    _number(f, "--heldout-item-fraction", 0 <= f < 1, "a share of query items, 0 <= f < 1", "0.2")
    if eng is not None:
        check_engine(eng)


def check_engine(eng: Any) -> None:
    """ConfigError for DuckDB options DuckDB would refuse (threads, memory limit), asked of DuckDB itself."""
    import duckdb

    _whole(eng.threads, "--threads", 1)
    _whole(eng.batch_rows, "batch_rows", 1)
    con = duckdb.connect(":memory:")
    try:
        con.execute("SET memory_limit = " + "'" + str(eng.memory_limit).replace("'", "''") + "'")
    except duckdb.Error as e:
        first = str(e).splitlines()[0].split("Error: ", 1)[-1]
        raise ConfigError(f"--memory-limit {eng.memory_limit}: DuckDB refuses it ({first}). Fix: a size such as "
                          "1GB or 512MB") from None
    finally:
        con.close()


# ---- paths -------------------------------------------------------------------------------------------------------
def check_inputs(cats: Iterable[Any]) -> None:
    """DataError naming every input that is missing, unreadable, empty or of the wrong kind (file vs folder), in one
    line, before any work (or any shard job) starts."""
    refused = []
    for c in cats:
        try:
            _check_input(c)
        except DataError as e:
            refused.append(str(e))
    if len(refused) > 1:
        raise DataError(f"{len(refused)} inputs refused, nothing started: " + " | ".join(refused))
    if refused:
        raise DataError(refused[0])


def _check_input(c: Any) -> None:
    """DataError for one category's ratings (and metadata) path."""
    path = Path(c.input)
    label = f"--category {c.domain}={path}" if c.domain else f"--input {path}"
    if c.source == "movielens":
        fix = "point it at a MovieLens folder holding ratings.csv and movies.csv (e.g. ml-latest-small)"
        if not path.is_dir():
            wrong = "no such folder" if not path.exists() else "a file, not a folder"
            raise DataError(f"{label}: {wrong} (--source movielens reads a folder). Fix: {fix}")
        for inner in ("ratings.csv", "movies.csv"):
            readable_file(path / inner, f"{label}: {inner}", fix)
    else:
        readable_file(path, label, f"point it at the ratings file of --source {c.source}")
    if c.meta is not None:
        meta = f"--category-meta {c.domain}={c.meta}" if c.domain else f"--meta {c.meta}"
        readable_file(Path(c.meta), meta, "point it at the item metadata file (JSONL or CSV with parent_asin,title)")


def check_outputs(out: Optional[str], work: Optional[str]) -> None:
    """DataError for an --out or --work-dir that is a file or cannot be written (the build's staging folder sits
    beside --out; its work folder is OUT.work or inside --work-dir)."""
    if out is not None:
        writable_dir(out, f"--out {out}", "the build")
        writable_dir(Path(out).parent, f"--out {out}", "the build")  # the staging folder .OUT.partial sits beside it
    if work is not None:
        writable_dir(work, f"--work-dir {work}", "the build's work databases")


def no_ratings(n: int, path: Any) -> None:
    """DataError when a source yielded no ratings (a header only): nothing to select groups from."""
    if not n:
        raise DataError(f"{path}: the file holds no ratings (only a header or blank lines). Fix: restore the file or "
                        "point --input at another one")


def no_groups(built: dict[str, Any], cfg: Any) -> None:
    """DataError when the selection found no test group: an empty benchmark is refused, not written."""
    if not built["groups"]:
        raise DataError(f"no group meets the selection: {built['n_eligible']} eligible ratings (more than --gamma "
                        f"{cfg.gamma} ratings before), {built['n_chains']} chains of 2+ raters more than --lam {cfg.lam} "
                        f"apart within --window-days {cfg.window_days:g}; nothing written. Fix: relax --gamma, --lam or "
                        "--window-days, or give more ratings")
