"""PerRecBench listwise prompts per second on the bundled sample (data/perrec_sample), the way the loop's process
builds them: `Listwise.built(example)` (display order, user blocks, the listwise prompt) for every group, pass after
pass, in this process.

    python benchmarks/bench_perrec_fast_prompts.py [--passes 200] [--repeats 5] [--out results/x.json]
        [--tasks /tmp/old/tasks]   # another tree's tasks/ folder imported as recbench.tasks (before/after)

Two figures, each the best of --repeats timings (CPU time of this process: the machine may be shared) of --passes
passes over the 120 groups:
- cold: every pass starts with the groups' members dropped and the user-block memo cleared, so each block is
  rendered again (_user_block.j2) and each prompt written (listwise.j2);
- warm: the blocks stay memoized, so only the listwise prompt is written.
The load average is printed beside them (the machine is shared: compare figures taken at a similar load).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _method_and_examples():
    from omegaconf import OmegaConf

    from recbench.run.construct import bundled_data
    from recbench.tasks.perrec.task import PerRecTask

    task = PerRecTask(OmegaConf.create({"name": "perrec", "data_dir": bundled_data("perrec_sample"),
                                        "difficulties": ["easy", "medium", "hard"], "retrieval_k": 4,
                                        "history_max": 200, "profile": False, "profile_max_tokens": 32,
                                        "profile_history": 30, "legacy_tau": False}))
    method = task.make_method(OmegaConf.create({"name": "listwise", "max_tokens": 64, "constrained": False}),
                              OmegaConf.create({"temperature": 0.0, "top_p": 1.0, "seed": 0}))
    return method, task.load()


def _cold(examples) -> None:
    from recbench.tasks.perrec import prompting

    for e in examples:
        dict.pop(e.data, "users", None)
    prompting._BLOCKS.clear()


def _timed(method, examples, passes: int, cold: bool) -> float:
    """Seconds of `passes` passes (cold: members and blocks dropped before each pass, outside the timing)."""
    total = 0.0
    for _ in range(passes):
        if cold:
            _cold(examples)
            for e in examples:
                e.data["users"]  # noqa: B018 - members built outside the timing (both trees build them alike)
        t0 = time.process_time()
        for e in examples:
            method.built(e)
        total += time.process_time() - t0
    return total


def main() -> None:
    """Time the prompts and print (and optionally write) prompts/s."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--passes", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=None)
    ap.add_argument("--tasks", default=None, help="a tasks/ folder to import as recbench.tasks (e.g. an older tree's)")
    a = ap.parse_args()
    if a.tasks:
        import recbench.tasks

        recbench.tasks.__path__[:] = [str(Path(a.tasks).resolve())]
    method, examples = _method_and_examples()
    for e in examples:  # the first prompt is checked against Jinja's: done before timing
        method.built(e)
    gc.freeze()
    import recbench.tasks.perrec

    out = {"tree": recbench.tasks.perrec.__path__[0], "groups": len(examples), "passes": a.passes,
           "load_before": os.getloadavg()}
    for kind in ("cold", "warm"):
        times = [_timed(method, examples, a.passes, kind == "cold") for _ in range(a.repeats)]
        n = len(examples) * a.passes
        out[kind] = {"prompts_per_s": round(n / min(times)), "every_repeat": [round(n / t) for t in times]}
        print(f"{kind}: {out[kind]['prompts_per_s']:,} prompts/s (best of {a.repeats}: "
              f"{', '.join(f'{v:,}' for v in out[kind]['every_repeat'])})")
    out["load_after"] = os.getloadavg()
    print(f"load average before/after: {out['load_before']} / {out['load_after']}")
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
