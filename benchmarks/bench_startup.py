"""Start-up before the first request, and the speed-up over the one-request reference client (issue 44 item 2).

    python benchmarks/bench_startup.py --before-rev 8911832 --reps 5 --label issue44
    python benchmarks/bench_startup.py --reps 3 --no-reference          # start-up only, this checkout
    python benchmarks/bench_startup.py --before-rev REV --also head_without=/path/to/tree --reps 5
    python benchmarks/bench_startup.py --reps 3 --set model.backend.concurrency=64   # another in-flight ceiling

The same command as bench_engine.py's reference section (`python -m recbench task=perrec model=smollm2-openai
model.backend.base_url=<stub> method=listwise|pairwise run.progress=false`, the 120 bundled groups, a warm derived-data
cache, an empty response cache each run) against the stub server (`start_stub_process(latency_s=0.2)`), per tree:
the baseline tree first (--before-rev: that commit exported with `git archive`; --before: a checkout), then this
checkout. Reps alternate between the trees (before, after, before, after, ...), so a swing of the machine's load
falls on both. Per run: **start-up** = the stub's first chat request's arrival (`stats()["first_at"]`, time.time())
minus the moment the process was started (same clock: both processes are on this machine), the whole process's
wall and the process tree's CPU seconds (a figure load moves less than wall). The reference client
(benchmarks/reference_client.py, one request at a time, a new client per request) runs once per method as a
process; speed-up = reference process wall / median recbench process wall, per tree, both
measured in this invocation. The compose cache (recbench/store/compose_cache.py) starts empty in a folder of this
invocation: rep 0 of each method composes, the later reps read the config back (`startup_first_rep_s` is rep 0's).
Every figure is printed with the load average at once;
results: benchmarks/results/bench_startup_<label>.json, rewritten after every run.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
#: folders setup.py installs inside the package (recbench.conf, recbench.tasks, ...): an exported tree gets links
ROOTS = ("conf", "data", "kg", "tasks")


def export_rev(rev: str, dest: Path) -> Path:
    """`git archive <rev>` into dest, with recbench/<conf|data|kg|tasks> linked to the tree's own folders, so that
    PYTHONPATH=dest imports every recbench module of that commit (the editable install maps them to this checkout)."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return link_roots(dest)


def link_roots(tree: Path) -> Path:
    """recbench/<root> -> ../<root> for each installed root folder the tree has outside the package."""
    for d in ROOTS:
        if (tree / d).is_dir() and not (tree / "recbench" / d).exists():
            (tree / "recbench" / d).symlink_to(Path("..") / d)
    return tree


def recbench_cmd(stub_url: str, method: str, derived: Path, limit: Optional[int],
                 extra: tuple[str, ...] = ()) -> list[str]:
    """bench_engine.py's reference-section command (warm derived cache), with `extra` overrides (--set)."""
    return [sys.executable, "-m", "recbench", "task=perrec", "model=smollm2-openai", f"model.backend.base_url={stub_url}",
            f"method={method}", *([f"limit={limit}", "run.limit_strategy=stratified"] if limit else []),
            f"cache.derived_dir={derived}", "run.progress=false", *extra]


def timed(cmd: list[str], env: dict[str, str], cwd: Path, stub: Any) -> dict[str, Any]:
    """Run one process against the (reset) stub: start-up to the first request, wall, requests, exit code."""
    import resource

    stub.reset()
    load = os.getloadavg()[0]
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.time() - t0
    ru2 = resource.getrusage(resource.RUSAGE_CHILDREN)  # the run's process tree (the stub is never waited for here)
    st = stub.stats()
    first = st.get("first_at")
    return {"startup_s": round(first - t0, 3) if first else None, "wall_s": round(wall, 3), "requests": st["paid"],
            "cpu_s": round(ru2.ru_utime + ru2.ru_stime - ru.ru_utime - ru.ru_stime, 3),
            "rc": p.returncode, "load": round(load, 2), "tail": p.stdout[-400:] if p.returncode else ""}


def compile_tree(tree: Path) -> Path:
    """Every module of the tree byte-compiled, as an installed package runs: a tree exported for the baseline has no
    __pycache__, and with PYTHONDONTWRITEBYTECODE set (as in some shells) every run of it would compile its modules
    from source (~0.1 CPU-s) while a working checkout reads its byte code."""
    folders = [str(tree / d) for d in ("recbench", *ROOTS) if (tree / d).is_dir()]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *folders], check=True, stdout=subprocess.DEVNULL)
    return tree


def child_env(**more: str) -> dict[str, str]:
    """This process's environment for a measured command, without PYTHONDONTWRITEBYTECODE (see compile_tree)."""
    return {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, **more}


def tree_env(tree: Path, work: Path, compose: Path) -> dict[str, str]:
    """A fresh runs dir and response cache; the tree's modules first on the path; a compose cache of this invocation
    (empty at the start: a tree that keeps composed configs composes on its first run of each command)."""
    return {**child_env(), "PYTHONPATH": str(tree), "RECBENCH_RUNS_DIR": str(work / "runs"),
            "RECBENCH_CACHE_DIR": str(work / "cache"), "RECBENCH_COMPOSE_CACHE_DIR": str(compose),
            "PYTHONUNBUFFERED": "1"}


class Results:
    """Prints each figure with the load average and rewrites the JSON file."""

    def __init__(self, out: Path, meta: dict[str, Any]):
        self.out, self.data = out, {**meta, "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                                    "load_avg_start": os.getloadavg(), "runs": [], "reference": {}, "summary": {}}

    def add(self, key: str, row: dict[str, Any], where: str = "runs") -> None:
        print(f"{key}: {json.dumps({k: v for k, v in row.items() if k != 'tail'})}"
              f"{'  ' + row['tail'] if row.get('tail') else ''}  (load {os.getloadavg()[0]:.2f})", flush=True)
        if where == "runs":
            self.data["runs"].append({"key": key, **row})
        else:
            self.data[where][key] = row
        self.save()

    def save(self) -> None:
        self.data["load_avg_end"] = os.getloadavg()
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(json.dumps(self.data, indent=1))


def summarize(res: Results, trees: list[tuple[str, Path]], methods: list[str]) -> None:
    """Medians per tree and method, and the speed-ups over the reference process."""
    for method in methods:
        for name, _ in trees:
            rows = [r for r in res.data["runs"] if r["key"] == f"{name}/{method}" and r["rc"] == 0]
            if not rows:
                continue
            ups = [r["startup_s"] for r in rows if r["startup_s"] is not None]
            s = {"runs": len(rows), "startup_median_s": round(statistics.median(ups), 3) if ups else None,
                 "startup_min_s": min(ups) if ups else None, "startup_first_rep_s": rows[0]["startup_s"],
                 "wall_median_s": round(statistics.median(r["wall_s"] for r in rows), 3),
                 "cpu_median_s": round(statistics.median(r.get("cpu_s", 0.0) for r in rows), 3)}
            ref = res.data["reference"].get(method)
            if ref and ref.get("rc") == 0:
                s["speedup_vs_reference"] = round(ref["wall_s"] / s["wall_median_s"], 1)
            res.data["summary"][f"{name}/{method}"] = s
            print(f"SUMMARY {name}/{method}: {json.dumps(s)}", flush=True)
    res.save()


def main(argv: Optional[list[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before-rev", help="a commit to export and measure first (the baseline)")
    ap.add_argument("--before", type=Path, help="an older checkout to measure first (the baseline)")
    ap.add_argument("--also", action="append", default=[], metavar="NAME=DIR",
                    help="another tree to measure between the baseline and this checkout (repeatable)")
    ap.add_argument("--reps", type=int, default=5, help="recbench runs per tree and method")
    ap.add_argument("--methods", default="listwise,pairwise")
    ap.add_argument("--limit", type=int, default=None, help="groups (default: all 120, as bench_engine's reference)")
    ap.add_argument("--no-reference", action="store_true", help="skip the reference client (start-up only)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="an override added to every recbench run (repeatable), e.g. model.backend.concurrency=64")
    ap.add_argument("--label", default="local")
    a = ap.parse_args(argv)
    import reference_client

    from recbench.store import derived_cache
    from recbench.testing.openai_stub import start_stub_process

    methods = [m for m in a.methods.split(",") if m]
    with tempfile.TemporaryDirectory(prefix="rb_bench_startup_") as d:
        tmp = Path(d)
        trees = [("after", ROOT)]
        for spec in reversed(a.also):
            name, _, path = spec.partition("=")
            trees.insert(0, (name, link_roots(Path(path).resolve())))
        if a.before_rev or a.before:
            trees.insert(0, ("before", export_rev(a.before_rev, tmp / "before") if a.before_rev
                             else link_roots(a.before.resolve())))
        for _, tree in trees:
            compile_tree(tree)
        out = ROOT / "benchmarks" / "results" / f"bench_startup_{a.label}.json"
        res = Results(out, {"label": a.label, "argv": sys.argv[1:] if argv is None else argv, "cpus": os.cpu_count(),
                            "before_rev": a.before_rev, "trees": {n: str(t) for n, t in trees}, "latency_s": 0.2,
                            "overrides": list(a.set)})
        derived = tmp / "shared" / "derived"
        derived_cache.configure(derived)
        with start_stub_process(latency_s=0.2) as stub:
            for method in methods:
                reference_client.load(method, a.limit)  # warms the derived cache both sides read
                if not a.no_reference:
                    ref_args = ["--limit", str(a.limit)] if a.limit else []
                    row = timed([sys.executable, str(ROOT / "benchmarks" / "reference_client.py"), "--base-url",
                                 stub.base_url, "--method", method, *ref_args],
                                child_env(RECBENCH_CACHE_DIR=str(tmp / "shared")), ROOT, stub)
                    res.add(method, row, where="reference")
                for i in range(a.reps):
                    for name, tree in trees:
                        row = timed(recbench_cmd(stub.base_url, method, derived, a.limit, tuple(a.set)),
                                    tree_env(tree, tmp / f"{name}_{method}_{i}", tmp / "compose"), tree, stub)
                        res.add(f"{name}/{method}", {"rep": i, **row})
        summarize(res, trees, methods)
    print(f"results: {out}")


if __name__ == "__main__":
    main()
