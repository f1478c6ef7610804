"""An empty or null answer, or a response without choices, is a backend error on every server path: retried, never
cached, the example abandoned (retried on the next run) instead of scored. An in-process engine (hf, vllm offline)
keeps a blank string as the model's own answer (deterministic, scored as unparsed); a missing one is an error."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pytest

from backends_stub import StubServer, compose_cfg, listwise_answer  # noqa: E402

from recbench.run.evaluate import run_from_config  # noqa: E402
from recbench.backends.base import empty_answer  # noqa: E402
from recbench.backends.openai import OpenAIBackend  # noqa: E402
from recbench.backends.openai_wire import _Failure, _parse  # noqa: E402
from recbench.backends.transport import HttpReply  # noqa: E402
from recbench.api.types import Request, SamplingParams  # noqa: E402

pytestmark = pytest.mark.fast

FAST = dict(backoff_initial_s=0.01, backoff_max_s=0.05, timeout_s=5.0)


def _reqs(n: int) -> list[Request]:
    return [Request.chat([{"role": "user", "content": f"User A:\n- Average rating: {i % 5}.0\nUser B:\n"
                                                      f"- Average rating: 2.5\nrequest {i}"}],
                         SamplingParams(max_tokens=16)) for i in range(n)]


def _reply(choices, usage=None) -> HttpReply:
    return HttpReply(200, {}, json.dumps({"choices": choices, "usage": usage or {}}).encode())


def test_empty_answer_rule():
    assert empty_answer("[User A]", "stop") is None
    assert "null" in empty_answer(None, "stop") and "empty" in empty_answer("", "stop")
    assert "empty" in empty_answer(" \n\t", "stop")  # blank text is no answer either
    assert "not a string" in empty_answer(["a"], "stop")
    # the model spent its whole budget (e.g. reasoning) without visible text: its answer, scored as unparsed
    assert empty_answer(None, "length") is None and empty_answer("", "length") is None
    # an in-process engine decoded the text itself: a blank string is the model's answer, a missing one is not
    assert empty_answer("", "stop", in_process=True) is None and empty_answer(" ", "stop", in_process=True) is None
    assert "null" in empty_answer(None, "stop", in_process=True)


@pytest.mark.parametrize("choices, what", [
    ([], "no choices"),
    ([{"message": {"role": "assistant", "content": None}, "finish_reason": "stop"}], "null answer"),
    ([{"message": {"role": "assistant", "content": ""}, "finish_reason": "stop"}], "empty answer"),
    ([{"message": {"role": "assistant", "content": "  "}, "finish_reason": "stop"}], "empty answer"),
    ([{"message": {"role": "assistant"}, "finish_reason": "stop"}], "null answer"),
])
def test_parse_refuses_bodies_without_an_answer(choices, what):
    with pytest.raises(_Failure) as ei:
        _parse(_reply(choices))
    assert what in str(ei.value) and ei.value.retryable and ei.value.status == 200


def test_parse_keeps_an_empty_answer_cut_at_the_token_limit():
    r = _parse(_reply([{"message": {"role": "assistant", "content": None}, "finish_reason": "length"}],
                      {"prompt_tokens": 7, "completion_tokens": 16}))
    assert r.ok and r.text == "" and r.finish_reason == "length" and r.completion_tokens == 16


@pytest.mark.parametrize("fault", ["null", "empty", "nochoices"])
def test_a_missing_answer_is_retried_and_the_retry_answers(fault):
    with StubServer(schedule=lambda k, a: fault if a == 1 else None) as stub:
        b = OpenAIBackend(model="stub", base_url=stub.base_url, concurrency=4, **FAST)
        reqs = _reqs(5)
        out = b.generate(reqs)
        b.close()
    assert [r.text for r in out] == [listwise_answer(r.message_dicts()) for r in reqs]
    assert set(stub.attempts.values()) == {2} and stub.faults[fault] == 5
    assert b.stats["malformed"] == 5 and b.stats["retries"] == 5 and b.stats["gave_up"] == 0


def _perrec_cfg(tmp: Path, *extra: str):
    return compose_cfg("task=perrec", "method=listwise", "model=smollm2-openai", "limit=6",
                       f"cache.path={tmp / 'cache.sqlite'}", *extra)


def test_null_answers_are_never_cached_nor_scored(tmp_path):
    """A server that answers 200 with content null every time: each request gives up after its retries, the
    examples are abandoned (exit 3 path), no cache row holds the null, and the healthy rerun asks again."""
    cfg = _perrec_cfg(tmp_path)
    with StubServer(schedule=lambda k, a: "null") as stub:
        b = OpenAIBackend(model="smollm2", base_url=stub.base_url, max_retries=2, **FAST)
        m = run_from_config(cfg, tmp_path / "run", backend=b).to_dict()
        b.close()
    assert not m["complete"] and m["counts"]["examples"] == 0 and m["counts"]["backend_errors"] == 6
    assert set(stub.attempts.values()) == {3}  # 1 + max_retries, each one a null answer
    errors = [json.loads(x) for x in (tmp_path / "run" / "errors.jsonl").read_text().splitlines()]
    assert len(errors) == 6 and all("null answer text" in e["error"] and "3 attempt(s)" in e["error"] for e in errors)
    with sqlite3.connect(tmp_path / "cache.sqlite") as c:
        assert c.execute("SELECT COUNT(*) FROM responses").fetchone()[0] == 0
    with StubServer() as healthy:
        b2 = OpenAIBackend(model="smollm2", base_url=healthy.base_url, **FAST)
        m2 = run_from_config(cfg, tmp_path / "run", backend=b2).to_dict()
        b2.close()
    assert m2["complete"] and m2["counts"]["examples"] == 6 and len(healthy.attempts) == 6


class _FakeLLM:
    """vLLM's LLM.chat shape: one RequestOutput per prompt, with `outputs` (completions) as scripted."""

    def __init__(self, outputs):
        self.outputs = outputs

    def chat(self, messages, **kw):
        return [SimpleNamespace(outputs=o, prompt_token_ids=[1, 2, 3]) for o in self.outputs[: len(messages)]]


def test_vllm_response_path_turns_missing_answers_into_errors():
    from recbench.backends.vllm import VLLMBackend

    done = SimpleNamespace(text="[User A]", finish_reason="stop", token_ids=[5, 6], logprobs=None)
    blank = SimpleNamespace(text="", finish_reason="stop", token_ids=[2], logprobs=None)
    cut = SimpleNamespace(text="", finish_reason="length", token_ids=[9] * 16, logprobs=None)
    b = object.__new__(VLLMBackend)  # the response path only: no engine
    b.llm, b.quirks, b.chat_template_kwargs = _FakeLLM([[done], [blank], [], [cut]]), (), None
    b.sampling_params = lambda r: None
    b.lora_request = lambda a: None
    out = b._chat(_reqs(4))
    assert out[0].ok and out[0].text == "[User A]" and out[0].completion_tokens == 2
    assert out[1].ok and out[1].text == ""  # the engine decoded nothing: the model's own (deterministic) answer
    assert not out[2].ok and "no completion" in out[2].error
    assert out[3].ok and out[3].text == "" and out[3].finish_reason == "length"


@pytest.mark.slow
def test_hf_empty_generation_is_the_models_answer(smollm2):
    """Real SmolLM2: an answer cut to nothing by a stop string at its very start is what the model said (the same on
    every retry), kept as an empty answer for the parser to count, not an error that abandons the example forever."""
    base = [{"role": "user", "content": "Say hello."}]
    first = smollm2.generate([Request.chat(base, SamplingParams(max_tokens=4))])[0]
    assert first.ok and first.text.strip()
    stop = first.text.strip()[:1]
    (r,) = smollm2.generate([Request.chat(base, SamplingParams(max_tokens=4, stop=(stop,)))])
    assert r.ok and r.text == "" and r.finish_reason == "stop", (first.text, r)
