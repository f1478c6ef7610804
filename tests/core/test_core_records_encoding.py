"""The per-answer writers assemble JSON text without json.dumps' per-call set-up: the response cache's request and
response columns, the message strings of cache keys, and samples.jsonl lines. Each must equal what json.dumps wrote
before, byte for byte, on odd inputs (non-ASCII, quotes, control characters, floats like 1e-05 and 0.1+0.2, NaN and
infinities, big ints, bools and int/float subclasses where numbers go, logprobs)."""
from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from recbench.api.types import Constraint, Request, Response, SamplingParams
from recbench.store.response_cache import ResponseCache, _ascii_str, _canon_str
from recbench.store.runstore import _json_default, clean_nan, dumps_line

pytestmark = pytest.mark.fast

ODD = ["", "plain", "héllo 日本 ☃", 'quote " back \\ slash', "ctl \x00\x01\x1f\x7f \b\f\n\r\t", "\u2028\u2029\ufeff",
       "emoji \U0001F600", "{\"ranking\": [\"User B\"]}"]


def test_strings_equal_json_dumps():
    for s in ODD + [None, 3, 2.5, True, ["a"]]:
        assert _canon_str(s) == json.dumps(s, ensure_ascii=False)
        assert _ascii_str(s) == json.dumps(s)


def _requests() -> list[Request]:
    rng = random.Random(5)
    out = []
    for i in range(60):
        msgs = [{"role": "system", "content": rng.choice(ODD)}, {"role": "user", "content": rng.choice(ODD) + str(i)}]
        c = [None, Constraint(kind="choice", choices=("[User A]", "é")), Constraint.json_schema({"a": [1, "é"]})][i % 3]
        out.append(Request.chat(msgs[i % 2:], SamplingParams(temperature=[0.0, 0.7][i % 2], max_tokens=8 + i % 3),
                                constraint=c, adapter=[None, "lora/ü"][i % 2], logprobs=[None, 3][i % 4 == 0]))
    return out


def test_request_column_equals_json_dumps_of_the_content(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    for r in _requests() * 2:  # the first of each parameter set builds the tail, the rest assemble
        assert cache._request_json(r) == json.dumps(r.content_dict())
    cache.close()


def _responses() -> list[Response]:
    class Int(int):
        pass

    out = []
    for lat in (0.0417, 1e-05, 0.1 + 0.2, 1e16, 5e-324, 3, math.nan, math.inf, -math.inf, np.float64(0.25), True):
        out.append(Response(text="r", latency_s=lat))
    for pt in (0, 190, 2**70, -1, True, Int(5), 1.5):
        out.append(Response(text="é \"x\"\n", prompt_tokens=pt, completion_tokens=pt))
    out.append(Response(text="t", logprobs=[{"token": "a", "logprob": -0.1}]))
    out.append(Response(text="t", finish_reason="length"))
    return out


def test_response_column_equals_json_dumps_of_the_payload():
    for resp in _responses():
        assert ResponseCache._payload_json(resp) == json.dumps(ResponseCache._payload(resp))


def test_rows_read_back_as_written(tmp_path):
    """The columns written by put_many are what get_many / requests_by_prefix read back."""
    cache = ResponseCache(tmp_path / "c.sqlite")
    reqs = _requests()[:5]
    for i, r in enumerate(reqs):
        cache.put_later(f"{i:064d}", "m", r, Response(text=ODD[i], prompt_tokens=i, latency_s=0.5))
    assert cache.flush() == 5
    got = cache.get_many([f"{i:064d}" for i in range(5)])
    assert [got[f"{i:064d}"].text for i in range(5)] == ODD[:5]
    assert cache.requests_by_prefix([f"{i:064d}"[:20] for i in range(1)]) == {}  # the prefix is shared by all five
    assert cache.requests_by_prefix([f"{4:064d}"]) == {f"{4:064d}": json.loads(json.dumps(reqs[4].content_dict()))}
    cache.close()


def test_sample_lines_equal_json_dumps():
    class Sub(str):
        pass

    records = [{"id": s, "meta": {"k": s, "n": 2**70, "f": 1e-05, "t": (1, "é")}, "metrics": {"ptc": 0.1 + 0.2}}
               for s in ODD]
    records += [{"id": "nan", "metrics": {"ptc": math.nan, "x": [math.inf, -math.inf]}},
                {"id": "np", "v": np.float64(0.5), "i": np.int64(3), "s": {1, 2} - {1}, "sub": Sub("x")},
                {"id": "keys", 1: "int key", None: "none key", 2.5: True}]
    for rec in records:
        try:
            want = json.dumps(rec, default=_json_default, ensure_ascii=False, allow_nan=False) + "\n"
        except ValueError:
            want = json.dumps(clean_nan(rec), default=_json_default, ensure_ascii=False) + "\n"
        assert dumps_line(rec) == want


def test_keys_and_prompt_lines_of_odd_message_lists():
    """No message, one, several; with and without example ids in the key; a prompt asked before its key."""
    from recbench.api.types import sha256_json
    from recbench.store.response_cache import KeyMaker, cache_key, messages_hash

    reqs = [Request(messages=()), Request(messages=(("user", "é"),)), *_requests()[:6]]
    for ident in ({"kind": "openai", "name": "m"}, {"kind": "predictions", "name": "p", "keyed_by_example": True}):
        km = KeyMaker(ident)
        for r in reqs:
            payload = {"model": ident, "request": r.content_dict()}
            if ident.get("keyed_by_example"):
                payload = {"example_id": r.example_id, **payload}
            assert km.key(r) == sha256_json(payload) == cache_key(ident, r)
            h = km.prompt_key(r)
            assert h == messages_hash(r.message_dicts()) == sha256_json(r.message_dicts())[:20]
            assert km.prompt_line(r, h) == json.dumps({"key": h, "messages": r.message_dicts()}, ensure_ascii=False)
    fresh = KeyMaker({"kind": "openai", "name": "m"})
    assert fresh.prompt_key(reqs[1]) == sha256_json(reqs[1].message_dicts())[:20]  # no key() first


def test_request_messages_json_is_the_cache_text_or_none(tmp_path):
    """KeyMaker.request_messages_json: json.dumps of the message dicts where the messages' JSON from key() is ASCII
    (DEL aside: ensure_ascii escapes it), else None; a row written with it equals one written without; prompt_line
    reuses its text."""
    from recbench.store.response_cache import KeyMaker

    km = KeyMaker({"kind": "openai", "name": "m"})
    cache = ResponseCache(tmp_path / "c.sqlite")
    reqs = [Request.chat([{"role": "user", "content": s}], SamplingParams()) for s in ODD + ["del \x7f", "ascii"]]
    seen = 0
    for r in reqs + _requests():
        assert km.request_messages_json(r) is None  # no key made yet
        km.key(r)
        got = km.request_messages_json(r)
        want = json.dumps(r.message_dicts())
        assert got is None or got == want
        seen += got is not None
        cache._request_json(r)  # the tail of this parameter set is known from here on
        assert cache._request_json(r, got) == cache._request_json(r) == json.dumps(r.content_dict())
        h = km.prompt_key(r)
        assert km.prompt_line(r, h) == json.dumps({"key": h, "messages": r.message_dicts()}, ensure_ascii=False)
        assert km.request_messages_json(r) is None  # prompt_key() took the parts
    assert seen >= 3 and km.request_messages_json(reqs[-1]) is None
    cache.close()
