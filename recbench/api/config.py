"""Structured configs (typed, with their defaults) for the core groups: run, cache, sampling, the top level, and
the keys every model backend shares.

conf/config.yaml starts from `RecbenchConfig` (registered as `recbench_schema`), so a wrong type fails at compose
time and each default lives here once. Each conf/model/*.yaml starts its `backend` node from one of the backend
schemas (`- /schema/backend@backend: openai` in its defaults list): the shared keys (name, batch_size, quirks, and
an API backend's concurrency, timeouts and retries) are typed, backend-specific keys stay free-form. Task and method
keys stay YAML in their groups; value ranges that types cannot say (temperature >= 0, sizes >= 1) are checked by
`validate`.

Long because the structured configs, their range checks and the rules tasks and methods declare for their own keys
(`Rule`, `check_settings`) are one contract: the valid values of every config key, in one module.
"""
from __future__ import annotations

from dataclasses import MISSING as NO_DEFAULT, dataclass, field, fields, is_dataclass, replace
from typing import Any, List, Optional

from omegaconf import MISSING, DictConfig, OmegaConf

from recbench.api.errors import ConfigError


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
    method), template (K paraphrased prompt templates; needs a method that ships them) and noise floor (every request
    decoded again with another batch size or dtype, not from the cache). 0 / null = off."""

    orders: int = 0
    templates: int = 0
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


# ---- model.backend: the typed base every backend shares; each default equals the backend constructor's own ----
@dataclass
class BackendConf:
    """Keys of every backend (model.backend); a backend's own keys are free-form additions to this node."""

    _target_: str = MISSING
    name: Optional[str] = None  # shown in records and the cache identity
    batch_size: Optional[int] = None  # requests handed to the backend at once


@dataclass
class ModelBackendConf(BackendConf):
    """Keys of every backend that serves a model (hf, vllm, openai)."""

    model: str = ""
    revision: Optional[str] = None
    quirks: Optional[List[str]] = None  # chat-template quirks (recbench/backends/quirks.py)


@dataclass
class HFBackendConf(ModelBackendConf):
    """transformers in-process (recbench.backends.hf.HFBackend)."""

    batch_size: Optional[int] = 16
    # torch threads: a positive integer, or auto = the cores other processes leave free (recbench/backends/threads.py)
    threads: Any = "auto"


@dataclass
class VLLMBackendConf(ModelBackendConf):
    """The vLLM offline engine (recbench.backends.vllm.VLLMBackend)."""

    batch_size: Optional[int] = 1024


@dataclass
class OpenAIBackendConf(ModelBackendConf):
    """Any OpenAI-compatible server (recbench.backends.openai.OpenAIBackend): concurrency, timeouts, retries."""

    # one URL, a list of servers of the same model, or a comma-separated string (env); None: the hosted OpenAI API
    base_url: Any = None
    api_key_env: Optional[str] = None  # environment variable holding the key (None: no key, a local server)
    concurrency: int = 8  # requests in flight
    timeout_s: float = 120.0
    max_retries: int = 4
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 20.0
    backoff_jitter: float = 0.5
    max_retry_after_s: float = 60.0
    # server down (stop, exit 2): this many connection failures in a row AND no HTTP answer for down_after_s seconds
    max_consecutive_failures: int = 5
    down_after_s: float = 3.0
    seed_param: bool = True


@dataclass
class PredictionsBackendConf(BackendConf):
    """Recorded answers replayed from a file (recbench.backends.predictions.PredictionsBackend)."""

    batch_size: Optional[int] = 256


#: conf/model/*.yaml name these as `- /schema/backend@backend: <name>`
BACKEND_SCHEMAS = {"hf": HFBackendConf, "vllm": VLLMBackendConf, "openai": OpenAIBackendConf,
                   "predictions": PredictionsBackendConf}


def register_configs() -> None:
    """Register the schemas in Hydra's ConfigStore (idempotent)."""
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    cs.store(name="recbench_schema", node=RecbenchConfig)
    for name, cls in BACKEND_SCHEMAS.items():  # not struct: backend-specific keys are added by the model's YAML
        cs.store(group="schema/backend", name=name, node=OmegaConf.structured(cls, flags={"struct": False}))


def _check(ok: bool, key: str, value: Any, rule: str) -> None:
    if not ok:
        raise ConfigError(f"{key}={value}: must be {rule}")


def _finite(v: Any, whole: bool = False) -> bool:
    """True when v is a finite number (a whole one when asked); a text like 'abc' or inf is not."""
    import math

    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        return False
    try:
        x = float(v)
    except ValueError:
        return False
    return math.isfinite(x) and (not whole or x == int(x) and not (isinstance(v, str) and "." in v))


def validate(cfg: DictConfig) -> None:
    """Range checks types cannot express, each naming the key: names, sampling, sizes, limit."""
    from recbench.store.rundir import bad_name

    for group in ("task", "model", "method"):  # each names one folder of the run dir under the runs dir
        name = (cfg.get(group) or {}).get("name")
        _check(name is None or not bad_name(name), f"{group}.name", name,
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
    m = cfg.get("method") or {}
    if m.get("max_tokens") is not None:
        _check(_finite(m.max_tokens, whole=True) and int(float(m.max_tokens)) >= 1, "method.max_tokens", m.max_tokens,
               "a whole number >= 1")
    b = (cfg.get("model") or {}).get("backend") or {}
    for key in ("batch_size", "concurrency", "max_consecutive_failures"):
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
    _check(_finite(t, whole=True) and (int(t) == 0 or int(t) >= 2), "audit.templates", t,
           "0 (off) or a whole number >= 2 (the prompt templates asked per example)")
    noise = a.get("noise") or {}
    bs = noise.get("batch_size")
    if bs is not None:
        _check(_finite(bs, whole=True) and int(bs) >= 1, "audit.noise.batch_size", bs,
               "a whole number >= 1 (the batch size of the re-decode), or null")
    dt = noise.get("dtype")
    if dt is not None:
        _check(dt in ("float32", "float16", "bfloat16"), "audit.noise.dtype", dt,
               "one of float32, float16, bfloat16 (the dtype of the re-decode), or null")


def _check_contamination(c: Any) -> None:
    """contamination.alpha in (0, 0.5], n_resamples >= 99, title_similarity in (0, 100]."""
    a, n, t = c.get("alpha"), c.get("n_resamples"), c.get("title_similarity")
    _check(a is None or _finite(a) and 0 < float(a) <= 0.5, "contamination.alpha", a,
           "in (0, 0.5] (the level of the gap test)")
    _check(n is None or _finite(n, whole=True) and int(n) >= 99, "contamination.n_resamples", n,
           "a whole number >= 99 (label permutations of the gap test)")
    _check(t is None or _finite(t) and 0 < float(t) <= 100, "contamination.title_similarity", t,
           "in (0, 100] (rapidfuzz ratio at which two titles name one item)")


def _check_shard(r: Any) -> None:
    """run.shard / run.shards: N >= 1 shards, and a shard index 0 <= I < N whenever N > 1."""
    n = r.get("shards", 1)
    _check(_finite(n, whole=True) and int(n) >= 1, "run.shards", n, "a whole number >= 1 (the number of shards; 1 = "
           "the whole run)")
    i = r.get("shard")
    if i is None and int(n) > 1:
        raise ConfigError(f"run.shards={n} needs run.shard=I, a whole number in [0, {int(n) - 1}]: one shard per "
                          f"process (all of them as one sweep: -m 'run.shard=range({n})' run.shards={n})")
    if i is not None:
        _check(_finite(i, whole=True) and 0 <= int(i) < int(n), "run.shard", i,
               f"a whole number in [0, {int(n) - 1}] with run.shards={n} (shards are numbered from 0)")


# ---- a YAML-only task (recbench.tasks.generic, docs/new_benchmark.md): the keys a task YAML may leave out --------
@dataclass
class YamlDataConf:
    """task.data of a YAML-only task."""

    path: Optional[str] = None  # required: the task says so, naming the key
    format: Optional[str] = None  # jsonl | json | csv | parquet; null = from the file's suffix
    id_field: Optional[str] = "id"  # the field holding each example's id; null = the row number


@dataclass
class YamlPromptConf:
    """task.prompt of a YAML-only task: `template` (inline Jinja2) or `template_file` is required."""

    system: Optional[str] = None  # null = no system message
    template: Optional[str] = None
    template_file: Optional[str] = None


@dataclass
class YamlParserConf:
    """task.parser of a YAML-only task: `kind` is required, the other keys belong to some kinds."""

    kind: Optional[str] = None
    choices: Optional[List[Any]] = None  # choice
    lo: Optional[float] = None  # number: clamp below (null = none)
    hi: Optional[float] = None  # number: clamp above (null = none)
    field: Optional[str] = None  # json_field
    sep: Optional[str] = None  # list: null = JSON list or numbered / bulleted lines
    pattern: Optional[str] = None  # regex
    group: Optional[int] = None  # regex: null = the pattern's first group if it has one, else the whole match
    ignore_case: bool = True  # regex


@dataclass
class YamlTaskConf:
    """The optional top-level keys of a YAML-only task and their defaults."""

    data: YamlDataConf = field(default_factory=YamlDataConf)
    prompt: YamlPromptConf = field(default_factory=YamlPromptConf)
    parser: YamlParserConf = field(default_factory=YamlParserConf)
    constrained: bool = False  # true: the backend chooses among parser.choices / matches parser.pattern
    max_tokens: Optional[int] = 16  # the answer budget of method=zero_shot (null = this default)
    headline_metric: Optional[str] = None  # null = the first metric
    breakdown_by: Optional[List[str]] = None  # null = no breakdown


def with_defaults(given: Any, schema: type) -> dict[str, Any]:
    """A mapping with every key it leaves out (or sets to null, for a nested block) taken from a dataclass schema's
    defaults, nested blocks merged key by key: the one place those defaults are written. Values are not
    type-checked here (the task's settings rules check them, naming the key)."""
    plain = OmegaConf.to_container(given, resolve=True) if isinstance(given, DictConfig) else dict(given or {})
    out = dict(plain)
    for f in fields(schema):
        if is_dataclass(f.default_factory) and isinstance(plain.get(f.name), (dict, DictConfig, type(None))):
            out[f.name] = with_defaults(plain.get(f.name), f.default_factory)  # type: ignore[arg-type]
        elif f.name not in plain:
            out[f.name] = f.default_factory() if f.default_factory is not NO_DEFAULT else f.default
    return out


# ---- task and method keys: each class declares the valid values of the keys it reads (`settings_rules`) -----------
@dataclass(frozen=True)
class Rule:
    """The valid values of one task or method key: a kind with an optional range, or a set of choices.

    kind: "int" (a whole number), "number", "bool", "text", "choice" (one of `choices`), "list" (each element checked
    by `item`; `lo`/`hi` bound its length). lo/hi are inclusive bounds, `above` an exclusive lower bound;
    `null` allows None (documented as "null = ..." beside the key in its YAML); `per_key` also allows a mapping from
    those keys to valid values."""

    kind: str
    lo: Optional[float] = None
    hi: Optional[float] = None
    above: Optional[float] = None
    choices: tuple = ()
    null: bool = False
    item: Optional["Rule"] = None
    per_key: tuple = ()  # the value may also be a mapping from these keys to such values (e.g. {movie: x, book: y})


def whole(lo: Optional[int] = None, hi: Optional[int] = None, null: bool = False) -> Rule:
    """A whole number in [lo, hi]."""
    return Rule("int", lo=lo, hi=hi, null=null)


def number(lo: Optional[float] = None, hi: Optional[float] = None, above: Optional[float] = None,
           null: bool = False, per_key: tuple = ()) -> Rule:
    """A number in [lo, hi] (or above `above`)."""
    return Rule("number", lo=lo, hi=hi, above=above, null=null, per_key=per_key)


def flag() -> Rule:
    """true or false."""
    return Rule("bool")


def text(null: bool = False) -> Rule:
    """A string (a name, a path, a template)."""
    return Rule("text", null=null)


def one_of(*choices: Any, null: bool = False) -> Rule:
    """One of the given values."""
    return Rule("choice", choices=tuple(choices), null=null)


def list_of(item: Rule, min_len: int = 1, null: bool = False) -> Rule:
    """A list (at least min_len long) whose every element satisfies `item`."""
    return Rule("list", item=item, lo=min_len, null=null)


def _show(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_show(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_show(x)}" for k, x in v.items()) + "}"
    return str(v)


def _range(r: Rule) -> str:
    lo = f"({r.above:g}" if r.above is not None else f"[{r.lo:g}" if r.lo is not None else None
    if lo is not None and r.hi is not None:
        return f" in {lo}, {r.hi:g}]"
    if r.above is not None:
        return f" > {r.above:g}"
    if r.lo is not None:
        return f" >= {r.lo:g}"
    return f" <= {r.hi:g}" if r.hi is not None else ""


def describe(r: Rule) -> str:
    """What a rule accepts, in words ('a whole number >= 1, or null')."""
    if r.kind == "int":
        s = "a whole number" + _range(r)
    elif r.kind == "number":
        s = "a number" + _range(r)
    elif r.kind == "bool":
        s = "true or false"
    elif r.kind == "text":
        s = "a string"
    elif r.kind == "choice":
        s = "one of " + ", ".join(_show(c) for c in r.choices)
    else:
        assert r.item is not None
        s = f"a list of at least {r.lo:g} element(s), each {describe(r.item)}"
    if r.per_key:
        s += f", or a mapping {{{', '.join(f'{k}: ...' for k in r.per_key)}}} of such"
    return s + (", or null" if r.null else "")


def _ok(v: Any, r: Rule) -> bool:
    import math

    if v is None:
        return r.null
    if r.per_key and isinstance(v, dict):
        return set(v) <= set(r.per_key) and all(_ok(x, replace(r, per_key=(), null=False)) for x in v.values())
    if r.kind == "bool":
        return isinstance(v, bool)
    if r.kind == "text":
        return isinstance(v, str)
    if r.kind == "choice":
        return isinstance(v, (str, int, float)) and not isinstance(v, bool) and v in r.choices
    if r.kind == "list":
        return (isinstance(v, (list, tuple)) and (r.lo is None or len(v) >= r.lo)
                and all(_ok(x, r.item) for x in v))  # type: ignore[arg-type]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (r.kind == "int" and not isinstance(v, int)):
        return False
    return (math.isfinite(v) and (r.lo is None or v >= r.lo) and (r.hi is None or v <= r.hi)
            and (r.above is None or v > r.above))


def check_settings(node: Any, rules: dict[str, Rule], prefix: str) -> None:
    """Refuse the first key of a task/method config whose value breaks its rule (dotted rule names reach nested keys):
    one ConfigError naming the key, the value and what is valid. Keys the config does not set are not checked."""
    from recbench.api.errors import suggest

    plain = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node
    for key, rule in rules.items():
        v: Any = plain
        for part in key.split("."):
            if not isinstance(v, dict) or part not in v:
                break
            v = v[part]
        else:
            if _ok(v, rule):
                continue
            hint = ""
            if rule.kind == "choice" and isinstance(v, str):
                hint = suggest(v, [str(c) for c in rule.choices])
            elif rule.kind == "list" and isinstance(v, (list, tuple)) and rule.item is not None:
                bad = next((x for x in v if not _ok(x, rule.item)), None)
                if bad is not None:
                    hint = f" '{_show(bad)}' is not.{suggest(str(bad), [str(c) for c in rule.item.choices])}"
            raise ConfigError(f"{prefix}.{key}={_show(v)}: must be {describe(rule)}.{hint}")
