"""Evaluate one (task, model, method) into a run dir: checks, run store, cache, loop, aggregation, metrics.json."""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

from recbench.api.config import validate
from recbench.backends.base import Backend
from recbench.run.construct import LazyBackend, build_task, data_source, select_examples, take_shard
from recbench.store import derived_cache
from recbench.store.diskspace import DiskFull
from recbench.store.finished import inputs_fingerprint, mark_finished, reuse_finished
from recbench.store.redact import redact_text
from recbench.store.response_cache import ResponseCache
from recbench.store.rundir import discard_unused
from recbench.store.runstore import RunStore, restore_prompts
from recbench.store.schema import RunResult

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
            reused = _reuse_finished(cfg, run_dir, inputs, t0)
            if reused is not None:
                return reused
        from recbench.run.loop import EvalLoop

        task = build_task(cfg)
        method = method_of(cfg, task)
        from recbench.audits.noise import check_noise

        check_noise(cfg, method, backend)  # audit.noise.batch_size=B: refused here when it cannot run
        if method.needs_backend and backend is None:  # a package or API key the model needs: before data or bars
            LazyBackend(cfg.model).preflight()
        selection = select_examples(task.load(), cfg.limit, cfg.run.limit_strategy, int(cfg.seed), task.breakdown_by,
                                    source=data_source(task))
        examples = take_shard(selection, cfg.run.shard, cfg.run.shards)  # run.shard=I: after limit
        lazy = LazyBackend(cfg.model) if method.needs_backend and backend is None else None
        from recbench.audits.contamination import split_examples

        # contamination.probe_run=DIR: meta `recalled` from a probe run of this model, after its checks
        examples = split_examples(cfg, task, examples, run_dir, (backend or lazy) if method.needs_backend else None)
    except BaseException:
        discard_unused(run_dir)  # the run dir Hydra made for this job, if it holds only Hydra's own files
        raise
    uses_model = method.needs_backend
    store = RunStore(run_dir)
    cache = None
    try:
        store.write_text("config.yaml", redact_text(config_text))  # secrets in URLs never reach a file
        cache_path = cfg.cache.path
        if cfg.run.shard is not None:  # a shard: shard.json (what recbench.merge checks), its own cache file
            from recbench.store.shards import ShardInfo, open_shard

            info = ShardInfo.of(cfg.run.shard, cfg.run.shards, selection, examples,
                                OmegaConf.to_container(cfg.task, resolve=True))
            cache_path = open_shard(store.dir, info, cfg.cache.path, cfg.cache.enabled and uses_model)
        cache = ResponseCache(cache_path, enabled=cfg.cache.enabled)
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
        records = [r for r in store.records() if r.id in wanted]
        noise = _noise_floor(cfg, task, method, examples, store.dir, cache, backend, records) if uses_model else None
        if noise is not None and noise[1].backend_errors:
            complete = False  # an example the re-decode could not answer: the next run finishes it
        _write_versions(store, backend, lazy, uses_model)
        loaded = bool(backend is not None or (lazy is not None and lazy.built))
        result = result_of(cfg, task, method, records, backend_errors=loop.stats.backend_errors,
                           complete=complete and len(records) == len(examples), run_dir=store.dir,
                           this_invocation={**(inv := _with_noise(vars(loop.stats), noise)),
                                            "total_wall_time_s": time.time() - t0, "model_loaded": loaded},
                           paid_tokens=(inv["prompt_tokens"], inv["completion_tokens"]),
                           extra=noise[0] if noise is not None else None)
        store.write_result(result)
        mark_finished(store.dir, inputs if result.complete else None)  # what a finished rerun may reuse
    finally:
        store.close()
        if cache is not None:
            cache.close()
        if lazy is not None:  # a backend this run built (HTTP clients, event loop); a given one is the caller's
            lazy.close()
    return result


def method_of(cfg: DictConfig, task: Any) -> Any:
    """The run's method: the task's, wrapped by the audits the config asks for (a run and a merge of its shards both
    build it here)."""
    from recbench.audits.order import maybe_audit  # numpy, the task's data libraries: only when something runs
    from recbench.audits.templates import maybe_template_audit

    method = task.make_method(cfg.method, cfg.sampling)
    method = maybe_audit(task, method, cfg.get("audit"))  # audit.orders=K: K display orders per example
    return maybe_template_audit(task, method, cfg.get("audit"))  # audit.templates=K: K paraphrased prompts


def result_of(cfg: DictConfig, task: Any, method: Any, records: list, *, backend_errors: int, complete: bool,
              run_dir: str | Path, this_invocation: dict[str, Any], paid_tokens: tuple[int, int] = (0, 0),
              extra: Optional[dict[str, Any]] = None) -> RunResult:
    """metrics.json of a run from its records: the aggregation (sorted by id, seeded bootstrap), counts and cost; a
    run and a merge of its shards (recbench.run.merge) both go through here, so they agree exactly."""
    from recbench.run.cost import run_cost
    from recbench.run.loop import aggregate

    from recbench.audits.contamination import contamination_block, enabled, split_breakdown
    from recbench.audits.templates import template_aggregates

    uses_model = method.needs_backend
    if enabled(cfg):
        split_breakdown(task)  # the `recalled` slices (a merge of shards builds its task afresh)
    agg = aggregate(task, records, n_boot=cfg.run.bootstrap_resamples, level=cfg.run.ci_level, seed=cfg.seed)
    blocks = {**template_aggregates(records, task.headline_metric, n_boot=cfg.run.bootstrap_resamples,
                                    level=cfg.run.ci_level, seed=cfg.seed),  # audit.templates=K
              **contamination_block(cfg, task, records), **(extra or {})}  # contamination.probe_run=DIR, audit.noise
    # cost of all the run's tokens (cached answers included) from the optional price table in the model config
    price = cfg.model.get("price") if uses_model else None
    cost = run_cost(price, agg.counts.prompt_tokens, agg.counts.completion_tokens)
    if cost is not None:  # what this invocation paid (cache hits cost nothing)
        cost = {**cost, "this_invocation": run_cost(price, *paid_tokens)["total"]}
    return RunResult.of(agg, task=task.identity(), model=cfg.model.name if uses_model else "none", method=method.name,
                        complete=complete, run_dir=str(run_dir), this_invocation=this_invocation,
                        backend_errors=backend_errors, extra=blocks, cost=cost)


def _noise_floor(cfg: DictConfig, task: Any, method: Any, examples: list, run_dir: Path, cache: ResponseCache,
                 backend: Optional[Backend], records: list) -> Optional[tuple[dict[str, Any], Any]]:
    """audit.noise: the examples decoded again with the other batch size / dtype (recbench.audits.noise), and
    (metrics.json's extra.noise_floor block, the re-decode's loop counters); None when the audit is off."""
    from recbench.audits.noise import noise_aggregates, noise_settings, re_decode

    settings = noise_settings(cfg.get("audit"))
    if not settings:
        return None
    t0 = time.time()
    redecoded, stats, tag, in_force = re_decode(cfg, task, method, examples, run_dir, cache, backend)
    node = cfg.model.get("backend") or {}
    reference = {k: (getattr(backend, k, None) if backend is not None else node.get(k)) for k in settings}
    block = noise_aggregates(records, redecoded, headline_metric=task.headline_metric, breakdown_by=task.breakdown_by,
                             settings=settings, reference=reference, level=cfg.run.ci_level, seed=cfg.seed)
    block["noise_floor"]["this_invocation"] = {"backend_calls": stats.backend_calls, "cache_hits": stats.cache_hits,
                                               "backend_errors": stats.backend_errors,
                                               "wall_time_s": time.time() - t0}
    block["noise_floor"]["records"] = f"noise/{tag}/samples.jsonl"
    block["noise_floor"]["backend_params"] = in_force  # what the re-decoding backend reports (None: all cached)
    return block, stats


def _with_noise(stats: dict[str, Any], noise: Optional[tuple[dict[str, Any], Any]]) -> dict[str, Any]:
    """This invocation's loop counters, the noise-floor re-decode's calls, hits, errors and tokens added (its own
    counts are in extra.noise_floor.this_invocation)."""
    if noise is None:
        return dict(stats)
    extra = vars(noise[1])
    keys = ("backend_errors", "backend_calls", "cache_hits", "cache_misses", "prompt_tokens", "completion_tokens")
    return {k: (v + extra[k] if k in keys else v) for k, v in stats.items()}


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


def _reuse_finished(cfg: DictConfig, run_dir: str | Path, inputs: Optional[str], t0: float) -> Optional[RunResult]:
    """metrics.json of an unchanged complete run with this invocation's counters (0 calls, all skipped), or None."""
    from recbench.run.loop import LoopStats

    price = cfg.model.get("price")
    cost = None
    if price:  # written only where metrics.json has a cost block (a priced model): nothing was paid now
        from recbench.run.cost import run_cost

        cost = (run_cost(price, 0, 0) or {}).get("total")
    inv = {**vars(LoopStats(wall_time_s=time.time() - t0)), "total_wall_time_s": time.time() - t0, "model_loaded": False}
    reused = reuse_finished(run_dir, inputs, inv, cost)
    return None if reused is None else RunResult.from_dict(reused, where=str(Path(run_dir) / "metrics.json"))
