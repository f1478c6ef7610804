"""The one metric registry: every metric's name, per-example function, aggregation, direction and binary-ness.

Benchmarks register their metrics here (at import of their task module); YAML-defined tasks pick registered
metrics by name (`resolve('hr@10')`). Reports and `recbench.stats.verdicts` read a metric's direction and binary-ness
from here (or from the `metric_info` block a run wrote into metrics.json), never from a list of names.

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
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Optional

from recbench.api.errors import ConfigError, lookup

log = logging.getLogger(__name__)
MetricFn = Callable[..., float]
Aggregation = Literal["mean", "corpus"]
Direction = Literal["higher", "lower", "none", "unknown"]
#: directions that rank systems (the others never give a verdict)
RANKING_DIRECTIONS = ("higher", "lower")


@dataclass(frozen=True)
class MetricSpec:
    """A registered metric.

    `fn(prediction, truth, **params)` gives the per-example value (None for metrics a task computes itself);
    `aggregation` is "mean" (the run value is the mean of per-example values) or "corpus" (a statistic of the
    whole set, e.g. corpus BLEU or RMSE, computed by `corpus` from the per-example values named
    `per_example_name`); `binary` means per-example values are 0/1 (exact McNemar tests apply).
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
    corpus: Optional[Callable[[list[float]], float]] = None
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


_REGISTRY: dict[str, MetricSpec] = {}
_PLUGINS_LOADED = False


def register(*specs: MetricSpec) -> None:
    """Add metrics; registering a name again with a different direction, binary-ness or aggregation is an error."""
    for s in specs:
        old = _REGISTRY.get(s.name)
        if old is not None and old.info() != s.info():
            raise ValueError(f"metric '{s.name}' registered twice with different properties: {old.info()} vs {s.info()}")
        if old is None or (s.fn is not None and old.fn is None):
            _REGISTRY[s.name] = s


def family(name: str) -> str:
    """A metric name without its cut-off: 'hr@10' -> 'hr'."""
    return name.split("@", 1)[0]


def _load_task_plugins() -> None:
    """Import every task package's `task` module once, so their metrics are registered (no names hard-coded)."""
    global _PLUGINS_LOADED
    if _PLUGINS_LOADED:
        return
    _PLUGINS_LOADED = True
    try:
        import recbench.tasks as tasks_pkg
    except ImportError:  # pragma: no cover - the package is always installed with recbench
        return
    for mod in pkgutil.iter_modules(tasks_pkg.__path__):
        if mod.ispkg:
            try:
                importlib.import_module(f"recbench.tasks.{mod.name}.task")
            except ImportError as e:  # a task whose optional dependency is missing still leaves the others
                log.debug("metric registry: could not import task %s: %s", mod.name, e)


def find_spec(name: str) -> Optional[MetricSpec]:
    """The registered spec of a metric name ('hr@10' finds 'hr@10', else the family 'hr'), or None."""
    for key in (name, family(name)):
        if key in _REGISTRY:
            return _REGISTRY[key]
    _load_task_plugins()
    for key in (name, family(name)):
        if key in _REGISTRY:
            return _REGISTRY[key]
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
    log.warning("metric '%s' is not registered (recbench.api.metrics.register): direction unknown, so it gets "
                "no better/worse verdict, letters or best marks; register it with higher_is_better=True/False, or "
                "None for a descriptive count", name)


def registered() -> dict[str, MetricSpec]:
    """All registered metrics by name (task packages included)."""
    _load_task_plugins()
    return dict(_REGISTRY)


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
