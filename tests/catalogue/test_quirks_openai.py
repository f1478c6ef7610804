"""The Gemma-2 system-prompt fold also applies to OpenAI-compatible servers, and keys the cache apart."""
from __future__ import annotations

from recbench.backends.openai import OpenAIBackend
from recbench.testing.openai_stub import StubServer
from recbench.api.types import Request, SamplingParams

import pytest

pytestmark = pytest.mark.fast


def test_openai_backend_folds_the_system_prompt_and_keys_it():
    seen = []

    def answer(messages):
        seen.append(messages)
        return "ok"

    with StubServer(answer_fn=answer) as stub:
        plain = OpenAIBackend(model="m", base_url=stub.base_url)
        folded = OpenAIBackend(model="m", base_url=stub.base_url, quirks=["fold_system"])
        req = Request.chat([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
                           SamplingParams(max_tokens=4))
        assert plain.generate([req])[0].ok and folded.generate([req])[0].ok
        plain.close()
        folded.close()
    assert [m["role"] for m in seen[0]] == ["system", "user"]
    assert seen[1] == [{"role": "user", "content": "Be brief.\n\nHi"}]
    assert folded.identity()["quirks"] == ["fold_system"] and "quirks" not in plain.identity()
