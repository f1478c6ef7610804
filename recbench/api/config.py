"""Structured configs (typed, with their defaults) for the core groups: run, cache, sampling, the top level, and
the keys every model backend shares.

conf/config.yaml starts from `RecbenchConfig` (registered as `recbench_schema`), so a wrong type fails at compose
time and each default lives here once. Each conf/model/*.yaml starts its `backend` node from one of the backend
schemas (`- /schema/backend@backend: openai` in its defaults list; each backend's schema lives with the backend,
recbench/backends/<kind>_conf.py): the shared keys (name, batch_size, quirks, and
an API backend's concurrency, timeouts and retries) are typed, backend-specific keys stay free-form. Task and method
keys stay YAML in their groups; value ranges that types cannot say (temperature >= 0, sizes >= 1) are checked by
`validate`.

The keys a YAML-only task may leave out are api/yaml_task.py; the rules tasks and methods declare for their own keys
(`Rule`, `check_settings`) are api/settings_rules.py; both are named here too.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, List, Mapping, Optional

from omegaconf import MISSING, DictConfig, OmegaConf

from recbench.api.backend_conf import (  # noqa: F401 - the keys every backend shares, named here with the core groups
    BackendConf,
    ModelBackendConf,
)
from recbench.api.errors import ConfigError
from recbench.api.settings_rules import (  # noqa: F401 - the valid values of every config key, named in one place
    Rule,
    check_settings,
    describe,
    flag,
    list_of,
    number,
    one_of,
    text,
    whole,
)
from recbench.api.yaml_task import (  # noqa: F401
    YamlDataConf,
    YamlParserConf,
    YamlPromptConf,
    YamlTaskConf,
    with_defaults,
)


@dataclass
class SamplingConf:
    """Decoding parameters sent with EVERY request (never the model's implicit defaults)."""

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = "${seed}"  # type: ignore[assignment] - interpolation, resolved to an int


@dataclass
class CacheConf:
    """The SQLite response cache."""

    enabled: bool = True
    # a sweep job on a cluster gets its own file (conf/hydra/job_cache/per_job.yaml sets RECBENCH_JOB_CACHE_DIR)
    path: str = "${oc.env:RECBENCH_JOB_CACHE_DIR,${oc.env:RECBENCH_CACHE_DIR,.cache}}/responses.sqlite"
    # derived data (loaded examples, counts) keyed by the input files' bytes: a second run skips parsing (null: off)
    derived_dir: Optional[str] = "${oc.env:RECBENCH_CACHE_DIR,.cache}/derived"


@dataclass
class RunConf:
    """How the loop runs and aggregates."""

    chunk_size: Optional[int] = None  # examples in progress at once (null = all)
    # which `limit` examples: stratified (round-robin over the task's first breakdown key, so limit=12 over three
    # difficulty levels runs 4 of each) | first (file order) | random (seeded)
    limit_strategy: str = "stratified"
    store_prompts: bool = True
    progress: bool = True
    bootstrap_resamples: int = 1000
    ci_level: float = 0.95
    # one run split over N processes or hosts: run.shard=I (0..N-1) with run.shards=N evaluates the examples whose id
    # hashes (sha256) to I, after `limit`, in its own run dir and cache file; python -m recbench.merge joins the N
    # shard dirs into the run's metrics.json (docs/scaling.md). null = not a shard
    shard: Optional[int] = None
    shards: int = 1


@dataclass
class PlanConf:
    """mode=plan's power analysis: the paired difference a claim should detect, and the fallback sd."""

    effect: float = 0.05  # warn when the planned n cannot detect a paired difference this large
    sd: float = 1.0  # sd of paired per-unit differences when no earlier run of the task gives one
    power: float = 0.8
    alpha: float = 0.05


@dataclass
class ReportConf:
    """What a report counts: runs with this share of parse failures or more are never a summary's "best method"."""

    max_parse_failure_rate: float = 0.5


@dataclass
class NoiseConf:
    """Noise-floor audit: decode the run's requests again with these backend settings (null = as the run)."""

    batch_size: Optional[int] = None  # another batch size (model.backend.batch_size)
    dtype: Optional[str] = None  # another dtype (model.backend.dtype: hf, vllm)


@dataclass
class AuditConf:
    """Validity audits (docs/validity.md): order (K seeded display orders per example; needs an order-auditable
    method), template (K paraphrased prompt templates; needs a method that ships them), seed (K sampling seeds per
    example; any method that asks a model) and noise floor (every request decoded again with another batch size or
    dtype, not from the cache). 0 / null = off."""

    orders: int = 0
    templates: int = 0
    seeds: int = 0
    noise: NoiseConf = field(default_factory=NoiseConf)


@dataclass
class ContaminationConf:
    """Contamination split (docs/memorization.md, "Contamination split"; recbench/audits/contamination.py): the
    headline on examples whose item a memorization probe run of the same model recalled, did not recall (the clean
    subset) or did not ask about, with the test of the gap. probe_run null = off."""

    probe_run: Optional[str] = None  # the probe's run dir (python -m recbench task=memorization_... model=<this model>)
    alpha: float = 0.05  # level of the gap test (two-sided permutation test of the difference in means)
    n_resamples: int = 9999  # label permutations of the gap test (exact when the groups have fewer arrangements)
    # an item's title in the task and in the probe's catalogue name the same item when equal once normalised, one a
    # prefix of the other (clipped) or rapidfuzz ratio >= this (0-100); else the probe is of another catalogue
    title_similarity: float = 90.0


@dataclass
class JudgeConf:
    """An LLM judge of the run's generated answers (docs/judges.md): `judge=NAME` merges conf/model/NAME.yaml (name,
    backend, ...) over these keys; name none = no judge. Not struct: the model entry's own keys merge in."""

    name: str = "none"
    backend: Any = None  # the model entry's backend node (same schema as model.backend)
    # pointwise (a rubric scored 1-5) | pairwise (against `reference`, both orders): its default in conf/judge/none.yaml
    protocol: str = MISSING
    reference: Optional[str] = None  # pairwise: the run dir of the same task and examples answered by a baseline
    panel: List[str] = field(default_factory=list)  # more catalogue names judging the same answers (own records)
    repeats: int = 0  # each verdict asked again this many times with another seed (the judge's noise floor)
    temperature: float = 0.0  # the judge's sampling temperature (repeats at 0 repeat greedy decoding)
    max_tokens: int = 256  # the judge's answer budget
    template: Optional[str] = None  # another Jinja template for the protocol (a path); null = the packaged one
    rubric: Any = None  # null = the task's rubric; a mapping aspect -> definition, or a list of the task's aspects


@dataclass
class RecbenchConfig:
    """The top-level config: task, model and method come from their config groups."""

    task: Any = None
    model: Any = None
    method: Any = None
    limit: Optional[int] = None  # evaluate N examples only (null = all); part of the run-dir name
    seed: int = 0
    mode: str = "run"  # run | plan
    sampling: SamplingConf = field(default_factory=SamplingConf)
    cache: CacheConf = field(default_factory=CacheConf)
    run: RunConf = field(default_factory=RunConf)
    plan: PlanConf = field(default_factory=PlanConf)
    report: ReportConf = field(default_factory=ReportConf)
    audit: AuditConf = field(default_factory=AuditConf)
    contamination: ContaminationConf = field(default_factory=ContaminationConf)
    judge: Any = None  # conf/judge/none.yaml (JudgeConf) with the judge model's entry merged in (judge=NAME)
    tracking: Any = None  # +tracking=mlflow|wandb (conf/tracking/, docs/results_elsewhere.md); taken off before the run


def register_configs(backend_schemas: Mapping[str, type] = MappingProxyType({})) -> None:
    """Register the schemas in Hydra's ConfigStore (idempotent): the core groups, and each backend's schema by kind
    (`backend_schemas`, recbench/backends/schemas.py `all_schemas()`: the backends register theirs, not this file)."""
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    cs.store(name="recbench_schema", node=RecbenchConfig)
    cs.store(group="schema", name="judge", node=OmegaConf.structured(JudgeConf, flags={"struct": False}))
    for name, cls in backend_schemas.items():  # not struct: backend-specific keys are added by the model's YAML
        cs.store(group="schema/backend", name=name, node=OmegaConf.structured(cls, flags={"struct": False}))


def _check(ok: bool, key: str, value: Any, rule: str) -> None:
    if not ok:
        raise ConfigError(f"{key}={value}: must be {rule}")


def _finite(v: Any, integer: bool = False) -> bool:
    """True when v is a finite number (a whole one when asked); a text like 'abc' or inf is not."""
    import math

    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        return False
    try:
        x = float(v)
    except ValueError:
        return False
    return math.isfinite(x) and (not integer or x == int(x) and not (isinstance(v, str) and "." in v))


def _one_component(name: object) -> bool:
    """True for one plain path component: no separator or NUL, not '', '.' or '..' (the names store/rundir.safe_name
    leaves as they are)."""
    s = str(name)
    return not any(c in s for c in "/\\\x00") and bool(s.strip("."))


def validate(cfg: DictConfig) -> None:
    """Range checks types cannot express, each naming the key: names, sampling, sizes, limit."""
    for group in ("task", "model", "method"):  # each names one folder of the run dir under the runs dir
        name = (cfg.get(group) or {}).get("name")
        _check(name is None or _one_component(name), f"{group}.name", name,
               "a plain name (one folder of the run dir: no '/' or '\\', not '.' or '..')")
    s = cfg.sampling
    _check(_finite(s.temperature) and float(s.temperature) >= 0, "sampling.temperature", s.temperature,
           "a finite number >= 0 (0 = greedy)")
    _check(_finite(s.top_p) and 0 < float(s.top_p) <= 1, "sampling.top_p", s.top_p, "in (0, 1]")
    r = cfg.run
    _check(r.chunk_size is None or int(r.chunk_size) >= 1, "run.chunk_size", r.chunk_size, ">= 1, or null for all")
    _check(int(r.bootstrap_resamples) >= 1, "run.bootstrap_resamples", r.bootstrap_resamples, ">= 1")
    _check(0 < float(r.ci_level) < 1, "run.ci_level", r.ci_level, "in (0, 1)")
    _check(r.limit_strategy in ("first", "stratified", "random"), "run.limit_strategy", r.limit_strategy,
           "one of first, stratified, random")
    _check(cfg.limit is None or int(cfg.limit) >= 1, "limit", cfg.limit, ">= 1, or null for all examples")
    _check_shard(r)
    rep = cfg.get("report") or {}
    if rep.get("max_parse_failure_rate") is not None:
        _check(0 < float(rep.max_parse_failure_rate) <= 1, "report.max_parse_failure_rate",
               rep.max_parse_failure_rate, "in (0, 1] (a run counts as best only below this parse-failure share)")
    _check(_finite(cfg.plan.effect) and float(cfg.plan.effect) > 0, "plan.effect", cfg.plan.effect,
           "a finite number > 0 (the paired difference a claim should detect)")
    _check(float(cfg.plan.sd) > 0, "plan.sd", cfg.plan.sd, "> 0")
    _check(0 < float(cfg.plan.power) < 1, "plan.power", cfg.plan.power, "in (0, 1)")
    _check(0 < float(cfg.plan.alpha) < 1, "plan.alpha", cfg.plan.alpha, "in (0, 1)")
    _check_audit(cfg.get("audit") or {})
    _check_contamination(cfg.get("contamination") or {})
    _check_judge(cfg.get("judge") or {})
    m = cfg.get("method") or {}
    if m.get("max_tokens") is not None:
        _check(_finite(m.max_tokens, integer=True) and int(float(m.max_tokens)) >= 1, "method.max_tokens", m.max_tokens,
               "a whole number >= 1")
    b = (cfg.get("model") or {}).get("backend") or {}
    for key in ("batch_size", "concurrency", "max_consecutive_failures", "max_response_bytes"):
        if b.get(key) is not None:
            _check(int(b[key]) >= 1, f"model.backend.{key}", b[key], ">= 1")
    if b.get("max_retries") is not None:
        _check(int(b.max_retries) >= 0, "model.backend.max_retries", b.max_retries, ">= 0")
    if b.get("timeout_s") is not None:
        _check(float(b.timeout_s) > 0, "model.backend.timeout_s", b.timeout_s, "> 0 (seconds)")
    if b.get("down_after_s") is not None:
        _check(float(b.down_after_s) > 0, "model.backend.down_after_s", b.down_after_s, "> 0 (seconds)")


def _check_audit(a: Any) -> None:
    """audit.templates: 0 or >= 2; audit.noise.batch_size >= 1; audit.noise.dtype a torch dtype name."""
    t = a.get("templates", 0)
    _check(_finite(t, integer=True) and (int(t) == 0 or int(t) >= 2), "audit.templates", t,
           "0 (off) or a whole number >= 2 (the prompt templates asked per example)")
    noise = a.get("noise") or {}
    bs = noise.get("batch_size")
    if bs is not None:
        _check(_finite(bs, integer=True) and int(bs) >= 1, "audit.noise.batch_size", bs,
               "a whole number >= 1 (the batch size of the re-decode), or null")
    dt = noise.get("dtype")
    if dt is not None:
        _check(dt in ("float32", "float16", "bfloat16"), "audit.noise.dtype", dt,
               "one of float32, float16, bfloat16 (the dtype of the re-decode), or null")


def _check_judge(j: Any) -> None:
    """judge.repeats >= 0, judge.temperature >= 0, judge.max_tokens >= 1 (the protocol and the rest:
    run/judge_settings.py)."""
    for key, ok, rule in (("repeats", lambda v: _finite(v, integer=True) and int(v) >= 0,
                           "a whole number >= 0 (0 = off)"),
                          ("temperature", lambda v: _finite(v) and float(v) >= 0, "a finite number >= 0"),
                          ("max_tokens", lambda v: _finite(v, integer=True) and int(v) >= 1, "a whole number >= 1")):
        if j.get(key) is not None:
            _check(ok(j.get(key)), f"judge.{key}", j.get(key), rule)


def _check_contamination(c: Any) -> None:
    """contamination.alpha in (0, 0.5], n_resamples >= 99, title_similarity in (0, 100]."""
    a, n, t = c.get("alpha"), c.get("n_resamples"), c.get("title_similarity")
    _check(a is None or _finite(a) and 0 < float(a) <= 0.5, "contamination.alpha", a,
           "in (0, 0.5] (the level of the gap test)")
    _check(n is None or _finite(n, integer=True) and int(n) >= 99, "contamination.n_resamples", n,
           "a whole number >= 99 (label permutations of the gap test)")
    _check(t is None or _finite(t) and 0 < float(t) <= 100, "contamination.title_similarity", t,
           "in (0, 100] (rapidfuzz ratio at which two titles name one item)")


def _check_shard(r: Any) -> None:
    """run.shard / run.shards: N >= 1 shards, and a shard index 0 <= I < N whenever N > 1."""
    n = r.get("shards", 1)
    _check(_finite(n, integer=True) and int(n) >= 1, "run.shards", n, "a whole number >= 1 (the number of shards; 1 = "
           "the whole run)")
    i = r.get("shard")
    if i is None and int(n) > 1:
        raise ConfigError(f"run.shards={n} needs run.shard=I, a whole number in [0, {int(n) - 1}]: one shard per "
                          f"process (all of them as one sweep: -m 'run.shard=range({n})' run.shards={n})")
    if i is not None:
        _check(_finite(i, integer=True) and 0 <= int(i) < int(n), "run.shard", i,
               f"a whole number in [0, {int(n) - 1}] with run.shards={n} (shards are numbered from 0)")
