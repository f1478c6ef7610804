"""The loop: resume after completion (zero calls), after SIGKILL (same metrics, calls only for unfinished work),
and errors recorded without being cached."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from recbench.run.evaluate import run_from_config
from recbench.store.schema import SCHEMA_VERSION
from tests.doubles import ScriptedBackend
from tests.helpers import compose_cfg, listwise_answer

REPO = Path(__file__).resolve().parents[2]


def _cfg(tmp_path, name, extra=()):
    return compose_cfg(["method=listwise", f"cache.path={tmp_path / name / 'cache.sqlite'}", "run.progress=false",
                        "run.bootstrap_resamples=200", *extra])


def test_rerun_after_completion_makes_no_backend_call(tmp_path):
    cfg = _cfg(tmp_path, "a")
    b1 = ScriptedBackend(listwise_answer, batch_size=16)
    m1 = run_from_config(cfg, tmp_path / "a" / "run", backend=b1)
    assert b1.calls == 120 and m1["counts"]["examples"] == 120 and m1["complete"]
    b2 = ScriptedBackend(listwise_answer)
    m2 = run_from_config(cfg, tmp_path / "a" / "run", backend=b2)
    assert b2.calls == 0 and m2["this_invocation"]["examples_skipped"] == 120
    assert m2["metrics"] == m1["metrics"]
    # a NEW run dir with the same config is served from the cache: still no backend call
    b3 = ScriptedBackend(listwise_answer)
    m3 = run_from_config(cfg, tmp_path / "a" / "run2", backend=b3)
    assert b3.calls == 0 and m3["this_invocation"]["cache_hits"] == 120 and m3["metrics"] == m1["metrics"]
    files = {p.name for p in (tmp_path / "a" / "run").iterdir()}
    assert {"samples.jsonl", "metrics.json", "config.yaml", "versions.json"} <= files
    saved = json.loads((tmp_path / "a" / "run" / "metrics.json").read_text())
    assert saved["schema_version"] == SCHEMA_VERSION and saved["counts"]["parse_failed"] == 0


def test_limit_runs_first_n(tmp_path):
    b = ScriptedBackend(listwise_answer)
    m = run_from_config(_cfg(tmp_path, "l", ["limit=7"]), tmp_path / "l" / "run", backend=b)
    assert b.calls == 7 and m["counts"]["examples"] == 7


def test_backend_errors_are_recorded_not_cached_and_retried(tmp_path):
    cfg = _cfg(tmp_path, "e", ["limit=10"])
    flaky = ScriptedBackend(lambda r: (_ for _ in ()).throw(RuntimeError("HTTP 503")) if "Puppy" in r.messages[-1][1] else listwise_answer(r))
    m = run_from_config(cfg, tmp_path / "e" / "run", backend=flaky)
    failed = m["counts"]["backend_errors"]
    assert failed > 0 and m["counts"]["examples"] == 10 - failed and not m["complete"]
    assert len((tmp_path / "e" / "run" / "errors.jsonl").read_text().splitlines()) == failed
    good = ScriptedBackend(listwise_answer)
    m2 = run_from_config(cfg, tmp_path / "e" / "run", backend=good)
    assert good.calls == failed and m2["counts"]["examples"] == 10 and m2["complete"]


KILL_SCRIPT = """
import sys, time
sys.path.insert(0, {repo!r})
from recbench.run.evaluate import run_from_config
from tests.doubles import ScriptedBackend
from tests.helpers import compose_cfg, listwise_answer
cfg = compose_cfg(["method=listwise", "cache.path={cache}", "run.progress=false", "run.chunk_size=8"])
def slow(req):
    time.sleep(0.05)
    return listwise_answer(req)
run_from_config(cfg, {run!r}, backend=ScriptedBackend(slow, batch_size=8))
"""


def test_sigkill_midway_then_resume_gives_same_metrics(tmp_path):
    # uninterrupted reference run
    ref = run_from_config(_cfg(tmp_path, "ref"), tmp_path / "ref" / "run", backend=ScriptedBackend(listwise_answer))
    run_dir, cache = tmp_path / "k" / "run", tmp_path / "k" / "cache.sqlite"
    script = KILL_SCRIPT.format(repo=str(REPO), cache=cache, run=str(run_dir))
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=tmp_path)
    samples = run_dir / "samples.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and (not samples.exists() or len(samples.read_text().splitlines()) < 30):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len([ln for ln in samples.read_text().splitlines() if ln.strip()])
    assert 30 <= done_before < 120
    resumed = ScriptedBackend(listwise_answer)
    m = run_from_config(_cfg(tmp_path, "k"), run_dir, backend=resumed)
    # only unfinished examples reach the backend (some of those may already be in the cache)
    assert resumed.calls <= 120 - done_before
    assert m["this_invocation"]["examples_skipped"] == done_before
    assert m["counts"]["examples"] == 120 and m["metrics"] == ref["metrics"]
