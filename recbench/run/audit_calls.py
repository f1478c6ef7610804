"""Where the run calls the audits: every enabled audit through its hooks (recbench.api.audits), in one place.

The run names no audit: it checks, wraps, labels, asks the audits' extra requests (handing them its own loop), and
collects their metrics.json blocks and plan notes, in registration order.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from recbench.api import audits
from recbench.api.audits import AuditRun, Extra
from recbench.run.construct import LazyBackend
from recbench.run.loop import EvalLoop, LoopStats
from recbench.store.runstore import RunStore


def check(cfg: Any, method: Any, backend: Any) -> None:
    """Every enabled audit's refusals, before the run dir is written."""
    for a in audits.enabled(cfg):
        a.check(cfg, method, backend)


def wrap(cfg: Any, task: Any, method: Any) -> Any:
    """The method with every enabled audit's wrapper around it."""
    for a in audits.enabled(cfg):
        method = a.wrap(task, method, cfg)
    return method


def label(cfg: Any, task: Any, examples: list[Any], run_dir: str | Path, model: Any) -> list[Any]:
    """The examples labelled by every enabled audit, before the loop."""
    for a in audits.enabled(cfg):
        examples = a.label(cfg, task, examples, run_dir, model)
    return examples


def prepare_task(cfg: Any, task: Any) -> None:
    """Every enabled audit's change to the task before aggregation (a merge of shards builds its task afresh)."""
    for a in audits.enabled(cfg):
        a.prepare_task(cfg, task)


def blocks(cfg: Any, task: Any, records: list[Any], run_dir: Optional[str | Path] = None) -> dict[str, Any]:
    """The metrics.json blocks of every audit the run asks (api/audits.py `asked`: switched on by the config, or
    declared for every run) from the run's records and (`run_dir`) what the run wrote beside them, e.g. the judge's
    records (a run and a merge of its shards)."""
    out: dict[str, Any] = {}
    for a in audits.asked(cfg):
        out.update(a.aggregate(cfg, task, records))
        if run_dir is not None:
            out.update(a.from_run_dir(cfg, task, records, run_dir))
    return out


def plan_notes(cfg: Any, unique_requests: int) -> list[str]:
    """What plan mode says about the enabled audits' requests."""
    return [n for n in (a.plan_note(cfg, unique_requests) for a in audits.enabled(cfg)) if n]


def _decoder(cfg: Any, task: Any, cache: Any, examples: list[Any]) -> Any:
    """decode(method, backend, factory, store_dir): the examples through the run's loop into a record file of their
    own (resumable, prompts stored), returning (records of these examples, the loop's counters)."""
    def decode(method: Any, backend: Any, factory: Any, store_dir: Path) -> tuple[list[Any], LoopStats]:
        store = RunStore(store_dir)
        try:
            loop = EvalLoop(task, method, backend, cache, store, chunk_size=cfg.run.chunk_size, store_prompts=True,
                            progress=cfg.run.progress, backend_factory=factory)
            loop.run(examples)
            wanted = {e.id for e in examples}
            return [r for r in store.records() if r.id in wanted], loop.stats
        finally:
            store.close()

    return decode


def extra_requests(cfg: Any, task: Any, method: Any, examples: list[Any], run_dir: Path, cache: Any, backend: Any,
                   records: list[Any]) -> list[Extra]:
    """Every enabled audit's requests after the run's loop, and what they give."""
    run = AuditRun(cfg=cfg, task=task, method=method, examples=examples, run_dir=Path(run_dir), cache=cache,
                   backend=backend, records=records, decode=_decoder(cfg, task, cache, examples),
                   lazy_backend=LazyBackend)
    out: list[Optional[Extra]] = [a.extra_requests(run) for a in audits.enabled(cfg)]
    return [x for x in out if x is not None]


#: the loop counters the audits' extra requests add to this invocation's
COUNTERS = ("backend_errors", "backend_calls", "cache_hits", "cache_misses", "prompt_tokens", "completion_tokens")


def with_extra(stats: dict[str, Any], extras: list[Extra]) -> dict[str, Any]:
    """This invocation's loop counters with the audits' extra requests' calls, hits, errors and tokens added."""
    out = dict(stats)
    for x in extras:
        more = vars(x.stats)
        out = {k: (v + more[k] if k in COUNTERS else v) for k, v in out.items()}
    return out
