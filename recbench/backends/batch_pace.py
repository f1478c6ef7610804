"""How many prompts an in-process engine puts in one batch: sized by a time budget, so that no batch holds the run's
answers back for minutes (issue 44: at load 14-16 a first batch of 16 listwise prompts spent 314 s in prefill).

The first batch is small (`start` prompts); each batch's seconds per prompt are measured, and the next batch holds as
many prompts as fit the budget at the slower of the last rate and the running average (a load that rises shrinks the
next batch at once), growing at most twice the last batch's size per step and never past the configured batch_size.
A budget of 0 or None keeps the fixed batch_size (the engine's behaviour before).
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable, Iterator, Optional


class BatchPace:
    """The size of the next batch (`size`), learnt from the batches timed with `timed(rows)`."""

    def __init__(self, max_size: int, budget_s: Optional[float], start: int = 2,
                 clock: Callable[[], float] = time.monotonic):
        self.max = max(1, int(max_size))
        self.budget = float(budget_s) if budget_s else None
        self.size = self.max if self.budget is None else min(self.max, max(1, start))
        self.per_row: Optional[float] = None  # running average of seconds per prompt
        self.clock = clock

    @contextmanager
    def timed(self, rows: int) -> Iterator[None]:
        """Time one batch of `rows` prompts (also when it fails: its time still tells the rate)."""
        t0 = self.clock()
        try:
            yield
        finally:
            self.observe(rows, self.clock() - t0)

    def observe(self, rows: int, seconds: float) -> int:
        """One batch of `rows` prompts took `seconds`: the size of the next batch."""
        if self.budget is None or rows <= 0 or seconds < 0:
            return self.size
        per = seconds / rows
        self.per_row = per if self.per_row is None else 0.5 * (self.per_row + per)
        rate = max(per, self.per_row)
        fit = int(self.budget / rate) if rate > 0 else self.max
        self.size = max(1, min(self.max, fit, 2 * max(rows, self.size)))
        return self.size
