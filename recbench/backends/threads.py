"""How many threads an in-process engine should use: `auto` takes the cores the other processes leave free (the cores
this process may run on, minus the 1-minute load average less this process's own share), at least 1.

On 2 shared cores one torch thread was 4.3x faster than two at load 4-7 and 0.58x as fast when idle
(docs/backends.md, "Threads"): each of torch's threads waits for the slowest at every operation, so a thread
that shares its core with another process holds all of them back.
"""
from __future__ import annotations

import os
import resource
from typing import Any, Optional


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

