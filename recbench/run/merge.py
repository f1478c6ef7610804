"""Join the N shard dirs of one run (run.shard=I run.shards=N) into the run dir of the same command without shards:
check that they are the N parts of one run (recbench.store.shards.check_shards), rebuild the run's selection from
its data and check it is the one the shards split, then aggregate the merged records exactly as a run does
(recbench.run.evaluate.result_of), so the merged metrics.json equals the unsharded run's apart from timing and
this_invocation. The shards' own response caches are merged into the shared cache."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Optional

from omegaconf import OmegaConf

from recbench.run.judging import merge_judges
from recbench.store.facts import Invocation
from recbench.store.records import LoopStats
from recbench.store.schema import RunResult
from recbench.store.shards import (
    ShardDir,
    ShardError,
    check_shards,
    merged_dir,
    read_shard,
    write_merged,
)


@dataclass
class Merged:
    """What a merge wrote: the merged run's result (its metrics.json), the cache merge report (None: no shard cache),
    the warnings."""

    result: RunResult
    cache: Optional[dict[str, Any]] = None
    warnings: list[str] = field(default_factory=list)


#: this_invocation counters summed over the shards' last invocations: every loop counter
_COUNTERS = tuple(f.name for f in fields(LoopStats))


def default_out(shards: list[ShardDir]) -> Path:
    """The run dir the shards merge into when --out is not given: the shard dirs' folder and name without the shard
    overrides (merged_dir), the same for every shard."""
    outs = {merged_dir(s.dir) for s in shards}
    if None in outs:
        raise ShardError(f"cannot tell the merged run dir from the shard dir names ({shards[0].dir.name} does not carry "
                         "run.shard=...): give --out DIR")
    if len(outs) > 1:
        raise ShardError(f"the shard dirs lie in different folders ({', '.join(sorted(map(str, outs)))}): give --out DIR")
    return outs.pop()  # type: ignore[return-value]


def shared_cache(shards: list[ShardDir]) -> Path:
    """The cache the shards' own caches are merged into: the cache.path they were all seeded from, else (per-job
    caches of a sweep) the shared cache, $RECBENCH_CACHE_DIR/responses.sqlite (.cache/ when unset)."""
    paths = {str((s.config.get("cache") or {}).get("path") or "") for s in shards}
    if len(paths) == 1 and "" not in paths:
        return Path(paths.pop())
    return Path(os.environ.get("RECBENCH_CACHE_DIR") or ".cache") / "responses.sqlite"


def _unsharded_config(shard: ShardDir) -> Any:
    """The shard's config with run.shard / run.shards reset: the config of the same run without sharding."""
    cfg = OmegaConf.create(shard.config)
    cfg.run.shard = None
    cfg.run.shards = 1
    return cfg


def merge_shards(dirs: Iterable[str | Path], out: Optional[str | Path] = None, cache: Optional[str | Path] = None,
                 merge_caches: bool = True) -> Merged:
    """Merge the shard dirs into `out` (default_out when None) and the shards' caches into `cache` (shared_cache when
    None). Refuses with ShardError (one line) what check_shards refuses, a data change since the shards ran, and a
    shard listing an example of another shard."""
    from recbench.api.config import validate
    from recbench.run.construct import build_task, data_source, select_examples, shard_of
    from recbench.run.audit_calls import RunAudits
    from recbench.run.evaluate import method_of, result_of
    from recbench.store import derived_cache
    from recbench.store.shards import ids_sha256

    t0 = time.time()
    shards = sorted((read_shard(d) for d in dirs), key=lambda s: s.info.shard)
    warnings = check_shards(shards)
    out_dir = Path(out) if out is not None else default_out(shards)
    cfg = _unsharded_config(shards[0])
    validate(cfg)
    derived_cache.configure(cfg.cache.get("derived_dir"))
    task = build_task(cfg)
    audits = RunAudits.of(cfg)
    method = method_of(cfg, task, audits)
    selection = select_examples(task.load(), cfg.limit, cfg.run.limit_strategy, int(cfg.seed), task.breakdown_by,
                                source=data_source(task))
    if ids_sha256(e.id for e in selection) != shards[0].info.selection_sha256:
        raise ShardError(f"the data now selects other examples than the shards split ({len(selection)} now, "
                         f"{shards[0].info.selection} then): the task's data changed since the shards ran; rerun them")
    by_id: dict[str, Any] = {}
    complete, unresolved = True, set()
    for s in shards:
        own = set(s.info.ids)
        wrong = next((i for i in s.info.ids if shard_of(i, s.info.shards) != s.info.shard), None)
        if wrong is not None:
            raise ShardError(f"{s.label} lists example {wrong!r}, which belongs to shard "
                             f"{shard_of(wrong, s.info.shards)}: its shard.json was edited or written by another "
                             "recbench; rerun the shard")
        done = {r.id for r in s.records if r.id in own}
        complete = complete and done == own
        unresolved |= {e.id for e in s.errors if e.id in own and e.id not in done}
        by_id.update((r.id, r) for r in s.records if r.id in own)
    records = [by_id[str(e.id)] for e in selection if str(e.id) in by_id]  # the selection's order
    last = [Invocation.from_dict((s.metrics or {}).get("this_invocation") or {}) for s in shards]
    inv: dict[str, Any] = {k: sum(getattr(i, k) or 0 for i in last) for k in _COUNTERS}
    inv.update(model_loaded=any(i.model_loaded for i in last),
               merged_shards=len(shards), total_wall_time_s=time.time() - t0)
    result = result_of(cfg, task, method, audits, records, backend_errors=len(unresolved),  # judge dirs joined by tag first
                       complete=complete and len(records) == len(selection), run_dir=out_dir, this_invocation=inv,
                       extra=merge_judges(cfg, out_dir, [s.dir for s in shards]))
    write_merged(out_dir, shards, records, OmegaConf.to_yaml(cfg), result, warnings)
    report = None
    sources = [s.cache_file for s in shards if s.cache_file is not None]
    if merge_caches and sources:
        from recbench.store.cache_tools import merge

        report = merge(sources, Path(cache) if cache is not None else shared_cache(shards), progress=False)
    return Merged(result, report, warnings)
