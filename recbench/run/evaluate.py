"""Evaluate one (task, model, method) into a run dir: checks, run store, cache, loop, aggregation, metrics.json."""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

from recbench.api.config import validate
from recbench.backends.base import Backend
from recbench.run import judge_settings, judging
from recbench.run.audit_calls import RunAudits, with_extra
from recbench.run.construct import LazyBackend, build_task, data_source, select_examples, take_shard
from recbench.run.cost import run_cost
from recbench.run.judge_settings import JudgeSettings
from recbench.run.loop import EvalLoop, LoopSettings, LoopStats, aggregate
from recbench.store import derived_cache
from recbench.store.diskspace import DiskFull
from recbench.store.finished import inputs_fingerprint, mark_finished, reuse_finished
from recbench.store.redact import redact_text
from recbench.store.response_cache import ResponseCache
from recbench.store.rundir import discard_unused
from recbench.store.runstore import RunStore, restore_prompts
from recbench.store.schema import RunResult, join_judged, judged_tag
from recbench.store.shards import ShardInfo, open_shard

log = logging.getLogger("recbench")


def run_from_config(cfg: DictConfig, run_dir: str | Path, backend: Optional[Backend] = None) -> RunResult:
    """Evaluate one (task, model, method) into run_dir, resuming what is there; returns the result metrics.json holds."""
    t0 = time.time()
    try:  # every config and data check before the run dir is written: a refused run leaves no trace in it
        validate(cfg)
        derived_cache.configure(cfg.cache.derived_dir)
        config_text = OmegaConf.to_yaml(cfg, resolve=True)
        inputs = None  # runs with a given backend object (tests, benchmarks) leave no reusable mark
        if backend is None:  # a finished run asked again: nothing to load, run or re-aggregate
            inputs = inputs_fingerprint(config_text, _input_paths(cfg))
            reused = _reuse_finished(cfg.model.get("price"), run_dir, inputs, t0)
            if reused is not None:
                return reused
        parts = _prepare(cfg, run_dir, backend)
    except BaseException:
        discard_unused(run_dir)  # the run dir Hydra made for this job, if it holds only Hydra's own files
        raise
    store = RunStore(run_dir)
    cache = None
    try:
        store.write_text("config.yaml", redact_text(config_text))  # secrets in URLs never reach a file
        cache = _open_cache(cfg, store, parts)
        result = _evaluate(cfg, parts, store, cache, backend, t0)
        store.write_result(result)
        mark_finished(store.dir, inputs if result.complete else None)  # what a finished rerun may reuse
    finally:
        store.close()
        if cache is not None:
            cache.close()
        if parts.lazy is not None:  # a backend this run built (HTTP clients, event loop); a given one is the caller's
            parts.lazy.close()
    return result


@dataclass
class _Parts:
    """What a run is built from before its run dir is written: task, method, the selection and its shard, the lazy
    backend (None: a backend object was given, or the method asks no model), and the config read once into typed
    settings: the audits it asks, the judge (None: none), the loop's settings."""

    task: Any
    method: Any
    selection: list
    examples: list
    lazy: Optional[LazyBackend]
    audits: RunAudits
    judge: Optional[JudgeSettings]
    loop: LoopSettings


def _prepare(cfg: DictConfig, run_dir: str | Path, backend: Optional[Backend]) -> _Parts:
    """Task, method (audits around it), the examples (selected, sharded, labelled by the audits), the judge's and the
    loop's settings, every check."""
    task = build_task(cfg)
    audits = RunAudits.of(cfg)
    method = method_of(cfg, task, audits)
    audits.check(method, backend)  # an audit that cannot run is refused here
    if method.needs_backend and backend is None:  # a package or API key the model needs: before data or bars
        LazyBackend(cfg.model).preflight()
    selection = select_examples(task.load(), cfg.limit, cfg.run.limit_strategy, int(cfg.seed), task.breakdown_by,
                                source=data_source(task))
    examples = take_shard(selection, cfg.run.shard, cfg.run.shards)  # run.shard=I: after limit
    lazy = LazyBackend(cfg.model) if method.needs_backend and backend is None else None
    judge = judge_settings.read(cfg, task, examples, backend)  # a judge that cannot run is refused here
    judge_settings.preflight(judge, model_checked=method.needs_backend and backend is None)  # before the model runs
    examples = audits.label(task, examples, run_dir, (backend or lazy) if method.needs_backend else None)
    loop = LoopSettings(chunk_size=cfg.run.chunk_size, store_prompts=cfg.run.store_prompts, progress=cfg.run.progress)
    return _Parts(task, method, selection, examples, lazy, audits, judge, loop)


def _open_cache(cfg: DictConfig, store: RunStore, parts: _Parts) -> ResponseCache:
    """The response cache (a shard's own file beside its shard.json), and prompts.jsonl restored from it."""
    cache_path = cfg.cache.path
    if cfg.run.shard is not None:  # a shard: shard.json (what recbench.merge checks), its own cache file
        info = ShardInfo.of(cfg.run.shard, cfg.run.shards, parts.selection, parts.examples,
                            OmegaConf.to_container(cfg.task, resolve=True))
        cache_path = open_shard(store.dir, info, cfg.cache.path, cfg.cache.enabled and parts.method.needs_backend)
    cache = ResponseCache(cache_path, enabled=cfg.cache.enabled)
    restored, lost = restore_prompts(store, cache)  # a deleted prompts.jsonl, rebuilt from the cache
    if restored or lost:
        log.warning("prompts.jsonl lacked %d prompt(s) of finished examples: %d restored from the response "
                    "cache%s", restored + lost, restored, f", {lost} not in the cache (the viewer marks them "
                    "missing)" if lost else "")
    return cache


def _evaluate(cfg: DictConfig, parts: _Parts, store: RunStore, cache: ResponseCache, backend: Optional[Backend],
              t0: float) -> RunResult:
    """The loop over the examples, the audits' extra requests, versions.json, and the result."""
    task, method, examples, lazy = parts.task, parts.method, parts.examples, parts.lazy
    uses_model = method.needs_backend
    loop = EvalLoop(task, method, backend if uses_model else None, cache, store, chunk_size=parts.loop.chunk_size,
                    store_prompts=parts.loop.store_prompts, progress=parts.loop.progress, backend_factory=lazy)
    wanted = {e.id for e in examples}
    try:
        loop.run(examples)
    except BaseException as e:  # interrupted or failed: no metrics.json from a partial state; say what is kept
        e.recbench_kept = (sum(1 for r in store.records() if r.id in wanted), len(examples), str(store.dir))
        _write_versions(store, backend, lazy, uses_model, quiet=True)
        raise
    records = [r for r in store.records() if r.id in wanted]
    extras = parts.audits.extra_requests(task, method, examples, store.dir, cache, backend, records, parts.loop) \
        if uses_model else []
    # the judge pass: the run's answers through the same loop and cache with the judge's backend (its own counters)
    judged = judging.judge_run(parts.judge, task, examples, records, store.dir, cache,
                               backend if backend is not None else lazy, parts.loop)
    errors = loop.stats.backend_errors + sum(x.stats.backend_errors for x in extras)  # the next run finishes them
    errors += judged.stats["backend_errors"] if judged is not None else 0
    _write_versions(store, backend, lazy, uses_model)
    inv = {**with_extra(vars(loop.stats), extras), "total_wall_time_s": time.time() - t0,
           "model_loaded": bool(backend is not None or (lazy is not None and lazy.built))}
    return result_of(cfg, task, method, parts.audits, records, backend_errors=loop.stats.backend_errors,
                     complete=errors == 0 and len(records) == len(examples), run_dir=store.dir, this_invocation=inv,
                     paid_tokens=(inv["prompt_tokens"], inv["completion_tokens"]),
                     extra={**{k: v for x in extras for k, v in x.blocks.items()}, **(judged.block if judged else {})})


def method_of(cfg: DictConfig, task: Any, audits: RunAudits) -> Any:
    """The run's method: the task's, wrapped by the audits the config asks for (a run, plan mode and a merge of its
    shards all build it here)."""
    return audits.wrap(task, task.make_method(cfg.method, cfg.sampling))


def result_of(cfg: DictConfig, task: Any, method: Any, audits: RunAudits, records: list, *, backend_errors: int,
              complete: bool, run_dir: str | Path, this_invocation: dict[str, Any],
              paid_tokens: tuple[int, int] = (0, 0), extra: Optional[dict[str, Any]] = None) -> RunResult:
    """metrics.json of a run from its records: the aggregation (sorted by id, seeded bootstrap), the audits' blocks,
    counts and cost; a run and a merge of its shards (recbench.run.merge) both go through here, so they agree
    exactly. `extra`: blocks of the audits' extra requests."""
    uses_model = method.needs_backend
    records = join_judged(records, run_dir, judged_tag(cfg))  # the judge's metrics, by example id (docs/judges.md)
    audits.prepare_task(task)  # e.g. the `recalled` slices
    agg = aggregate(task, records, n_boot=cfg.run.bootstrap_resamples, level=cfg.run.ci_level, seed=cfg.seed)
    blocks = {**audits.blocks(task, records, run_dir), **(extra or {})}
    # cost of all the run's tokens (cached answers included) from the optional price table in the model config
    price = cfg.model.get("price") if uses_model else None
    cost = run_cost(price, agg.counts.prompt_tokens, agg.counts.completion_tokens)
    if cost is not None:  # what this invocation paid (cache hits cost nothing)
        cost = {**cost, "this_invocation": run_cost(price, *paid_tokens)["total"]}
    import recbench.store.facts as facts  # here, not at start-up

    return RunResult.of(agg, task=facts.TaskInfo.from_dict(task.identity()),
                        model=cfg.model.name if uses_model else "none", method=method.name, complete=complete,
                        run_dir=str(run_dir), this_invocation=facts.Invocation.of(this_invocation),
                        backend_errors=backend_errors, extra=blocks,
                        cost=None if cost is None else facts.Cost.from_dict(cost))


def _input_paths(cfg: DictConfig) -> dict[str, Any]:
    """The config nodes whose files a finished run's metrics.json depends on: the task's data, and the probe run of a
    contamination split (a probe run that changed is read again)."""
    out: dict[str, Any] = {"task": OmegaConf.to_container(cfg.task, resolve=True)}
    probe = (cfg.get("contamination") or {}).get("probe_run")
    if probe:
        out["probe_run"] = str(Path(str(probe)).resolve())
    return out


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


def _reuse_finished(price: Any, run_dir: str | Path, inputs: Optional[str], t0: float) -> Optional[RunResult]:
    """metrics.json of an unchanged complete run with this invocation's counters (0 calls, all skipped), or None
    (`price`: the model's price table, if it has one)."""
    cost = None
    if price:  # written only where metrics.json has a cost block (a priced model): nothing was paid now
        cost = (run_cost(price, 0, 0) or {}).get("total")
    inv = {**vars(LoopStats(wall_time_s=time.time() - t0)), "total_wall_time_s": time.time() - t0, "model_loaded": False}
    reused = reuse_finished(run_dir, inputs, inv, cost)
    return None if reused is None else RunResult.from_dict(reused, where=str(Path(run_dir) / "metrics.json"))
