"""Core performance, measured in one run on the same prompts (ratios, not absolute claims).

1. Eval-loop throughput / raw batched `HFBackend.generate` throughput on the same PerRecBench listwise
   prompts with the real SmolLM2 (target >= 0.9).
2. Wall time of a full cache replay of the default run at paper scale: 600 groups (200 easy/medium/hard)
   x 3 methods (pointwise, pairwise, listwise), every answer already in the cache (target < 2 s).
   The cache is filled by a scripted backend (a real model would take hours on this CPU); replay cost
   does not depend on who wrote the cache.

    python benchmarks/bench_core.py [--n 16] [--reps 2] [--out benchmarks/results/bench_core.json]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from recbench.app import run_from_config  # noqa: E402
from recbench.cache import ResponseCache  # noqa: E402
from recbench.loop import EvalLoop  # noqa: E402
from recbench.runstore import RunStore  # noqa: E402
from tests.doubles import ScriptedBackend  # noqa: E402
from tests.helpers import compose_cfg, listwise_answer  # noqa: E402


def loop_vs_raw(n: int, reps: int, tmp: Path) -> dict:
    """Throughput ratio of the loop (cache on, empty) to raw backend.generate on the same requests."""
    from recbench.app import build_backend, build_task

    cfg = compose_cfg(["method=listwise", "run.progress=false", "task.difficulties=[medium]"])
    task = build_task(cfg)
    method = task.make_method(cfg.method, cfg.sampling)
    examples = task.load()[:n]
    requests = [next(method.run(e))[0] for e in examples]
    backend = build_backend(cfg.model)
    backend.generate(requests[:2])  # warm-up
    raw_t, loop_t = [], []
    for rep in range(reps):
        t = time.perf_counter()
        raw = backend.generate(requests)
        raw_t.append(time.perf_counter() - t)
        loop = EvalLoop(task, method, backend, ResponseCache(tmp / f"loop{rep}.sqlite"), RunStore(tmp / f"run{rep}"),
                        progress=False)
        t = time.perf_counter()
        loop.run(examples)
        loop_t.append(time.perf_counter() - t)
        answers = [r["calls"][0]["response"] for r in loop.store.records()]
        assert sorted(answers) == sorted(r.text for r in raw), "loop and raw answers differ"
    tokens = sum(r.completion_tokens for r in raw)
    return {"requests": n, "completion_tokens": tokens, "raw_s": raw_t, "loop_s": loop_t,
            "raw_req_per_s": n / min(raw_t), "loop_req_per_s": n / min(loop_t),
            "ratio_loop_over_raw": min(raw_t) / min(loop_t)}


def cache_replay(tmp: Path) -> dict:
    """Fill a cache for 600 groups x 3 methods, then time the full replay (all cache hits)."""
    from recbench.tasks.perrec import synth

    data = tmp / "perrec600"
    synth.main(["--out", str(data), "--items", "900", "--users", "700", "--queries", "700", "--per-size", "200"])
    answers = {"pointwise": lambda r: "3", "pairwise": lambda r: "[User A]", "listwise": listwise_answer}
    base = [f"task.data_dir={data}", f"cache.path={tmp / 'replay.sqlite'}", "run.progress=false"]
    fill_s = {}
    for m, fn in answers.items():
        t = time.perf_counter()
        run_from_config(compose_cfg([*base, f"method={m}"]), tmp / "fill" / m, backend=ScriptedBackend(fn, name="replay"))
        fill_s[m] = time.perf_counter() - t
    replay_s, resume_s, calls, examples = {}, {}, 0, 0
    for m, fn in answers.items():
        cfg = compose_cfg([*base, f"method={m}"])
        b = ScriptedBackend(fn, name="replay")
        t = time.perf_counter()  # a NEW run dir: every example re-driven, every answer a cache hit
        met = run_from_config(cfg, tmp / "replay" / m, backend=b)
        replay_s[m] = time.perf_counter() - t
        t = time.perf_counter()  # the SAME run dir again: finished examples skipped
        run_from_config(cfg, tmp / "replay" / m, backend=b)
        resume_s[m] = time.perf_counter() - t
        calls += b.calls
        examples += met["counts"]["examples"]
    return {"groups_per_method": examples // 3, "methods": list(answers), "fill_s": fill_s, "replay_s": replay_s,
            "replay_total_s": sum(replay_s.values()), "rerun_same_dir_s": resume_s,
            "rerun_same_dir_total_s": sum(resume_s.values()), "backend_calls_during_replay": calls}


def main() -> None:
    """Run both measurements and print/save the JSON result."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=16, help="listwise prompts for the loop/raw comparison")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--skip-model", action="store_true", help="only the cache replay")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "bench_core.json"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        result = {"cache_replay": cache_replay(tmp)}
        if not args.skip_model:
            result["loop_vs_raw"] = loop_vs_raw(args.n, args.reps, tmp)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
