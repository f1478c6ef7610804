"""How long a run has left, from what has been measured: for a batch engine, the decoding steps per second and the
steps and prefill its batches took so far; for anything else, the answers per second once a few have landed.
Never from one answer: an answer that took a whole batch's time would give an ETA of that time per request."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

from recbench.backends.decoding import DecodeBatch


@dataclass
class BatchHistory:
    """The batches an in-process engine finished in this run: their rows, steps, prefill and decoding seconds."""

    rows: list[int] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    prefill_s: list[float] = field(default_factory=list)
    decode_s: list[float] = field(default_factory=list)
    tokens: int = 0

    def add(self, batch: DecodeBatch) -> None:
        """Record a finished batch."""
        wall = batch.elapsed()
        prefill = batch.prefill_s if batch.prefill_s is not None else wall
        self.rows.append(batch.rows)
        self.steps.append(batch.steps)
        self.prefill_s.append(prefill)
        self.decode_s.append(max(wall - prefill, 0.0))
        self.tokens += batch.tokens


def batch_eta(left: int, done: BatchHistory, cur: Optional[DecodeBatch]) -> tuple[Optional[float], bool]:
    """(seconds left, is an upper bound) for `left` unanswered requests, the batch `cur` among them: its steps still
    to go, then each later batch's prefill plus its steps, at the measured seconds per step. The steps of a batch are
    the mean of the finished ones; before one has finished, the token limit (so the figure is an upper bound).
    None until a decoding step has been timed."""
    cur_steps = cur.steps if cur is not None and cur.prefill_s is not None else 0
    steps = sum(done.steps) + cur_steps
    if steps == 0:
        return None, False
    decode_s = sum(done.decode_s) + (cur.elapsed() - cur.prefill_s if cur_steps else 0.0)  # type: ignore[operator]
    step_s = decode_s / steps
    prefills = done.prefill_s + ([cur.prefill_s] if cur_steps else [])  # type: ignore[list-item]
    prefill = sum(prefills) / len(prefills)
    bound = not done.steps
    per_batch = sum(done.steps) / len(done.steps) if done.steps else float(cur.max_tokens)  # type: ignore[union-attr]
    rows = max(done.rows + ([cur.rows] if cur is not None else []))
    now = 0.0
    if cur is not None and not cur.done:
        now = max(per_batch - cur.steps, 0.0) * step_s
        if cur.prefill_s is None:  # still in prefill: the rest of it, at the mean prefill so far
            now += max(prefill - cur.elapsed(), 0.0)
        left -= cur.rows
    later = math.ceil(max(left, 0) / rows)
    return now + later * (prefill + per_batch * step_s), bound


def request_eta(left: int, answered: int, elapsed: float, min_answers: int = 2) -> Optional[float]:
    """Seconds left at the mean answer rate so far; None before `min_answers` answers."""
    if answered < min_answers or elapsed <= 0:
        return None
    return left * elapsed / answered
