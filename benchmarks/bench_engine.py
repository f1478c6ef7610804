"""Engine benchmark (issue 11), one command: every figure printed and flushed as soon as it is measured, with the
machine's load average, and written to benchmarks/results/bench_engine.json after each figure.

    python benchmarks/bench_engine.py [--quick] [--only reference,capacity,...] [--skip sigkill,hf]

Sections (targets in brackets; ratios are measured side by side in one run, absolute times swing with load):
  reference   sequential reference client (benchmarks/reference_client.py: one request in flight, a new client per
              request, pairwise heapsort per group) vs `python -m recbench task=perrec model=smollm2-openai
              model.backend.base_url=<stub> method=listwise|pairwise` on the bundled groups, stub latency 200 ms
              [speedup >= 10x listwise, >= 20x pairwise]; request counts of both
  capacity    OpenAIBackend.generate at concurrency 32 vs ideal = requests x latency / concurrency [>= 0.8]
  stragglers  5% of prompts answered after 3 s, pairwise through the CLI: wall vs the straggler-free wall
              [<= 1.3 x clean + 3 s]
  replay      600 groups x (pointwise, pairwise, listwise), every answer from the cache, new run dirs: wall and
              CPU [< 2 s]
  rerun       a finished `task=perrec model=smollm2 method=listwise limit=N` run again [< 3 s, loads no model];
              `python -m recbench --help` [< 1.5 s]
  sigkill     a pairwise run against the stub SIGKILLed 20 times at random points, then finished: aggregates equal
              the fault-free run's; paid requests [<= fault-free + 20 x concurrency]
  hf          eval loop vs raw batched HFBackend.generate on the same listwise prompts (real SmolLM2) [>= 0.9]
  vllm        benchmarks/bench_backends.py in .venv-vllm (loop vs raw LLM.chat) [>= 0.95]; skipped without that venv
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

SECTIONS = ("reference", "capacity", "stragglers", "replay", "rerun", "sigkill", "hf", "vllm")
PY = sys.executable
STRATIFIED = ("run.limit_strategy=stratified",)  # a --limit takes easy, medium and hard groups alike


class Report:
    """Prints each figure at once (with the load average) and rewrites the JSON file after each one."""

    def __init__(self, out: Path, argv: list[str]):
        self.out = out
        self.data: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "argv": argv,
                                     "cpus": os.cpu_count(), "load_avg_start": os.getloadavg(), "sections": {}}
        out.parent.mkdir(parents=True, exist_ok=True)

    def figure(self, section: str, name: str, value: Any, note: str = "", **extra: Any) -> Any:
        """Record and print one measured figure."""
        load = os.getloadavg()
        shown = f"{value:.3f}" if isinstance(value, float) else str(value)
        print(f"[{section}] {name} = {shown}{('  ' + note) if note else ''}  (load {load[0]:.1f})", flush=True)
        self.data["sections"].setdefault(section, {})[name] = {"value": value, "load_avg": load, **extra}
        self.save()
        return value

    def note(self, section: str, text: str) -> None:
        """Print (and keep) a line of context."""
        print(f"[{section}] {text}", flush=True)
        self.data["sections"].setdefault(section, {}).setdefault("_notes", []).append(text)
        self.save()

    def save(self) -> None:
        """Write the JSON file (atomically)."""
        self.data["load_avg_end"] = os.getloadavg()
        tmp = self.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=str))
        tmp.replace(self.out)


# ---- running the CLI -----------------------------------------------------------------------------------
def cli_env(root: Path, **extra: str) -> dict[str, str]:
    """Environment with a fresh cache and runs dir under root."""
    return {**os.environ, "RECBENCH_CACHE_DIR": str(root / "cache"), "RECBENCH_RUNS_DIR": str(root / "runs"),
            "PYTHONUNBUFFERED": "1", **extra}


def recbench_cmd(*overrides: str) -> list[str]:
    """`python -m recbench <overrides> run.progress=false`."""
    return [PY, "-m", "recbench", *overrides, "run.progress=false"]


def run_cli(cmd: list[str], env: dict[str, str], timeout: float = 3600) -> tuple[float, int, str]:
    """Run a command; (wall seconds, exit code, last 3000 chars of its output)."""
    t = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    return time.perf_counter() - t, p.returncode, p.stdout[-3000:]


def find_metrics(root: Path) -> dict[str, Any]:
    """The one metrics.json under root/runs."""
    found = sorted((root / "runs").rglob("metrics.json"))
    if len(found) != 1:
        raise RuntimeError(f"expected one metrics.json under {root / 'runs'}, found {len(found)}")
    return json.loads(found[0].read_text())


def aggregates(m: dict[str, Any]) -> dict[str, Any]:
    """The parts of metrics.json that must not depend on kills, order or timing."""
    c = m.get("counts", {})
    return {"metrics": m.get("metrics"), "breakdown": m.get("breakdown"),
            "counts": {k: c.get(k) for k in ("examples", "parsed", "parse_failures", "parse_repaired",
                                             "prompt_tokens", "completion_tokens")},
            "complete": m.get("complete")}


def perrec_openai(stub_url: str, method: str, limit: Optional[int], *extra: str) -> list[str]:
    """The CLI command for PerRecBench through the openai backend at stub_url."""
    lim = [f"limit={limit}", *STRATIFIED] if limit else []
    return recbench_cmd("task=perrec", "model=smollm2-openai", f"model.backend.base_url={stub_url}",
                        f"method={method}", *lim, *extra)


# ---- sections --------------------------------------------------------------------------------------------
def sec_reference(rep: Report, a: argparse.Namespace, tmp: Path) -> None:
    """Sequential reference client vs the recbench CLI on the same groups and stub, compared like for like: whole
    process against whole process (start-up included), and request loop against request loop. Both read the
    groups from the same warm derived-data cache (the reference reads the groups recbench loads, as the official
    script reads prepared files); the recbench process is also timed cold (derived cache off)."""
    import reference_client

    from recbench.testing.openai_stub import start_stub_process

    limit = a.ref_limit
    from recbench.store import derived_cache

    shared = tmp / "ref_shared_cache"  # derived data only: each recbench run below gets an empty response cache
    derived_cache.configure(shared / "derived")  # where the in-process warm-up below writes
    derived = [f"cache.derived_dir={shared / 'derived'}"]
    ref_args = ["--limit", str(limit)] if limit else []
    with start_stub_process(latency_s=0.2) as stub:
        for method in ("listwise", "pairwise"):
            reference_client.load(method, limit, extra=STRATIFIED if limit else ())  # warms the derived cache
            stub.reset()
            wall, rc, out = run_cli([PY, str(REPO / "benchmarks" / "reference_client.py"), "--base-url", stub.base_url,
                                     "--method", method, *ref_args], cli_env(tmp / f"ref_proc_{method}",
                                                                            RECBENCH_CACHE_DIR=str(shared)))
            if rc != 0:
                rep.note("reference", f"reference {method} exited {rc}: {out[-800:]}")
                continue
            ref = json.loads(out.strip().splitlines()[-1])
            ref_loop = rep.figure("reference", f"{method}_reference_wall_s", ref["wall_s"],
                                  f"request loop: {ref['groups']} groups, {ref['requests']} requests, one at a time")
            ref_proc = rep.figure("reference", f"{method}_reference_process_wall_s", wall, "whole process")
            rep.figure("reference", f"{method}_reference_requests", stub.stats()["paid"])
            stub.reset()
            root = tmp / f"ref_{method}"
            wall, rc, out = run_cli(perrec_openai(stub.base_url, method, limit, *derived), cli_env(root))
            paid = stub.stats()["paid"]
            if rc != 0:
                rep.note("reference", f"recbench {method} exited {rc}: {out[-800:]}")
            rep.figure("reference", f"{method}_recbench_wall_s", wall, "whole CLI process, start-up included")
            rep.figure("reference", f"{method}_recbench_requests", paid)
            target = 10 if method == "listwise" else 20
            rep.figure("reference", f"{method}_speedup", ref_proc / wall,
                       f"whole process vs whole process; target >= {target}x")
            try:
                m = find_metrics(root)
                inv = m.get("this_invocation", {})
                if inv.get("wall_time_s"):
                    loop_s = rep.figure("reference", f"{method}_recbench_loop_wall_s", float(inv["wall_time_s"]),
                                        "inside the process (metrics.json this_invocation.wall_time_s)")
                    rep.figure("reference", f"{method}_speedup_loop_only", ref_loop / loop_s,
                               "reference loop vs recbench loop, both without process start-up")
            except (RuntimeError, ValueError) as e:
                rep.note("reference", f"no metrics.json for {method}: {e}")
            stub.reset()
            cold, rc, out = run_cli(perrec_openai(stub.base_url, method, limit, "cache.derived_dir=null"),
                                    cli_env(tmp / f"ref_cold_{method}"))
            rep.figure("reference", f"{method}_recbench_cold_wall_s", cold,
                       f"whole CLI process, derived cache off (groups parsed, BM25 built); exit {rc}; "
                       f"speedup vs the reference process {ref_proc / cold:.1f}x")


def sec_capacity(rep: Report, a: argparse.Namespace, tmp: Path) -> None:
    """openai backend at concurrency 32 against the stub's capacity."""
    from recbench.backends.openai import OpenAIBackend
    from recbench.testing.openai_stub import start_stub_process
    from recbench.api.types import Request, SamplingParams

    n, c, lat = 120, 32, 0.2
    reqs = [Request.chat([{"role": "user", "content": f"User A:\n- Average rating: {i % 5}.0\nUser B:\n"
                                                      f"- Average rating: 2.5\ncapacity {i}"}],
                         SamplingParams(max_tokens=16)) for i in range(n)]
    ideal = n * lat / c
    with start_stub_process(latency_s=lat) as stub:
        walls = []
        for _ in range(3):
            b = OpenAIBackend(model="stub", base_url=stub.base_url, concurrency=c)
            t = time.perf_counter()
            out = b.generate(reqs)
            walls.append(time.perf_counter() - t)
            b.close()
            assert all(r.ok for r in out), [r.error for r in out if not r.ok][:2]
        peak = stub.stats()["max_in_flight"]
    rep.figure("capacity", "wall_s_best_of_3", min(walls), f"{n} requests, concurrency {c}, latency {lat}s; "
               f"ideal {ideal:.3f}s; all {[round(w, 3) for w in walls]}")
    rep.figure("capacity", "ideal_over_wall", ideal / min(walls), "target >= 0.8")
    rep.figure("capacity", "stub_max_in_flight", peak)
    if a.clients:
        import bench_openai_client

        rep.note("capacity", "client comparison (bench_openai_client.py), same stub settings:")
        res = bench_openai_client.measure(n, c, lat, reps=2, emit=lambda s: rep.note("capacity", s))
        for k, v in res.items():
            if isinstance(v, dict) and "wall_s" in v:
                rep.figure("capacity", f"client_{k}_wall_s", v["wall_s"], f"{v['cpu_ms_per_request']} ms CPU/request")


def sec_stragglers(rep: Report, a: argparse.Namespace, tmp: Path) -> None:
    """Pairwise through the CLI with and without 5% of prompts at 3 s."""
    from recbench.testing.openai_stub import start_stub_process

    walls: dict[str, float] = {}
    loops: dict[str, float] = {}
    for name, share in (("clean", 0.0), ("stragglers", 0.05)):
        with start_stub_process(latency_s=0.2, straggler_share=share, straggler_s=3.0) as stub:
            root = tmp / f"straggle_{name}"
            wall, rc, out = run_cli(perrec_openai(stub.base_url, "pairwise", a.limit), cli_env(root))
            st = stub.stats()
        if rc != 0:
            rep.note("stragglers", f"{name} run exited {rc}: {out[-600:]}")
        walls[name] = rep.figure("stragglers", f"{name}_wall_s", wall,
                                 f"whole CLI; {st['paid']} requests, {st['stragglers']} at 3 s")
        try:
            loops[name] = rep.figure("stragglers", f"{name}_loop_wall_s",
                                     float(find_metrics(root)["this_invocation"]["wall_time_s"]),
                                     "inside the process (no start-up)")
        except (RuntimeError, KeyError, ValueError) as e:
            rep.note("stragglers", f"no loop wall for {name}: {e}")
    for kind, w in (("cli", walls), ("loop", loops)):
        if len(w) == 2:
            bound = 1.3 * w["clean"] + 3.0
            rep.figure("stragglers", f"{kind}_straggler_wall_over_bound", w["stragglers"] / bound,
                       f"bound 1.3 x clean + 3 s = {bound:.2f}s; target <= 1.0")


def sec_replay(rep: Report, a: argparse.Namespace, tmp: Path) -> None:
    """600 groups x 3 methods: fill a cache with a scripted backend, then replay every answer from it."""
    from recbench.tasks.perrec.build import synth
    from tests.doubles import ScriptedBackend
    from tests.helpers import compose_cfg, listwise_answer

    from recbench.run.evaluate import run_from_config

    data = tmp / "perrec600"
    # the size (200 groups per difficulty) in both modes: it runs from the cache
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):  # the builder prints its stats
        synth.main(["--out", str(data), "--items", "900", "--users", "700", "--queries", "700", "--per-size", "200"])
    answers = {"pointwise": lambda r: "3", "pairwise": lambda r: "[User A]", "listwise": listwise_answer}
    base = [f"task.data_dir={data}", f"cache.path={tmp / 'replay.sqlite'}", "run.progress=false"]
    t = time.perf_counter()
    for m, fn in answers.items():
        run_from_config(compose_cfg([*base, f"method={m}"]), tmp / "fill" / m, backend=ScriptedBackend(fn, name="replay"))
    rep.note("replay", f"cache filled in {time.perf_counter() - t:.1f}s")
    cfgs = {m: compose_cfg([*base, f"method={m}"]) for m in answers}  # composed outside the timed part
    wall = cpu = 0.0
    calls = examples = 0
    for m, fn in answers.items():
        b = ScriptedBackend(fn, name="replay")
        t, c = time.perf_counter(), time.process_time()
        met = run_from_config(cfgs[m], tmp / "replay" / m, backend=b).to_dict()
        w, cp = time.perf_counter() - t, time.process_time() - c
        wall, cpu = wall + w, cpu + cp
        calls += b.calls
        examples += met["counts"]["examples"]
        rep.figure("replay", f"{m}_wall_s", w, f"cpu {cp:.2f}s, {met['counts']['examples']} groups")
    rep.figure("replay", "total_wall_s", wall, f"{examples} groups over 3 methods; target < 2 s")
    rep.figure("replay", "total_cpu_s", cpu)
    rep.figure("replay", "backend_calls_during_replay", calls, "must be 0")


def sec_rerun(rep: Report, a: argparse.Namespace, tmp: Path) -> None:
    """A finished SmolLM2 listwise run rerun; `python -m recbench --help`."""
    root = Path(a.rerun_root) if a.rerun_root else tmp / "rerun"
    env = cli_env(root)
    cmd = recbench_cmd("task=perrec", "model=smollm2", "method=listwise", f"limit={a.rerun_limit}")
    wall, rc, out = run_cli(cmd, env)  # with --rerun-root holding a finished run: a rerun that re-aggregates
    rep.figure("rerun", "first_run_wall_s", wall, f"limit={a.rerun_limit}, real SmolLM2 (hf), exit {rc}"
               + (f"; root {root} (kept)" if a.rerun_root else ""))
    if rc != 0:
        rep.note("rerun", f"first run exited {rc}: {out[-600:]}")
    walls = []
    for _ in range(3):
        w, rc2, out2 = run_cli(cmd, env)
        walls.append(w)
    rep.figure("rerun", "finished_rerun_wall_s", min(walls), f"target < 3 s; exit {rc2}; best of 3, all "
               f"{[round(w, 2) for w in walls]}")
    try:
        inv = find_metrics(root).get("this_invocation", {})
        rep.figure("rerun", "rerun_backend_calls", inv.get("backend_calls"), "must be 0")
        if "model_loaded" in inv:
            rep.figure("rerun", "rerun_model_loaded", inv["model_loaded"], "must be False")
    except (RuntimeError, ValueError) as e:
        rep.note("rerun", f"no metrics.json: {e}")
    walls = [run_cli([PY, "-m", "recbench", "--help"], env)[0] for _ in range(3)]
    rep.figure("rerun", "help_wall_s", min(walls), f"target < 1.5 s; all {[round(w, 2) for w in walls]}")
    t = time.perf_counter()
    subprocess.run([PY, "-c", "pass"], check=True)
    rep.figure("rerun", "bare_python_wall_s", time.perf_counter() - t, "interpreter start-up alone, for scale")


def sec_sigkill(rep: Report, a: argparse.Namespace, tmp: Path) -> None:
    """Kill a pairwise run `--kills` times at random points while requests flow, finish it; compare with a
    fault-free run. Concurrency is `--kill-concurrency`, so one run spans many windows of requests."""
    from recbench.testing.openai_stub import start_stub_process

    rng = random.Random(11)
    c = a.kill_concurrency
    extra = (f"model.backend.concurrency={c}",)
    with start_stub_process(latency_s=0.2) as stub:
        clean = tmp / "kill_clean"
        wall, rc, out = run_cli(perrec_openai(stub.base_url, "pairwise", a.limit, *extra), cli_env(clean))
        clean_paid = stub.stats()["paid"]
        rep.figure("sigkill", "fault_free_wall_s", wall, f"exit {rc}, concurrency {c}")
        rep.figure("sigkill", "fault_free_paid_requests", clean_paid)
        stub.reset()
        root = tmp / "kill_runs"
        env = cli_env(root)
        cmd = perrec_openai(stub.base_url, "pairwise", a.limit, *extra)
        kills = 0
        t0 = time.perf_counter()
        while kills < a.kills:
            before = stub.stats()["received"]
            p = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            while p.poll() is None and stub.stats()["received"] == before:  # wait until new requests flow
                time.sleep(0.01)
            delay = rng.uniform(0.0, a.kill_window)
            time.sleep(delay)
            if p.poll() is not None:
                rep.note("sigkill", f"the run finished before kill {kills + 1}: {kills} kills in all")
                break
            p.send_signal(signal.SIGKILL)
            p.wait()
            kills += 1
            print(f"[sigkill] kill {kills}/{a.kills}: {delay:.2f}s after new requests; paid so far "
                  f"{stub.stats()['paid']}", flush=True)
        rep.figure("sigkill", "kills", kills, f"in {time.perf_counter() - t0:.1f}s, each within "
                   f"{a.kill_window:g}s after the first new request")
        wall, rc, out = run_cli(cmd, env)
        if rc != 0:
            rep.note("sigkill", f"final run exited {rc}: {out[-600:]}")
        paid = stub.stats()["paid"]
    same = aggregates(find_metrics(root)) == aggregates(find_metrics(clean))
    rep.figure("sigkill", "results_equal_fault_free", same, "must be True")
    bound = clean_paid + kills * c
    rep.figure("sigkill", "paid_requests", paid, f"bound fault-free + {kills} x {c} = {bound}")
    rep.figure("sigkill", "paid_over_bound", paid / bound, "target <= 1.0")


def sec_hf(rep: Report, a: argparse.Namespace, tmp: Path) -> None:
    """Eval loop (cache off) vs raw batched HFBackend.generate on the very same requests."""
    from tests.helpers import compose_cfg

    from recbench.run.construct import build_backend

    from recbench.run.evaluate import run_from_config
    from recbench.testing.recording import Recording

    over = ["method=listwise", "run.progress=false", "cache.enabled=false", "task.difficulties=[medium]",
            f"limit={a.hf_n}", "run.limit_strategy=first"]
    cfg = compose_cfg(over)
    t = time.perf_counter()
    hf = build_backend(cfg.model)
    rep.note("hf", f"SmolLM2 loaded in {time.perf_counter() - t:.1f}s")
    run_from_config(compose_cfg([*over[:-2], "limit=2"]), tmp / "hf_warm", backend=hf)  # warm-up
    loop_t, raw_t = [], []
    for i in range(a.hf_reps):
        rec = Recording(hf)
        t = time.perf_counter()
        run_from_config(cfg, tmp / f"hf_loop{i}", backend=rec)
        loop_t.append(time.perf_counter() - t)
        reqs = list(rec.requests)
        t = time.perf_counter()
        raw = hf.generate(reqs)
        raw_t.append(time.perf_counter() - t)
    rep.figure("hf", "requests", len(reqs), f"{sum(r.completion_tokens for r in raw)} completion tokens")
    rep.figure("hf", "loop_wall_s", min(loop_t), f"all {[round(x, 2) for x in loop_t]}")
    rep.figure("hf", "raw_wall_s", min(raw_t), f"all {[round(x, 2) for x in raw_t]}")
    rep.figure("hf", "loop_over_raw", min(raw_t) / min(loop_t), "throughput ratio; target >= 0.9")


def sec_vllm(rep: Report, a: argparse.Namespace, tmp: Path) -> None:
    """benchmarks/bench_backends.py in .venv-vllm (loop vs raw LLM.chat), when that venv exists."""
    py = REPO / ".venv-vllm" / "bin" / "python"
    if not py.exists():
        rep.note("vllm", "skipped: no .venv-vllm here (bash scripts/setup_vllm.sh creates it)")
        return
    out = tmp / "bench_backends.json"
    cmd = [str(py), str(REPO / "benchmarks" / "bench_backends.py"), "--limit", str(a.vllm_limit), "--skip-server",
           "--out", str(out)]
    wall, rc, text = run_cli(cmd, {**os.environ, "PYTHONUNBUFFERED": "1"})
    if rc != 0 or not out.exists():
        rep.note("vllm", f"bench_backends.py exited {rc}: {text[-800:]}")
        return
    v = json.loads(out.read_text())["vllm"]
    rep.figure("vllm", "loop_wall_s", v["loop_wall_s"])
    rep.figure("vllm", "raw_wall_s", v["raw_wall_s"])
    rep.figure("vllm", "loop_over_raw", v["loop_over_raw"], "target >= 0.95")


RUNNERS: dict[str, Callable[[Report, argparse.Namespace, Path], None]] = {
    "reference": sec_reference, "capacity": sec_capacity, "stragglers": sec_stragglers, "replay": sec_replay,
    "rerun": sec_rerun, "sigkill": sec_sigkill, "hf": sec_hf, "vllm": sec_vllm}


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    """Flags; --quick shrinks every size for a loaded machine."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes (a loaded machine)")
    ap.add_argument("--only", default="", help=f"comma list of sections: {','.join(SECTIONS)}")
    ap.add_argument("--skip", default="", help="comma list of sections to leave out")
    ap.add_argument("--limit", type=int, default=None, help="groups for stragglers/sigkill (default all 120; quick 40)")
    ap.add_argument("--ref-limit", type=int, default=None, help="groups for the reference section (default 120; quick 40)")
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--kill-window", type=float, default=0.4, help="kill within this many seconds after new requests flow")
    ap.add_argument("--kill-concurrency", type=int, default=8, help="model.backend.concurrency of the killed runs")
    ap.add_argument("--rerun-limit", type=int, default=None, help="SmolLM2 groups for the rerun section (default 4; quick 1)")
    ap.add_argument("--rerun-root", default=None, help="rerun: RECBENCH_{RUNS,CACHE}_DIR root to keep between "
                    "invocations (the first run, with the model load, then happens once)")
    ap.add_argument("--hf-n", type=int, default=None, help="listwise prompts for hf loop/raw (default 16; quick 4)")
    ap.add_argument("--hf-reps", type=int, default=None)
    ap.add_argument("--vllm-limit", type=int, default=24)
    ap.add_argument("--clients", action="store_true", help="capacity: also compare raw HTTP clients")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "bench_engine.json"))
    a = ap.parse_args(argv)
    q = a.quick
    a.limit = a.limit or (40 if q else None)
    a.ref_limit = a.ref_limit or (40 if q else None)
    a.rerun_limit = a.rerun_limit or (1 if q else 4)
    a.hf_n = a.hf_n or (4 if q else 16)
    a.hf_reps = a.hf_reps or (1 if q else 2)
    only = [s for s in a.only.split(",") if s]
    skip = {s for s in a.skip.split(",") if s}
    bad = [s for s in [*only, *skip] if s not in SECTIONS]
    if bad:
        ap.error(f"unknown section(s) {bad}; valid: {', '.join(SECTIONS)}")
    a.sections = [s for s in (only or SECTIONS) if s not in skip]
    return a


def main(argv: Optional[list[str]] = None) -> None:
    """Run the selected sections in order; a failing section is reported and the next one runs."""
    a = parse_args(argv)
    rep = Report(Path(a.out), sys.argv[1:] if argv is None else argv)
    print(f"bench_engine: sections {', '.join(a.sections)}{' (quick)' if a.quick else ''}; "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; results -> {a.out}", flush=True)
    with tempfile.TemporaryDirectory(prefix="rb_bench_engine_") as d:
        for s in a.sections:
            t = time.perf_counter()
            try:
                RUNNERS[s](rep, a, Path(d))
            except Exception as e:  # noqa: BLE001 - one broken section must not hide the others' figures
                rep.note(s, f"FAILED: {type(e).__name__}: {e}")
            rep.note(s, f"section took {time.perf_counter() - t:.1f}s")
    rep.data["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    rep.save()


if __name__ == "__main__":
    main()
