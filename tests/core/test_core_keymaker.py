"""KeyMaker assembles the cache key from parts serialized once; it must equal sha256 of the canonical JSON payload
(the key every existing cache file was written with), and the prompt hash of prompts.jsonl likewise."""
from __future__ import annotations

import random

from recbench.store.response_cache import KeyMaker
from recbench.api.types import Constraint, Request, SamplingParams, sha256_json

import pytest

pytestmark = pytest.mark.fast


def _requests(n: int = 120) -> list[Request]:
    rng = random.Random(3)
    out = []
    for i in range(n):
        msgs = [{"role": "system", "content": f"sys ünïcode \"q\" \\ \n\t{i % 3}"},
                {"role": "user", "content": "héllo 日本 \u2028 " + "".join(rng.choice("ab\"\\\n é") for _ in range(i % 9))}]
        sp = SamplingParams(temperature=[0.0, 0.7][i % 2], top_p=[1.0, 0.9][i % 3 == 0], max_tokens=8 + i % 3,
                            seed=i % 4, stop=("\n", "</s>") if i % 5 == 0 else ())
        c = [None, Constraint(kind="choice", choices=("[User A]", "[User B]")), Constraint.json_schema({"a": [1, "é"]}),
             Constraint(kind="regex", pattern="\\d+")][i % 4]
        out.append(Request.chat(msgs, sp, constraint=c, adapter=[None, "lora/x"][i % 2], logprobs=[None, 3][i % 3 == 0],
                                example_id=str(i)))
    return out


def test_key_equals_sha256_of_the_canonical_payload():
    for identity in ({"kind": "hf", "name": "m", "weights": "sha256:abc", "x": None, "quirks": ["fold_system"]},
                     {"kind": "predictions", "name": "p", "keyed_by_example": True}):
        km = KeyMaker(identity)
        for r in _requests():
            payload = {"model": identity, "request": r.content_dict()}
            if identity.get("keyed_by_example"):
                payload = {"example_id": r.example_id, **payload}
            assert km.key(r) == sha256_json(payload)
            assert km.key(r) == sha256_json(payload)  # parts cached: the second key is the same
            h, msgs = km.prompt_hash(r)
            assert h == sha256_json(r.message_dicts())[:20] and msgs == r.message_dicts()


def test_known_key_is_stable():
    r = Request.chat([{"role": "user", "content": "Rank them."}], SamplingParams(max_tokens=8))
    assert KeyMaker({"kind": "hf", "name": "m"}).key(r) == sha256_json(
        {"model": {"kind": "hf", "name": "m"}, "request": {"messages": [{"role": "user", "content": "Rank them."}],
         "sampling": {"temperature": 0.0, "top_p": 1.0, "max_tokens": 8, "seed": 0, "stop": []},
         "constraint": None, "adapter": None, "logprobs": None}})


def test_prompt_line_is_the_json_of_the_prompt_record():
    """prompts.jsonl lines assembled from the messages' JSON that key() made equal json.dumps of {"key", "messages"}
    (non-ASCII kept), for prompts taken fresh, memoized, and asked in another order."""
    import json

    km = KeyMaker({"kind": "hf", "name": "m"})
    reqs = _requests() + [Request.chat([{"role": "system", "content": "Système ☃ \"q\"\n\\\\"},
                                        {"role": "user", "content": "Rank \u2028 them"}], SamplingParams(max_tokens=8))]
    for r in reqs:
        km.key(r)
    for r in reqs + reqs[::-1]:
        h, msgs = km.prompt_hash(r)
        assert km.prompt_line(r, h) == json.dumps({"key": h, "messages": msgs}, ensure_ascii=False)
    assert km.prompt_line(reqs[0], "abc") == json.dumps({"key": "abc", "messages": reqs[0].message_dicts()},
                                                        ensure_ascii=False)  # not the last prompt taken: encoded again
