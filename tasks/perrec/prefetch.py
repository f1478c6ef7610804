"""Listwise prompts built ahead on the second core: a forked child process writes, in the examples' order, each
example's prompt, its user labels and its users' ids in display order, while the loop's process sends requests and
scores answers. The child runs the very same code on the very same data (a fork of the loop's process before the first
example), so a prompt taken from it is the prompt the loop's process would have built; an example the child has not
reached, or passed, is built in the loop's process as usual. A build that fails in the child ends the child, and a
child killed is noticed within WAIT_S: the loop's process builds the rest itself (and meets the error, raised there).

Started by the loop through Listwise.prefetch (the Method.prefetch hook, api/task.py), which the loop closes when it
ends; only where it pays and is safe: at least MIN_EXAMPLES examples, the 'fork' start method available, and the
prompt depending on the example alone (no per-user profiles to ask, no audit's display order or paraphrase).
"""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
from collections import OrderedDict
from queue import Empty, Full
from typing import Any, Callable, Optional, Sequence

from recbench.api.types import Example

MIN_EXAMPLES = 2000  # below this, building every prompt takes well under a second: no second process
CHUNK = 256  # examples per message from the child (about 0.4 MB of prompts)
WAIT_S = 1.0  # how often the loop's side, waiting for a chunk, checks that the child still runs

Built = tuple[str, list[str], list[str]]  # (prompt, labels, user ids in display order)


def available(n_examples: int) -> bool:
    """True when a prefetch of n_examples would start here (enough examples, and fork is a start method)."""
    return n_examples >= MIN_EXAMPLES and "fork" in mp.get_all_start_methods()


class Prefetch:
    """The child building examples[start:] with `build`, and the loop's side taking them by example id in order."""

    def __init__(self, build: Callable[[Example], Built], examples: Sequence[Example], start: int):
        ctx = mp.get_context("fork")
        self._queue = ctx.Queue(maxsize=64)  # at most 64 chunks ahead (about 16,000 prompts)
        self._proc = ctx.Process(target=_child, args=(build, examples, start, self._queue, os.getpid()),
                                 name="recbench-prefetch", daemon=True)
        self._proc.start()
        self._pos = {ex.id: i for i, ex in enumerate(examples)}
        self._next, self._end = start, len(examples)  # the first example not yet received, and the end
        self._got: "OrderedDict[str, Built]" = OrderedDict()
        self._done = False

    def take(self, example_id: str) -> Optional[Built]:
        """The child's prompt of this example (waiting for its chunk), or None when the child passed it, never
        builds it or has ended. Older examples never taken are dropped (the loop starts examples in order)."""
        i = self._pos.get(example_id, -1)
        if i < self._next and example_id not in self._got:
            return None  # passed (or before the child's start): the caller builds it
        while example_id not in self._got and not self._done:
            try:
                batch = self._queue.get(timeout=WAIT_S)
            except Empty:
                if self._proc.exitcode is not None:  # gone without its end mark (killed): the caller builds
                    self.close()
                continue
            if batch is None:
                self.close()
            else:
                self._got.update(batch)
                self._next += len(batch)
        if example_id not in self._got:
            return None
        while True:
            key, built = self._got.popitem(last=False)
            if key == example_id:
                if not self._got and self._next >= self._end:  # the last one: the child is done
                    self.close()
                return built

    def close(self) -> None:
        """Stop the child (if it still runs) and let go of what it sent."""
        self._done = True
        if self._proc.is_alive():
            self._proc.terminate()
        self._proc.join(timeout=5)
        self._queue.close()
        self._queue.cancel_join_thread()


def _child(build: Callable[[Example], Built], examples: Sequence[Example], start: int, queue: Any,
           parent: int) -> None:
    """The child: build examples[start:] chunk by chunk into the queue, then None; stop when the parent is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the loop's to handle; the child is terminated
    try:
        for lo in range(start, len(examples), CHUNK):
            if not _put(queue, [(ex.id, build(ex)) for ex in examples[lo:lo + CHUNK]], parent):
                return
    except Exception:  # noqa: BLE001 - the end mark instead: the loop's process builds the rest and meets the error
        pass
    if _put(queue, None, parent):
        queue.close()
        queue.join_thread()


def _put(queue: Any, item: Any, parent: int) -> bool:
    """Put item, waiting while the queue is full; False (give up) once the parent is gone (killed: no orphan)."""
    while os.getppid() == parent:
        try:
            queue.put(item, timeout=1.0)
            return True
        except Full:
            continue
    return False
