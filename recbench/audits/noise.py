"""Noise-floor audit (`audit.noise.batch_size=B`, `audit.noise.dtype=D`): decode the run's examples again with
another batch size (or dtype) and measure how much the answers and the metrics move from that alone.

The cache key does not include the batch size, so a plain re-run would be answered from the cache. The re-decode
therefore runs under a **namespaced identity**: the backend is wrapped (`Namespaced`) so that its identity, and with
it every cache key, carries `{"noise_floor": "batch_size=4"}`. Its answers are cached too (a rerun of the audit
costs 0 calls), but never mixed with the run's own answers, whose keys are unchanged. It goes through the same
`EvalLoop` (batching, deduplication, resumability) into its own record file, `<run dir>/noise/<tag>/samples.jsonl`
(no metrics.json there, so reports and compare never take it for a run). Only the plain method is re-decoded (template
0, order 0), whatever other audits are on: the floor is the headline's.

`noise_aggregates` pairs the run's records with the re-decoded ones by example id: the share of examples whose raw
answer text changed and whose scored prediction changed (Clopper-Pearson CIs), and per metric and slice the mean
difference re-decode minus run with its paired bootstrap CI and sign-flip p. The **noise floor** of a metric is the
larger end of that CI in absolute value, max(|ci_low|, |ci_high|): how far the metric can move from the batch size
alone; `recbench.compare` marks a difference smaller than the floor of either run.
"""
from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any, Optional

import numpy as np
from omegaconf import DictConfig, OmegaConf

from recbench.api.audits import Audit, AuditRun, Extra, register, variants_asked
from recbench.api.errors import ConfigError
from recbench.audits.noise_blocks import (KEY, NOISE_TABLE, NoiseBlock, Share, Shift, floor_of,  # noqa: F401
                                          summary_line)
from recbench.api.types import Request, Response
from recbench.backends.base import Backend

#: the backend settings the re-decode may change (audit.noise.<key> -> model.backend.<key>)
SETTINGS = ("batch_size", "dtype")


def noise_settings(audit_cfg: Any) -> dict[str, Any]:
    """The audit.noise settings that are set ({} = the audit is off)."""
    noise = (audit_cfg or {}).get("noise") or {}
    return {k: noise.get(k) for k in SETTINGS if noise.get(k) is not None}


def noise_tag(settings: dict[str, Any]) -> str:
    """The namespace of a re-decode: 'batch_size=4' or 'batch_size=4,dtype=bfloat16'."""
    return ",".join(f"{k}={settings[k]}" for k in SETTINGS if k in settings)


def check_noise(cfg: DictConfig, method: Any, backend: Optional[Backend]) -> None:
    """One-line ConfigErrors for a noise audit that cannot run: a method without a model, a sharded run, a dtype for a
    backend that has none, a backend object given in code asked for a new dtype."""
    settings = noise_settings(cfg.get("audit"))
    if not settings:
        return
    keys = " ".join(f"audit.noise.{k}={v}" for k, v in settings.items())
    if not method.needs_backend:
        raise ConfigError(f"{keys}: method '{method.name}' asks no model, so there is nothing to decode again (or unset "
                          "audit.noise)")
    if cfg.run.shard is not None:
        raise ConfigError(f"{keys}: the noise-floor audit runs on a whole run, not a shard (run.shard): run it without "
                          "sharding, or unset audit.noise")
    node = (cfg.get("model") or {}).get("backend") or {}
    if "dtype" in settings and backend is None and "dtype" not in node:
        raise ConfigError(f"audit.noise.dtype={settings['dtype']}: model '{cfg.model.name}' has no model.backend.dtype "
                          f"to change ({node.get('_target_')}); use audit.noise.batch_size only")
    if "dtype" in settings and backend is not None:
        raise ConfigError(f"audit.noise.dtype={settings['dtype']}: needs a backend built from the model config (the "
                          "command line), not a backend object; use audit.noise.batch_size only")


class Namespaced(Backend):
    """A backend whose identity (hence every cache key) carries the noise-floor namespace; everything else is the
    inner backend's."""

    kind = "noise"

    def __init__(self, inner: Backend, tag: str):  # noqa: D107
        self.inner, self.tag = inner, tag
        self.batch_size = inner.batch_size

    def identity(self) -> dict[str, Any]:
        """The inner identity plus {'noise_floor': tag}."""
        return {**self.inner.identity(), KEY: self.tag}

    def generate(self, requests: list[Request]) -> list[Response]:
        """The inner backend's answers."""
        return self.inner.generate(requests)

    def stream(self, next_requests, on_response) -> None:
        """The inner backend's stream (its own batching at its own batch size)."""
        self.inner.stream(next_requests, on_response)

    def effective_params(self) -> dict[str, Any]:
        """The inner backend's settings in force."""
        return self.inner.effective_params()


class _NamespacedFactory:
    """A lazily built re-decode backend (from the model config with the audit's settings) under the namespace."""

    def __init__(self, lazy: Any, tag: str):
        self.lazy, self.tag = lazy, tag

    @property
    def built(self) -> bool:
        """True once the backend was constructed."""
        return self.lazy.built

    def identity(self) -> dict[str, Any]:
        """The namespaced identity, from the config where the backend class can."""
        return {**self.lazy.identity(), KEY: self.tag}

    def __call__(self) -> Backend:
        """The namespaced backend, built now if it was not yet."""
        return Namespaced(self.lazy(), self.tag)


def _model_cfg_with(model_cfg: DictConfig, settings: dict[str, Any]) -> DictConfig:
    node = OmegaConf.to_container(model_cfg, resolve=True)
    node.setdefault("backend", {}).update(settings)  # type: ignore[union-attr]
    return OmegaConf.create(node)


def innermost(method: Any) -> Any:
    """The plain method under any audit wrappers (order, template)."""
    while hasattr(method, "inner"):
        method = method.inner
    return method


def re_decode(run: AuditRun) -> tuple[list, Any, str, Optional[dict[str, Any]]]:
    """Decode the run's examples again with the audit's backend settings under the namespace, into
    <run_dir>/noise/<tag>/ (resumable); returns (records of these examples, the loop's stats, tag, the settings the
    re-decoding backend reports in force, or None when every answer came from the cache)."""
    settings = noise_settings(run.cfg.get("audit"))
    tag = noise_tag(settings)
    if run.backend is not None:  # a backend object (tests, benchmarks): a copy at the other batch size
        other = copy.copy(run.backend)
        other.batch_size = int(settings["batch_size"])
        given, factory = Namespaced(other, tag), None
    else:
        given, factory = None, _NamespacedFactory(run.lazy_backend(_model_cfg_with(run.cfg.model, settings)), tag)
    # prompts are stored (by hash) so each re-decoded answer is paired with the run's answer to the same prompt
    records, stats = run.decode(innermost(run.method), given, factory, Path(run.run_dir) / "noise" / tag)
    used = given if given is not None else (factory() if factory is not None and factory.built else None)
    return records, stats, tag, (used.effective_params() if used is not None else None)


def noise_floor(run: AuditRun) -> Optional[Extra]:
    """audit.noise: the examples decoded again with the other batch size / dtype, metrics.json's extra.noise_floor
    block and the re-decode's loop counters; None when the audit is off or the method asks no model."""
    import time

    settings = noise_settings(run.cfg.get("audit"))
    if not settings or not run.method.needs_backend:
        return None
    t0 = time.time()
    redecoded, stats, tag, in_force = re_decode(run)
    node = run.cfg.model.get("backend") or {}
    reference = {k: (getattr(run.backend, k, None) if run.backend is not None else node.get(k)) for k in settings}
    block = noise_aggregates(run.records, redecoded, headline_metric=run.task.headline_metric,
                             breakdown_by=run.task.breakdown_by, settings=settings, reference=reference,
                             level=run.cfg.run.ci_level, seed=run.cfg.seed)
    b = block[KEY]
    b.this_invocation = {"backend_calls": stats.backend_calls, "cache_hits": stats.cache_hits,
                         "backend_errors": stats.backend_errors, "wall_time_s": time.time() - t0}
    b.records = f"noise/{tag}/samples.jsonl"
    b.backend_params = in_force  # what the re-decoding backend reports (None: all cached)
    return Extra(blocks=block, stats=stats)


# ---- aggregates ---------------------------------------------------------------------------------------------
def _canon(x: Any) -> str:
    return json.dumps(x, sort_keys=True, default=str)


def _texts_changed(run_rec: Any, redecoded: Any) -> bool:
    """True when a re-decoded answer differs from the run's answer to the same prompt (calls paired by prompt hash;
    the run's other calls, e.g. other templates or display orders, are not compared). Without prompt hashes, the
    sorted answer texts of the two records are compared."""
    by_prompt: dict[Any, list[str]] = {}
    for c in run_rec.calls:
        by_prompt.setdefault(getattr(c, "prompt", None), []).append(c.response)
    again: dict[Any, list[str]] = {}
    for c in redecoded.calls:
        again.setdefault(getattr(c, "prompt", None), []).append(c.response)
    if None in by_prompt or None in again:
        return sorted(c.response for c in run_rec.calls) != sorted(c.response for c in redecoded.calls)
    return any(sorted(texts) != sorted(by_prompt.get(h, [])) for h, texts in again.items())


def _share(k: int, n: int, level: float) -> Share:
    """A share with its exact (Clopper-Pearson) CI (scipy.stats.binomtest)."""
    if n == 0:
        return Share(count=0, n=0, share=math.nan, ci_low=math.nan, ci_high=math.nan)
    from scipy import stats

    ci = stats.binomtest(k, n).proportion_ci(confidence_level=level, method="exact")
    return Share(count=int(k), n=int(n), share=k / n, ci_low=float(ci.low), ci_high=float(ci.high))


def metric_shift(run_values, redecoded, *, n_boot: int = 9999, level: float = 0.95, seed: int = 0) -> Shift:
    """The mean difference re-decode minus run over the examples defined in both, its paired bootstrap CI, the
    sign-flip p, and the noise floor max(|ci_low|, |ci_high|) (|diff| when the CI is undefined)."""
    from recbench.stats.paired import paired_bootstrap_ci, sign_flip_test

    a = np.asarray(redecoded, dtype=float)
    b = np.asarray(run_values, dtype=float)
    ok = ~(np.isnan(a) | np.isnan(b))
    a, b = a[ok], b[ok]
    if not len(a):
        return Shift(n=0, diff=math.nan, ci_low=math.nan, ci_high=math.nan, p_value=math.nan, floor=math.nan)
    diff = float(np.mean(a - b))
    lo, hi = paired_bootstrap_ci(a, b, n_resamples=n_boot, level=level, seed=seed)
    p = sign_flip_test(a, b, seed=seed).p_value
    floor = max(abs(lo), abs(hi)) if math.isfinite(lo) and math.isfinite(hi) else abs(diff)
    return Shift(n=int(len(a)), diff=diff, ci_low=lo, ci_high=hi, p_value=float(p), floor=float(floor))


def noise_aggregates(run_records: list, redecoded: list, *, headline_metric: str, breakdown_by: tuple = (),
                     settings: dict[str, Any], reference: dict[str, Any], level: float = 0.95, seed: int = 0,
                     alpha: float = 0.05, n_boot: int = 9999) -> dict[str, NoiseBlock]:
    """metrics.json's noise-floor block, typed: answers that changed (raw text of any request; scored prediction), and per
    metric (overall and per breakdown slice) the shift caused by the re-decode and the noise floor."""
    by_id = {r.id: r for r in redecoded}
    pairs = [(r, by_id[r.id]) for r in sorted(run_records, key=lambda r: r.id) if r.id in by_id]
    texts = [_texts_changed(a, b) for a, b in pairs]
    preds = [_canon(a.prediction) != _canon(b.prediction) for a, b in pairs]
    status = [a.parse_status != b.parse_status for a, b in pairs]
    n_calls = sum(len(b.calls) for _, b in pairs)
    metrics = list(dict.fromkeys(m for a, _ in pairs for m in a.metrics))

    def shifts(sub: list) -> dict[str, Shift]:
        def val(r, m):
            v = r.metrics.get(m)
            return math.nan if v is None else float(v)
        return {m: metric_shift([val(a, m) for a, _ in sub], [val(b, m) for _, b in sub], n_boot=n_boot, level=level,
                                seed=seed) for m in metrics}

    overall = shifts(pairs)
    by_slice = {}
    for key in breakdown_by:
        for v in sorted({str(a.meta[key]) for a, _ in pairs if key in a.meta}):
            sub = [(a, b) for a, b in pairs if str(a.meta.get(key)) == v]
            by_slice[f"{key}={v}"] = shifts(sub)
    head = overall.get(headline_metric) or Shift(floor=math.nan, p_value=math.nan)
    answers = _share(sum(texts), len(pairs), level)
    return {KEY: NoiseBlock(
        settings=settings, tag=noise_tag(settings), reference=reference,
        examples=len(pairs), examples_not_redecoded=len(run_records) - len(pairs), requests=n_calls,
        metric=headline_metric, answers_changed=answers,
        predictions_changed=_share(sum(preds), len(pairs), level),
        parse_status_changed=int(sum(status)), metrics=overall, by_slice=by_slice,
        floor=head.floor if head.floor is not None else math.nan,
        flips_detected=bool(answers.count > 0),
        metric_moved=bool(head.p_value is not None and math.isfinite(head.p_value) and head.p_value < alpha),
        note=("diff = re-decode minus run, per example; floor = max(|ci_low|, |ci_high|) of its paired bootstrap CI; "
              "the run's answers are whatever the cache holds for them (the cache key has no batch size)"))}


class NoiseFloor(Audit):
    """audit.noise.* as an audit: its refusals, the re-decode after the loop, its plan note and terminal line."""

    key = KEY
    rank = 30
    blocks = {KEY: NoiseBlock}
    tables = (NOISE_TABLE,)

    def enabled(self, cfg: Any) -> bool:
        """audit.noise.batch_size or audit.noise.dtype is set."""
        return bool(noise_settings(cfg.get("audit")))

    def check(self, cfg: Any, method: Any, backend: Any) -> None:
        """Refused here when it cannot run."""
        check_noise(cfg, method, backend)

    def extra_requests(self, run: AuditRun) -> Optional[Extra]:
        """The re-decode and its block."""
        return noise_floor(run)

    def plan_note(self, cfg: Any, unique_requests: int) -> Optional[str]:
        """The plain method's distinct requests are decoded once more under the noise namespace."""
        audit = cfg.get("audit") or {}
        return (f"audit.noise ({noise_tag(noise_settings(audit))}): the plain method's distinct requests (about "
                f"{unique_requests // variants_asked(cfg)}: the plain variant of each example) are decoded again with "
                "these settings, under their own cache namespace: that many more backend calls on the first run")

    def terminal_line(self, blocks: dict[str, Any]) -> Optional[str]:
        """Answers changed, headline shift, floor."""
        return summary_line(blocks)


AUDIT = register(NoiseFloor())
