"""`python -m recbench.build perrec`: the builder's command line and `build()`, the one call every engine goes through
(the selection it implements: the package docstring, recbench/tasks/perrec/build/__init__.py)."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Optional

from recbench.api.errors import ConfigError, DataError
from recbench.store.diskspace import DiskFull
from recbench.tasks.perrec.build.checks import check_flags, check_inputs, check_outputs, no_ratings, parse_scale, scale_for
from recbench.tasks.perrec.build.config import BuildConfig
from recbench.tasks.perrec.build.duckdb_engine import Category, Engine
from recbench.tasks.perrec.build.pandas_engine import build_groups
from recbench.tasks.perrec.build.readers import READERS, read_source
from recbench.tasks.perrec.build.sql import SOURCES, ratings_file
from recbench.tasks.perrec.build.stats import stats_markdown
from recbench.tasks.perrec.build.run import build_categories, finish

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
    ap = _Parser(prog="python -m recbench.build perrec", description=sys.modules[__package__].__doc__,
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
            from recbench.tasks.perrec.build.shards import build_sharded

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
