"""Run a duckdb-engine build over one or more categories (prepare, select, write) and write any engine's build:
statistics, then the files through a staging folder moved into place."""
from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any, Optional

from recbench.store.diskspace import disk_full, is_full
from recbench.tasks.perrec.build.checks import no_groups
from recbench.tasks.perrec.build.config import BuildConfig
from recbench.tasks.perrec.build.duckdb_engine import Category, Engine, prepare
from recbench.tasks.perrec.build.readers import category_items
from recbench.tasks.perrec.build.stats import statistics
from recbench.tasks.perrec.build.write import write_build


def build_categories(cats: list[Category], out: str, cfg: BuildConfig, eng: Optional[Engine] = None,
                     work: Optional[str] = None, prepared: bool = False) -> dict[str, Any]:
    """The duckdb engine over one or more categories: prepare each (unless `prepared`: shard jobs did), select,
    write; the work folder is removed after a finished build."""
    from recbench.tasks.perrec.build.merge import category_folder, select, work_folder

    eng = eng or Engine()
    work_dir = work_folder(out, work)
    t0 = time.perf_counter()
    try:
        if not prepared:
            for i, cat in enumerate(cats):
                prepare(cat, category_folder(work_dir, i, cat), cfg, eng)
        t_read = time.perf_counter() - t0
        built = select(work_dir, cats, cfg, eng)
        items = category_items(cats)
        one = len(cats) == 1 and not cats[0].domain
        src = {"kind": cats[0].source, "input": cats[0].input, "meta": cats[0].meta} if one else \
            {"kind": cats[0].source, "categories": {c.domain: {"input": c.input, "meta": c.meta} for c in cats}}
        stats = finish(out, items, built, cfg, src, t_read, "duckdb")
    except BaseException as e:
        if not prepared:  # a single build's work folder is only scratch; a sharded build's keeps prepared categories
            shutil.rmtree(work_dir, ignore_errors=True)
        if isinstance(e, OSError) and is_full(e):
            raise disk_full(work_dir, "the build's work folder", "point --work-dir at a disk with room") from None
        raise
    shutil.rmtree(work_dir, ignore_errors=True)
    return stats


def finish(out: str, items: Any, built: dict[str, Any], cfg: BuildConfig, source: dict[str, Any], t_read: float,
            engine: str) -> dict[str, Any]:
    """Statistics, then the build written to a staging folder and moved into `out` (nothing half-written there)."""
    from recbench.tasks.perrec.build.merge import publish, staged

    stats = statistics(items, built, cfg)
    stats["source"] = source
    stats["read_seconds"] = round(t_read, 3)
    stats["engine"] = engine
    if built.get("domains"):
        stats["domains"] = built["domains"]
    if out is None:
        return stats
    no_groups(built, cfg)
    stage = staged(Path(out))
    try:
        write_build(stage, items, built, stats)
        publish(stage, Path(out))
    except OSError as e:
        shutil.rmtree(stage, ignore_errors=True)
        if is_full(e):
            raise disk_full(out, "the build", "write --out to a disk with room") from None
        raise
    return stats
