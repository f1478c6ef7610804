"""The client CPU of the evaluation loop's per-answer bookkeeping (issue 29), alone: cache keys, call records and
prompts.jsonl, the response cache's rows, scoring and truth, samples.jsonl, progress; before (an older tree) and
after (this tree) in one invocation, on a real PerRecBench listwise workload.

    PYTHONPATH=. python benchmarks/bench_loop_records.py --data /tmp/scalebench/built/ml-10M \
        --derived /tmp/scalebench/cache/ml-10M/derived --before /work/main --label 60k

First (in this process, this tree) the workload is built once and pickled: every example's listwise request with
its real prompt, the stub server's answer to it and the Outcome the method parses from it. Then each tree, in its
own process (PYTHONPATH=tree), runs `EvalLoop.run` over it with a fresh run dir and response cache, the two trees
taking turns `--repeats` times (both see the same load on a shared machine). The method replays the stored requests
and outcomes; the backend answers from the table, `--window` in flight and `--per-pull` answers between two pulls
(as the openai backend's stream does; 7 on average in a 6,000-group stub run), so the CPU measured is the loop's
bookkeeping plus a small replay cost that is the same in both trees. CPU is time.process_time, the median of the
runs; the ratio is before / after. Both trees' samples.jsonl and prompts.jsonl are compared byte for byte (the
replayed answers carry fixed latencies) and the cache rows (less `created`).
Results: benchmarks/results/bench_loop_records_<label>.json (60k: 60,000 groups of ml-10M, 2026-11-26, before =
main at 237ad16, 5 turns each, load 1.1-1.6: 210.3 -> 125.2 us per answer, x1.68, identical; an earlier invocation
at load ~2 without the last change, the cache row's reused messages text: 158.8 -> 104.1, x1.52).

`--sqlite` times the response cache's rows alone (the workload's real requests and answers, `--per-pull` rows per
transaction) with SQLite's default checkpoint interval and this tree's: bench_loop_records_sqlite_<label>.json.
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _compose(data: Path):
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from recbench.cli.overrides import method_paths
    from recbench.run.construct import register_resolvers

    register_resolvers()
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="recbench.conf", version_base="1.3"):
        return compose(config_name="config", overrides=method_paths(
            ["task=perrec_built", f"task.data_dir={data}", "method=listwise", "model=openai-server", "model.name=stub",
             "model.backend.model=stub", "model.backend.base_url=http://127.0.0.1:9/v1"]))


def build_workload(a: argparse.Namespace) -> Path:
    """Examples (plain copies of what score/truth read), their requests, answers and outcomes, pickled."""
    from recbench.api.types import Example, Response
    from recbench.run.construct import LazyBackend, build_task
    from recbench.store import derived_cache
    from recbench.testing.openai_stub import listwise_answer

    cfg = _compose(a.data)
    derived_cache.configure(str(a.work / "derived"))
    task = build_task(cfg)
    method = task.make_method(cfg.method, cfg.sampling)
    examples = task.load()[: a.limit] if a.limit else task.load()
    method.prepare(examples)
    rows = []
    for ex in examples:
        gen = method.run(ex)
        reqs = next(gen)
        resps = []
        for r in reqs:
            text = listwise_answer(r.message_dicts())
            resps.append(Response(text=text, prompt_tokens=sum(len(c) for _, c in r.messages) // 4,
                                  completion_tokens=len(text) // 4, latency_s=0.0417))
        try:
            gen.send(resps)
            raise RuntimeError("listwise asked a second round")
        except StopIteration as stop:
            outcome = stop.value
        users = [{k: u[k] for k in ("user_id", "rating", "relative_rating", "avg_rating")} for u in ex.data["users"]]
        rows.append((Example(id=ex.id, data={"users": users}, meta=dict(ex.meta)), list(reqs), resps, outcome))
    out = a.work / "workload.pkl"
    with open(out, "wb") as f:
        pickle.dump({"identity": LazyBackend(cfg.model).identity(), "data": str(a.data), "rows": rows}, f, protocol=5)
    return out


class _Replay:
    """A method that yields each example's stored requests and returns its stored outcome."""

    name = "listwise"

    def __init__(self, by_id):
        self.by_id = by_id

    def prepare(self, examples) -> None:
        """Nothing to prepare."""

    def asks_one_round(self) -> bool:
        """One round."""
        return True

    def run(self, ex):
        """The stored requests, then the stored outcome."""
        _, reqs, _, outcome = self.by_id[ex.id]
        yield reqs
        return outcome


class _Table:
    """A backend that answers from the table: `window` in flight, `per_pull` answers between two pulls."""

    def __init__(self, identity, answers, window, per_pull):
        self._identity, self.answers, self.window, self.per_pull = identity, answers, window, per_pull

    def identity(self):
        """The stub model's identity."""
        return self._identity

    def stream(self, next_requests, on_response) -> None:
        """Answer in arrival order, pulling after every `per_pull` answers."""
        from collections import deque

        flight = deque(next_requests(self.window))
        while flight:
            for _ in range(min(self.per_pull, len(flight))):
                req = flight.popleft()
                on_response(req, self.answers[id(req)])
            flight.extend(next_requests(self.window - len(flight)))


def time_tree(pkl: Path, work: Path, repeats: int, window: int, per_pull: int) -> dict:
    """Run the loop over the workload `repeats` times in this process; CPU seconds of each run."""
    from recbench.run.construct import build_task
    from recbench.run.loop import EvalLoop
    from recbench.store.response_cache import ResponseCache
    from recbench.store.runstore import RunStore

    with open(pkl, "rb") as f:
        w = pickle.load(f)
    task = build_task(_compose(Path(w["data"])))
    by_id = {ex.id: row for row in w["rows"] for ex in [row[0]]}
    answers = {id(q): r for _, reqs, resps, _ in w["rows"] for q, r in zip(reqs, resps)}
    examples = [row[0] for row in w["rows"]]
    cpu = []
    for i in range(repeats):
        run, db = work / f"run{i}", work / f"cache{i}.sqlite"
        shutil.rmtree(run, ignore_errors=True)
        for s in ("", "-wal", "-shm"):
            Path(f"{db}{s}").unlink(missing_ok=True)
        store, cache = RunStore(run), ResponseCache(db)
        loop = EvalLoop(task, _Replay(by_id), _Table(w["identity"], answers, window, per_pull), cache, store,
                        progress=False)
        t = time.process_time()
        loop.run(examples)
        store.close()
        cache.close()
        cpu.append(time.process_time() - t)
    return {"cpu_s": cpu, "examples": len(examples)}


def time_sqlite(pkl: Path, work: Path, repeats: int, per_pull: int) -> dict:
    """The response cache's rows alone (ResponseCache.put_many, `per_pull` rows per transaction), with SQLite's
    default checkpoint interval (1000 pages) and with this tree's (WAL_CHECKPOINT_PAGES): CPU and wall per row."""
    from recbench.store import response_cache as rc
    from recbench.store.response_cache import KeyMaker, ResponseCache

    with open(pkl, "rb") as f:
        w = pickle.load(f)
    km = KeyMaker(w["identity"])
    items = [(km.key(q), "stub", q, r) for _, reqs, resps, _ in w["rows"] for q, r in zip(reqs, resps)]
    out: dict = {}
    for rnd in range(repeats):
        for pages in (1000, rc.WAL_CHECKPOINT_PAGES):
            db = work / "sqlite.sqlite"
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
            rc.WAL_CHECKPOINT_PAGES = pages
            cache = ResponseCache(db)
            t, c = time.perf_counter(), time.process_time()
            for i in range(0, len(items), per_pull):
                cache.put_many(items[i : i + per_pull])
            cache.close()
            row = out.setdefault(str(pages), {"cpu_us_per_row": [], "wall_us_per_row": []})
            row["cpu_us_per_row"].append(round((time.process_time() - c) / len(items) * 1e6, 1))
            row["wall_us_per_row"].append(round((time.perf_counter() - t) / len(items) * 1e6, 1))
            print(f"round {rnd} wal_autocheckpoint={pages}: {row['cpu_us_per_row'][-1]} us cpu, "
                  f"{row['wall_us_per_row'][-1]} us wall per row, load {os.getloadavg()[0]:.2f}", flush=True)
    for row in out.values():
        row["median_cpu_us"] = statistics.median(row["cpu_us_per_row"])
        row["median_wall_us"] = statistics.median(row["wall_us_per_row"])
    return out


def _cache_rows(db: Path) -> list:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("SELECT key, model, request, response FROM responses ORDER BY key").fetchall()
    finally:
        con.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, help="a built PerRecBench data dir (recbench.build perrec)")
    p.add_argument("--derived", type=Path, help="a derived-data cache folder to copy in (read-only source)")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--before", type=Path, help="the older checkout (the baseline)")
    p.add_argument("--label", default="local")
    p.add_argument("--work", type=Path, default=Path("/tmp/bench_loop_records"))
    p.add_argument("--repeats", type=int, default=5, help="runs of each tree, taking turns")
    p.add_argument("--window", type=int, default=64)
    p.add_argument("--per-pull", type=int, default=4)
    p.add_argument("--reuse", action="store_true", help="reuse the pickled workload of an earlier invocation")
    p.add_argument("--sqlite", action="store_true", help="time the response cache's rows alone, by checkpoint interval")
    p.add_argument("--time-only", type=Path, help=argparse.SUPPRESS)  # the child: time this tree on this workload
    p.add_argument("--round", type=int, default=0, help=argparse.SUPPRESS)  # the child's round: its run dir
    a = p.parse_args()
    if a.time_only:
        print(json.dumps(time_tree(a.time_only, a.work / f"round{a.round}", a.repeats, a.window, a.per_pull)))
        return
    a.work.mkdir(parents=True, exist_ok=True)
    if a.derived and not (a.work / "derived").exists():
        shutil.copytree(a.derived, a.work / "derived")
    pkl = a.work / "workload.pkl"
    if not (a.reuse and pkl.exists()):
        t = time.time()
        build_workload(a)
        print(f"workload built in {time.time() - t:.1f} s", flush=True)
    if a.sqlite:
        res = {"label": a.label, "limit": a.limit, "per_pull": a.per_pull, "rows": time_sqlite(pkl, a.work, a.repeats,
                                                                                              a.per_pull)}
        out = ROOT / "benchmarks" / "results" / f"bench_loop_records_sqlite_{a.label}.json"
        out.write_text(json.dumps(res, indent=2))
        print(f"results: {out}")
        return
    trees = ([("before", a.before)] if a.before else []) + [("after", ROOT)]
    rows = {name: {"cpu_s": [], "examples": 0} for name, _ in trees}
    for rnd in range(a.repeats):  # the trees take turns, one run each, so both see the same load
        for name, tree in trees:
            sub = a.work / name
            env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
            out = subprocess.run([sys.executable, __file__, "--time-only", str(pkl), "--work", str(sub), "--repeats",
                                  "1", "--window", str(a.window), "--per-pull", str(a.per_pull), "--round", str(rnd)],
                                 env=env, cwd=str(tree), capture_output=True, text=True)
            if out.returncode:
                sys.exit(f"{name} failed:\n{out.stderr[-3000:]}")
            r = json.loads(out.stdout.splitlines()[-1])
            rows[name]["cpu_s"] += r["cpu_s"]
            rows[name]["examples"] = r["examples"]
            print(f"round {rnd} {name}: {r['cpu_s'][0]:.2f} s cpu, load {os.getloadavg()[0]:.2f}", flush=True)
            if rnd:  # round 0's files are compared below; the others only take room
                shutil.rmtree(sub / f"round{rnd}", ignore_errors=True)
    for name, r in rows.items():
        r["median_cpu_s"] = statistics.median(r["cpu_s"])
        r["us_per_answer"] = round(r["median_cpu_s"] / r["examples"] * 1e6, 1)
        print(f"{name}: median {r['median_cpu_s']:.2f} s cpu, {r['us_per_answer']} us per answer", flush=True)
    res = {"label": a.label, "data": str(a.data), "limit": a.limit, "window": a.window, "per_pull": a.per_pull,
           "repeats": a.repeats, "rows": rows, "load_end": os.getloadavg()[0]}
    if "before" in rows:
        b, f = a.work / "before", a.work / "after"
        res["ratio_before_over_after"] = round(rows["before"]["median_cpu_s"] / rows["after"]["median_cpu_s"], 2)
        b, f = b / "round0", f / "round0"
        res["identical"] = {name: (b / "run0" / name).read_bytes() == (f / "run0" / name).read_bytes()
                            for name in ("samples.jsonl", "prompts.jsonl")}
        res["identical"]["cache rows"] = _cache_rows(b / "cache0.sqlite") == _cache_rows(f / "cache0.sqlite")
        print(f"ratio before/after {res['ratio_before_over_after']}, identical {res['identical']}", flush=True)
    out = ROOT / "benchmarks" / "results" / f"bench_loop_records_{a.label}.json"
    out.write_text(json.dumps(res, indent=2))
    print(f"results: {out}")


if __name__ == "__main__":
    main()
