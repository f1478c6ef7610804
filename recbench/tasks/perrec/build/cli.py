"""Build PerRecBench groups from raw ratings (Amazon Reviews 2023 JSONL(.gz)/CSV/parquet, MovieLens CSV).

    python -m recbench.build perrec --source movielens --input ../shared/data/ml-latest-small --out built/ml
    python -m recbench.build perrec --source amazon-csv --input All_Beauty.5core.csv.gz --meta meta.jsonl --out built/beauty --gamma 10
    python -m recbench.build perrec --source amazon-jsonl --category Beauty=Beauty.jsonl.gz --category Toys=Toys.jsonl.gz --out built/two
        [--launcher submitit_local]   # one domain per category; with a launcher, one job per category

Engines: `duckdb` (default; out of core, memory set by --memory-limit) and `pandas` (in memory); on the same input and
seed they write the same groups (docs/perrec.md, "Building at scale").

Selection (Tan et al. 2025, PerRecBench): for every query item, the raters who rated it within one co-rating
window of `window_days` (tumbling windows anchored at the item's first eligible rating), who are ACTIVE (more
than `gamma` ratings strictly before their own rating of the item), and whose relative ratings (rating minus the
user's average over the history strictly before the query; `--avg whole` reproduces the released data's
whole-history average) differ pairwise by more than `lam`. Groups of 2/3/4 users = easy/medium/hard, `per_size`
each, sampled with `seed`. Each difficulty is its own test set (as in the released per-level files
item2group_avg_diff_sample-{easy,medium,hard}.json): within a difficulty every group comes from a different
(item, window); one window may give groups of several difficulties, which then share users; a held-out split (`heldout_per_size` per size) drawn from a seeded share of the query
items (`heldout_item_fraction`) disjoint from the test groups' items feeds few-shot prompts and fine-tuning. Output layout: see docs/perrec.md ("recbench group format").
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Optional

from recbench.api.errors import ConfigError, DataError
from recbench.store.diskspace import DiskFull
from recbench.tasks.perrec.build_checks import check_flags, check_inputs, check_outputs, no_ratings, parse_scale, scale_for
from recbench.tasks.perrec.build_config import BuildConfig
from recbench.tasks.perrec.build_duckdb import Category, Engine
from recbench.tasks.perrec.build_pandas import (annotate, build_groups, clean_ratings, item_prior_means,  # noqa: F401
                                                separated_chains)
from recbench.tasks.perrec.build_readers import READERS, RATING_COLS, category_items, read_source  # noqa: F401
from recbench.tasks.perrec.build_sql import SOURCES, ratings_file
from recbench.tasks.perrec.build_stats import statistics, stats_markdown, windows_in_several_difficulties  # noqa: F401
from recbench.tasks.perrec.build_run import build_categories, finish

ENGINES = ("duckdb", "pandas")


def build(source: str, input: str, out: str, meta: Optional[str] = None, cfg: Optional[BuildConfig] = None,
          engine: str = "duckdb", eng: Optional[Engine] = None, work: Optional[str] = None) -> dict[str, Any]:
    """Read a source, select groups, write the recbench group format; returns the statistics."""
    cfg = cfg or BuildConfig()
    check_flags(cfg, eng or Engine())
    if engine == "pandas":
        t0 = time.perf_counter()
        ratings, items = read_source(source, input, meta, scale_for(cfg, source))
        no_ratings(len(ratings), ratings_file(source, input) if source in SOURCES else input)
        t_read = time.perf_counter() - t0
        built = build_groups(ratings, cfg)
        del ratings
        return finish(out, items, built, cfg, {"kind": source, "input": str(input), "meta": str(meta) if meta else None},
                       t_read, engine)
    return build_categories([Category(source, str(input), meta)], out, cfg, eng, work)


def categories(a: argparse.Namespace, ap: argparse.ArgumentParser) -> list[Category]:
    """The build's inputs: --input (one, no domain) or one per --category NAME=PATH (with --category-meta NAME=PATH)."""
    if a.category:
        if a.input:
            ap.error("give either --input or --category NAME=PATH, not both")
        pairs = [c.split("=", 1) for c in a.category]
        metas = dict(m.split("=", 1) for m in a.category_meta or [])
        bad = [c for c in pairs if len(c) != 2 or not c[0] or not c[1]] + [m for m in metas if m not in dict(pairs)]
        if bad or len({n for n, _ in pairs}) != len(pairs):
            ap.error(f"--category takes NAME=PATH with distinct names (and --category-meta a known NAME): {bad or pairs}")
        return [Category(a.source, p, metas.get(n), n) for n, p in pairs]
    if not a.input:
        ap.error("--input (or --category NAME=PATH) is required")
    return [Category(a.source, a.input, a.meta)]


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one `recbench: error:` line, like every other refusal."""

    def error(self, message: str) -> None:  # type: ignore[override]
        """Print one line naming the problem and where the options are listed; exit 2."""
        print(f"recbench: error: {message} (python -m recbench.build perrec --help lists the options)", file=sys.stderr)
        sys.exit(2)


def parser() -> argparse.ArgumentParser:
    """The builder's command line."""
    d, e = BuildConfig(), Engine()
    ap = _Parser(prog="python -m recbench.build perrec", description=__doc__,
                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", required=True, choices=sorted(set(READERS) | set(SOURCES)))
    ap.add_argument("--input", default=None, help="ratings file (Amazon, parquet) or folder (MovieLens)")
    ap.add_argument("--meta", default=None, help="Amazon item metadata (JSONL or CSV with parent_asin,title)")
    ap.add_argument("--category", action="append", help="NAME=PATH: one category (a domain of the groups); repeat")
    ap.add_argument("--category-meta", action="append", help="NAME=PATH: item metadata of category NAME")
    ap.add_argument("--out", default=None, help="output folder (required unless --stats-md)")
    ap.add_argument("--stats-md", action="store_true",
                    help="print only the statistics table (Markdown, as in docs/perrec.md); write files only with --out")
    ap.add_argument("--gamma", type=int, default=d.gamma)
    ap.add_argument("--lam", type=float, default=d.lam)
    ap.add_argument("--window-days", type=float, default=d.window_days)
    ap.add_argument("--sizes", type=int, nargs="+", default=list(d.sizes))
    ap.add_argument("--per-size", type=int, default=d.per_size)
    ap.add_argument("--heldout-per-size", type=int, default=d.heldout_per_size)
    ap.add_argument("--heldout-item-fraction", type=float, default=d.heldout_item_fraction)
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--avg", choices=["prior", "whole"], default=d.avg)
    ap.add_argument("--time-unit", choices=["auto", "s", "ms"], default=d.time_unit)
    ap.add_argument("--rating-scale", type=parse_scale, default=None, metavar="LO,HI",
                    help="refuse ratings outside LO..HI (default: the source's, MovieLens 0.5,5 and Amazon 1,5)")
    ap.add_argument("--engine", choices=ENGINES, default="duckdb", help="duckdb: out of core (default); pandas: in memory")
    ap.add_argument("--memory-limit", default=e.memory_limit, help="duckdb engine: DuckDB's memory_limit (e.g. 1GB)")
    ap.add_argument("--threads", type=int, default=e.threads, help="duckdb engine: DuckDB threads")
    ap.add_argument("--work-dir", default=None, help="duckdb engine: databases and spill files (default OUT.work)")
    ap.add_argument("--launcher", choices=["none", "submitit_local", "slurm"], default="none",
                    help="duckdb engine with --category: prepare one category per submitit job, then merge")
    return ap


def main(argv: Optional[list[str]] = None) -> None:
    """CLI: python -m recbench.build perrec --source ... --input ... --out ... [criteria]."""
    ap = parser()
    a = ap.parse_args(argv)
    try:
        _build_cli(ap, a)
    except (ConfigError, DataError, DiskFull, FileNotFoundError) as e:  # bad input or a full disk: one line, exit 2
        print(f"recbench: error: {e}", file=sys.stderr)
        sys.exit(2)


def _build_cli(ap: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    import tempfile

    cfg = BuildConfig(gamma=a.gamma, lam=a.lam, window_days=a.window_days, sizes=tuple(a.sizes), per_size=a.per_size,
                      heldout_per_size=a.heldout_per_size,
                      heldout_item_fraction=a.heldout_item_fraction, seed=a.seed, avg=a.avg, time_unit=a.time_unit,
                      rating_scale=a.rating_scale)
    if a.out is None and not a.stats_md:
        ap.error("--out is required (or --stats-md to print the statistics table only)")
    cats = categories(a, ap)
    if a.engine == "pandas" and (len(cats) > 1 or cats[0].domain or a.launcher != "none"):
        ap.error("--category and --launcher need --engine duckdb")
    if a.source not in READERS and a.engine == "pandas":
        ap.error(f"--source {a.source} needs --engine duckdb")
    eng = Engine(memory_limit=a.memory_limit, threads=a.threads)
    check_flags(cfg, eng)  # everything refusable, before any work starts (engine options on either engine)
    check_inputs(cats)
    check_outputs(a.out, a.work_dir)
    with tempfile.TemporaryDirectory(prefix="perrec-build-") as tmp:
        work = a.work_dir or (str(Path(tmp) / "work") if a.out is None else None)
        if a.launcher != "none":
            from recbench.tasks.perrec.build_shards import build_sharded

            stats = build_sharded(cats, a.out, cfg, eng, a.launcher, work)
        elif a.engine == "pandas":
            c = cats[0]
            stats = build(c.source, c.input, a.out, c.meta, cfg, engine="pandas")
        else:
            stats = build_categories(cats, a.out, cfg, eng, work)
    name = Path(cats[0].input).name if len(cats) == 1 else "+".join(c.domain for c in cats)
    print(stats_markdown(stats, f"({name})"))
    if a.out is not None and not a.stats_md:
        print(f"wrote {a.out}: groups.jsonl, heldout.jsonl, items.jsonl, ratings.csv.gz, stats.json, stats.md")


if __name__ == "__main__":
    main()
