"""The seeded display order of a group's members: np.random.default_rng(seed words).permutation(n), the same
permutation written without numpy's per-call generator set-up (numpy's SeedSequence mixing, run for many examples
at once where the method is prepared, then PCG64 seeding and the short shuffle in plain Python)."""
from __future__ import annotations

import functools
from collections import defaultdict
from typing import Any, Sequence

import numpy as np

from recbench.api.types import Example

_M32, _M64, _M128 = (1 << 32) - 1, (1 << 64) - 1, (1 << 128) - 1
_PCG_MULT = (2549297995355413924 << 64) + 4865540595714422341  # PCG's default 128-bit multiplier
_PY_SHUFFLE_MAX = 8  # longer permutations: numpy's own shuffle is the cheaper
_INIT_A, _MULT_A = 0x43B0D7E5, 0x931E8875  # SeedSequence's entropy hashing
_MIX_L, _MIX_R = 0xCA01F9DD, 0x4973F715  # and mixing constants
_POOLS: dict[tuple[int, str, int], list[int]] = {}  # (seed, example id, order) -> SeedSequence pool, from prepare()


def seed_words(seed: int, example_id: str, order: int) -> list[int]:
    """The entropy words of an example's display order (order 0 is the usual one)."""
    return [seed, *example_id.encode()] if not order else [seed, 9, order, *example_id.encode()]


def presentation_order(example: Example, seed: int, order: int = 0) -> list[dict[str, Any]]:
    """The group's users in a seeded shuffled order, so position never leaks the ground truth; `order` k > 0 is the
    order audit's k-th alternative display order (order 0 is the usual one, so caches and results do not change)."""
    users = example.data["users"]
    return [users[i] for i in permutation(seed, example.id, int(order or 0), len(users))]


@functools.lru_cache(maxsize=65536)
def permutation(seed: int, example_id: str, order: int, n: int) -> tuple[int, ...]:
    """np.random.default_rng(seed_words(seed, example_id, order)).permutation(n), computed once per example."""
    entropy = seed_words(seed, example_id, order)
    if 0 <= seed < 2 ** 32 and 0 <= order < 2 ** 32 and n <= _PY_SHUFFLE_MAX:  # one 32-bit word each
        pool = _POOLS.pop((seed, example_id, order), None)
        if pool is None:
            pool = np.random.SeedSequence(np.array(entropy, np.uint32)).pool.tolist()
        return pcg64_permutation(pool, n)
    return tuple(np.random.default_rng(entropy).permutation(n).tolist())


def prepare(seed: int, example_ids: Sequence[str], order: int = 0) -> None:
    """Mix the seed words of these examples' display orders at once (vectorised, ids of one length together), for
    permutation() to use; replaces what an earlier prepare left."""
    _POOLS.clear()
    if not (0 <= seed < 2 ** 32 and 0 <= order < 2 ** 32):
        return
    head = seed_words(seed, "", order)
    by_len: dict[int, list[tuple[str, bytes]]] = defaultdict(list)
    for eid in example_ids:
        raw = eid.encode()
        by_len[len(raw)].append((eid, raw))
    for size, items in by_len.items():
        words = np.empty((len(items), len(head) + size), np.uint32)
        words[:, :len(head)] = head
        if size:
            words[:, len(head):] = np.frombuffer(b"".join(r for _, r in items), np.uint8).reshape(len(items), size)
        for (eid, _), pool in zip(items, _mix(words).tolist()):
            _POOLS[(seed, eid, order)] = pool


def _mix(words: np.ndarray) -> np.ndarray:
    """SeedSequence.mix_entropy over rows of entropy words (rows x L uint32): the 4-word pool of each row."""
    h = _INIT_A

    def hashmix(v: np.ndarray) -> np.ndarray:
        nonlocal h
        v = v ^ np.uint32(h)
        h = (h * _MULT_A) & _M32
        v = v * np.uint32(h)
        return v ^ (v >> np.uint32(16))

    def mix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        r = np.uint32(_MIX_L) * x - np.uint32(_MIX_R) * y
        return r ^ (r >> np.uint32(16))

    rows, n = words.shape
    zero = np.zeros(rows, np.uint32)
    pool = [hashmix(words[:, i] if i < n else zero) for i in range(4)]
    for src in range(4):
        for dst in range(4):
            if src != dst:
                pool[dst] = mix(pool[dst], hashmix(pool[src]))
    for src in range(4, n):
        for dst in range(4):
            pool[dst] = mix(pool[dst], hashmix(words[:, src]))
    return np.stack(pool, axis=1)


def _state_hashes() -> tuple[tuple[int, int], ...]:
    """The hash constants SeedSequence.generate_state uses for its 8 words (they do not depend on the pool)."""
    h, out = 0x8B51F9DD, []
    for _ in range(8):
        out.append((h, (h * 0x58F38DED) & _M32))
        h = out[-1][1]
    return tuple(out)


_STATE_HASHES = _state_hashes()


def pcg64_permutation(pool: list[int], n: int) -> tuple[int, ...]:
    """np.random.Generator(PCG64(s)).permutation(n) for a SeedSequence s with this pool (4 uint32 words), in plain
    Python: the seeding and the few draws of a short shuffle cost less than numpy's generator set-up."""
    w = []
    for i, (a, b) in enumerate(_STATE_HASHES):  # s.generate_state(4, np.uint64), as 8 uint32 words
        v = ((pool[i & 3] ^ a) * b) & _M32
        w.append(v ^ (v >> 16))
    inc = ((w[5] << 96 | w[4] << 64 | w[7] << 32 | w[6]) << 1 | 1) & _M128  # pcg64_set_seed
    state = (((w[1] << 96 | w[0] << 64 | w[3] << 32 | w[2]) + inc) * _PCG_MULT + inc) & _M128
    arr, spare = list(range(n)), -1
    for i in range(n - 1, 0, -1):  # Fisher-Yates from the end, j = random_interval(i)
        mask = i | i >> 1
        mask |= mask >> 2
        mask |= mask >> 4
        mask |= mask >> 8
        mask |= mask >> 16
        while True:  # masked rejection over 32-bit draws (each 64-bit output serves two)
            if spare < 0:
                state = (state * _PCG_MULT + inc) & _M128
                x, r = (state >> 64) ^ (state & _M64), state >> 122  # XSL-RR output
                x = ((x >> r) | (x << (64 - r))) & _M64
                j, spare = x & _M32 & mask, x >> 32
            else:
                j, spare = spare & mask, -1
            if j <= i:
                break
        arr[i], arr[j] = arr[j], arr[i]
    return tuple(arr)
