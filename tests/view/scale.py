"""A large run dir for the viewer at scale: a real listwise run on the bundled sample (scripted answers), its
records cloned to N examples with fresh ids (and, optionally, one distinct prompt per example, as a real run of N
groups stores)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from recbench.run.evaluate import run_from_config
from tests.doubles import ScriptedBackend
from tests.helpers import compose_cfg, listwise_answer


def listwise_run(root: Path) -> Path:
    """perrec listwise on every group of the bundled sample, answered by a scripted backend."""
    cfg = compose_cfg([f"cache.path={root / 'cache.sqlite'}", "run.progress=false", "run.bootstrap_resamples=50",
                       "method=listwise"])
    run_dir = root / "listwise"
    run_from_config(cfg, run_dir, backend=ScriptedBackend(listwise_answer, batch_size=16))
    return run_dir


def scaled_run(src: Path, dst: Path, n: int, unique_prompts: bool = False) -> Path:
    """A copy of run dir `src` whose samples.jsonl holds n records, cycled from src's with ids '<id>~<k>'."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file() and f.name not in ("samples.jsonl", "prompts.jsonl", "samples.html"):
            shutil.copy2(f, dst / f.name)
    records = [json.loads(x) for x in (src / "samples.jsonl").read_text().splitlines() if x.strip()]
    prompts = {d["key"]: d["messages"] for d in
               (json.loads(x) for x in (src / "prompts.jsonl").read_text().splitlines() if x.strip())}
    with open(dst / "samples.jsonl", "w", encoding="utf-8") as out, \
            open(dst / "prompts.jsonl", "w", encoding="utf-8") as pout:
        written = set()
        for i in range(n):
            r = dict(records[i % len(records)])
            r["id"] = f"{r['id']}~{i // len(records)}"
            calls = []
            for c in r.get("calls", []):
                c = dict(c)
                key = c.get("prompt")
                if key and unique_prompts:
                    new = f"{key}-{i}"
                    msgs = [dict(m) for m in prompts[key]]
                    msgs[-1]["content"] += f"\n(group {i})"
                    pout.write(json.dumps({"key": new, "messages": msgs}) + "\n")
                    c["prompt"] = new
                elif key and key not in written:
                    pout.write(json.dumps({"key": key, "messages": prompts[key]}) + "\n")
                    written.add(key)
                calls.append(c)
            r["calls"] = calls
            out.write(json.dumps(r) + "\n")
    return dst
