"""Threads revisited between batches and batches sized by a time budget (issue 44 item 4): on a fake load and a fake
clock, the calls to torch.set_num_threads and the batch sizes are asserted; no model is loaded."""
from __future__ import annotations

import pytest

from recbench.backends import threads
from recbench.backends.batch_pace import BatchPace
from recbench.backends.threads import ThreadChoice

pytestmark = pytest.mark.fast


class Fake:
    """A load average and a clock the test moves by hand."""

    def __init__(self, load: float):
        self.load, self.now = load, 0.0

    def tick(self, seconds: float, load: float | None = None) -> None:
        self.now += seconds
        if load is not None:
            self.load = load


def choice(fake: Fake, monkeypatch, setting="auto") -> tuple[ThreadChoice, list[int], list[str]]:
    monkeypatch.setattr(threads, "_own_load", lambda: 0.0)  # a fresh process: nothing of its own in the load yet
    applied: list[int] = []
    said: list[str] = []
    c = ThreadChoice(setting, applied.append, say=said.append, load=lambda: fake.load, clock=lambda: fake.now, cpus=2)
    return c, applied, said


def test_a_rising_load_drops_to_one_thread_and_a_quiet_machine_brings_two_back(monkeypatch):
    fake = Fake(load=0.2)
    c, applied, said = choice(fake, monkeypatch)
    assert applied == [2] and c.n == 2  # quiet at start: both cores
    fake.tick(5, load=8.0)
    assert c.revisit() is None and applied == [2]  # looked at most every 10 s
    fake.tick(10)
    assert c.revisit() == 1 and applied == [2, 1]
    # 8.0 less our own part: 2 threads for 15 s of the kernel's 1-minute average, 2 * (1 - exp(-15/60)) = 0.44
    assert said == ["recbench: threads 2 -> 1 (auto: 2 cores, load 7.6 from other processes)"]
    for _ in range(5):  # still busy: no call
        fake.tick(15, load=7.5)
        assert c.revisit() is None
    assert applied == [2, 1]
    fake.tick(120, load=1.1)  # the others left; our one thread is most of the load now
    assert c.revisit() == 2 and applied == [2, 1, 2] and c.changes == said
    assert said[1] == "recbench: threads 1 -> 2 (auto: 2 cores, load 0.1 from other processes)"


def test_no_flapping_at_the_boundary(monkeypatch):
    """2 cores: 2 threads while the others' load is under 0.5, else 1. Around 0.5 the margin (0.25) keeps the count;
    past it the count changes."""
    fake = Fake(load=0.3)
    c, applied, _ = choice(fake, monkeypatch)
    assert applied == [2]
    for load in (2.6, 2.45, 2.55, 2.7):  # our 2 threads (600 s on: all of our part) + others 0.6, 0.45, 0.55, 0.7
        fake.tick(600, load=load)
        assert c.revisit() is None
    fake.tick(600, load=2.8)  # others 0.8: 1 thread even with the margin
    assert c.revisit() == 1 and applied == [2, 1]
    for load in (1.45, 1.3):  # our 1 thread + others 0.45, 0.3
        fake.tick(600, load=load)
        assert c.revisit() is None
    fake.tick(600, load=1.2)  # others 0.2
    assert c.revisit() == 2 and applied == [2, 1, 2]


def test_a_set_count_is_never_revisited(monkeypatch):
    fake = Fake(load=0.0)
    c, applied, said = choice(fake, monkeypatch, setting=2)
    fake.tick(600, load=12.0)
    assert c.revisit() is None and applied == [2] and said == [] and c.why == "set"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def run(pace: BatchPace, clock: Clock, per_prompt_s, prompts: int) -> list[tuple[int, float]]:
    """Answer `prompts` prompts in batches of pace.size; per_prompt_s(i) is the cost of a prompt in batch i."""
    out, i = [], 0
    while prompts > 0:
        rows = min(pace.size, prompts)
        with pace.timed(rows):
            clock.now += rows * per_prompt_s(i)
        out.append((rows, rows * per_prompt_s(i)))
        prompts -= rows
        i += 1
    return out


def test_batches_grow_to_batch_size_on_a_quiet_machine():
    clock = Clock()
    pace = BatchPace(16, 25.0, clock=clock)
    got = run(pace, clock, lambda i: 1.0, 60)  # 1 s per prompt: 16 prompts fit 25 s
    assert [r for r, _ in got] == [2, 4, 8, 16, 16, 14]


def test_under_load_no_batch_after_the_first_exceeds_the_budget_and_a_rise_shrinks_the_next_at_once():
    clock = Clock()
    pace = BatchPace(16, 25.0, clock=clock)
    cost = lambda i: 20.0 if i < 4 else (2.0 if i < 8 else 12.0)  # noqa: E731 - loaded, quiet, loaded again
    got = run(pace, clock, cost, 40)
    assert [r for r, _ in got][:4] == [2, 1, 1, 1]  # 20 s a prompt: one at a time (the first batch is 2: 40 s)
    assert all(s <= 25.0 for _, s in got[1:4])
    # quiet again (2 s a prompt): the running average still remembers 20 s, so the size grows 1, 2, 3, 5 and then 8
    assert [r for r, _ in got][4:8] == [1, 2, 3, 5] and got[8][0] == 8
    assert got[8] == (8, 96.0) and pace.size == 2  # one slow batch (the load came back) and the next is small
    assert all(s <= 25.0 for _, s in got[9:])


def test_no_budget_keeps_the_fixed_batch_size():
    clock = Clock()
    pace = BatchPace(16, None, clock=clock)
    assert [r for r, _ in run(pace, clock, lambda i: 30.0, 40)] == [16, 16, 8]
