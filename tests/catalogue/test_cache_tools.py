"""Per-job caches written by separate processes merge into one cache that serves every answer; stats describes it."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from recbench.store.response_cache import ResponseCache, cache_key
from recbench.cli.cache import main
from recbench.store.cache_tools import merge, stats
from recbench.api.types import Request, SamplingParams

pytestmark = pytest.mark.full

IDENTITY = {"kind": "hf", "name": "test-model", "weights": "sha256:0"}

WORKER = textwrap.dedent("""
    import sys
    from recbench.store.response_cache import ResponseCache, cache_key
    from recbench.api.types import Request, Response, SamplingParams
    path, lo, hi = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    ident = {"kind": "hf", "name": "test-model", "weights": "sha256:0"}
    cache = ResponseCache(path)
    for j in range(lo, hi):  # one put per request: many small transactions, as a real run makes
        req = Request(messages=(("user", f"question {j}"),), sampling=SamplingParams(max_tokens=8))
        cache.put_many([(cache_key(ident, req), "test-model", req, Response(text=f"answer {j}", completion_tokens=2))])
    cache.close()
""")


def request(j: int) -> Request:
    return Request(messages=(("user", f"question {j}"),), sampling=SamplingParams(max_tokens=8))


@pytest.fixture
def job_caches(tmp_path):
    """Three processes, each writing its own cache file under a sweep-like dir; their keys overlap."""
    ranges = [(0, 10), (5, 15), (10, 20)]
    paths = [tmp_path / "sweep" / "caches" / f"job{i}" / "responses.sqlite" for i in range(len(ranges))]
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(p), str(lo), str(hi)])
             for p, (lo, hi) in zip(paths, ranges)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    return paths


def test_merge_of_per_job_caches_serves_every_answer(job_caches, tmp_path):
    dest = tmp_path / "shared" / "responses.sqlite"
    res = merge([tmp_path / "sweep"], dest, progress=False)  # a folder: every *.sqlite under it
    assert res["rows_before"] == 0 and res["rows_after"] == 20  # union of 0..19, overlaps stored once
    assert sorted(r["rows"] for r in res["sources"]) == [10, 10, 10]
    assert sum(r["added"] for r in res["sources"]) == 20
    cache = ResponseCache(dest)
    keys = [cache_key(IDENTITY, request(j)) for j in range(20)]
    got = cache.get_many(keys)
    assert [got[k].text for k in keys] == [f"answer {j}" for j in range(20)] and cache.hits == 20
    cache.close()
    again = merge(job_caches, dest, progress=False)  # idempotent: nothing new the second time
    assert again["rows_after"] == 20 and sum(r["added"] for r in again["sources"]) == 0


def test_merge_keeps_what_dest_already_holds(job_caches, tmp_path):
    dest = tmp_path / "responses.sqlite"
    merge([job_caches[0]], dest, progress=False)
    assert stats(dest)["rows"] == 10
    res = merge(job_caches[1:], dest, progress=False)
    assert (res["rows_before"], res["rows_after"]) == (10, 20)
    assert [r["added"] for r in res["sources"]] == [5, 5]


def test_cli_merge_and_stats(job_caches, tmp_path, capsys):
    dest = tmp_path / "merged.sqlite"
    assert main(["merge", *map(str, job_caches), str(dest), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows_after"] == 20
    assert main(["stats", str(dest), "--json"]) == 0
    st = json.loads(capsys.readouterr().out)[0]
    assert st["rows"] == 20 and st["models"] == {"test-model": 20} and st["first_created"] <= st["last_created"]
    assert main(["stats", str(tmp_path / "absent.sqlite")]) == 2
    assert "no cache file or folder at" in capsys.readouterr().err


def test_a_file_that_is_not_a_cache_is_refused(tmp_path, capsys):
    import sqlite3

    bad = tmp_path / "other.sqlite"
    sqlite3.connect(bad).execute("CREATE TABLE responses (a TEXT)")
    assert main(["merge", str(bad), str(tmp_path / "d.sqlite")]) == 2
    assert "not a recbench response cache" in capsys.readouterr().err
