"""BM25 retrieval over a user's shown history: rank_bm25's BM25Okapi, and a vectorised copy over pre-tokenised titles
that gives the same scores bit for bit (same operations in the same order), so the same top-k."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

_WORD = re.compile(r"[^\W_]+")  # runs of str.isalnum() characters
K1, B, EPSILON = 1.5, 0.75, 0.25  # rank_bm25.BM25Okapi's defaults
EMPTY = "_"  # the token an untokenisable title stands for (never a query token)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens for BM25 (runs of alphanumeric characters, longer than one character)."""
    return [w for w in (m.lower() for m in _WORD.findall(text)) if len(w) > 1]


def bm25_top_k(query: str, docs: list[str], k: int) -> list[int]:
    """Indices of the k docs most relevant to the query under BM25 (ties: most recent first)."""
    if not docs:
        return []
    from rank_bm25 import BM25Okapi

    bm = BM25Okapi([tokenize(d) or [EMPTY] for d in docs])
    scores = bm.get_scores(tokenize(query))
    order = sorted(range(len(docs)), key=lambda i: (-scores[i], -i))
    return order[:k]


@dataclass
class TokenTable:
    """Each title's tokens as ids with counts, in first-occurrence order (a CSR table over title codes)."""

    vocab: dict[str, int]
    ptr: np.ndarray     # int64, len(titles) + 1: title t's entries are ptr[t]:ptr[t+1]
    ids: np.ndarray     # int32 token ids
    counts: np.ndarray  # int64 occurrences of the token in the title
    length: np.ndarray  # int64 tokens per title (with repeats; 1 for an untokenisable title)

    @classmethod
    def build(cls, titles: Iterable[str]) -> "TokenTable":
        """The table of every title (title code = position in `titles`)."""
        vocab: dict[str, int] = {}
        ptr, ids, counts, length = [0], [], [], []
        for title in titles:
            toks = tokenize(title) or [EMPTY]
            freq: dict[str, int] = {}
            for w in toks:
                freq[w] = freq.get(w, 0) + 1
            for w, c in freq.items():
                ids.append(vocab.setdefault(w, len(vocab)))
                counts.append(c)
            ptr.append(len(ids))
            length.append(len(toks))
        return cls(vocab, np.asarray(ptr, np.int64), np.asarray(ids, np.int32), np.asarray(counts, np.int64),
                   np.asarray(length, np.int64))

    def query_ids(self, query: str) -> list[int]:
        """The query's tokens as ids, in order with repeats; tokens no title has are left out (their idf is 0)."""
        return [i for i in (self.vocab.get(w) for w in tokenize(query)) if i is not None]


_LOG_HALF = np.array([math.log(j + 0.5) for j in range(4097)])  # math.log(j + 0.5), as rank_bm25 computes idf


def _log_half(n: int) -> np.ndarray:
    global _LOG_HALF
    if n >= len(_LOG_HALF):
        _LOG_HALF = np.array([math.log(j + 0.5) for j in range(2 * n + 1)])
    return _LOG_HALF


def top_k(table: TokenTable, query: Sequence[int], docs: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k docs (title codes, oldest first) most relevant to the query token ids: the same ranking
    as bm25_top_k over those titles (scores, ties most recent first)."""
    n = len(docs)
    if n == 0:
        return np.zeros(0, np.int64)
    if not query:  # every score 0: the most recent first
        return np.arange(n - 1, max(n - 1 - k, -1), -1)
    starts, lens = table.ptr[docs], table.ptr[docs + 1] - table.ptr[docs]
    total = int(lens.sum())
    offsets = np.cumsum(lens) - lens
    pos = np.arange(total) - np.repeat(offsets - starts, lens)
    doc_of, tok, cnt = np.repeat(np.arange(n), lens), table.ids[pos], table.counts[pos]
    doc_len = table.length[docs]
    avgdl = int(doc_len.sum()) / n
    norm = K1 * (1 - B + B * doc_len / avgdl)  # the same for every query token (rank_bm25 recomputes it)
    logs = _log_half(n)
    score = np.zeros(n)
    idf: dict[int, float] = {}
    hits: dict[int, np.ndarray] = {}
    eps = None
    for q in query:
        if q not in idf:
            hit = hits[q] = (tok == q).nonzero()[0]
            df = len(hit)
            if not df:
                idf[q] = 0.0
                continue
            value = logs[n - df] - logs[df]
            if value < 0:
                eps = _epsilon(tok, n, logs) if eps is None else eps
                value = eps
            idf[q] = float(value)
        weight = idf[q]
        if not weight:
            continue
        hit = hits[q]
        q_freq = np.zeros(n, np.int64)
        q_freq[doc_of[hit]] = cnt[hit]
        score += weight * (q_freq * (K1 + 1) / (q_freq + norm))
    return np.lexsort((-np.arange(n), -score))[:k]


def _epsilon(tok: np.ndarray, n: int, logs: np.ndarray) -> float:
    """rank_bm25's floor for negative idfs: EPSILON x the mean idf of every word, summed in first-seen order."""
    uniq, first, df = np.unique(tok, return_index=True, return_counts=True)
    idfs = (logs[n - df] - logs[df])[np.argsort(first)]
    return EPSILON * (float(np.cumsum(idfs)[-1]) / len(uniq))
