"""Torch threads for the default model on a shared CPU (issue 30, item 2): requests/s and completion tokens/s of the
README main workload (PerRecBench listwise, SmolLM2 through the hf backend, batch 16) with model.backend.threads=1, 2
and auto (recbench/backends/threads.py), at the machine's current load and under an added load of 4 and of 8 busy
processes that this script starts and stops itself (each lives at most --max-load-s seconds).

    python benchmarks/bench_threads.py [--groups 8] [--loads 0,4,8] [--settle-s 45] [--settings 1,2,auto]

Per load level the three settings run one after another (in rotated order, so none always goes first), in one process,
with os.getloadavg() recorded before and after each; `auto` reports the thread count it chose and the load it saw.
Every figure is printed as measured; the table goes to stdout and benchmarks/results/bench_threads.json.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_engine import Report  # noqa: E402 - the benchmarks' one reporter (prints with the load average)
from bench_engine_cpu import SMOLLM2, answer, workload  # noqa: E402 - the same workload as the engine benchmark

SETTINGS = ("1", "2", "auto")


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
    """Stop the busy processes this script started."""
    for p in procs:
        p.terminate()
    for p in procs:
        p.join(5)


def measure(setting: str, requests: list) -> dict[str, Any]:
    """Answer every request with model.backend.threads=setting; wall, CPU, rates and the threads in force."""
    import torch

    from recbench.backends.hf import HFBackend

    load_before = os.getloadavg()
    backend = HFBackend(**SMOLLM2, batch_size=16, threads=setting)  # weights load once per process
    threads = torch.get_num_threads()
    t0, c0 = time.perf_counter(), time.process_time()
    resps = answer(backend, requests, grouped=True)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    errors = [r.error for r in resps if r.error]
    if errors:
        raise SystemExit(f"bench_threads: threads={setting}: {len(errors)} error(s), first: {errors[0]}")
    return {"setting": setting, "threads": threads, "why": backend.load_info.get("threads"), "wall_s": round(wall, 2),
            "cpu_s": round(cpu, 2), "requests_per_s": round(len(resps) / wall, 4),
            "completion_tokens_per_s": round(sum(r.completion_tokens for r in resps) / wall, 2),
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()], "texts": [r.text for r in resps]}


def run_level(rep: Report, level: int, requests: list, settle_s: float, max_load_s: float, rotate: int,
              settings: tuple[str, ...] = SETTINGS) -> dict[str, dict[str, Any]]:
    """The settings under `level` added busy processes (0: the machine as it is), in rotated order."""
    procs = start_load(level, max_load_s) if level else []
    try:
        if level:
            rep.note("loads", f"{level} busy processes started; waiting {settle_s:.0f} s for the load average to rise")
            time.sleep(settle_s)
        order = settings[rotate % len(settings):] + settings[:rotate % len(settings)]
        rows: dict[str, dict[str, Any]] = {}
        for s in order:
            row = rows[s] = measure(s, requests)
            rep.figure(f"added_load_{level}", f"threads={s} requests/s", row["requests_per_s"],
                       f"({row['wall_s']:.1f} s, CPU {row['cpu_s']:.1f} s, {row['completion_tokens_per_s']:.1f} "
                       f"completion tok/s, {row['threads']} thread(s): {row['why']}; load "
                       f"{row['load_before'][0]:.1f} -> {row['load_after'][0]:.1f})",
                       **{k: v for k, v in row.items() if k != "texts"})
        return rows
    finally:
        stop_load(procs)


def main() -> None:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--loads", default="0,4,8", help="added busy processes per level, comma-separated")
    ap.add_argument("--settle-s", type=float, default=45.0, help="wait after starting the busy processes")
    ap.add_argument("--max-load-s", type=float, default=900.0, help="a busy process ends by itself after this")
    ap.add_argument("--settings", default=",".join(SETTINGS), help="which of 1, 2, auto to run (each level)")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "bench_threads.json"))
    a = ap.parse_args()
    rep = Report(Path(a.out), sys.argv[1:])
    print(f"bench_threads: {os.cpu_count()} CPUs, load {os.getloadavg()}; results -> {a.out}", flush=True)
    _, _, requests = workload(a.groups)
    rep.note("workload", f"perrec listwise, {len(requests)} bundled groups (stratified), batch 16, max_tokens "
                         f"{requests[0].sampling.max_tokens}, greedy")
    table = {}
    for i, level in enumerate(int(x) for x in a.loads.split(",")):
        table[level] = run_level(rep, level, requests, a.settle_s, a.max_load_s, i, tuple(a.settings.split(",")))
    print("\n| added busy processes | setting | threads used | load avg (1 min) before -> after | wall s | req/s | "
          "completion tok/s | x threads=2 (else the first) | same text |", flush=True)
    print("|---|---|---|---|---|---|---|---|---|")
    for level, rows in table.items():
        base = rows.get("2") or rows[next(iter(rows))]
        for s, r in rows.items():
            same = sum(x == y for x, y in zip(r["texts"], base["texts"]))
            print(f"| {level} | {s} | {r['threads']} | {r['load_before'][0]:.1f} -> {r['load_after'][0]:.1f} | "
                  f"{r['wall_s']:.1f} | {r['requests_per_s']:.3f} | {r['completion_tokens_per_s']:.1f} | "
                  f"{r['requests_per_s'] / base['requests_per_s']:.2f} | {same}/{len(r['texts'])} |", flush=True)


if __name__ == "__main__":
    main()
