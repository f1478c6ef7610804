"""LLMRec metrics: RMSE/MAE on clamped ratings, HR@k/NDCG@k for one held-out item, BLEU-4 (sacrebleu), ROUGE-1/2/L."""
from __future__ import annotations

import math
from typing import Hashable, Iterable, Sequence

import numpy as np

from recbench.api.metrics import rouge_scorer, sentence_bleu


# ---- rating -----------------------------------------------------------------------------------
def clamp(x: float, lo: float = 1.0, hi: float = 5.0) -> float:
    """x clamped into the rating range [lo, hi]."""
    return float(min(hi, max(lo, x)))


def rmse(pred: Sequence[float], true: Sequence[float], lo: float = 1.0, hi: float = 5.0) -> float:
    """Root mean squared error of predictions clamped to [lo, hi]."""
    p = np.clip(np.asarray(pred, dtype=float), lo, hi)
    return float(np.sqrt(np.mean((p - np.asarray(true, dtype=float)) ** 2))) if len(p) else math.nan


def mae(pred: Sequence[float], true: Sequence[float], lo: float = 1.0, hi: float = 5.0) -> float:
    """Mean absolute error of predictions clamped to [lo, hi]."""
    p = np.clip(np.asarray(pred, dtype=float), lo, hi)
    return float(np.mean(np.abs(p - np.asarray(true, dtype=float)))) if len(p) else math.nan


# ---- ranking (one relevant item per example, as in leave-one-out evaluation) ------------------
def rank_of(ranked: Sequence[Hashable], target: Hashable) -> int | None:
    """1-based position of target in the ranked list, or None when it is absent."""
    for i, x in enumerate(ranked):
        if x == target:
            return i + 1
    return None


def hit_at_k(ranked: Sequence[Hashable], target: Hashable, k: int) -> float:
    """HR@k: 1 if the target is among the first k items, else 0."""
    r = rank_of(ranked[:k], target)
    return 1.0 if r is not None else 0.0


def ndcg_at_k(ranked: Sequence[Hashable], target: Hashable, k: int) -> float:
    """NDCG@k with one relevant item: 1/log2(rank+1) if rank <= k, else 0 (ideal DCG = 1)."""
    r = rank_of(ranked[:k], target)
    return 1.0 / math.log2(r + 1) if r is not None else 0.0


def ranking_metrics(ranked: Sequence[Hashable], target: Hashable, ks: Iterable[int] = (1, 5, 10)) -> dict[str, float]:
    """hr@k and ndcg@k for every k."""
    out: dict[str, float] = {}
    for k in ks:
        out[f"hr@{k}"] = hit_at_k(ranked, target, k)
        out[f"ndcg@{k}"] = ndcg_at_k(ranked, target, k)
    return out


def ranking_metrics_batch(scores: np.ndarray, target_col: np.ndarray, ks: Iterable[int] = (1, 5, 10)) -> dict[str, np.ndarray]:
    """Vectorised hr@k/ndcg@k from a (users x candidates) score matrix; ties count against the target (pessimistic)."""
    s = np.asarray(scores, dtype=float)
    t = s[np.arange(len(s)), target_col][:, None]
    rank = 1 + (s > t).sum(1) + ((s == t).sum(1) - 1)  # ties ranked ahead of the target
    out: dict[str, np.ndarray] = {}
    for k in ks:
        out[f"hr@{k}"] = (rank <= k).astype(float)
        out[f"ndcg@{k}"] = np.where(rank <= k, 1.0 / np.log2(rank + 1), 0.0)
    return out


# ---- text ---------------------------------------------------------------------------------------
def sentence_bleu4(hyp: str, ref: str) -> float:
    """Sentence BLEU-4 (sacrebleu defaults: 13a tokenizer, exp smoothing), 0-100."""
    return sentence_bleu(hyp, ref)


def corpus_bleu4(hyps: Sequence[str], refs: Sequence[str]) -> float:
    """Corpus BLEU-4 (sacrebleu), 0-100."""
    import sacrebleu

    return float(sacrebleu.corpus_bleu(list(hyps), [list(refs)]).score) if hyps else math.nan


def rouge(hyp: str, ref: str) -> dict[str, float]:
    """ROUGE-1/2/L F1 (rouge-score, Porter stemmer), 0-100."""
    s = rouge_scorer().score(ref, hyp)
    return {k: 100.0 * v.fmeasure for k, v in s.items()}


def text_metrics(hyp: str, ref: str) -> dict[str, float]:
    """bleu4 plus rouge1/rouge2/rougeL for one generated text."""
    return {"bleu4": sentence_bleu4(hyp, ref), **rouge(hyp, ref)}
