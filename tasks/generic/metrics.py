"""The metric registry of config-only benchmarks: per-example metrics by name (with parameters, e.g. hr@10)."""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from recbench.metrics import kendall_tau_ranks
from recbench.registry import ConfigError, lookup

MetricFn = Callable[..., float]


@dataclass(frozen=True)
class MetricSpec:
    """A registered metric: per-example function(prediction, truth, **params), its value on a parse failure,
    and an optional corpus-level aggregate computed from the per-example values."""

    fn: MetricFn
    on_failure: Optional[float]  # None: undefined (NaN) for a failed parse
    params: tuple[str, ...] = ()
    corpus: Optional[Callable[[list[float]], float]] = None  # e.g. rmse = sqrt(mean(squared errors))
    doc: str = ""
    defaults: dict[str, Any] = field(default_factory=dict)
    per_example_name: Optional[str] = None  # for corpus metrics: the name of the per-example values


def _norm(v: Any) -> str:
    return re.sub(r"\s+", " ", str(v).strip().lower())


def _as_float(v: Any) -> float:
    return float(v)


def accuracy(pred: Any, truth: Any) -> float:
    """1 if the prediction equals the ground truth (numbers numerically, text case/space-insensitively)."""
    try:
        return float(math.isclose(float(pred), float(truth)))
    except (TypeError, ValueError):
        return float(_norm(pred) == _norm(truth))


def absolute_error(pred: Any, truth: Any) -> float:
    """|prediction - truth| (MAE when averaged)."""
    return abs(_as_float(pred) - _as_float(truth))


def squared_error(pred: Any, truth: Any) -> float:
    """(prediction - truth)^2 (MSE when averaged; RMSE = its square root)."""
    return (_as_float(pred) - _as_float(truth)) ** 2


def _as_list(v: Any) -> list[str]:
    if isinstance(v, (list, tuple)):
        return [str(x).strip() for x in v]
    if isinstance(v, str) and v.strip().startswith("["):
        import json

        try:
            return [str(x).strip() for x in json.loads(v)]
        except ValueError:
            pass
    return [str(v).strip()]


def kendall_tau(pred: Any, truth: Any) -> float:
    """Kendall tau between predicted and true rankings (per-item ranks); unknown items are dropped and
    items the prediction left out are appended in the worst order (reverse of the truth)."""
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


def bleu(pred: Any, truth: Any) -> float:
    """Sentence BLEU (sacrebleu, 0-100) against the reference text."""
    import sacrebleu

    return float(sacrebleu.sentence_bleu(str(pred), [str(truth)]).score)


@functools.lru_cache(maxsize=1)
def _rouge():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)


def _rouge_f(kind: str) -> MetricFn:
    def f(pred: Any, truth: Any) -> float:
        return float(_rouge().score(str(truth), str(pred))[kind].fmeasure) * 100

    f.__doc__ = f"{kind} F-measure (rouge-score, stemmed, 0-100)."
    return f


REGISTRY: dict[str, MetricSpec] = {
    "accuracy": MetricSpec(accuracy, 0.0, doc=accuracy.__doc__ or ""),
    "exact_match": MetricSpec(accuracy, 0.0, doc="alias of accuracy"),
    "mae": MetricSpec(absolute_error, None, doc=absolute_error.__doc__ or ""),
    "mse": MetricSpec(squared_error, None, doc=squared_error.__doc__ or ""),
    "rmse": MetricSpec(squared_error, None, corpus=lambda v: math.sqrt(sum(v) / len(v)) if v else math.nan,
                       per_example_name="squared_error", doc="root of the mean squared error (per-example value: squared error)"),
    "kendall_tau": MetricSpec(kendall_tau, 0.0, doc=kendall_tau.__doc__ or ""),
    "hr": MetricSpec(hit_rate, 0.0, params=("k",), defaults={"k": 10}, doc=hit_rate.__doc__ or ""),
    "ndcg": MetricSpec(ndcg, 0.0, params=("k",), defaults={"k": 10}, doc=ndcg.__doc__ or ""),
    "bleu": MetricSpec(bleu, 0.0, doc=bleu.__doc__ or ""),
    "rouge1": MetricSpec(_rouge_f("rouge1"), 0.0, doc="ROUGE-1 F (0-100)"),
    "rouge2": MetricSpec(_rouge_f("rouge2"), 0.0, doc="ROUGE-2 F (0-100)"),
    "rougeL": MetricSpec(_rouge_f("rougeL"), 0.0, doc="ROUGE-L F (0-100)"),
}


def register(name: str, spec: MetricSpec) -> None:
    """Add a metric (e.g. from a user's own Task module) under a new name."""
    REGISTRY[name] = spec


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
        return float(self.spec.fn(pred, truth, **dict(self.params)))


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
    spec = lookup(REGISTRY, name, what=f"metric in {where}")
    unknown = set(params) - set(spec.params)
    if unknown:
        raise ConfigError(f"{where}: metric '{name}' takes no parameter(s) {sorted(unknown)}. "
                          f"Valid parameters: {', '.join(spec.params) or '(none)'}")
    full = {**spec.defaults, **params}
    label = name + (f"@{full['k']}" if "k" in full and "k" in spec.params else "")
    return BoundMetric(label, spec, tuple(sorted(full.items())))
