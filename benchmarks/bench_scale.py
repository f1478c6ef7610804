"""Scale benchmark (issue 29): PerRecBench from generated MovieLens-like ratings at 1M .. 100M, every step timed.

    python benchmarks/bench_scale.py --label before --sizes 1M,10M --keep /tmp/scalebench
    python benchmarks/bench_scale.py --label before --sizes 25M,100M --steps build --keep /tmp/scalebench
    python benchmarks/bench_scale.py --label after --sizes 100M --steps build --build-source parquet --mem-gb 8 --keep /tmp/scalebench
    python benchmarks/bench_scale.py --label shapes_after --sizes 25M --steps build --shapes default,wide \
        --mem-gb 3 --keep /tmp/scalebench
    python benchmarks/bench_scale.py --quick          # smoke test: 50K ratings, every step, a temporary folder

Per size and shape (`--shapes`: `default`, and `wide`: 2.5x the users and items, power-law activity; scale_data.py
SHAPES): generate the data once (`benchmarks/scale_data.py`, seeded; reused from --keep when present), then the
steps (a non-default shape's rows are named with it: "build (wide)"), each its own process under `/usr/bin/time -v`
with a resident-memory limit (`--mem-gb`, default 10;
`benchmarks/measure_step.py`):

- build: `python -m recbench.build perrec --source movielens --per-size 20000` (60,000 groups where the data has them);
  with `--build-source parquet`, `--source parquet` on a parquet copy of the ratings (row "build (parquet)")
- run: `method=user_avg` with an empty derived-data cache (first load), again with it filled (cached), and
  `method=bm25_history` (cached)
- stub: a listwise run against the stub OpenAI server (`recbench/testing/openai_stub.py`, 20 ms per request,
  `model.backend.concurrency=64`, an empty response cache), its asyncio engine unless `--stub-engine threads`: the
  stub shares the two cores with the run it measures, and a server elsewhere would not
- compare: `python -m recbench.compare USER_AVG_RUN BM25_RUN --metric ptc`
- report: `python -m recbench.report USER_AVG_RUN BM25_RUN`
- view: `python -m recbench.view` on the stub run (the run with prompts), or the bm25 run when there is none

Order: build, the three runs, compare, report, then the stub run (the longest) and view.

Each row (step, data, wall, peak RSS, exit: ok / killed / oom / error, load averages) is printed as soon as it is
measured and the JSON (`benchmarks/results/bench_scale_<label>.json`) is rewritten after every row, so a killed or
failing step is a row and the next steps go on (steps that need a failed step's output are rows "skipped: ...").
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure_step import run_measured  # noqa: E402
from scale_data import SHAPES, parse_count  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("build", "run", "stub", "compare", "report", "view")
PY = sys.executable


class Bench:
    """One benchmark session: the rows measured so far and where they are written."""

    def __init__(self, a: argparse.Namespace, keep: Path, out_json: Path):
        self.a, self.keep, self.out_json = a, keep, out_json
        self.rows: list[dict] = []
        self.shape = "default"  # the shape being measured (one_size's data, builds and row names)
        self.meta = {"label": a.label, "command": " ".join([Path(PY).name, *sys.argv]), "started": _now(),
                     "machine": {"cpus": os.cpu_count(), "mem_total_gb": _mem_total_gb(), "host": platform.node()},
                     "mem_limit_gb": a.mem_gb, "per_size": a.per_size, "stub_latency_s": a.stub_latency,
                     "stub_concurrency": a.stub_concurrency,
                     "stub_engine": a.stub_engine, "shapes": a.shapes, "keep": str(keep)}

    @property
    def tag(self) -> str:
        """The shape's suffix of data, build and run folders ('' for the default shape)."""
        return "" if self.shape == "default" else f"-{self.shape}"

    def named(self, step: str) -> str:
        """A step's row name: with the shape unless it is the default one ("build (wide)")."""
        return step if self.shape == "default" else f"{step} ({self.shape})"

    def step(self, size: str, step: str, cmd: list[str], env: dict | None = None, **extra) -> dict:
        """Measure one command, print and save its row."""
        step = self.named(step)
        log = self.keep / "logs" / f"{self.a.label}-{size}-{step.replace(' ', '_')}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        r = run_measured(cmd, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, cwd=str(ROOT),
                         mem_gb=self.a.mem_gb, as_gb=self.a.as_gb, timeout_s=self.a.step_timeout, log=log)
        row = {"size": size, "step": step, "shape": self.shape, **extra, **r, "cmd": " ".join(cmd), "log": str(log)}
        return self.add(row)

    def skip(self, size: str, step: str, why: str) -> dict:
        """A step that could not run: a row saying why."""
        return self.add({"size": size, "step": self.named(step), "shape": self.shape, "exit": f"skipped: {why}", "wall_s": None, "peak_rss_gb": None,
                         "load_end": [round(x, 2) for x in os.getloadavg()]})

    def add(self, row: dict) -> dict:
        self.rows.append(row)
        rss = f"{row['peak_rss_gb']:.2f} GB" if row.get("peak_rss_gb") is not None else "-"
        wall = f"{row['wall_s']:.1f} s" if row.get("wall_s") is not None else "-"
        wall += f" (cpu {row['cpu_s']:.1f} s)" if row.get("cpu_s") is not None else ""
        note = "; ".join(f"{k}={row[k]}" for k in ("groups", "examples", "requests", "html_mb", "bound_s") if k in row)
        print(f"[{_now()}] {row['size']:>5} {row['step']:<28} {wall:>24} {rss:>9}  {row['exit']}  "
              f"load {row['load_end'][0]:.1f}" + (f"  ({note})" if note else ""), flush=True)
        self.save()
        return row

    def save(self) -> None:
        """Rewrite the results file: this session's rows replace earlier rows of the same size and step; other rows (from
        earlier or concurrent sessions with the same label) stay, so sizes and steps may be measured by separate
        commands."""
        self.out_json.parent.mkdir(parents=True, exist_ok=True)
        mine = {(r["size"], r["step"]) for r in self.rows}
        with open(Path(tempfile.gettempdir()) / f"{self.out_json.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            old = json.loads(self.out_json.read_text()) if self.out_json.exists() else {}
            sessions = [x for x in old.get("sessions", []) if x.get("started") != self.meta["started"]
                        or x.get("command") != self.meta["command"]]
            rows = [r for r in old.get("rows", []) if (r.get("size"), r.get("step")) not in mine]
            merged = {"label": self.a.label, "sessions": [*sessions, self.meta], "rows": [*rows, *self.rows]}
            tmp = self.out_json.with_suffix(".tmp")
            tmp.write_text(json.dumps(merged, indent=1) + "\n")
            tmp.replace(self.out_json)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _mem_total_gb() -> float:
    import psutil

    return round(psutil.virtual_memory().total / 1e9, 1)


def find_run(runs_dir: Path) -> Path | None:
    """The run dir (holding metrics.json) under a runs folder, or None."""
    found = sorted(runs_dir.rglob("metrics.json")) if runs_dir.exists() else []
    return found[0].parent if found else None


def generate(b: Bench, size: str) -> Path | None:
    """The size's MovieLens-like data (generated once, reused when --keep has it); None when generation failed."""
    data = b.keep / "data" / f"ml-{size}{b.tag}"
    if (data / "generated.json").exists():
        return data
    shutil.rmtree(data, ignore_errors=True)
    cmd = [PY, str(ROOT / "benchmarks" / "scale_data.py"), "movielens", "--ratings", size, "--out", str(data),
           "--seed", str(b.a.seed), "--shape", b.shape]
    row = b.step(size, "generate (not a recbench step)", cmd)
    if row["exit"] != "ok":
        return None
    info = json.loads(Path(row["log"]).read_text().strip().splitlines()[-1])
    (data / "generated.json").write_text(json.dumps(info) + "\n")
    row.update(ratings=info["ratings"], disk_mb=round(info["bytes"] / 1e6, 1))
    b.save()
    return data


def parquet_copy(b: Bench, size: str, data: Path) -> Path | None:
    """The size's ratings as parquet (user_id, item_id, rating, timestamp: what `--source parquet` reads), converted
    once with DuckDB into --keep (a row of its own, not a recbench step); None when the conversion failed."""
    out = b.keep / "data" / f"ml-{size}{b.tag}-parquet" / "ratings.parquet"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    sql = (f"COPY (SELECT userId AS user_id, movieId AS item_id, rating, timestamp FROM read_csv('{data}/ratings.csv', "
           "header=true, types={'userId': 'VARCHAR', 'movieId': 'VARCHAR', 'rating': 'DOUBLE', 'timestamp': 'BIGINT'})) "
           f"TO '{out}.tmp' (FORMAT parquet, COMPRESSION zstd)")
    code = (f"import duckdb, os; c = duckdb.connect(); c.execute(\"SET memory_limit='2GB'\"); c.execute({sql!r}); "
            f"os.replace('{out}.tmp', '{out}')")
    row = b.step(size, "convert to parquet (not a recbench step)", [PY, "-c", code])
    return out if row["exit"] == "ok" and out.exists() else None


def build(b: Bench, size: str, data: Path, built: Path) -> bool:
    """The build step (from the MovieLens CSV, or with --build-source parquet from its parquet copy); True when a
    build is there afterwards."""
    shutil.rmtree(built, ignore_errors=True)
    info = json.loads((data / "generated.json").read_text())
    src, step, what = ["--source", "movielens", "--input", str(data)], "build", f"{info['bytes'] / 1e6:,.0f} MB CSV"
    if b.a.build_source == "parquet":
        pq = parquet_copy(b, size, data)
        if pq is None:
            b.skip(size, "build (parquet)", "the parquet conversion failed")
            return False
        src, step, what = ["--source", "parquet", "--input", str(pq)], "build (parquet)", \
            f"{pq.stat().st_size / 1e6:,.0f} MB parquet"
    cmd = [PY, "-m", "recbench.build", "perrec", *src, "--out", str(built), "--per-size", str(b.a.per_size),
           "--seed", str(b.a.seed)]
    row = b.step(size, step, cmd, data=f"{info['ratings']:,} ratings ({what})")
    if row["exit"] == "ok" and (built / "stats.json").exists():
        st = json.loads((built / "stats.json").read_text())
        row.update(groups=st.get("groups"), heldout_groups=st.get("heldout_groups"),
                   built_mb=round(sum(p.stat().st_size for p in built.iterdir()) / 1e6, 1))
        b.save()
        return True
    return False


def run_step(b: Bench, size: str, step: str, built: Path, runs: Path, cache: Path, overrides: list[str]) -> Path | None:
    """One `python -m recbench` run into a fresh runs folder; returns its run dir when it finished."""
    shutil.rmtree(runs, ignore_errors=True)
    cmd = [PY, "-m", "recbench", "task=perrec_built", f"task.data_dir={built}", "run.progress=false", *overrides]
    row = b.step(size, step, cmd, env={"RECBENCH_RUNS_DIR": str(runs), "RECBENCH_CACHE_DIR": str(cache)})
    run = find_run(runs)
    if run is not None:
        m = json.loads((run / "metrics.json").read_text())
        row.update(examples=m.get("n") or m.get("n_examples") or _count_lines(run / "samples.jsonl"),
                   ptc=_ptc(m))
        b.save()
    return run if row["exit"] == "ok" else None


def _count_lines(p: Path) -> int | None:
    if not p.exists():
        return None
    with open(p, "rb") as f:
        return sum(1 for _ in f)


def _ptc(m: dict) -> float | None:
    """The overall PTC of a metrics.json (its layout: {"metrics": {"ptc": {"mean": ...}}} or flat)."""
    for key in ("metrics", "overall", None):
        d = m.get(key, {}) if key else m
        v = d.get("ptc") if isinstance(d, dict) else None
        if isinstance(v, dict):
            v = v.get("mean", v.get("value"))
        if isinstance(v, (int, float)):
            return round(float(v), 4)
    return None


def stub_step(b: Bench, size: str, built: Path, runs: Path, cache: Path) -> Path | None:
    """The listwise run against the stub server (fresh response cache, derived data cached)."""
    import psutil

    from recbench.testing.openai_stub import start_stub_process

    responses = cache / f"stub_responses_{b.a.label}.sqlite"
    responses.unlink(missing_ok=True)
    with start_stub_process(latency_s=b.a.stub_latency, engine=b.a.stub_engine) as stub:
        overrides = ["method=listwise", "model=openai-server", "model.name=stub-20ms", "model.backend.model=stub",
                     f"model.backend.base_url={stub.base_url}", f"model.backend.concurrency={b.a.stub_concurrency}",
                     f"cache.path={responses}"] + (["+model.backend.http_process=true"] if b.a.stub_http_process else [])
        step = "stub listwise run" + (" (http_process)" if b.a.stub_http_process else "")
        run = run_step(b, size, step, built, runs, cache, overrides)
        paid = stub.stats().get("paid")
        server_cpu = sum(psutil.Process(stub.proc.pid).cpu_times()[:2])  # the server shares the two cores
    row = b.rows[-1]
    if paid is not None:
        row.update(requests=paid, bound_s=round(paid * b.a.stub_latency / b.a.stub_concurrency, 1),
                   server_cpu_s=round(server_cpu, 1), server_engine=b.a.stub_engine,
                   loop_s=_loop_seconds(b, size, step))
        b.save()
    return run


def _loop_seconds(b: Bench, size: str, step: str) -> float | None:
    """The run's own 'this run: ... wall Ns' (the loop, without start-up) from the step's log."""
    log = b.keep / "logs" / f"{b.a.label}-{size}-{b.named(step).replace(' ', '_')}.log"
    m = re.search(r"\| wall ([0-9.]+)s", log.read_text(errors="replace")) if log.exists() else None
    return float(m.group(1)) if m else None


def one_size(b: Bench, size: str, steps: set[str]) -> None:
    """Every requested step at one size; a failed step's dependents become 'skipped' rows."""
    data = generate(b, size)
    if data is None:
        b.skip(size, "all steps", "data generation failed")
        return None
    built, runs, cache = (b.keep / d / f"ml-{size}{b.tag}" for d in ("built", "runs", "cache"))
    if "build" in steps:
        ok = build(b, size, data, built)
    else:
        ok = (built / "groups.jsonl").exists()
    if not ok:
        for s in [s for s in STEPS if s in steps and s != "build"]:
            b.skip(size, s, "no build (the build step failed or was not run)")
        return None
    ua = bm = stub = None
    if "run" in steps:
        shutil.rmtree(cache, ignore_errors=True)
        ua = run_step(b, size, "run user_avg (first load)", built, runs / "user_avg_first", cache, ["method=user_avg"])
        run_step(b, size, "run user_avg (cached)", built, runs / "user_avg_cached", cache, ["method=user_avg"])
        bm = run_step(b, size, "run bm25_history (cached)", built, runs / "bm25_history", cache, ["method=bm25_history"])
    else:
        ua, bm = find_run(runs / "user_avg_first"), find_run(runs / "bm25_history")
    pair_steps(b, size, steps & {"compare", "report"}, ua, bm, None)  # before the long stub run
    if "stub" in steps:
        stub = stub_step(b, size, built, runs / "stub_listwise", cache)
    else:
        stub = find_run(runs / "stub_listwise")
    pair_steps(b, size, steps & {"view"}, ua, bm, stub)
    return None


def pair_steps(b: Bench, size: str, steps: set[str], ua: Path | None, bm: Path | None, stub: Path | None) -> None:
    """compare and report on the two model-free runs, view on the stub run (or the bm25 run)."""
    need = "needs the user_avg and bm25_history runs"
    if "compare" in steps:
        if ua and bm:
            out = b.keep / "compare" / f"ml-{size}{b.tag}-{b.a.label}.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            b.step(size, "compare --metric ptc", [PY, "-m", "recbench.compare", str(ua), str(bm), "--metric", "ptc",
                                                  "--json", str(out)])
        else:
            b.skip(size, "compare --metric ptc", need)
    if "report" in steps:
        if ua and bm:
            out = b.keep / "reports" / f"ml-{size}{b.tag}-{b.a.label}"
            shutil.rmtree(out, ignore_errors=True)
            b.step(size, "report", [PY, "-m", "recbench.report", str(ua), str(bm), "-o", str(out)])
        else:
            b.skip(size, "report", need)
    if "view" in steps:
        target = stub or bm
        if target:
            html = b.keep / "view" / f"ml-{size}{b.tag}-{b.a.label}.html"
            html.parent.mkdir(parents=True, exist_ok=True)
            html.unlink(missing_ok=True)
            row = b.step(size, "view", [PY, "-m", "recbench.view", str(target), "--out", str(html)],
                         data=f"run {target.relative_to(b.keep)}")
            if html.exists():
                row["html_mb"] = round(html.stat().st_size / 1e6, 1)
                b.save()
        else:
            b.skip(size, "view", "needs the run it shows")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags."""
    from recbench.testing.openai_stub import ENGINES

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--label", default=None, help="before | after | any name: the results file's suffix")
    ap.add_argument("--sizes", default="1M,10M", help="comma list of rating counts: 1M,10M,25M,100M (K and M suffixes)")
    ap.add_argument("--shapes", default="default", help="comma list of data shapes: default, wide (scale_data.py SHAPES)")
    ap.add_argument("--steps", default=",".join(STEPS), help=f"comma subset of {','.join(STEPS)}")
    ap.add_argument("--keep", default=None, help="folder for data, builds, runs and logs, kept (default: a temp folder, removed)")
    ap.add_argument("--quick", action="store_true", help="smoke test: --sizes 50K --per-size 100, results in the keep folder")
    ap.add_argument("--per-size", type=int, default=20000, help="groups per difficulty (3 difficulties)")
    ap.add_argument("--mem-gb", type=float, default=10.0, help="resident-memory limit per step (the process tree)")
    ap.add_argument("--as-gb", type=float, default=None, help="also an address-space limit (prlimit --as)")
    ap.add_argument("--step-timeout", type=float, default=3600.0, help="seconds before a step is killed")
    ap.add_argument("--stub-latency", type=float, default=0.02)
    ap.add_argument("--stub-concurrency", type=int, default=64)
    ap.add_argument("--stub-engine", choices=ENGINES, default="asyncio",
                    help="the stub server's engine (recbench/testing/openai_stub.py ENGINES): asyncio takes about 30%% "
                         "less of the cores the client shares with it")
    ap.add_argument("--stub-http-process", action="store_true",
                    help="the stub run with model.backend.http_process=true (HTTP on a second core)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--build-source", choices=["movielens", "parquet"], default="movielens",
                    help="the build step's input: the generated CSV, or its parquet copy (converted once into --keep)")
    ap.add_argument("--out", default=None, help="results JSON (default benchmarks/results/bench_scale_<label>.json)")
    a = ap.parse_args(argv)
    if a.quick:
        a.sizes = "50K" if a.sizes == "1M,10M" else a.sizes
        a.per_size = 100 if a.per_size == 20000 else a.per_size
    a.label = a.label or ("quick" if a.quick else "run")
    if set(a.shapes.split(",")) - set(SHAPES):
        ap.error(f"--shapes: valid shapes are {', '.join(SHAPES)}")
    bad = sorted(set(a.steps.split(",")) - set(STEPS))
    if bad:
        ap.error(f"unknown step(s) {', '.join(bad)}; valid: {', '.join(STEPS)}")
    for s in a.sizes.split(","):
        try:
            parse_count(s)
        except ValueError:
            ap.error(f"--sizes: '{s}' is not a count like 1M, 250K or 5000")
    return a


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark; prints a row per measured step and writes the results JSON."""
    a = parse_args(argv)
    tmp = None if a.keep else tempfile.mkdtemp(prefix="bench_scale_")
    keep = Path(a.keep or tmp).resolve()
    default_out = (keep if a.quick else ROOT / "benchmarks" / "results") / f"bench_scale_{a.label}.json"
    b = Bench(a, keep, Path(a.out) if a.out else default_out)
    print(f"bench_scale: label={a.label} sizes={a.sizes} steps={a.steps} keep={keep} -> {b.out_json}", flush=True)
    try:
        for size in a.sizes.split(","):
            for shape in a.shapes.split(","):
                b.shape = shape
                one_size(b, size.strip(), set(a.steps.split(",")))
    finally:
        b.meta["finished"] = _now()
        b.save()
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"wrote {b.out_json}")


if __name__ == "__main__":
    main()
