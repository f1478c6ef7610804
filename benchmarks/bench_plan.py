"""`mode=plan` wall time for every catalogue model and every YAML (config-only) benchmark (issue 44: under 5 s at
load 9), at the machine's load and under added busy processes this script starts and stops itself.

    python benchmarks/bench_plan.py [--added 0,8] [--settle-s 60] [--before REV] [--repeat 1]

Per level: the baselines first (`python -c 'import recbench'`, the interpreter's own start; `python -m recbench list
models`, the CLI without Hydra), then `mode=plan model=M` for each model `list models` names (its default task,
perrec) and `mode=plan model=smollm2 task=T` for each config-only benchmark (conf/task/*.yaml of the `generic`
benchmark) and perrec. Each figure is the median of --repeat runs, given with its ratio to the interpreter baseline of
the same level (so two levels, or two machines, compare), the 1-minute load average before and after, and pass/fail
against the 5 s target. --before REV times the same commands on `git archive REV` (extracted to a temp folder and run
through the editable install's mapping), interleaved with this tree's, so before/after come from the same run.
The smollm2 plans and one other first run once unmeasured per tree (a warm derived-data cache: the GGUF tokenizer
folder, token counts; byte code).
Results: stdout and benchmarks/results/bench_plan.json.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_engine import Report  # noqa: E402 - the benchmarks' one reporter (prints with the load average)
from bench_startup import child_env, compile_tree  # noqa: E402 - every tree timed from its byte code
from loadgen import start_load, stop_load  # noqa: E402

PY = sys.executable
TARGET_S = 5.0
# run `python -m recbench` from another tree: point the editable install's mapping (recbench.tasks -> tasks/, conf, data)
# at that tree, then run the package as __main__
BOOT = ("import sys, runpy\n"
        "for m in [m for k, m in list(sys.modules.items()) if k.startswith('__editable__') and hasattr(m, 'MAPPING')]:\n"
        "    m.MAPPING.update({k: v.replace(@REPO@, @TREE@, 1) for k, v in m.MAPPING.items()})\n"
        "    m.NAMESPACES.update({k: [p.replace(@REPO@, @TREE@, 1) for p in v] for k, v in m.NAMESPACES.items()})\n"
        "sys.argv = ['recbench', *sys.argv[1:]]\n"
        "runpy.run_module('recbench', run_name='__main__', alter_sys=True)\n")


def recbench_argv(tree: Path, args: list[str]) -> list[str]:
    """`python -m recbench args` run from `tree`."""
    if tree == REPO:
        return [PY, "-m", "recbench", *args]
    return [PY, "-c", BOOT.replace("@REPO@", repr(str(REPO))).replace("@TREE@", repr(str(tree))), *args]


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, int, str]:
    """(wall s, exit code, output tail) of one command."""
    t = time.perf_counter()
    p = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return time.perf_counter() - t, p.returncode, p.stdout[-600:]


def rating_csv(folder: Path) -> Path:
    """A small ratings CSV for generic_rating_csv, whose data.path has no default (id, history, item, rating)."""
    path = folder / "ratings.csv"
    rows = [f"r{i},\"Heat (4); Up (5); Coco ({1 + i % 5})\",Item {i},{1 + i % 5}" for i in range(40)]
    path.write_text("id,history,item,rating\n" + "\n".join(rows) + "\n")
    return path


def cases(data: Path) -> list[tuple[str, list[str]]]:
    """(label, plan overrides) for every catalogue model and every config-only benchmark."""
    out = subprocess.run([PY, "-m", "recbench", "list", "models"], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout
    models = [ln.split()[0] for ln in out.splitlines() if ln.strip() and not ln.startswith(" ")]
    tasks = subprocess.run([PY, "-m", "recbench", "list", "tasks"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout
    generic = [ln.split()[0] for ln in tasks.splitlines() if len(ln.split()) > 1 and ln.split()[1] == "generic"]
    rows = [(f"model={m}", [f"model={m}"]) for m in models]
    rows += [(f"smollm2 task={t}", ["model=smollm2", f"task={t}",
                                    *([f"task.data.path={rating_csv(data)}"] if t == "generic_rating_csv" else [])])
             for t in [*generic, "perrec"]]
    return rows


def extract(rev: str) -> Path:
    """`git archive rev` in a temp folder (the repository itself is not touched)."""
    d = Path(tempfile.mkdtemp(prefix="bench_plan_before_"))
    arch = subprocess.run(["git", "archive", rev], cwd=REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(d)], input=arch, check=True)
    return d


def level(rep: Report, n: int, trees: dict[str, Path], rows: list, a: argparse.Namespace, env: dict) -> dict:
    """Every case on every tree with n added busy processes."""
    procs = start_load(n, a.max_load_s) if n else []
    sec = f"added_{n}"
    try:
        if n:
            rep.note(sec, f"{n} busy processes started; waiting {a.settle_s:.0f} s for the load average to rise")
            time.sleep(a.settle_s)
        base = [timed([PY, "-c", "import recbench"], REPO, env)[0] for _ in range(3)]
        base_s = statistics.median(base)
        rep.figure(sec, "baseline python -c 'import recbench' s", round(base_s, 3))
        cli = statistics.median(timed([PY, "-m", "recbench", "list", "models"], REPO, env)[0] for _ in range(3))
        rep.figure(sec, "baseline python -m recbench list models s", round(cli, 3), f"x{cli / base_s:.1f} baseline")
        table = {}
        for label, args in rows:
            for name, tree in trees.items():
                walls, load0 = [], os.getloadavg()[0]
                for _ in range(a.repeat):
                    wall, rc, tail = timed(recbench_argv(tree, ["mode=plan", *args]), tree, env)
                    if rc:
                        raise SystemExit(f"bench_plan: {name}: plan {' '.join(args)} failed ({rc}):\n{tail}")
                    walls.append(wall)
                med = statistics.median(walls)
                verdict = "ok" if med < TARGET_S else "OVER 5 s"
                table[(label, name)] = med
                rep.figure(sec, f"{name}: plan {label} s", round(med, 3),
                           f"x{med / base_s:.1f} baseline; load {load0:.1f} -> {os.getloadavg()[0]:.1f}; {verdict}",
                           ratio=round(med / base_s, 2), runs=[round(w, 3) for w in walls])
        return {"baseline_s": base_s, "table": table}
    finally:
        stop_load(procs)


def main() -> None:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--added", default="0,8", help="added busy processes per level, comma-separated")
    ap.add_argument("--settle-s", type=float, default=60.0, help="wait after starting the busy processes")
    ap.add_argument("--max-load-s", type=float, default=1200.0, help="a busy process ends by itself after this")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--before", help="a git revision to time too, interleaved (e.g. HEAD~3)")
    ap.add_argument("--after", default=str(REPO), help="the tree timed as 'after': a folder (default: this checkout) or a git revision")
    ap.add_argument("--only", default="", help="comma-separated substrings: time only the cases naming one")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "bench_plan.json"))
    a = ap.parse_args()
    rep = Report(Path(a.out), sys.argv[1:])
    print(f"bench_plan: {os.cpu_count()} CPUs, load {os.getloadavg()}; results -> {a.out}", flush=True)
    runs = Path(tempfile.mkdtemp(prefix="bench_plan_runs_"))
    env = child_env(RECBENCH_RUNS_DIR=str(runs), RECBENCH_CACHE_DIR=str(REPO / ".cache"), PYTHONUNBUFFERED="1")
    trees = {"after": Path(a.after).resolve() if Path(a.after).is_dir() else extract(a.after)}
    if a.before:
        trees = {"before": extract(a.before), **trees}
    for tree in trees.values():
        compile_tree(tree)
    rows = [r for r in cases(runs) if not a.only or any(s in r[0] for s in a.only.split(","))]
    rep.note("cases", f"{len(rows)} plans: {', '.join(r[0] for r in rows)}")
    for name, tree in trees.items():  # warm: byte code, the derived-data cache's tokenizer folder and counts
        for _, args in [r for r in rows if "smollm2" in r[0]][:6] + rows[:1]:
            timed(recbench_argv(tree, ["mode=plan", *args]), tree, env)
    levels = {n: level(rep, n, trees, rows, a, env) for n in (int(x) for x in a.added.split(","))}
    print("\n| added busy | load (1 min) | case | " + " | ".join(f"{t} s" for t in trees) + " | x baseline |")
    print("|---|---|---|" + "---|" * len(trees) + "---|")
    for n, lv in levels.items():
        for label, _ in rows:
            cells = " | ".join(f"{lv['table'][(label, t)]:.2f}" for t in trees)
            print(f"| {n} | {rep.data['sections'][f'added_{n}'][f'after: plan {label} s']['load_avg'][0]:.1f} | "
                  f"{label} | {cells} | {lv['table'][(label, 'after')] / lv['baseline_s']:.1f} |")


if __name__ == "__main__":
    main()
