"""Cache keying: a different model, adapter, template, seed or parameter never hits; errors are never stored."""
import subprocess
import sys

from recbench.store.response_cache import ResponseCache, cache_key
from recbench.api.types import Constraint, Request, Response, SamplingParams

import pytest

pytestmark = pytest.mark.fast

MSG = [{"role": "user", "content": "Rate 'Dune' from 1 to 5."}]
MODEL = {"kind": "hf", "name": "m", "weights": "sha256:abc", "adapter": None, "chat_template": "t1"}


def req(**kw):
    return Request.chat(MSG, SamplingParams(**{"max_tokens": 8, **kw}))


def test_key_covers_model_and_request_content():
    base = cache_key(MODEL, req())
    assert base == cache_key(dict(MODEL), req())  # deterministic
    variants = [
        cache_key({**MODEL, "name": "other"}, req()),
        cache_key({**MODEL, "weights": "sha256:def"}, req()),
        cache_key({**MODEL, "adapter": "lora1"}, req()),
        cache_key({**MODEL, "chat_template": "t2"}, req()),
        cache_key({**MODEL, "kind": "vllm"}, req()),
        cache_key(MODEL, req(seed=1)),
        cache_key(MODEL, req(temperature=0.7)),
        cache_key(MODEL, req(top_p=0.9)),
        cache_key(MODEL, req(max_tokens=9)),
        cache_key(MODEL, Request.chat(MSG, SamplingParams(max_tokens=8), constraint=Constraint("choice", ("1", "2")))),
        cache_key(MODEL, Request.chat(MSG, SamplingParams(max_tokens=8), adapter="lora1")),
        cache_key(MODEL, Request.chat([{"role": "user", "content": "Rate 'Dune' from 1 to 5. "}], SamplingParams(max_tokens=8))),
    ]
    assert base not in variants and len(set(variants)) == len(variants)


def test_hits_misses_and_errors_never_cached(tmp_path):
    c = ResponseCache(tmp_path / "c.sqlite")
    good, bad = cache_key(MODEL, req()), cache_key(MODEL, req(seed=5))
    written = c.put_many([(good, "m", req(), Response(text="4", completion_tokens=1)),
                          (bad, "m", req(seed=5), Response(error="HTTP 500"))])
    assert written == 1 and len(c) == 1
    got = c.get_many([good, bad, cache_key({**MODEL, "name": "other"}, req())])
    assert list(got) == [good] and got[good].text == "4" and got[good].cached
    assert (c.hits, c.misses) == (1, 2)


@pytest.mark.full  # three writer processes
def test_concurrent_processes_share_the_cache(tmp_path):
    path = tmp_path / "shared.sqlite"
    code = (
        "import sys; from recbench.store.response_cache import ResponseCache; from recbench.api.types import Request, Response, SamplingParams\n"
        "c = ResponseCache(sys.argv[1]); w = int(sys.argv[2])\n"
        "for i in range(200):\n"
        "    r = Request.chat([{'role': 'user', 'content': f'{w}-{i}'}], SamplingParams())\n"
        "    c.put_many([(f'{w}-{i}', 'm', r, Response(text=str(i)))])\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path), str(w)]) for w in range(3)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    c = ResponseCache(path)
    assert len(c) == 600
    assert c._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_held_answers_read_back_before_the_flush_and_commit_in_it(tmp_path):
    """put_later: get_many answers from what is held (as a committed row reads back); flush writes it in one
    transaction, errors are never held; close commits what is still held."""
    path = tmp_path / "c.sqlite"
    c = ResponseCache(path)
    ok, other = Response(text="5", prompt_tokens=3, completion_tokens=1, latency_s=0.2), Response(text="4")
    c.put_later("k1", "m", req(), ok)
    c.put_later("k2", "m", req(seed=1), Response(error="boom"))
    got = c.get_many(["k1", "k2"])
    assert set(got) == {"k1"} and got["k1"].text == "5" and got["k1"].cached and got["k1"].prompt_tokens == 3
    assert len(c) == 0 and c.flush() == 1 and len(c) == 1 and c.flush() == 0
    assert c.get_many(["k1"])["k1"] == got["k1"]  # the same Response held and committed
    c.put_later("k3", "m", req(seed=2), other)
    c.close()
    again = ResponseCache(path)
    assert set(again.get_many(["k1", "k2", "k3"])) == {"k1", "k3"}
    again.close()


def test_request_column_is_the_json_of_the_request_content(tmp_path):
    """The request column keeps json.dumps(content_dict()) (plan mode looks cached answers up by this text), built from
    parts per distinct parameters: checked over constraints, adapters, seeds and non-ASCII text."""
    import json
    import sqlite3

    c = ResponseCache(tmp_path / "c.sqlite")
    reqs = []
    for i in range(3):
        for cons in (None, Constraint.json_schema({"enum": ["User A", "Ü"]}), Constraint(kind="choice", choices=("a", "b"))):
            reqs.append(Request.chat([{"role": "system", "content": "sys é"}, {"role": "user", "content": f'q{i} "x" ☃'}],
                                     SamplingParams(max_tokens=8, seed=i % 2), constraint=cons,
                                     adapter="lora" if i == 2 else None))
    for i, r in enumerate(reqs):
        c.put(f"k{i}", "m", r, Response(text="ok"))
    with sqlite3.connect(tmp_path / "c.sqlite") as con:
        rows = dict(con.execute("SELECT key, request FROM responses").fetchall())
    c.close()
    assert [rows[f"k{i}"] for i in range(len(reqs))] == [json.dumps(r.content_dict()) for r in reqs]


def test_a_killed_writer_loses_no_committed_row(tmp_path):
    """With checkpoints every WAL_CHECKPOINT_PAGES pages the committed rows sit in the WAL until then: a writer killed
    with SIGKILL (no close, no checkpoint) loses none of them, and what it held with put_later but never flushed is
    all it loses."""
    from recbench.store.response_cache import WAL_CHECKPOINT_PAGES

    path = tmp_path / "c.sqlite"
    code = (
        "import os, signal, sys; from recbench.store.response_cache import ResponseCache\n"
        "from recbench.api.types import Request, Response, SamplingParams\n"
        "c = ResponseCache(sys.argv[1])\n"
        "for i in range(300):\n"
        "    r = Request.chat([{'role': 'user', 'content': 'x' * 3000 + str(i)}], SamplingParams())\n"
        "    c.put_later(f'k{i}', 'm', r, Response(text=str(i)))\n"
        "    if i % 7 == 6: c.flush()\n"
        "assert c._conn.execute('PRAGMA wal_autocheckpoint').fetchone()[0] == int(sys.argv[2])\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    p = subprocess.run([sys.executable, "-c", code, str(path), str(WAL_CHECKPOINT_PAGES)], timeout=120)
    assert p.returncode == -9
    assert (tmp_path / "c.sqlite-wal").stat().st_size > 300 * 3000  # the rows were still in the WAL
    c = ResponseCache(path)
    got = c.get_many([f"k{i}" for i in range(300)])
    assert sorted(got, key=lambda k: int(k[1:])) == [f"k{i}" for i in range(294)]  # 294 = 42 flushes of 7; 6 held
    assert got["k293"].text == "293"
    c.close()
