"""A self-made CPU load: N busy-loop processes, each ending by itself after a deadline (issue 44's "at load 6-8 / 9",
measured with our own load generator rather than whatever the machine happens to carry).

    python benchmarks/loadgen.py 6 --seconds 900      # 6 busy processes for at most 15 minutes (Ctrl-C stops them)

Imported by the benchmarks: start_load(n, max_s) / stop_load(procs). The 1-minute load average takes about a minute
to rise to the new level: wait (settle) before measuring, and record os.getloadavg() with every figure.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import signal
import time


def _spin(deadline: float) -> None:
    """A busy process: burn one core until the deadline."""
    x = 0
    while time.time() < deadline:
        x += 1


def start_load(n: int, max_s: float) -> list[mp.Process]:
    """n busy processes, each ending by itself after max_s seconds at the latest."""
    deadline = time.time() + max_s
    procs = [mp.Process(target=_spin, args=(deadline,), daemon=True) for _ in range(n)]
    for p in procs:
        p.start()
    return procs


def stop_load(procs: list[mp.Process]) -> None:
    """Stop the busy processes this module started (by their own handles, nothing else)."""
    for p in procs:
        p.terminate()
    for p in procs:
        p.join(5)


def main() -> None:
    """CLI: hold N busy processes until --seconds pass or Ctrl-C/SIGTERM."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("n", type=int, help="busy processes")
    ap.add_argument("--seconds", type=float, default=900.0, help="each ends by itself after this")
    a = ap.parse_args()

    def on_term(*_: object) -> None:
        raise KeyboardInterrupt

    procs = start_load(a.n, a.seconds)  # started first: they keep SIGTERM's default (terminate() ends them quietly)
    signal.signal(signal.SIGTERM, on_term)  # `kill PID` stops the busy processes too
    print(f"loadgen: {a.n} busy processes (pids {' '.join(str(p.pid) for p in procs)}) for at most {a.seconds:.0f} s; "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    try:
        for p in procs:
            p.join()
    except KeyboardInterrupt:
        pass
    finally:
        stop_load(procs)


if __name__ == "__main__":
    main()
