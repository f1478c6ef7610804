"""Client CPU of PerRecBench listwise prompt building and answer reading (issue 29's stub run), older tree against this
one in one invocation: per example, `Listwise.run` up to its first yield (display order, lazy members, user blocks,
prompt, constraint, requests) and from the answer to the Outcome (parse_ranking), timed with time.process_time.

    python benchmarks/bench_perrec_prompts.py --data /tmp/scalebench/built/ml-10M \\
        --derived /tmp/scalebench/cache/ml-10M/derived --before /work/main --label 60k [--limit N] [--repeats 5]

Each tree runs in its own process per repeat, the trees alternating so that drift in the machine's load hits both
(PYTHONPATH=tree, a memory limit), on the same examples, answers and settings: the examples are loaded (the
derived-data cache copied into --work; a tree whose loader differs builds its own entry there once, before any
timing), gc frozen as the run loop freezes it, the method's prepare() run, then every example run to its first
yield, keeping all generators alive as the loop does (the pre-yield time, prepare included); then each is sent its
stub answer (recbench.testing.openai_stub.listwise_answer, computed outside the timing) up to its Outcome (the
post-answer time). Reported: µs per example, the median over repeats (and every repeat), the before/after ratios,
the load average. Requests (content, purpose) and outcomes are hashed per tree: `identical` compares them, also
under --variants N (self-consistency, few-shot, chain of thought, constrained, a paraphrase, an audit order) on the
first N groups. Results: benchmarks/results/bench_perrec_prompts_<label>.json.
"""
from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
#: name -> (method overrides, keyword arguments of Listwise.run)
VARIANTS: dict[str, tuple[list[str], dict[str, int]]] = {
    "plain": ([], {}),
    "samples3": (["method.samples=3", "method.temperature=0.7"], {}),
    "shots2": (["method.shots=2"], {}),
    "cot": (["method.cot=true"], {}),
    "constrained": (["method.constrained=true"], {}),
    "paraphrase1": ([], {"template": 1}),
    "order2": ([], {"order": 2}),
}


def _load(data: str, overrides: list[str], limit: int) -> tuple[Any, list]:
    """The task's examples (first `limit`) and a listwise method, as the CLI composes them."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from recbench.cli.overrides import method_paths
    from recbench.run.construct import CONFIG_MODULE, build_task, register_resolvers

    register_resolvers()
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        cfg = compose(config_name="config", overrides=method_paths(
            ["task=perrec_built", f"task.data_dir={data}", "method=listwise", "model=none", *overrides]))
    task = build_task(cfg)
    exs = task.load()[:limit] if limit else task.load()
    return (lambda: task.make_method(cfg.method, cfg.sampling)), exs


def _cold(exs: list) -> None:
    """Drop what a first run has not built yet: lazy members, user blocks, display permutations (as named in either
    tree)."""
    from recbench.tasks.perrec import lazy, prompting

    for e in exs:
        if isinstance(e.data, lazy.LazyGroup):
            dict.pop(e.data, "users", None)
    getattr(lazy, "_BUILT", {}).clear()
    getattr(prompting, "_BLOCKS", {}).clear()
    prompting._permutation.cache_clear()


def _digest(h: "hashlib._Hash", obj: Any) -> None:
    h.update(json.dumps(obj, sort_keys=True, default=str).encode())


def worker(a: argparse.Namespace) -> dict:
    """One tree's figures: µs per example of each phase and repeat, and the hashes of requests and outcomes."""
    from recbench.api.types import Response
    from recbench.testing.openai_stub import listwise_answer

    overrides, run_kw = VARIANTS[a.variant]
    make_method, exs = _load(a.data, overrides, a.limit)
    try:  # the prompts built in this process, as timed here (a large run builds them in a prefetch child instead)
        from recbench.tasks.perrec import prefetch
        prefetch.MIN_EXAMPLES = 10 ** 12
    except ImportError:  # an older tree
        pass
    pre, post, answers, digests = [], [], None, {}
    for rep in range(a.repeats):
        _cold(exs)
        method = make_method()
        gc.collect()
        gc.freeze()  # as EvalLoop.run: the loaded examples are not walked by every full collection
        t0 = time.process_time()
        method.prepare(exs)  # as EvalLoop.run, before the first example
        gens, reqs = [], []
        for e in exs:
            g = method.run(e, **run_kw)
            reqs.append(next(g))
            gens.append(g)
        pre.append((time.process_time() - t0) / len(exs) * 1e6)
        if answers is None:  # the stub's answers, computed once outside the timing
            answers = [[Response(text=listwise_answer(r.message_dicts())) for r in rs] for rs in reqs]
        t0 = time.process_time()
        outs = []
        for g, ans in zip(gens, answers):
            try:
                g.send(ans)
            except StopIteration as stop:
                outs.append(stop.value)
        post.append((time.process_time() - t0) / len(exs) * 1e6)
        if rep == 0:
            hr, ho = hashlib.sha256(), hashlib.sha256()
            for rs in reqs:
                _digest(hr, [[r.content_dict(), r.purpose, r.example_id] for r in rs])
            for o in outs:
                _digest(ho, [o.prediction, o.parse_status, o.record_details()])
            digests = {"requests": hr.hexdigest(), "outcomes": ho.hexdigest(), "outcomes_n": len(outs)}
        del gens, reqs, outs
        gc.unfreeze()
    return {"examples": len(exs), "pre_us": pre, "post_us": post, **digests}


def run_tree(a: argparse.Namespace, tree: Path, variant: str, limit: int, repeats: int) -> dict:
    """The worker in its own process on `tree` (memory-limited); its figures."""
    env = {**os.environ, "PYTHONPATH": str(tree), "RECBENCH_CACHE_DIR": str(a.work / "cache")}
    cmd = ["prlimit", f"--as={a.mem_gb * 10 ** 9}", "--", sys.executable, str(HERE), "--worker", "--data", str(a.data),
           "--variant", variant, "--limit", str(limit), "--repeats", str(repeats)]
    p = subprocess.run(cmd, env=env, cwd=str(tree), capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"worker failed on {tree} ({variant}):\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def _row(name: str, got: dict) -> str:
    pre, post = statistics.median(got["pre_us"]), statistics.median(got["post_us"])
    reps = lambda xs: " ".join(f"{x:.1f}" for x in xs)  # noqa: E731
    return (f"{name:>7}: pre-yield {pre:7.1f} us/example (repeats {reps(got['pre_us'])}); post-answer {post:6.1f} "
            f"us/example (repeats {reps(got['post_us'])}); {got['examples']} examples")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", help="a built PerRecBench data dir (recbench.build perrec)")
    p.add_argument("--derived", type=Path, help="a derived-data cache folder to copy in (a cached load)")
    p.add_argument("--before", type=Path, default=Path("/work/main"), help="the older tree")
    p.add_argument("--label", default="run")
    p.add_argument("--work", type=Path, default=Path("/tmp/bench_perrec_prompts"))
    p.add_argument("--limit", type=int, default=0, help="first N groups (0: all)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--variants", type=int, default=0, help="also check identity of every variant on N groups")
    p.add_argument("--mem-gb", type=int, default=8)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--variant", default="plain", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        print(json.dumps(worker(a)))
        return
    if not a.data:
        p.error("--data is required")
    if a.derived and not (a.work / "cache" / "derived").exists():
        shutil.copytree(a.derived, a.work / "cache" / "derived")
    trees = {"before": a.before.resolve(), "after": ROOT}
    out = ROOT / "benchmarks" / "results" / f"bench_perrec_prompts_{a.label}.json"
    res: dict[str, Any] = {"argv": sys.argv, "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                           "trees": {k: str(v) for k, v in trees.items()}, "load_avg_start": os.getloadavg()}
    for name, tree in trees.items():  # warm-up: each tree's derived-data entry built (once) before any timing
        run_tree(a, tree, "plain", 1, 1)
    for rep in range(a.repeats):  # one process per tree and repeat, the trees alternating: drift in load hits both
        for name, tree in trees.items():
            got = run_tree(a, tree, "plain", a.limit, 1)
            print(f"repeat {rep + 1} {name}: pre-yield {got['pre_us'][0]:.1f}, post-answer {got['post_us'][0]:.1f} "
                  f"us/example (load {os.getloadavg()[0]:.1f})", flush=True)
            if name not in res:
                res[name] = got
            else:
                res[name]["pre_us"] += got["pre_us"]
                res[name]["post_us"] += got["post_us"]
                res[name]["same_each_repeat"] = res[name].get("same_each_repeat", True) and got["requests"] == \
                    res[name]["requests"] and got["outcomes"] == res[name]["outcomes"]
    for name in trees:
        print(_row(name, res[name]), flush=True)
    b, f = res["before"], res["after"]
    res["ratio_pre"] = statistics.median(b["pre_us"]) / statistics.median(f["pre_us"])
    res["ratio_post"] = statistics.median(b["post_us"]) / statistics.median(f["post_us"])
    res["identical"] = all(b[k] == f[k] for k in ("requests", "outcomes", "outcomes_n"))
    print(f"before/after CPU per example: pre-yield {res['ratio_pre']:.2f}x, post-answer {res['ratio_post']:.2f}x; "
          f"identical {res['identical']}", flush=True)
    for v in list(VARIANTS)[1:] if a.variants else []:
        got = {name: run_tree(a, tree, v, a.variants, 1) for name, tree in trees.items()}
        same = all(got["before"][k] == got["after"][k] for k in ("requests", "outcomes", "outcomes_n"))
        res.setdefault("variants", {})[v] = {"identical": same, **got}
        print(f"variant {v} ({a.variants} groups, one cold repeat): identical {same}", flush=True)
    res["load_avg_end"] = os.getloadavg()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(f"written {out}")


if __name__ == "__main__":
    main()
