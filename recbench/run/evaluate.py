"""Evaluate one (task, model, method) into a run dir: checks, run store, cache, loop, aggregation, metrics.json."""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

from recbench.api.config import validate
from recbench.backends.base import Backend
from recbench.run.construct import LazyBackend, build_task, data_source, select_examples
from recbench.store import derived_cache
from recbench.store.diskspace import DiskFull
from recbench.store.finished import inputs_fingerprint, mark_finished, reuse_finished
from recbench.store.redact import redact_text
from recbench.store.response_cache import ResponseCache
from recbench.store.rundir import discard_unused
from recbench.store.runstore import RunStore, restore_prompts
from recbench.store.schema import RunResult

log = logging.getLogger("recbench")


def run_from_config(cfg: DictConfig, run_dir: str | Path, backend: Optional[Backend] = None) -> dict[str, Any]:
    """Evaluate one (task, model, method) into run_dir, resuming what is there; returns metrics.json's content."""
    t0 = time.time()
    try:  # every config and data check before the run dir is written: a refused run leaves no trace in it
        validate(cfg)
        derived_cache.configure(cfg.cache.derived_dir)
        config_text = OmegaConf.to_yaml(cfg, resolve=True)
        inputs = None  # runs with a given backend object (tests, benchmarks) leave no reusable mark
        if backend is None:  # a finished run asked again: nothing to load, run or re-aggregate
            inputs = inputs_fingerprint(config_text, OmegaConf.to_container(cfg.task, resolve=True))
            reused = _reuse_finished(cfg, run_dir, inputs, t0)
            if reused is not None:
                return reused
        from recbench.audits.order import (
            maybe_audit,  # numpy, the task's data libraries: only when something runs
        )
        from recbench.run.loop import EvalLoop, aggregate

        task = build_task(cfg)
        method = task.make_method(cfg.method, cfg.sampling)
        method = maybe_audit(task, method, cfg.get("audit"))  # audit.orders=K: K display orders per example
        if method.needs_backend and backend is None:  # a package or API key the model needs: before data or bars
            LazyBackend(cfg.model).preflight()
        examples = select_examples(task.load(), cfg.limit, cfg.run.limit_strategy, int(cfg.seed), task.breakdown_by,
                                   source=data_source(task))
    except BaseException:
        discard_unused(run_dir)  # the run dir Hydra made for this job, if it holds only Hydra's own files
        raise
    uses_model = method.needs_backend
    lazy = LazyBackend(cfg.model) if uses_model and backend is None else None
    store = RunStore(run_dir)
    cache = None
    try:
        store.write_text("config.yaml", redact_text(config_text))  # secrets in URLs never reach a file
        cache = ResponseCache(cfg.cache.path, enabled=cfg.cache.enabled)
        restored, lost = restore_prompts(store, cache)  # a deleted prompts.jsonl, rebuilt from the cache
        if restored or lost:
            log.warning("prompts.jsonl lacked %d prompt(s) of finished examples: %d restored from the response "
                        "cache%s", restored + lost, restored, f", {lost} not in the cache (the viewer marks them "
                        "missing)" if lost else "")
        loop = EvalLoop(task, method, backend if uses_model else None, cache, store, chunk_size=cfg.run.chunk_size,
                        store_prompts=cfg.run.store_prompts, progress=cfg.run.progress, backend_factory=lazy)
        complete = False
        wanted = {e.id for e in examples}
        try:
            loop.run(examples)
            complete = loop.stats.backend_errors == 0
        except BaseException as e:  # interrupted or failed: no metrics.json from a partial state; say what is kept
            e.recbench_kept = (sum(1 for r in store.records() if r.id in wanted), len(examples), str(store.dir))
            _write_versions(store, backend, lazy, uses_model, quiet=True)
            raise
        _write_versions(store, backend, lazy, uses_model)
        records = [r for r in store.records() if r.id in wanted]
        agg = aggregate(task, records, n_boot=cfg.run.bootstrap_resamples, level=cfg.run.ci_level, seed=cfg.seed)
        agg["counts"].backend_errors = loop.stats.backend_errors
        result = RunResult(
            task=task.identity(), model=cfg.model.name if uses_model else "none", method=method.name,
            complete=complete and len(records) == len(examples), run_dir=str(store.dir), **agg,
            this_invocation={**vars(loop.stats), "total_wall_time_s": time.time() - t0,
                             "model_loaded": bool(backend is not None or (lazy is not None and lazy.built))})
        # cost of all the run's tokens (cached answers included) from the optional price table in the model config
        from recbench.run.cost import run_cost

        price = cfg.model.get("price") if uses_model else None
        c = result.counts
        result.cost = run_cost(price, c.prompt_tokens, c.completion_tokens)
        if result.cost is not None:  # what this invocation paid (cache hits cost nothing)
            result.cost["this_invocation"] = run_cost(price, loop.stats.prompt_tokens,
                                                      loop.stats.completion_tokens)["total"]
        store.write_result(result)
        mark_finished(store.dir, inputs if result.complete else None)  # what a finished rerun may reuse
    finally:
        store.close()
        if cache is not None:
            cache.close()
    return result.to_dict()


def _write_versions(store: RunStore, backend: Optional[Backend], lazy: Optional[LazyBackend], uses_model: bool,
                    quiet: bool = False) -> None:
    """versions.json with the backend's identity and effective parameters (quiet: a failure to write is ignored,
    for the error path, where the first error is the one to report)."""
    try:
        built = backend if backend is not None else (lazy() if lazy is not None and lazy.built else None)
        if built is not None and uses_model:
            store.write_versions({"backend_identity": built.identity(), "backend_params": built.effective_params()})
        elif not (store.dir / "versions.json").exists():
            store.write_versions({"backend_identity": None, "backend_params": None})
    except (OSError, DiskFull):
        if not quiet:
            raise


def _reuse_finished(cfg: DictConfig, run_dir: str | Path, inputs: Optional[str], t0: float) -> Optional[dict[str, Any]]:
    """metrics.json of an unchanged complete run with this invocation's counters (0 calls, all skipped), or None."""
    from recbench.run.loop import LoopStats

    price = cfg.model.get("price")
    cost = None
    if price:  # written only where metrics.json has a cost block (a priced model): nothing was paid now
        from recbench.run.cost import run_cost

        cost = (run_cost(price, 0, 0) or {}).get("total")
    inv = {**vars(LoopStats(wall_time_s=time.time() - t0)), "total_wall_time_s": time.time() - t0, "model_loaded": False}
    return reuse_finished(run_dir, inputs, inv, cost)
