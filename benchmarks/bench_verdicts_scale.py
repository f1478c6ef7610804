"""compare and report on two PerRecBench-like runs of N paired groups (issue 29: 60,000), wall time and peak RSS.

    PYTHONPATH=. python benchmarks/bench_verdicts_scale.py [--groups 60000] [--out DIR] [--limit-bytes 8000000000]

Writes two run dirs with the project's own writer (recbench.store.runstore.RunStore, schema records): groups of
2, 3 and 4 users (easy, medium, hard), popularity and history slices as a real run has them, PTC of two rankers that
share part of their error (paired units), then runs `python -m recbench.compare A B --metric ptc` and
`python -m recbench.report A B` as separate processes under `/usr/bin/time -v` and `prlimit --as` (a memory limit),
printing wall time, CPU time (user + system: what the wall time would be on an idle core, the commands being
single-threaded), peak RSS, the load average and the verdict figures as they are measured. Results:
benchmarks/results/bench_verdicts_scale.json. Targets (issue 29): compare under 30 s and 1 GB, report under 60 s
and 2 GB.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from recbench.stats.bootstrap import tau_permutation  # noqa: E402
from recbench.store.runstore import RunStore  # noqa: E402
from recbench.store.schema import RunResult, SampleRecord  # noqa: E402

SIZES = {2: "easy", 3: "medium", 4: "hard"}
INFO = {"ptc": {"higher_is_better": True, "direction": "higher", "binary": False, "aggregation": "mean"}}


def _taus(scores: np.ndarray, noise: np.ndarray) -> list[float]:
    """PTC of ranking by scores + noise against ranking by scores (per group)."""
    return [tau_permutation((np.argsort(np.argsort(-(s + e))) + 1).tolist()) for s, e in zip(scores, noise)]


def synthesize(out: Path, groups: int, seed: int = 0) -> list[Path]:
    """Two run dirs of `groups` paired PerRecBench-like examples (method a better than method b on average)."""
    rng = np.random.default_rng(seed)
    size = rng.choice([2, 3, 4], groups)
    pop = rng.choice(["low", "mid", "high"], groups)
    hist = rng.choice(["short", "mid", "long"], groups)
    shared = {m: rng.normal(0, 1.0, (groups, m)) for m in SIZES}
    runs = []
    for name, scale in (("bm25_history", 1.6), ("random", 2.4)):
        tau = np.empty(groups)
        for m in SIZES:
            idx = np.flatnonzero(size == m)
            truth = np.tile(-np.arange(m, dtype=float), (len(idx), 1))
            noise = scale * (0.6 * shared[m][idx] + 0.8 * rng.normal(0, 1.0, (len(idx), m)))
            tau[idx] = _taus(truth, noise)
        d = out / name
        store = RunStore(d)
        store.append_many(SampleRecord(id=f"g{i:06d}", meta={"difficulty": SIZES[int(size[i])],
                                                             "group_size": int(size[i]), "popularity": str(pop[i]),
                                                             "history": str(hist[i])},
                                       metrics={"ptc": float(tau[i])}) for i in range(groups))
        breakdown = {key: {v: {"n": int(np.sum(col == v)), "metrics": {}} for v in order}
                     for key, col, order in (("difficulty", np.array([SIZES[int(s)] for s in size]),
                                              ("easy", "medium", "hard")),
                                             ("popularity", pop, ("low", "mid", "high")),
                                             ("history", hist, ("short", "mid", "long")))}
        store.write_result(RunResult.from_dict({
            "schema_version": 2, "task": {"name": "perrec"}, "model": "none", "method": name,
            "headline_metric": "ptc", "metrics": {"ptc": {"mean": float(tau.mean()), "n": groups}},
            "breakdown": breakdown, "complete": True, "metric_info": INFO, "cluster_by": None}))
        store.write_text("config.yaml", f"task:\n  name: perrec\nmethod:\n  name: {name}\nseed: 0\n")
        store.close()
        runs.append(d)
    return runs


def measure(cmd: list[str], limit: int) -> dict:
    """Run cmd under /usr/bin/time -v and prlimit --as=limit: wall, peak RSS, exit code, stdout."""
    full = ["prlimit", f"--as={limit}", "--", "/usr/bin/time", "-v", *cmd]
    t = time.perf_counter()
    p = subprocess.run(full, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - t
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    cpu = sum(float(x) for x in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", p.stderr))
    return {"cmd": " ".join(cmd), "rc": p.returncode, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
            "peak_rss_mb": round(int(rss.group(1)) / 1024, 1) if rss else None, "load": os.getloadavg(),
            "stdout": p.stdout, "stderr_tail": p.stderr[-3000:]}


def main() -> int:
    """Synthesize, measure compare and report, print and write the results."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=60_000)
    ap.add_argument("--out", help="folder for the two runs (default: a temporary one)")
    ap.add_argument("--limit-bytes", type=int, default=8_000_000_000)
    ap.add_argument("--json", default=str(ROOT / "benchmarks/results/bench_verdicts_scale.json"))
    ap.add_argument("--steps", default="compare,report", help="which of compare,report to measure")
    a = ap.parse_args()
    out = Path(a.out or tempfile.mkdtemp(prefix="bench_verdicts_"))
    t = time.perf_counter()
    if all((out / n / "metrics.json").is_file() for n in ("bm25_history", "random")):
        ra, rb = out / "bm25_history", out / "random"  # written by an earlier call with the same --out
        print(f"reusing the 2 runs under {out}", flush=True)
    else:
        ra, rb = synthesize(out, a.groups)
        print(f"synthesized 2 runs of {a.groups} groups in {time.perf_counter() - t:.1f} s under {out}", flush=True)
    py = sys.executable
    results = {"groups": a.groups, "limit_bytes": a.limit_bytes, "command": " ".join(sys.argv)}
    steps = {"compare": [py, "-m", "recbench.compare", str(ra), str(rb), "--metric", "ptc",
                         "--json", str(out / "verdicts.json")],
             "report": [py, "-m", "recbench.report", str(ra), str(rb), "-o", str(out / "report")]}
    steps = {k: v for k, v in steps.items() if k in a.steps.split(",")}
    for name, cmd in steps.items():
        r = measure(cmd, a.limit_bytes)
        print(f"{name}: rc {r['rc']}, wall {r['wall_s']} s, CPU {r['cpu_s']} s, peak RSS {r['peak_rss_mb']} MB, load "
              f"{' '.join(f'{x:.1f}' for x in r['load'])}", flush=True)
        if r["rc"] != 0:
            print(r["stderr_tail"], flush=True)
        if name == "compare":
            print(r["stdout"], flush=True)
        results[name] = {k: v for k, v in r.items() if k != "stdout"}
    if (out / "verdicts.json").exists():
        recs = json.loads((out / "verdicts.json").read_text())
        results["verdicts"] = [{k: c[k] for k in ("run_a", "run_b", "slice", "n", "diff", "ci_low", "ci_high",
                                                  "p_value", "p_adjusted", "n_resamples", "verdict")} for c in recs]
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {a.json}")
    return 0 if all(results[s]["rc"] == 0 for s in steps) else 1


if __name__ == "__main__":
    sys.exit(main())
