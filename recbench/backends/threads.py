"""How many threads an in-process engine should use: `auto` takes the cores the other processes leave free (the cores
this process may run on, minus the 1-minute load average less this process's own share), at least 1.

On 2 shared cores one torch thread was 4.3x faster than two at load 4-7 and 0.58x as fast when idle
(docs/backends.md, "Threads"): each of torch's threads waits for the slowest at every operation, so a thread
that shares its core with another process holds all of them back.

The load changes while a run goes (issue 44: 1 thread chosen at load 3.6 was kept through load 4-11), so
`ThreadChoice.revisit` looks again between batches: the 1-minute load average less this process's own part of it
(its threads, counted the way the kernel averages them: exponentially over a minute), and a new count when the free
cores say so with a margin (no flapping at a boundary), said in one line.
"""
from __future__ import annotations

import math
import os
import resource
import time
from typing import Any, Callable, Optional


def usable_cpus() -> int:
    """The cores this process may run on (its affinity mask, else os.cpu_count())."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _own_load() -> float:
    """This process's own part of the load average: its CPU seconds over its age, counted over at least a minute."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            age = float(f.read().split()[0]) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        age = 60.0
    return (ru.ru_utime + ru.ru_stime) / max(age, 60.0)


def auto_threads(cpus: int, load: float) -> int:
    """Threads for `cpus` usable cores with `load` runnable processes besides this one: the free cores, rounded,
    between 1 and cpus."""
    return max(1, min(cpus, int(cpus - max(load, 0.0) + 0.5)))


def pick_threads(setting: Any, cpus: Optional[int] = None, load: Optional[float] = None) -> tuple[int, str]:
    """(threads, why) for model.backend.threads: a positive integer as given, or `auto` (also null) from the cores
    free now. ValueError naming the key for anything else."""
    if setting is None or str(setting).strip().lower() == "auto":
        cpus = usable_cpus() if cpus is None else cpus
        if load is None:
            load = max(0.0, os.getloadavg()[0] - _own_load())
        n = auto_threads(cpus, load)
        return n, f"auto: {cpus} cores, load {load:.1f} from other processes"
    try:
        n = int(setting)
    except (TypeError, ValueError):
        n = 0
    if n < 1 or str(n) != str(setting).strip():
        raise ValueError(f"model.backend.threads: {setting!r} is not a positive integer or 'auto' "
                         "(e.g. model.backend.threads=1, or auto to pick from the free cores)")
    return n, "set"



#: a revisit changes the count only when the load, moved this far towards keeping it, still says change
MARGIN = 0.25
#: the load average's time constant (the kernel's 1-minute average decays as exp(-t / 60 s))
LOAD_TAU_S = 60.0


class ThreadChoice:
    """An engine's thread count: chosen at start (`pick_threads`) and, for `auto`, revisited between batches.

    `apply(n)` sets the count (torch.set_num_threads), `say(line)` tells a change, `load()` reads the 1-minute load
    average and `clock()` the time (both replaceable: the tests give a fake load and clock). `changes` keeps each
    change's line (recorded with the run's effective parameters)."""

    def __init__(self, setting: Any, apply: Callable[[int], None], say: Callable[[str], None] = print,
                 load: Optional[Callable[[], float]] = None, clock: Callable[[], float] = time.monotonic,
                 cpus: Optional[int] = None, every_s: float = 10.0):
        self.auto = setting is None or str(setting).strip().lower() == "auto"
        self.cpus = usable_cpus() if cpus is None else cpus
        self._load = load or (lambda: os.getloadavg()[0])
        self._apply, self._say, self._clock, self.every_s = apply, say, clock, every_s
        own = _own_load()
        first = max(0.0, self._load() - own) if self.auto else None
        self.n, self.why = pick_threads(setting, cpus=self.cpus, load=first)
        self._own, self._last = own, clock()  # this process's part of the load average, and when it was reckoned
        self.changes: list[str] = []
        apply(self.n)

    def revisit(self) -> Optional[int]:
        """Between batches: the count again from the load now (at most every `every_s` seconds); the new count when
        it changed, else None."""
        now = self._clock()
        if not self.auto or now - self._last < self.every_s:
            return None
        decay = math.exp(-(now - self._last) / LOAD_TAU_S)
        self._own = self._own * decay + self.n * (1.0 - decay)  # our n threads were runnable since the last look
        self._last = now
        others = max(0.0, self._load() - self._own)
        new = auto_threads(self.cpus, others)
        if new == self.n or auto_threads(self.cpus, others + (-MARGIN if new < self.n else MARGIN)) == self.n:
            return None
        old, self.n = self.n, new
        self.why = f"auto: {self.cpus} cores, load {others:.1f} from other processes"
        self._apply(new)
        line = f"recbench: threads {old} -> {new} ({self.why})"
        self.changes.append(line)
        self._say(line)
        return new
