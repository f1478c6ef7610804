"""Write user profiles with a model of your choice (separate from the evaluated model) into a profile file.

    python -m recbench.tasks.perrec.profiles task=perrec_built task.data_dir=built/ml model=llama8b out=built/ml/profiles.json
    python -m recbench task=perrec_built task.data_dir=built/ml model=smollm2 method=listwise \\
        task.profile=true task.profile_file=built/ml/profiles.json

One profile per (user, query item) from the user's history before the query (template profile.j2, the paper's
appendix prompt), keyed "<user_id>@<query_item>"; requests go through the response cache like any other.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

from recbench.run.construct import build_backend, build_task, register_resolvers
from recbench.store.response_cache import ResponseCache, cache_key
from recbench.api.prompts import render
from recbench.api.types import Request, SamplingParams

PKG = "recbench.tasks.perrec"


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


def write_profiles(cfg, out: str, backend=None) -> dict[str, str]:
    """Generate (or replay from the cache) every profile and write them as JSON to `out`."""
    task = build_task(cfg)
    backend = backend or build_backend(cfg.model)
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


def main(argv: Optional[list[str]] = None) -> None:
    """CLI: recbench overrides (task=..., model=..., task.data_dir=...) plus out=<file>."""
    from hydra import compose, initialize_config_module

    argv = list(sys.argv[1:] if argv is None else argv)
    out = next((a.split("=", 1)[1] for a in argv if a.startswith("out=")), None)
    if not out:
        print(__doc__)
        sys.exit(2)
    register_resolvers()
    # profiles depend on the task, the model and the sampling settings, never on the method: a method= is left out
    overrides = [a for a in argv if not a.startswith(("out=", "method="))]
    with initialize_config_module(config_module="recbench.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    profiles = write_profiles(cfg, out)
    print(f"wrote {len(profiles)} profiles to {out}")


if __name__ == "__main__":
    main()
