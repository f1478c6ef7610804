"""The standard per-example metrics, selectable by name in YAML (`resolve('hr@10')`): their functions and their
registration, each with the one-line meaning legends show."""
from __future__ import annotations

import functools
import json
import math
import re
from typing import Any, Sequence

from recbench.api.metric_spec import MetricFn, MetricSpec, register


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
    t = _as_list(truth)
    p = [x for x in dict.fromkeys(_as_list(pred)) if x in set(t)]
    p += [x for x in reversed(t) if x not in set(p)]
    return _tau_of_permutation([p.index(x) for x in t])


def _tau_of_permutation(ranks: Sequence[int]) -> float:
    """Kendall tau between positions 0..n-1 and distinct `ranks` (tau-a = tau-b = scipy.stats.kendalltau; counted
    directly because scipy's per-call overhead dominates on short lists); NaN below two items."""
    n = len(ranks)
    if n < 2:
        return math.nan
    s = sum((ranks[j] > ranks[i]) - (ranks[j] < ranks[i]) for i in range(n) for j in range(i + 1, n))
    return s / (n * (n - 1) / 2)


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
    MetricSpec("accuracy", binary=True, fn=accuracy, on_failure=0.0, doc=accuracy.__doc__ or "",
               meaning="share of answers equal to the truth (a failed parse counts as wrong)"),
    MetricSpec("exact_match", binary=True, fn=accuracy, on_failure=0.0, doc="alias of accuracy",
               meaning="share of answers equal to the truth (alias of accuracy)"),
    MetricSpec("mae", higher_is_better=False, fn=absolute_error, doc="mean absolute error",
               meaning="mean absolute error of the predicted value"),
    MetricSpec("mse", higher_is_better=False, fn=squared_error, doc="mean squared error",
               meaning="mean squared error of the predicted value"),
    MetricSpec("absolute_error", higher_is_better=False, fn=absolute_error, doc=absolute_error.__doc__ or "",
               meaning="|prediction - truth| per answer (MAE when averaged)"),
    MetricSpec("squared_error", higher_is_better=False, fn=squared_error, doc=squared_error.__doc__ or "",
               meaning="(prediction - truth)^2 per answer (MSE when averaged)"),
    MetricSpec("rmse", higher_is_better=False, aggregation="corpus", fn=squared_error, corpus=_rmse,
               per_example_name="squared_error",
               doc="root of the mean squared error (per-example value: squared error)",
               meaning="root mean squared error over the run"),
    MetricSpec("kendall_tau", fn=kendall_tau, on_failure=0.0, doc=kendall_tau.__doc__ or "",
               meaning="Kendall tau between predicted and true ranking, -1 to 1 (a failed parse scores 0)"),
    MetricSpec("hr", binary=True, fn=hit_rate, on_failure=0.0, params=("k",), defaults={"k": 10},
               doc=hit_rate.__doc__ or "", meaning="hit rate: share of answers with a true item in the first k"),
    MetricSpec("ndcg", fn=ndcg, on_failure=0.0, params=("k",), defaults={"k": 10}, doc=ndcg.__doc__ or "",
               meaning="NDCG of the first k recommended items against the true items, 0 to 1"),
    MetricSpec("bleu", fn=sentence_bleu, on_failure=0.0, doc=sentence_bleu.__doc__ or "",
               meaning="sentence BLEU of the generated text against the reference, 0-100"),
    MetricSpec("rouge1", fn=_rouge_f("rouge1"), on_failure=0.0, doc="ROUGE-1 F (0-100)",
               meaning="ROUGE-1 F of the generated text against the reference (word overlap), 0-100"),
    MetricSpec("rouge2", fn=_rouge_f("rouge2"), on_failure=0.0, doc="ROUGE-2 F (0-100)",
               meaning="ROUGE-2 F of the generated text against the reference (word-pair overlap), 0-100"),
    MetricSpec("rougeL", fn=_rouge_f("rougeL"), on_failure=0.0, doc="ROUGE-L F (0-100)",
               meaning="ROUGE-L F of the generated text against the reference (longest common subsequence), 0-100"),
)
