"""The seeded display order of a group's members: np.random.default_rng(seed words).permutation(n), computed once
per example. In a large listwise run the prefetch child (prefetch.py) computes it with the prompts, off the run's
process."""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

from recbench.api.types import Example


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
    entropy: Any = seed_words(seed, example_id, order)
    if 0 <= seed < 2 ** 32 and 0 <= order < 2 ** 32:  # one 32-bit word each: the same seed words, coerced faster
        entropy = np.array(entropy, np.uint32)
    return tuple(np.random.default_rng(entropy).permutation(n).tolist())
