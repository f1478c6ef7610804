"""The client's cost in a stub-server listwise run (issue 29): the same PerRecBench run in one process and with the
openai backend's HTTP side in a second process (`+model.backend.http_process=true`), and optionally an older tree,
each against the stub OpenAI server (20 ms per request, 64 in flight), with a fresh response cache.

    python benchmarks/bench_stub_client.py --data /tmp/scalebench/built/ml-10M --derived /tmp/scalebench/cache/ml-10M/derived --label idle
    python benchmarks/bench_stub_client.py --data DIR --limit 6000 --before /path/to/older/checkout --label quick

Each run is its own process under `/usr/bin/time -v` (`benchmarks/measure_step.py`: wall, CPU seconds of the run
and its children, peak RSS of one process and of the process tree). Per row: the loop's seconds (metrics.json
`this_invocation.wall_time_s`), the requests the stub answered, the bound (requests x latency / in flight), and the
ratios of wall and loop to the first row's, measured in the same invocation. Every row's samples.jsonl (less
latencies), prompts.jsonl and metrics.json (less this_invocation and run_dir) are compared with the first row's:
`identical` must be true. Results: benchmarks/results/bench_stub_client_<label>.json, rewritten after every row.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure_step import run_measured  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def run_one(a: argparse.Namespace, name: str, tree: Path, extra: list[str]) -> dict:
    """One listwise run against a fresh stub server and a fresh response cache; its row."""
    from recbench.testing.openai_stub import start_stub_process

    runs, cache = a.work / "runs" / name, a.work / "cache"
    shutil.rmtree(runs, ignore_errors=True)
    resp = cache / f"responses_{name}.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{resp}{suffix}").unlink(missing_ok=True)
    env = {**os.environ, "RECBENCH_RUNS_DIR": str(runs), "RECBENCH_CACHE_DIR": str(cache), "PYTHONPATH": str(tree)}
    with start_stub_process(latency_s=a.latency, engine=a.stub_engine) as stub:
        cmd = [sys.executable, "-m", "recbench", "task=perrec_built", f"task.data_dir={a.data}", "run.progress=false",
               "method=listwise", "model=openai-server", "model.name=stub", "model.backend.model=stub",
               f"model.backend.base_url={stub.base_url}", f"model.backend.concurrency={a.concurrency}",
               f"cache.path={resp}", *([f"limit={a.limit}"] if a.limit else []), *extra]
        row = run_measured(cmd, env=env, cwd=str(tree), mem_gb=a.mem_gb)
        paid = stub.stats().get("paid") or 0
    run = next(iter(runs.rglob("metrics.json")), None)
    inv = json.loads(run.read_text()).get("this_invocation", {}) if run else {}
    row.update(name=name, tree=str(tree), overrides=extra, requests=paid, stub_engine=a.stub_engine,
               bound_s=round(paid * a.latency / a.concurrency, 2), loop_s=round(inv.get("wall_time_s", 0.0), 2),
               run_dir=str(run.parent) if run else None)
    return row


def _samples(d: Path) -> dict[str, dict]:
    out = {}
    with open(d / "samples.jsonl") as f:
        for line in f:
            r = json.loads(line)
            for c in r.get("calls", []):
                c.pop("latency_s", None)
            out[r["id"]] = r
    return out


def _metrics(d: Path) -> dict:
    m = json.loads((d / "metrics.json").read_text())
    return {k: v for k, v in m.items() if k not in ("this_invocation", "run_dir")}


def same_run(a: str, b: str) -> bool:
    """Same records (less latencies), the same prompts and the same metrics (less this_invocation, run_dir)."""
    da, db = Path(a), Path(b)
    return (_samples(da) == _samples(db) and sorted(open(da / "prompts.jsonl")) == sorted(open(db / "prompts.jsonl"))
            and _metrics(da) == _metrics(db))


def main() -> None:
    from recbench.testing.openai_stub import ENGINES

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, required=True, help="a built PerRecBench data dir (recbench.build perrec)")
    p.add_argument("--derived", type=Path, help="a derived-data cache folder to copy in (a cached start-up)")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--before", type=Path, help="an older checkout to run first, as the baseline row")
    p.add_argument("--label", default="local")
    p.add_argument("--work", type=Path, default=Path("/tmp/bench_stub_client"))
    p.add_argument("--latency", type=float, default=0.02)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--mem-gb", type=float, default=6.0)
    p.add_argument("--stub-engine", choices=ENGINES, default="asyncio",
                   help="the stub server's engine (recbench/testing/openai_stub.py ENGINES)")
    a = p.parse_args()
    (a.work / "cache").mkdir(parents=True, exist_ok=True)
    if a.derived and not (a.work / "cache" / "derived").exists():
        shutil.copytree(a.derived, a.work / "cache" / "derived")
    plan = ([("before", a.before, [])] if a.before else []) + [
        ("one process", ROOT, []), ("http_process", ROOT, ["+model.backend.http_process=true"])]
    out = ROOT / "benchmarks" / "results" / f"bench_stub_client_{a.label}.json"
    rows: list[dict] = []
    for name, tree, extra in plan:
        row = run_one(a, name.replace(" ", "_"), tree.resolve(), extra)
        first = rows[0] if rows else row
        row["wall_ratio"] = round(row["wall_s"] / first["wall_s"], 3)
        row["loop_ratio"] = round(row["loop_s"] / first["loop_s"], 3) if first["loop_s"] else None
        row["identical"] = same_run(first["run_dir"], row["run_dir"]) if row["run_dir"] and first["run_dir"] else None
        rows.append(row)
        print(f"{name}: wall {row['wall_s']} s (x{row['wall_ratio']}), loop {row['loop_s']} s (x{row['loop_ratio']}), "
              f"cpu {row['cpu_s']} s, peak RSS {row['peak_rss_gb']} GB (tree {row['max_tree_rss_gb']}), "
              f"{row['requests']} requests (bound {row['bound_s']} s), identical {row['identical']}, "
              f"load {row['load_start']} -> {row['load_end']}, {row['exit']}", flush=True)
        out.write_text(json.dumps({"label": a.label, "data": str(a.data), "limit": a.limit, "latency_s": a.latency,
                                   "concurrency": a.concurrency, "rows": rows}, indent=2))
    print(f"results: {out}")


if __name__ == "__main__":
    main()
