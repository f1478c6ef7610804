"""Backend throughput, one run, same prompts: eval loop vs raw vllm.LLM.chat, and the openai backend at concurrency 1 vs 32.

    .venv-vllm/bin/python benchmarks/bench_backends.py --limit 32 [--skip-server] [--out bench.json]

Part 1 runs PerRecBench listwise through the whole eval loop (cache off) on the vllm backend, then sends the very
same requests (same SamplingParams) straight to `LLM.chat`; the prefix cache is reset before each timed pass.
Part 2 starts a real vLLM OpenAI server on 127.0.0.1 (free port) and sends the same requests through the openai
backend with concurrency 1 and 32 after one warm-up pass. Target: loop/raw >= 0.95.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from recbench.testing.recording import Recording  # noqa: E402
from recbench.testing.serve import start_vllm_server  # noqa: E402
from recbench.api.types import Request  # noqa: E402


def compose(*overrides: str):
    """The run config as `python -m recbench ...` composes it."""
    from hydra import compose as hcompose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from recbench.cli.overrides import method_paths
    from recbench.run.construct import CONFIG_MODULE, register_resolvers

    register_resolvers()
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        return hcompose(config_name="config",
                        overrides=method_paths(["run.progress=false", "cache.enabled=false", *overrides]))


def bench_vllm(limit: int, method: str) -> tuple[dict[str, Any], Any, list[Request]]:
    """Eval-loop vs raw LLM.chat throughput on the same requests."""
    from recbench.run.construct import build_backend
    from recbench.run.evaluate import run_from_config

    cfg = compose("task=perrec", f"method={method}", "model=smollm2-vllm", f"limit={limit}")
    t0 = time.time()
    vb = build_backend(cfg.model)
    startup = time.time() - t0
    rec = Recording(vb)
    # warm-up (structured-output grammars, kernels), not timed
    run_from_config(compose("task=perrec", f"method={method}", "model=smollm2-vllm", "limit=2"),
                    tempfile.mkdtemp(prefix="rb_bench_warm_"), backend=vb)
    res: dict[str, list[float]] = {"loop": [], "raw": []}
    toks: dict[str, int] = {}
    for rep in range(2):
        vb.llm.reset_prefix_cache()
        rec.requests.clear()
        m = run_from_config(cfg, tempfile.mkdtemp(prefix="rb_bench_loop_"), backend=rec).to_dict()
        res["loop"].append(m["this_invocation"]["wall_time_s"])
        toks["loop"] = m["this_invocation"]["completion_tokens"]
        reqs = list(rec.requests)
        params = [vb.sampling_params(r) for r in reqs]
        vb.llm.reset_prefix_cache()
        t = time.time()
        outs = vb.llm.chat([r.message_dicts() for r in reqs], sampling_params=params, use_tqdm=False)
        res["raw"].append(time.time() - t)
        toks["raw"] = sum(len(o.outputs[0].token_ids) for o in outs)
    loop_s, raw_s = min(res["loop"]), min(res["raw"])
    out = {
        "requests": len(reqs), "engine_startup_s": round(startup, 1),
        "loop_wall_s": round(loop_s, 3), "raw_wall_s": round(raw_s, 3),
        "loop_completion_tokens": toks["loop"], "raw_completion_tokens": toks["raw"],
        "loop_req_per_s": round(len(reqs) / loop_s, 3), "raw_req_per_s": round(len(reqs) / raw_s, 3),
        "loop_over_raw": round(raw_s / loop_s, 3), "all_walls": res,
    }
    return out, vb, reqs


def bench_openai(model_dir: str, reqs: list[Request]) -> dict[str, Any]:
    """openai backend against a real vLLM server: the same requests at concurrency 1 and 32."""
    from recbench.backends.openai import OpenAIBackend

    cfg = compose("model=smollm2-openai")
    kw = {k: v for k, v in cfg.model.backend.items() if k not in ("_target_", "base_url", "concurrency")}
    srv = start_vllm_server(model_dir, seed=None)
    base_url = srv.base_url
    out: dict[str, Any] = {"requests": len(reqs), "server_startup_s": round(srv.startup_s, 1)}
    try:
        warm = OpenAIBackend(**kw, base_url=base_url, concurrency=32)
        warm.generate(reqs)  # warm-up: grammars compiled, prefixes cached for both timed passes
        warm.close()
        for c in (1, 32):
            b = OpenAIBackend(**kw, base_url=base_url, concurrency=c)
            t = time.time()
            resps = b.generate(reqs)
            dt = time.time() - t
            b.close()
            out[f"c{c}"] = {"wall_s": round(dt, 3), "req_per_s": round(len(reqs) / dt, 3),
                            "completion_tokens": sum(r.completion_tokens for r in resps),
                            "errors": sum(not r.ok for r in resps)}
        out["c32_over_c1"] = round(out["c1"]["wall_s"] / out["c32"]["wall_s"], 3)
    finally:
        srv.stop()
    return out


def main() -> None:
    """Run both parts and print/save the JSON result."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=32, help="PerRecBench examples (one listwise request each)")
    ap.add_argument("--method", default="listwise")
    ap.add_argument("--skip-server", action="store_true")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    result: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "load_avg": os.getloadavg()}}
    result["vllm"], vb, reqs = bench_vllm(a.limit, a.method)
    print(json.dumps({"vllm": result["vllm"]}, indent=1), flush=True)
    if not a.skip_server:
        result["openai"] = bench_openai(vb.model_path, reqs)
        print(json.dumps({"openai": result["openai"]}, indent=1), flush=True)
    result["machine"]["load_avg_end"] = os.getloadavg()
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
