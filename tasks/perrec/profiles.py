"""Write user profiles with a model of your choice (separate from the evaluated model) into a profile file.

    python -m recbench.tool perrec.profiles task=perrec_built task.data_dir=built/ml model=llama8b out=built/ml/profiles.json
    python -m recbench task=perrec_built task.data_dir=built/ml model=smollm2 method=listwise \\
        task.profile=true task.profile_file=built/ml/profiles.json

One profile per (user, query item) from the user's history before the query (template profile.j2, the paper's
appendix prompt), keyed "<user_id>@<query_item>"; requests go through the response cache like any other. The
command line is the core's tool runner (recbench/cli/tool.py): it composes the config and builds the task and the
backend as a run does, and hands them to run_tool here.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from recbench.api.prompts import render
from recbench.api.types import Request, SamplingParams
from recbench.store.response_cache import ResponseCache, cache_key

PKG = "recbench.tasks.perrec"
#: the tool's own arguments (recbench/cli/tool.py); a method= is taken and ignored: profiles depend on the task, the
#: model and the sampling settings, never on the method
TOOL_KEYS = ("out", "method")
TOOL_REQUIRED = ("out",)


def profile_requests(task, sampling_cfg, splits: tuple[str, ...] = ("test", "heldout")) -> dict[str, Request]:
    """{'user@query_item': profile request} for every member of the task's (and held-out) groups."""
    tcfg = task.cfg
    # the same explicit parameters as a method's inline profile request (so both share cache entries)
    sp = SamplingParams(temperature=float(sampling_cfg.temperature), top_p=float(sampling_cfg.top_p),
                        max_tokens=int(tcfg.profile_max_tokens), seed=int(sampling_cfg.seed),
                        stop=tuple(sampling_cfg.get("stop") or ()))
    out: dict[str, Request] = {}
    exs = task.load() + (task.heldout() if "heldout" in splits else [])
    for ex in exs:
        for u in ex.data["users"]:
            msgs = [{"role": "user", "content": render(PKG, "profile.j2", history=u["history"][-int(tcfg.profile_history):])}]
            out[f"{u['user_id']}@{ex.data['query_item']}"] = Request.chat(msgs, sp, purpose="profile")
    return out


def write_profiles(task: Any, backend: Any, cfg: Any, out: str) -> dict[str, str]:
    """Generate (or replay from the cache, cfg.cache) every profile of the task's members with the backend and the
    run's sampling settings (cfg.sampling), and write them as JSON to `out`."""
    reqs = profile_requests(task, cfg.sampling)
    cache = ResponseCache(cfg.cache.path, enabled=cfg.cache.enabled)
    ident = backend.identity()
    keys = {name: cache_key(ident, r) for name, r in reqs.items()}
    have = cache.get_many(list(keys.values()))
    todo = [n for n in reqs if keys[n] not in have]
    step = max(1, backend.batch_size * 4)
    for s in range(0, len(todo), step):
        chunk = todo[s:s + step]
        resps = backend.generate([reqs[n] for n in chunk])
        cache.put_many([(keys[n], str(ident.get("name")), reqs[n], r) for n, r in zip(chunk, resps)])
        have.update({keys[n]: r for n, r in zip(chunk, resps)})
    profiles = {n: have[keys[n]].text.strip() for n in reqs if have.get(keys[n]) is not None and have[keys[n]].ok}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(profiles, indent=1, ensure_ascii=False))
    cache.close()
    return profiles


def run_tool(cfg: Any, task: Any, backend: Any, args: dict[str, str]) -> None:
    """The command line (python -m recbench.tool perrec.profiles ... out=<file>): the parts built by the core."""
    profiles = write_profiles(task, backend, cfg, args["out"])
    print(f"wrote {len(profiles)} profiles to {args['out']}")


if __name__ == "__main__":
    raise SystemExit("run it through the core's tool runner: python -m recbench.tool perrec.profiles key=value ... "
                     "out=<file>")
