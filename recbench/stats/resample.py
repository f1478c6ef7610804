"""Resampling in bounded batches with the draws of the one-block calls: bootstrap index rows and sign-flip nulls.

A bootstrap of B resamples of n units drew a (B, n) index matrix in one `Generator.integers` call, and the sign-flip
test let scipy permute a (B, n, 2) index tile: at 60,000 units that is gigabytes. Here the same draws come a batch
of rows at a time, so a block holds at most BLOCK_FLOATS values, and the numbers are the same for the same seed:

- `integer_blocks` reproduces one `rng.integers(0, n, (B, n))` call. numpy draws each bounded integer by Lemire's
  method from 32-bit words it takes from 64-bit outputs, low half first, and drops a held half at the end of a call;
  rows drawn by separate `integers` calls would drop it at every batch boundary and shift the stream. So the words
  are taken here from `bit_generator.random_raw` and a word is kept (accepted) as numpy keeps it.
- `sign_flip_null` reproduces scipy.stats.permutation_test((d,), sum, permutation_type="samples"): scipy shuffles
  each unit's pair (d, -d) with one `next_uint32` word (a 2-item Fisher-Yates shuffle swaps when the word's low bit is
  0), and sums the flipped values unit after unit; both are done here on a block of rows.

tests/stats/test_stats_batching.py pins the outputs of the one-block implementation and checks them with tiny blocks.
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np

#: values of float64 in one (batch x units) block: 8,000,000 x 8 bytes = 64 MB (a batch has BLOCK_FLOATS // units
#: rows, at least 1); not user-facing: the numbers do not depend on it, only the peak memory
BLOCK_FLOATS = 8_000_000
_SCIPY_EPS = np.finfo(np.float64).eps * 100  # scipy.stats.permutation_test's relative tolerance for ties


def batch_rows(n_units: int, total: int | None = None) -> int:
    """Resamples per batch so that a (batch x n_units) float64 block holds at most BLOCK_FLOATS values."""
    rows = max(1, BLOCK_FLOATS // max(1, int(n_units)))
    return rows if total is None else max(1, min(rows, int(total)))


class WordStream:
    """The 32-bit words of a Generator's bit generator in the order numpy's buffered draws use them (low half of
    each 64-bit output first). `held` starts with the half a `next_uint32` call left in the state (`from_state`)."""

    def __init__(self, rng: np.random.Generator, *, from_state: bool = False):
        self._bg = rng.bit_generator
        self._held: np.ndarray = np.empty(0, dtype=np.uint32)
        if from_state:
            st = self._bg.state
            if st.get("has_uint32"):
                self._held = np.array([st["uinteger"]], dtype=np.uint32)
                st["has_uint32"] = 0
                self._bg.state = st

    def take(self, k: int) -> np.ndarray:
        """The next k words."""
        head, self._held = self._held[:k], self._held[k:]
        rest = k - len(head)
        words = self._bg.random_raw((rest + 1) // 2).view(np.uint32) if rest > 0 else np.empty(0, np.uint32)
        self._held = np.concatenate([self._held, words[rest:]])
        return np.concatenate([head, words[:rest]]) if len(head) else words[:rest]


def integer_blocks(rng: np.random.Generator, n: int, total: int, rows: int | None = None) -> Iterator[np.ndarray]:
    """(rows, n) int64 blocks whose concatenation equals rng.integers(0, n, (total, n)) drawn in one call (n < 2^32);
    afterwards rng is where that call leaves it."""
    rows = rows or batch_rows(n, total)
    if n == 1:  # numpy draws nothing for a one-value range
        for k in range(0, total, rows):
            yield np.zeros((min(rows, total - k), 1), dtype=np.int64)
        return
    if not 1 < n < 2 ** 32:
        raise ValueError(f"integer_blocks needs 1 <= n < 2^32, got {n}")
    stream = WordStream(rng)
    for k in range(0, total, rows):
        yield bounded_integers(stream, n, min(rows, total - k) * n).reshape(-1, n)


def bounded_integers(stream: WordStream, n: int, count: int) -> np.ndarray:
    """The next `count` integers in [0, n) by numpy's 32-bit Lemire method (1 < n < 2^32): a word x gives
    (x n) >> 32, and is rejected (the next word is tried) when (x n) mod 2^32 is below 2^32 mod n."""
    threshold = np.uint32((2 ** 32) % n)
    parts, have = [], 0
    while have < count:
        m = stream.take(count - have).astype(np.uint64)
        m *= np.uint64(n)
        rejected = m.astype(np.uint32) < threshold  # the low 32 bits of the product
        m >>= np.uint64(32)
        kept = m[~rejected] if rejected.any() else m
        parts.append(kept.view(np.int64))
        have += len(kept)
    return parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


def sign_flip_null(d: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """The Monte Carlo null distribution of sum(d) under random sign flips, value for value what
    scipy.stats.permutation_test((d,), np.sum, permutation_type="samples", n_resamples=B, random_state=rng) builds."""
    d = np.asarray(d, dtype=float)
    n = len(d)
    stream = WordStream(rng, from_state=True)
    rows = batch_rows(n, n_resamples)
    null = np.empty(n_resamples)
    neg = -d
    for k in range(0, n_resamples, rows):
        r = min(rows, n_resamples - k)
        flip = (stream.take(r * n) & 1).reshape(r, n) == 0
        # scipy sums unit after unit (its reduction runs over a strided unit axis): the same order here
        null[k:k + r] = np.sum(np.where(flip, neg, d).T.copy(), axis=0)
    return null


def two_sided_p(null: np.ndarray, observed: float) -> float:
    """scipy.stats.permutation_test's two-sided Monte Carlo p: 2 x the smaller tail count (+1) over (B + 1), ties
    within 100 eps x |observed| counted as extreme, at most 1."""
    gamma = abs(_SCIPY_EPS * observed)
    b = len(null)
    less = float(np.count_nonzero(null <= observed + gamma) + 1) / (b + 1)
    greater = float(np.count_nonzero(null >= observed - gamma) + 1) / (b + 1)
    return float(np.clip(min(less, greater) * 2, 0.0, 1.0))
