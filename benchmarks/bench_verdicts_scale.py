"""compare, report and a run's aggregate at scale (issue 29: 60,000 paired groups, 100,000 users): wall, CPU, peak RSS.

    PYTHONPATH=. python benchmarks/bench_verdicts_scale.py [--groups 60000] [--out DIR] [--limit-bytes 8000000000]
        [--runs RUN_A RUN_B] [--aggregate-runs RUN_DIR ...] [--trees after=. before=/tmp/stats_base]
        [--steps compare,report,aggregate]

Without --runs, writes two run dirs with the project's own writer (recbench.store.runstore.RunStore, schema records):
groups of 2, 3 and 4 users (easy, medium, hard), popularity and history slices as a real run has them, PTC of two
rankers that share part of their error (paired units). With --runs, two existing runs (e.g. the kept 60,000-group
ml-10M runs of bench_scale). Then runs `python -m recbench.compare A B --metric ptc` and `python -m recbench.report A
B` as separate processes under `/usr/bin/time -v` and `prlimit --as` (a memory limit), and for each --aggregate-runs
dir, run/loop.aggregate on its records (the task loaded first, outside the timed part; the run's own bootstrap
resamples, level and seed). Each `--trees NAME=PATH` is a source tree measured on the same inputs, step after step
(PYTHONPATH=PATH; `before` = the base commit unpacked with `git archive <base> | tar -x -C /tmp/stats_base` plus the
conf/data symlinks under recbench/), so before/after ratios come from one invocation. Printed as measured: wall time,
CPU time (user + system), peak RSS, the load average, and the figures, which must agree between trees. Results:
benchmarks/results/bench_verdicts_scale.json. Targets (issue 29): compare under 30 s and 1 GB, report under 60 s
and 2 GB; an LLMRec model-free run of 100,000 users under 2 minutes and 2 GB.
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


#: the pairs --effects can build: run b's noise scale against run a's 1.6 (a larger scale ranks worse), and the sd of a
#: continuous jitter added to both runs' PTC (0: PTC stays on its lattice of thirds)
EFFECTS = {"significant": (2.4, 0.0),  # p ~ 1e-300
           "null": (1.6, 0.0),  # the same method twice, independent noise: p ~ 0.77
           "small": (1.64, 0.0),  # p ~ 0.016: where the adaptive Monte Carlo drew the most
           "small_continuous": (1.64, 0.01)}  # the same off the lattice: Monte Carlo within the flip budget


def synthesize(out: Path, groups: int, seed: int = 0, effect: str = "significant") -> list[Path]:
    """Two run dirs of `groups` paired PerRecBench-like examples (method a better than method b on average, by the
    effect's noise scale; 'null': equal)."""
    scale_b, jitter = EFFECTS[effect]
    rng = np.random.default_rng(seed)
    size = rng.choice([2, 3, 4], groups)
    pop = rng.choice(["low", "mid", "high"], groups)
    hist = rng.choice(["short", "mid", "long"], groups)
    shared = {m: rng.normal(0, 1.0, (groups, m)) for m in SIZES}
    runs = []
    for name, scale in (("bm25_history", 1.6), ("random", scale_b)):
        tau = np.empty(groups)
        for m in SIZES:
            idx = np.flatnonzero(size == m)
            truth = np.tile(-np.arange(m, dtype=float), (len(idx), 1))
            noise = scale * (0.6 * shared[m][idx] + 0.8 * rng.normal(0, 1.0, (len(idx), m)))
            tau[idx] = _taus(truth, noise)
        if jitter:
            tau += rng.normal(0, jitter, groups)
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


AGGREGATE = """
import hashlib, json, sys, time
from pathlib import Path
from omegaconf import OmegaConf
from recbench.run.construct import build_task
from recbench.run.loop import aggregate
from recbench.store.schema import read_run
d = Path(sys.argv[1])
cfg = OmegaConf.load(d / "config.yaml")
t = time.perf_counter()
task = build_task(cfg)
if sys.argv[2:] != ["noload"]:  # run_facts may need the loaded data (LLMRec: the users' histories)
    task.load()
records = list(read_run(d).samples())
load_s = time.perf_counter() - t
c, t = time.process_time(), time.perf_counter()
agg = aggregate(task, records, n_boot=int(cfg.run.bootstrap_resamples), level=float(cfg.run.ci_level),
                seed=int(cfg.seed))
wall, cpu = time.perf_counter() - t, time.process_time() - c
blocks = {"all": agg.metrics, **{f"{k}={v}": b.metrics for k, vals in agg.breakdown.items() for v, b in vals.items()}}
figures = {sl: {m: [s.mean, s.ci_low, s.ci_high, s.n] for m, s in ms.items()} for sl, ms in blocks.items()}
print(json.dumps({"units": len(records), "load_s": round(load_s, 1), "aggregate_wall_s": round(wall, 2),
                  "aggregate_cpu_s": round(cpu, 2), "figures_sha256": hashlib.sha256(json.dumps(figures).encode())
                  .hexdigest(), "overall": figures["all"]}))
"""


def measure(cmd: list[str], limit: int, tree: Path = ROOT) -> dict:
    """Run cmd under /usr/bin/time -v and prlimit --as=limit with PYTHONPATH=tree: wall, peak RSS, exit code, stdout."""
    full = ["prlimit", f"--as={limit}", "--", "/usr/bin/time", "-v", *cmd]
    t = time.perf_counter()
    p = subprocess.run(full, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tree)},
                       cwd=tree)  # -m and -c put the working dir before PYTHONPATH: run in the tree
    wall = time.perf_counter() - t
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    cpu = sum(float(x) for x in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", p.stderr))
    return {"cmd": " ".join(cmd), "rc": p.returncode, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
            "peak_rss_mb": round(int(rss.group(1)) / 1024, 1) if rss else None, "load": os.getloadavg(),
            "stdout": p.stdout, "stderr_tail": p.stderr[-3000:]}


def _runs(a: argparse.Namespace, out: Path, effect: str) -> tuple[Path, Path]:
    """The two runs to compare: --runs, else synthesized under out/<effect> (reused when an earlier call wrote them)."""
    if a.runs:
        return Path(a.runs[0]).resolve(), Path(a.runs[1]).resolve()
    out = out / effect
    if all((out / n / "metrics.json").is_file() for n in ("bm25_history", "random")):
        print(f"reusing the 2 runs under {out}", flush=True)
        return out / "bm25_history", out / "random"
    t = time.perf_counter()
    ra, rb = synthesize(out, a.groups, effect=effect)
    print(f"synthesized 2 runs of {a.groups} groups ({effect}) in {time.perf_counter() - t:.1f} s under {out}",
          flush=True)
    return ra, rb


def _steps(a: argparse.Namespace, out: Path, ra: Path, rb: Path, tree_name: str) -> dict[str, list[str]]:
    py = sys.executable
    steps = {"compare": [py, "-m", "recbench.compare", str(ra), str(rb), "--metric", "ptc",
                         "--json", str(out / f"verdicts-{tree_name}.json")],
             "report": [py, "-m", "recbench.report", str(ra), str(rb), "-o", str(out / f"report-{tree_name}")]}
    for spec in a.aggregate_runs:  # RUN_DIR or RUN_DIR::noload (the task's data not loaded first)
        d, _, how = spec.partition("::")
        d = str(Path(d).resolve())
        steps[f"aggregate {Path(d).parts[-4] if len(Path(d).parts) > 4 else d}"] = [py, "-c", AGGREGATE, d, *([how] if how else [])]
    wanted = a.steps.split(",")
    return {k: v for k, v in steps.items() if k.split()[0] in wanted}


def _measure_pair(a: argparse.Namespace, out: Path, ra: Path, rb: Path, trees: dict[str, Path], effect: str,
                  results: dict) -> None:
    """Each step on one pair of runs, tree after tree (so before/after ratios come from the same minutes)."""
    first = next(iter(trees))
    for step in _steps(a, out, ra, rb, first):
        for name, tree in trees.items():
            r = measure(_steps(a, out, ra, rb, name)[step], a.limit_bytes, tree)
            print(f"{effect} {step} [{name}]: rc {r['rc']}, wall {r['wall_s']} s, CPU {r['cpu_s']} s, peak RSS "
                  f"{r['peak_rss_mb']} MB, load {' '.join(f'{x:.1f}' for x in r['load'])}", flush=True)
            if r["rc"] != 0:
                print(r["stderr_tail"], flush=True)
            row = {"effect": effect, "step": step, "tree": name, **{k: v for k, v in r.items() if k != "stdout"}}
            if step == "compare":
                print(r["stdout"], flush=True)
                vj = out / f"verdicts-{name}.json"
                if vj.exists():
                    row["verdicts"] = [{k: c.get(k) for k in ("slice", "n", "diff", "ci_low", "ci_high", "p_value",
                                                              "n_resamples", "p_mc_se", "p_precision", "verdict")}
                                       for c in json.loads(vj.read_text())]
            if step.startswith("aggregate") and r["rc"] == 0:
                row["aggregate"] = json.loads(r["stdout"].strip().splitlines()[-1])
                print(f"  {json.dumps({k: v for k, v in row['aggregate'].items() if k != 'overall'})}", flush=True)
            results["steps"].append(row)


def main() -> int:
    """Measure compare, report and aggregate for each tree, print and write the results."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=60_000)
    ap.add_argument("--out", help="folder for the synthesized runs and the outputs (default: a temporary one)")
    ap.add_argument("--runs", nargs=2, metavar=("RUN_A", "RUN_B"), help="compare these runs instead of synthesizing")
    ap.add_argument("--aggregate-runs", nargs="*", default=[], metavar="RUN_DIR",
                    help="run dirs whose records run/loop.aggregate aggregates again (timed); RUN_DIR::noload skips "
                         "loading the task's data first (its run facts then lack what needs the data)")
    ap.add_argument("--trees", nargs="*", default=["after=."], metavar="NAME=PATH")
    ap.add_argument("--limit-bytes", type=int, default=8_000_000_000)
    ap.add_argument("--json", default=str(ROOT / "benchmarks/results/bench_verdicts_scale.json"))
    ap.add_argument("--steps", default="compare,report,aggregate", help="which of compare,report,aggregate to measure")
    ap.add_argument("--effects", default="null,significant",
                    help=f"which synthesized pairs to measure, in order (of {', '.join(EFFECTS)}); ignored with --runs")
    a = ap.parse_args()
    out = Path(a.out or tempfile.mkdtemp(prefix="bench_verdicts_")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    trees = {n: Path(p).resolve() for n, p in (t.split("=", 1) for t in a.trees)}
    results: dict = {"groups": a.groups, "limit_bytes": a.limit_bytes, "command": " ".join(sys.argv),
                     "trees": {n: str(p) for n, p in trees.items()}, "pairs": {}, "steps": []}
    for name, tree in trees.items():  # the package each tree's commands import (the tree's own, not the install)
        where = subprocess.run([sys.executable, "-c", "import recbench; print(recbench.__file__)"], cwd=tree,
                               capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tree)}).stdout.strip()
        print(f"tree {name}: {tree} imports {where}", flush=True)
        results["trees"][name] = {"path": str(tree), "imports": where}
    for effect in (["given"] if a.runs else a.effects.split(",")):
        ra, rb = _runs(a, out, effect)
        results["pairs"][effect] = [str(ra), str(rb)]
        _measure_pair(a, out if a.runs else out / effect, ra, rb, trees, effect, results)
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {a.json}")
    return 0 if all(r["rc"] == 0 for r in results["steps"]) else 1


if __name__ == "__main__":
    sys.exit(main())
