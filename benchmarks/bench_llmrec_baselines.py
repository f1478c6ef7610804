"""LLMRec reference baselines on the FULL P5 Beauty split (22,363 users) and on Amazon 2023 All_Beauty, with timings.

    python benchmarks/bench_llmrec_baselines.py [--out runs/bench_llmrec] [--limit N]

Runs every (task, baseline) through the same Hydra config + evaluation loop as `python -m recbench`, then prints a
Markdown table (HR@k / NDCG@k for sequential and direct, RMSE / MAE for rating) with each run's wall time.
The frozen candidate files are frozen first if missing (deterministic: the recorded sha256 is checked on load).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from recbench.cli.overrides import method_paths
from recbench.run.construct import CONFIG_MODULE, register_resolvers

from recbench.run.evaluate import run_from_config

RANK_TASKS = ["llmrec_sequential_p5", "llmrec_direct_p5"]
RANK_METHODS = ["random", "popularity", "item_knn", "mf"]
RATING_METHODS = ["global_mean", "user_mean", "item_mean", "random"]


def _cfg(task: str, method: str, extra: list[str]):
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        return compose(config_name="config", overrides=method_paths([f"task={task}", f"method={method}", "model=none",
                                                                      "run.progress=false", "cache.enabled=false", *extra]))


def ensure_candidates(cfg) -> None:
    """Freeze the task's candidate file if it is not there yet (the recorded hash then verifies it)."""
    from recbench.tasks.llmrec.candidates import freeze

    path = Path(cfg.task.candidates.path)
    if not path.exists():
        kind = "sequential" if "sequential" in cfg.task.name else "direct"
        print(f"freezing {path} ...", file=sys.stderr)
        freeze(cfg.task.data_dir, kind, path)


def main() -> None:
    """Run all baselines and print the table."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="runs/bench_llmrec")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--rank-methods", default=",".join(RANK_METHODS))
    ap.add_argument("--rating-methods", default=",".join(RATING_METHODS))
    a = ap.parse_args()
    register_resolvers()
    extra = [f"limit={a.limit}"] if a.limit else []
    rows = []
    jobs = ([(t, m) for t in RANK_TASKS for m in a.rank_methods.split(",") if m]
            + [("llmrec_rating_az23", m) for m in a.rating_methods.split(",") if m])
    for task, method in jobs:
        cfg = _cfg(task, method, extra)
        if "candidates" in cfg.task:
            ensure_candidates(cfg)
        run_dir = Path(a.out) / task / method
        for f in ("samples.jsonl", "metrics.json"):  # a benchmark measures a fresh run, not a resume
            (run_dir / f).unlink(missing_ok=True)
        t0 = time.time()
        m = run_from_config(cfg, run_dir).to_dict()
        dt = time.time() - t0
        agg = {k: v["mean"] for k, v in m["metrics"].items()}
        agg.update({k: v for k, v in m["extra"].items() if isinstance(v, float)})
        rows.append({"task": task, "method": method, "n": m["counts"]["examples"], "seconds": round(dt, 1), **agg})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print("\n| task | method | n | HR@1 | HR@5 | NDCG@5 | HR@10 | NDCG@10 | RMSE | MAE | time (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    f = lambda r, k: f"{r[k]:.4f}" if k in r and r[k] is not None else ""  # noqa: E731
    for r in rows:
        print(f"| {r['task']} | {r['method']} | {r['n']} | {f(r, 'hr@1')} | {f(r, 'hr@5')} | {f(r, 'ndcg@5')} | "
              f"{f(r, 'hr@10')} | {f(r, 'ndcg@10')} | {f(r, 'rmse')} | {f(r, 'mae')} | {r['seconds']} |")
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "baselines.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
