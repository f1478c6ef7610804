"""Parse rates of the default model: every headline (task, method) with model=smollm2 on the bundled data.

    nice -n 10 .venv/bin/python benchmarks/parse_rates.py [--limit 20] [--limit-for perrec/pairwise=8]
                                                         [--only perrec/listwise,llmrec_rating/zero_shot]

Runs each pair in-process with one shared backend (the model is loaded once), into a temporary runs dir, with the
shipped defaults (only `limit`, and run.limit_strategy=stratified as by default), and prints a row per pair as soon
as it is measured. Parse rate = parsed examples (ok + repaired) / examples; `ok` is the share parsed with no repair;
`finish=length` is the share of model answers cut by max_tokens. Writes benchmarks/results/parse_rates.json.
The response cache is the usual one (greedy decoding, so a cached answer equals a fresh one); --no-cache bypasses it.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: the headline methods of each benchmark (issue 16): PerRecBench, LLMRec's five tasks, RecBench+
HEADLINE = [("perrec", "pointwise"), ("perrec", "pairwise"), ("perrec", "listwise"),
            ("llmrec_rating", "zero_shot"), ("llmrec_sequential", "zero_shot"), ("llmrec_direct", "zero_shot"),
            ("llmrec_explanation", "zero_shot"), ("llmrec_summary", "zero_shot"), ("recbench_plus", "assistant")]
TARGET = 0.90


def compose(overrides: list[str]):
    """The run config as `python -m recbench ...` composes it."""
    from hydra import compose as hcompose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from recbench.cli.overrides import method_paths
    from recbench.run.construct import CONFIG_MODULE, register_resolvers

    register_resolvers()
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        return hcompose(config_name="config", overrides=method_paths(overrides))


def row_of(task: str, method: str, limit: int, m: dict[str, Any], wall_s: float) -> dict[str, Any]:
    """One table row from a run's metrics.json content."""
    c = m["counts"]
    n = c["examples"] or 1
    head = m["headline_metric"]
    hv = (m["metrics"].get(head) or {}).get("mean")
    if hv is None:  # corpus-level headlines (rating MAE) live in extra
        hv = (m.get("extra") or {}).get(head)
    return {"task": task, "method": method, "limit": limit, "examples": c["examples"], "parsed": c["parsed"],
            "ok": c["parse_ok"], "repaired": c["parse_repaired"], "failed": c["parse_failed"],
            "parse_rate": c["parsed"] / n, "ok_rate": c["parse_ok"] / n,
            "model_calls": c["model_calls"], "finish_length": c.get("finish_length", 0),
            "finish_length_share": (c.get("finish_length", 0) / c["model_calls"]) if c["model_calls"] else 0.0,
            "headline_metric": head, "headline": hv, "meets_target": c["parsed"] / n >= TARGET,
            "wall_s": round(wall_s, 1)}


def fmt(r: dict[str, Any]) -> str:
    """A fixed-width line of one row."""
    hv = "-" if r["headline"] is None else f"{r['headline']:.3f}"
    return (f"{r['task']:<19} {r['method']:<10} {r['examples']:>4} {r['parsed']:>6} {r['repaired']:>8} {r['failed']:>6} "
            f"{r['parse_rate']:>6.0%} {r['ok_rate']:>5.0%} {r['finish_length_share']:>7.0%}  {r['headline_metric']}={hv}"
            f"  {'' if r['meets_target'] else '<90%'} ({r['wall_s']:.0f}s)")


HEADER = (f"{'task':<19} {'method':<10} {'n':>4} {'parsed':>6} {'repaired':>8} {'failed':>6} {'rate':>6} {'ok':>5} "
          f"{'length':>7}  headline")


def main(argv: list[str] | None = None) -> int:
    """Measure every headline pair; print rows as they come; write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--limit-for", default="", help="per pair limits, e.g. perrec/pairwise=8,recbench_plus/assistant=10")
    ap.add_argument("--only", default="", help="comma-separated task/method pairs (default: all headline pairs)")
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--no-cache", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "parse_rates.json"))
    ap.add_argument("--runs-dir", default=None, help="keep the run dirs here (default: a temp dir)")
    a = ap.parse_args(argv)
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    import recbench.run.evaluate as app
    from recbench.run.construct import LazyBackend

    per = {k: int(v) for k, v in (x.split("=") for x in a.limit_for.split(",") if x)}
    pairs = [tuple(p.split("/")) for p in a.only.split(",") if p] or HEADLINE
    runs = Path(a.runs_dir or tempfile.mkdtemp(prefix="rb_parse_rates_"))
    load0 = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    extra = ["run.progress=false", *(["cache.enabled=false"] if a.no_cache else [])]
    backend = None
    rows = []
    print(f"runs in {runs}; load {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}", flush=True)
    print(HEADER, flush=True)
    for task, method in pairs:
        limit = per.get(f"{task}/{method}", a.limit)
        cfg = compose([f"task={task}", f"method={method}", f"model={a.model}", f"limit={limit}", *extra])
        if backend is None:  # one model for every pair, loaded on the first cache miss only
            backend = LazyBackend(cfg.model)
        app.LazyBackend = lambda _cfg, shared=backend: shared  # run_from_config builds its lazy backend through this
        t0 = time.time()
        m = app.run_from_config(cfg, runs / task / method)
        rows.append(row_of(task, method, limit, m, time.time() - t0))
        print(fmt(rows[-1]), flush=True)
    result = {"started": started, "finished": time.strftime("%Y-%m-%d %H:%M:%S"), "model": a.model,
              "limit": a.limit, "limit_for": per, "limit_strategy": "stratified", "cpus": os.cpu_count(),
              "load_avg_start": list(load0), "load_avg_end": list(os.getloadavg()),
              "command": "nice -n 10 .venv/bin/python benchmarks/parse_rates.py " + " ".join(argv or sys.argv[1:]),
              "parse_rate": "parsed examples (ok + repaired) / examples; failures are never parsed", "rows": rows}
    out = Path(a.out)
    if a.only and out.exists():  # a partial run updates its rows in the existing file
        old = json.loads(out.read_text())
        keep = [r for r in old.get("rows", []) if (r["task"], r["method"]) not in set(pairs)]
        result["rows"] = sorted(keep + rows, key=lambda r: next((i for i, p in enumerate(HEADLINE)
                                                                  if p == (r["task"], r["method"])), 99))
        result["partial_updates"] = old.get("partial_updates", []) + [{"started": started, "pairs": [list(p) for p in pairs],
                                                                        "load_avg_start": list(load0)}]
        for k in ("started", "limit", "limit_for", "load_avg_start", "load_avg_end", "command"):
            result[k] = old.get(k, result[k])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}; load {os.getloadavg()[0]:.2f}", flush=True)
    return 0 if all(r["meets_target"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
