"""A sequential reference client that behaves like the official PerRecBench inference script.

One request in flight, a NEW `openai.OpenAI` client per request, groups one after another; pairwise asks both
orders one after the other and runs its heapsort sequentially per group. Prompts, sampling and parsing are
recbench's own (the method generators are driven by hand), so both clients send the same requests to a
deterministic server and reach the same predictions; only the way requests are scheduled differs.

    python benchmarks/reference_client.py --base-url http://127.0.0.1:8000/v1 --method pairwise [--limit 40]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def ask(base_url: str, model: str, req: Any) -> Any:
    """One chat completion through a brand-new client (as the official script does), closed afterwards."""
    from openai import OpenAI

    from recbench.api.types import Response

    client = OpenAI(api_key="EMPTY", base_url=base_url, max_retries=2, timeout=120)
    try:
        sp = req.sampling
        out = client.chat.completions.create(model=model, messages=req.message_dicts(), temperature=sp.temperature,
                                             top_p=sp.top_p, max_tokens=sp.max_tokens, seed=sp.seed)
    finally:
        client.close()
    ch = out.choices[0]
    usage = out.usage
    return Response(text=ch.message.content or "", finish_reason=ch.finish_reason or "stop",
                    prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                    completion_tokens=getattr(usage, "completion_tokens", 0) or 0)


def load(method: str, limit: Optional[int] = None, data_dir: Optional[str] = None,
         extra: tuple[str, ...] = ()) -> tuple[Any, list[Any]]:
    """recbench's PerRecBench method object and the bundled groups (first `limit`), as the CLI composes them."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from recbench.cli.overrides import method_paths
    from recbench.run.construct import CONFIG_MODULE, build_task, register_resolvers

    register_resolvers()
    GlobalHydra.instance().clear()
    overrides = ["task=perrec", f"method={method}", "model=smollm2-openai", "run.progress=false"]
    if data_dir:
        overrides.append(f"task.data_dir={data_dir}")
    if limit:
        overrides.append(f"limit={limit}")
    overrides += list(extra)
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        cfg = compose(config_name="config", overrides=method_paths(overrides))
    task = build_task(cfg)
    m = task.make_method(cfg.method, cfg.sampling)
    examples = task.load()
    if limit:  # the same groups `python -m recbench ... limit=N` picks
        from recbench.run.construct import select_examples

        examples = select_examples(examples, cfg.limit, cfg.run.limit_strategy, int(cfg.seed), task.breakdown_by)
    m.prepare(examples)
    return m, examples


def run(base_url: str, method: str, limit: Optional[int] = None, model: str = "smollm2",
        extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """Evaluate the groups one request at a time; returns wall time, request count and each group's prediction."""
    m, examples = load(method, limit, extra=extra)
    t0 = time.perf_counter()
    requests, predictions = 0, {}
    for ex in examples:
        gen = m.run(ex)
        resps = None
        while True:
            try:
                reqs = next(gen) if resps is None else gen.send(resps)
            except StopIteration as stop:
                predictions[ex.id] = stop.value.prediction
                break
            resps = []
            for r in reqs:  # both orders of a pair: one after the other
                resps.append(ask(base_url, model, r))
                requests += 1
    return {"method": method, "groups": len(examples), "requests": requests,
            "wall_s": time.perf_counter() - t0, "predictions": predictions}


def main() -> None:
    """Command line: run against a server and print wall time and request count."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--method", default="listwise", choices=["pointwise", "pairwise", "listwise"])
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--model", default="smollm2")
    a = ap.parse_args()
    res = run(a.base_url, a.method, a.limit, a.model)
    print(json.dumps({k: v for k, v in res.items() if k != "predictions"}))


if __name__ == "__main__":
    main()
