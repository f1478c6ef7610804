"""Test helpers: compose the real Hydra config in-process."""
from __future__ import annotations

from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from recbench.run.construct import register_resolvers


def compose_cfg(overrides: list[str]):
    """The composed recbench config for the given overrides (as the CLI would build it, minus the hydra node)."""
    register_resolvers()
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="recbench.conf", version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


def listwise_answer(req) -> str:
    """A deterministic, parseable listwise answer: the users in reverse label order."""
    text = req.messages[-1][1]
    n = int(text.split(" users all rated")[0].strip().split()[-1])
    labels = [f"User {chr(65 + i)}" for i in range(n)][::-1]
    return '{"ranking": [' + ", ".join(f'"{x}"' for x in labels) + "]}"


def read_samples(run_dir) -> list[dict]:
    """A run dir's records as dicts, each call with its messages, read through recbench.store.schema.read_run."""
    from recbench.store.schema import read_run

    out = []
    for r in read_run(run_dir, require_result=False).samples(with_prompts=True):
        d = r.to_dict()
        for c, call in zip(d["calls"], r.calls):
            c["messages"] = call.messages
        out.append(d)
    return out


def run_scripted(tmp_path, overrides: list[str], answer_fn) -> tuple[dict, list[dict], list]:
    """Run the config through the loop with a ScriptedBackend answering `answer_fn(request)` into tmp_path/run:
    (metrics.json's content, samples.jsonl's records, every request the backend was sent)."""
    import json

    from recbench.run.evaluate import run_from_config
    from tests.doubles import ScriptedBackend

    cfg = compose_cfg([*overrides, f"cache.path={tmp_path / 'cache.sqlite'}"])
    seen = []

    def answer(req):
        seen.append(req)
        return answer_fn(req)

    m = run_from_config(cfg, tmp_path / "run", backend=ScriptedBackend(answer))
    recs = [json.loads(x) for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    return m, recs, seen
