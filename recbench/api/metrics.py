"""The one metric registry: every metric's name, per-example function, aggregation, direction and binary-ness.

A metric is declared once, where it is computed: the standard per-example metrics below (`register`, selectable by
name in YAML: `resolve('hr@10')`), and each benchmark's own metrics in its Task class (`Task.metric_specs`, next to
the `score()` that computes them), which this registry collects when the class is defined (`declare`). The run loop
holds a task to its declarations (`check_scored`). A corpus metric (a statistic of the whole run: RMSE, corpus BLEU)
is a MetricSpec whose `corpus` computes it (`corpus_values`); there is no other way to add one. Reports and
`recbench.stats.verdicts` read a metric's direction and binary-ness from here (or from the `metric_info` block a run
wrote into metrics.json), never from a list of names.

Long because the registry, the contract checks the loop applies to tasks, and the standard metrics it registers
are one contract: a metric's name, direction and computation stated side by side.

Every metric has one of four directions: "higher" or "lower" is better; "none" for a descriptive value declared
without one (a count such as `n_recommended`); "unknown" for a metric nobody registered. Only "higher" and "lower"
ever give a "better", a verdict, significance letters or best marks.
"""
from __future__ import annotations

import functools
import importlib
import json
import logging
import math
import pkgutil
import re
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal, Mapping, Optional, Sequence

from recbench.api.errors import CannotRun, ConfigError, lookup

log = logging.getLogger(__name__)
MetricFn = Callable[..., float]
Aggregation = Literal["mean", "corpus"]
Direction = Literal["higher", "lower", "none", "unknown"]
#: directions that rank systems (the others never give a verdict)
RANKING_DIRECTIONS = ("higher", "lower")


@dataclass(frozen=True)
class MetricSpec:
    """A registered metric.

    `fn(prediction, truth, **params)` gives the per-example value (None for metrics a task's score() computes);
    `aggregation` is "mean" (the run value is the mean of per-example values) or "corpus" (a statistic of the
    whole set, e.g. corpus BLEU or RMSE); `binary` means per-example values are 0/1 (exact McNemar tests apply).
    `corpus` computes the metric's run-level value, written to metrics.json `extra` (see `corpus_values`): with
    `per_example_name` it is `corpus(values)` over that per-example value (RMSE from squared errors: the form a
    paired comparison resamples); without, `corpus(records, task)` over the run's records (corpus BLEU, RMSE over
    parsed answers, corpus item shares), returning None where the metric does not apply to the run. A mean metric
    may have a corpus value too (an item share per answer, and over all named items).
    `higher_is_better=None` declares a metric without a direction (a descriptive count): it is compared but never
    called better or worse. `declared=False` marks the stand-in for a metric nobody registered (direction unknown).
    """

    name: str
    higher_is_better: Optional[bool] = True
    binary: bool = False
    aggregation: Aggregation = "mean"
    fn: Optional[MetricFn] = None
    on_failure: Optional[float] = None  # value of a failed parse; None = undefined (NaN)
    params: tuple[str, ...] = ()
    defaults: dict[str, Any] = field(default_factory=dict)
    corpus: Optional[Callable[..., Optional[float]]] = None
    per_example_name: Optional[str] = None
    doc: str = ""
    declared: bool = True

    @property
    def direction(self) -> Direction:
        """'higher' or 'lower' (is better), 'none' (declared without a direction) or 'unknown' (not registered)."""
        if not self.declared:
            return "unknown"
        if self.higher_is_better is None:
            return "none"
        return "higher" if self.higher_is_better else "lower"

    @property
    def ranks(self) -> bool:
        """True when the metric has a direction, so a difference can make one system better."""
        return self.direction in RANKING_DIRECTIONS

    def info(self) -> dict[str, Any]:
        """What a run dir records about the metric (direction, binary-ness, aggregation); higher_is_better is None
        when the direction is 'none' or 'unknown'."""
        return {"higher_is_better": self.higher_is_better if self.ranks else None, "direction": self.direction,
                "binary": self.binary, "aggregation": self.aggregation}


_REGISTRY: dict[str, MetricSpec] = {}  # register(): metrics selectable by name (and any a user adds)
_DECLARED: dict[str, MetricSpec] = {}  # declare(): the metrics task classes declare (Task.metric_specs)
_PLUGINS_LOADED = False


def _add(table: dict[str, MetricSpec], s: MetricSpec, how: str) -> None:
    for other in (_REGISTRY, _DECLARED):
        old = other.get(s.name)
        if old is not None and old.info() != s.info():
            raise ValueError(f"metric '{s.name}' {how} with properties {s.info()}, but it is already declared with "
                             f"{old.info()}: one name, one direction, binary-ness and aggregation")
    old = table.get(s.name)
    if old is None or (s.fn is not None and old.fn is None):
        table[s.name] = s


def register(*specs: MetricSpec) -> None:
    """Add metrics selectable by name (a per-example `fn`); registering a name again with a different direction,
    binary-ness or aggregation is an error. A task's own metrics are declared in its class (Task.metric_specs)."""
    for s in specs:
        _add(_REGISTRY, s, "registered twice")


def declare(owner: str, specs: Iterable[MetricSpec]) -> None:
    """Record the metrics a task class declares (called when the class is defined, never by hand); a name another
    task or the registry already uses with a different direction, binary-ness or aggregation is an error."""
    for s in specs:
        _add(_DECLARED, s, f"declared by {owner}")


def _lookup(table: Mapping[str, MetricSpec], name: str) -> Optional[MetricSpec]:
    """The spec of a metric name in one table: the name itself ('hr@10'), else its family ('hr')."""
    return table.get(name) or table.get(family(name))


def family(name: str) -> str:
    """A metric name without its cut-off: 'hr@10' -> 'hr'."""
    return name.split("@", 1)[0]


def task_packages() -> list[str]:
    """The names of the task packages under recbench.tasks (folders, in name order)."""
    import recbench.tasks as tasks_pkg

    return sorted(m.name for m in pkgutil.iter_modules(tasks_pkg.__path__) if m.ispkg)


def import_task_module(package: str, module: str = "task") -> Any:
    """Import recbench.tasks.<package>.<module>; a package that fails to import is an error naming the package,
    the exception and the line that raised it (never skipped: a broken task would silently lose its metrics)."""
    name = f"recbench.tasks.{package}.{module}"
    try:
        return importlib.import_module(name)
    except Exception as e:  # noqa: BLE001 - any failure of a task package's code is reported the same way
        where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
        at = f" at {where.filename}:{where.lineno}" if where else ""
        raise CannotRun(f"task package '{package}' failed to import: {name} raised {type(e).__name__}: {e}{at}. "
                        f"Fix recbench/tasks/{package} (or install what it needs)") from e


def _load_task_plugins() -> None:
    """Import every task package's `task` module once, so the metrics their classes declare are known (no names
    hard-coded); a package that fails to import stops with an error naming it."""
    global _PLUGINS_LOADED
    if _PLUGINS_LOADED:
        return
    for package in task_packages():
        import_task_module(package)
    _PLUGINS_LOADED = True


def find_spec(name: str) -> Optional[MetricSpec]:
    """The spec of a metric name, registered or declared by a task ('hr@10' finds 'hr@10', else the family 'hr'),
    or None."""
    for first in (True, False):
        if not first:
            _load_task_plugins()
        for table in (_REGISTRY, _DECLARED):
            spec = _lookup(table, name)
            if spec is not None:
                return spec
    return None


def metric_spec(name: str, recorded: Optional[dict[str, Any]] = None) -> MetricSpec:
    """The spec of a metric: registered, else what a run recorded in metrics.json (`metric_info`), else a
    non-binary stand-in whose direction is 'unknown', with a warning (an unknown metric is never guessed better)."""
    spec = find_spec(name)
    if spec is not None:
        return spec
    if recorded:
        direction = recorded.get("direction")
        if direction is None:  # metric_info written before directions were named: a bool, or None
            hib = recorded.get("higher_is_better")
            direction = "unknown" if hib is None else ("higher" if hib else "lower")
        if direction == "unknown":
            _warn_unknown(name)
        return MetricSpec(name, higher_is_better={"higher": True, "lower": False}.get(direction),
                          declared=direction != "unknown", binary=bool(recorded.get("binary", False)),
                          aggregation=recorded.get("aggregation", "mean"))
    _warn_unknown(name)
    return MetricSpec(name, higher_is_better=None, declared=False)


@functools.lru_cache(maxsize=None)
def _warn_unknown(name: str) -> None:
    log.warning("metric '%s' is not registered: direction unknown, so it gets no better/worse verdict, letters or "
                "best marks; declare it in its task class (metric_specs = (MetricSpec('%s', higher_is_better=True/"
                "False, or None for a descriptive count), ...))", name, name)


def registered() -> dict[str, MetricSpec]:
    """All known metrics by name: registered, and declared by the task packages."""
    _load_task_plugins()
    return {**_DECLARED, **_REGISTRY}


# ---- holding a task to its declarations --------------------------------------------------------------
class UndeclaredMetric(ValueError):
    """A task's score() returned a metric its class does not declare (Task.metric_specs)."""


def check_scored(task: Any, keys: Iterable[str], memo: dict[str, bool]) -> None:
    """Refuse a per-example metric the task neither declares (task.declared_metrics()) nor finds registered by name
    (register(): the standard metrics); a task with `undeclared_metrics = "unknown"` (a user's subclass of a YAML
    task) records such a metric with direction 'unknown' instead, with a warning. `memo` caches names per task."""
    for key in keys:
        if key in memo:
            continue
        ok = _lookup(task.declared_metrics(), key) is not None or _lookup(_REGISTRY, key) is not None
        memo[key] = ok
        if not ok and task.undeclared_metrics != "unknown":
            declared = ", ".join(sorted(task.declared_metrics())) or "none"
            raise UndeclaredMetric(
                f"task '{task.name}' ({type(task).__name__}.score) returned metric '{key}', which it does not declare: "
                f"add MetricSpec('{key}', higher_is_better=True/False, or None for a count) to "
                f"{type(task).__name__}.metric_specs (declared: {declared})")


def corpus_values(task: Any, records: Sequence[Any]) -> dict[str, Any]:
    """The run-level value of every corpus metric the task declares (MetricSpec.corpus), in declaration order: a
    statistic of one per-example value (`per_example_name`; null when no example defines it), or of the records
    (left out where the function returns None: the metric does not apply to this run)."""
    out: dict[str, Any] = {}
    for name, spec in task.declared_metrics().items():
        if spec.corpus is None:
            continue
        if spec.per_example_name:
            vals = [v for r in records if not math.isnan(v := r.value(spec.per_example_name))]
            out[name] = spec.corpus(vals) if vals else None
        elif (value := spec.corpus(records, task)) is not None:
            out[name] = value
    return out


def run_info(task: Any, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """metrics.json's metric_info: direction, binary-ness and aggregation of each name, from the task's declarations,
    else the registry, else a stand-in whose direction is 'unknown' (with a warning)."""
    declared = task.declared_metrics()
    return {m: (_lookup(declared, m) or metric_spec(m)).info() for m in names}


# ---- metrics selected by name in YAML (config-only benchmarks) ---------------------------------------
@dataclass(frozen=True)
class BoundMetric:
    """A metric as configured: its output name (e.g. 'hr@10'), spec and parameters."""

    name: str
    spec: MetricSpec
    params: tuple[tuple[str, Any], ...]

    @property
    def record_name(self) -> str:
        """The key of this metric's per-example value (a corpus metric like rmse records squared errors)."""
        return self.spec.per_example_name or self.name

    def __call__(self, pred: Any, truth: Any) -> float:
        """The per-example value."""
        return float(self.spec.fn(pred, truth, **dict(self.params)))  # type: ignore[misc]


def selectable() -> dict[str, MetricSpec]:
    """Registered metrics that have a per-example function (what task.metrics can name)."""
    return {k: v for k, v in registered().items() if v.fn is not None}


def resolve(item: Any, where: str = "task.metrics") -> BoundMetric:
    """'accuracy', 'hr@10' or {name: hr, k: 10} -> a BoundMetric (ConfigError naming the key and valid names)."""
    if isinstance(item, str):
        name, _, k = item.partition("@")
        if k and not k.isdigit():
            raise ConfigError(f"{where}: '{item}': the cut-off after '@' must be a whole number, e.g. hr@10")
        params: dict[str, Any] = {"k": int(k)} if k else {}
    else:
        d = dict(item)
        if "name" not in d:
            raise ConfigError(f"{where}: a metric given as a mapping needs 'name' (got {d})")
        name = str(d.pop("name"))
        params = d
    spec = lookup(selectable(), name, what=f"metric in {where}")
    unknown = set(params) - set(spec.params)
    if unknown:
        raise ConfigError(f"{where}: metric '{name}' takes no parameter(s) {sorted(unknown)}. "
                          f"Valid parameters: {', '.join(spec.params) or '(none)'}")
    full = {**spec.defaults, **params}
    label = name + (f"@{full['k']}" if "k" in full and "k" in spec.params else "")
    return BoundMetric(label, spec, tuple(sorted(full.items())))


# ---- the standard per-example metrics --------------------------------------------------------------
def _norm(v: Any) -> str:
    return re.sub(r"\s+", " ", str(v).strip().lower())


def _as_list(v: Any) -> list[str]:
    if isinstance(v, (list, tuple)):
        return [str(x).strip() for x in v]
    if isinstance(v, str) and v.strip().startswith("["):
        try:
            return [str(x).strip() for x in json.loads(v)]
        except ValueError:
            pass
    return [str(v).strip()]


def accuracy(pred: Any, truth: Any) -> float:
    """1 if the prediction equals the ground truth (numbers numerically, text case/space-insensitively)."""
    try:
        return float(math.isclose(float(pred), float(truth)))
    except (TypeError, ValueError):
        return float(_norm(pred) == _norm(truth))


def absolute_error(pred: Any, truth: Any) -> float:
    """|prediction - truth| (MAE when averaged)."""
    return abs(float(pred) - float(truth))


def squared_error(pred: Any, truth: Any) -> float:
    """(prediction - truth)^2 (MSE when averaged; RMSE = its square root)."""
    return (float(pred) - float(truth)) ** 2


def kendall_tau(pred: Any, truth: Any) -> float:
    """Kendall tau between predicted and true rankings (per-item ranks); unknown items are dropped and
    items the prediction left out are appended in the worst order (reverse of the truth)."""
    from recbench.stats.bootstrap import kendall_tau_ranks

    t = _as_list(truth)
    p = [x for x in dict.fromkeys(_as_list(pred)) if x in set(t)]
    p += [x for x in reversed(t) if x not in set(p)]
    return kendall_tau_ranks(t, p)


def hit_rate(pred: Any, truth: Any, k: int = 10) -> float:
    """1 if any ground-truth item is among the first k predicted items."""
    rel = {_norm(x) for x in _as_list(truth)}
    return float(any(_norm(x) in rel for x in _as_list(pred)[: int(k)]))


def ndcg(pred: Any, truth: Any, k: int = 10) -> float:
    """NDCG@k with binary relevance (each ground-truth item counts once)."""
    rel = {_norm(x) for x in _as_list(truth)}
    seen: set[str] = set()
    dcg = 0.0
    for i, x in enumerate(_as_list(pred)[: int(k)]):
        n = _norm(x)
        if n in rel and n not in seen:
            dcg += 1.0 / math.log2(i + 2)
            seen.add(n)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(rel), int(k))))
    return dcg / ideal if ideal else math.nan


def sentence_bleu(pred: Any, truth: Any) -> float:
    """Sentence BLEU (sacrebleu defaults: 13a tokenizer, exp smoothing, 0-100) against the reference text."""
    import sacrebleu

    return float(sacrebleu.sentence_bleu(str(pred), [str(truth)]).score)


@functools.lru_cache(maxsize=1)
def rouge_scorer():
    """The shared ROUGE-1/2/L scorer (rouge-score, Porter stemmer)."""
    from rouge_score import rouge_scorer as rs

    return rs.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)


def _rouge_f(kind: str) -> MetricFn:
    def f(pred: Any, truth: Any) -> float:
        return float(rouge_scorer().score(str(truth), str(pred))[kind].fmeasure) * 100

    f.__doc__ = f"{kind} F-measure (rouge-score, stemmed, 0-100)."
    return f


def _rmse(values: list[float]) -> float:
    return math.sqrt(sum(values) / len(values)) if values else math.nan


register(
    MetricSpec("accuracy", binary=True, fn=accuracy, on_failure=0.0, doc=accuracy.__doc__ or ""),
    MetricSpec("exact_match", binary=True, fn=accuracy, on_failure=0.0, doc="alias of accuracy"),
    MetricSpec("mae", higher_is_better=False, fn=absolute_error, doc="mean absolute error"),
    MetricSpec("mse", higher_is_better=False, fn=squared_error, doc="mean squared error"),
    MetricSpec("absolute_error", higher_is_better=False, fn=absolute_error, doc=absolute_error.__doc__ or ""),
    MetricSpec("squared_error", higher_is_better=False, fn=squared_error, doc=squared_error.__doc__ or ""),
    MetricSpec("rmse", higher_is_better=False, aggregation="corpus", fn=squared_error, corpus=_rmse,
               per_example_name="squared_error", doc="root of the mean squared error (per-example value: squared error)"),
    MetricSpec("kendall_tau", fn=kendall_tau, on_failure=0.0, doc=kendall_tau.__doc__ or ""),
    MetricSpec("hr", binary=True, fn=hit_rate, on_failure=0.0, params=("k",), defaults={"k": 10},
               doc=hit_rate.__doc__ or ""),
    MetricSpec("ndcg", fn=ndcg, on_failure=0.0, params=("k",), defaults={"k": 10}, doc=ndcg.__doc__ or ""),
    MetricSpec("bleu", fn=sentence_bleu, on_failure=0.0, doc=sentence_bleu.__doc__ or ""),
    MetricSpec("rouge1", fn=_rouge_f("rouge1"), on_failure=0.0, doc="ROUGE-1 F (0-100)"),
    MetricSpec("rouge2", fn=_rouge_f("rouge2"), on_failure=0.0, doc="ROUGE-2 F (0-100)"),
    MetricSpec("rougeL", fn=_rouge_f("rougeL"), on_failure=0.0, doc="ROUGE-L F (0-100)"),
)
