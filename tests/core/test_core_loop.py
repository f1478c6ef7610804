"""The loop on the toy task: resume after completion (zero calls), after SIGKILL (same metrics, calls only for
unfinished work), and errors recorded without being cached."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recbench.run.evaluate import run_from_config
from recbench.store.schema import SCHEMA_VERSION
from tests.doubles import ScriptedBackend
from tests.toy import toy_cfg
from tests.toy.scripted import reverse

pytestmark = pytest.mark.fast
REPO = Path(__file__).resolve().parents[2]
N = 36  # the toy task's examples


def _cfg(tmp_path, name, extra=()):
    return toy_cfg(["run.bootstrap_resamples=200", *extra], tmp_path / name)


def test_rerun_after_completion_makes_no_backend_call(tmp_path):
    cfg = _cfg(tmp_path, "a")
    b1 = ScriptedBackend(reverse, batch_size=16)
    m1 = run_from_config(cfg, tmp_path / "a" / "run", backend=b1).to_dict()
    assert b1.calls == N and m1["counts"]["examples"] == N and m1["complete"]
    b2 = ScriptedBackend(reverse)
    m2 = run_from_config(cfg, tmp_path / "a" / "run", backend=b2).to_dict()
    assert b2.calls == 0 and m2["this_invocation"]["examples_skipped"] == N
    assert m2["metrics"] == m1["metrics"]
    # a NEW run dir with the same config is served from the cache: still no backend call
    b3 = ScriptedBackend(reverse)
    m3 = run_from_config(cfg, tmp_path / "a" / "run2", backend=b3).to_dict()
    assert b3.calls == 0 and m3["this_invocation"]["cache_hits"] == N and m3["metrics"] == m1["metrics"]
    files = {p.name for p in (tmp_path / "a" / "run").iterdir()}
    assert {"samples.jsonl", "metrics.json", "config.yaml", "versions.json"} <= files
    saved = json.loads((tmp_path / "a" / "run" / "metrics.json").read_text())
    assert saved["schema_version"] == SCHEMA_VERSION and saved["counts"]["parse_failed"] == 0


def test_limit_runs_first_n(tmp_path):
    b = ScriptedBackend(reverse)
    m = run_from_config(_cfg(tmp_path, "l", ["limit=7"]), tmp_path / "l" / "run", backend=b).to_dict()
    assert b.calls == 7 and m["counts"]["examples"] == 7
    ids = [json.loads(x)["id"] for x in (tmp_path / "l" / "run" / "samples.jsonl").read_text().splitlines()]
    # run.limit_strategy=stratified (the default): round robin over the levels, each in the task's order
    assert sorted(ids) == ["easy-00", "easy-01", "easy-02", "hard-00", "hard-01", "medium-00", "medium-01"]


def test_backend_errors_are_recorded_not_cached_and_retried(tmp_path):
    cfg = _cfg(tmp_path, "e", ["limit=10"])
    flaky = ScriptedBackend(lambda r: (_ for _ in ()).throw(RuntimeError("HTTP 503")) if "Blue" in r.messages[-1][1]
                            else reverse(r))
    m = run_from_config(cfg, tmp_path / "e" / "run", backend=flaky).to_dict()
    failed = m["counts"]["backend_errors"]
    assert failed > 0 and m["counts"]["examples"] == 10 - failed and not m["complete"]
    assert len((tmp_path / "e" / "run" / "errors.jsonl").read_text().splitlines()) == failed
    good = ScriptedBackend(reverse)
    m2 = run_from_config(cfg, tmp_path / "e" / "run", backend=good).to_dict()
    assert good.calls == failed and m2["counts"]["examples"] == 10 and m2["complete"]


KILL_SCRIPT = """
import sys, time
sys.path.insert(0, {repo!r})
from recbench.run.evaluate import run_from_config
from tests.doubles import ScriptedBackend
from tests.toy import toy_cfg
from tests.toy.scripted import reverse
cfg = toy_cfg(["cache.path={cache}", "run.chunk_size=4"])
def slow(req):
    time.sleep(0.1)
    return reverse(req)
run_from_config(cfg, {run!r}, backend=ScriptedBackend(slow, batch_size=4))
"""


@pytest.mark.full  # a second interpreter, killed
def test_sigkill_midway_then_resume_gives_same_metrics(tmp_path):
    # uninterrupted reference run
    ref = run_from_config(_cfg(tmp_path, "ref"), tmp_path / "ref" / "run", backend=ScriptedBackend(reverse)).to_dict()
    run_dir, cache = tmp_path / "k" / "run", tmp_path / "k" / "cache.sqlite"
    script = KILL_SCRIPT.format(repo=str(REPO), cache=cache, run=str(run_dir))
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=tmp_path)
    samples = run_dir / "samples.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and (not samples.exists() or len(samples.read_text().splitlines()) < 8):
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len([ln for ln in samples.read_text().splitlines() if ln.strip()])
    assert 8 <= done_before < N
    resumed = ScriptedBackend(reverse)
    m = run_from_config(_cfg(tmp_path, "k"), run_dir, backend=resumed).to_dict()
    # only unfinished examples reach the backend (some of those may already be in the cache)
    assert resumed.calls <= N - done_before
    assert m["this_invocation"]["examples_skipped"] == done_before
    assert m["counts"]["examples"] == N and m["metrics"] == ref["metrics"]


class _WatchedBackend(ScriptedBackend):
    """Answers in batches of 5 and, at every pull, reads the cache and samples.jsonl from outside the loop (as a
    process killed at that moment would leave them)."""

    def __init__(self, cache_path: Path, samples_path: Path):
        super().__init__(reverse, batch_size=5)
        self.cache_path, self.samples_path = cache_path, samples_path
        self.seen: list[tuple[int, int, int]] = []  # (answers delivered so far, cache rows, sample lines)

    def stream(self, next_requests, on_response) -> None:
        delivered = 0
        while True:
            batch = next_requests(self.batch_size)
            import sqlite3

            with sqlite3.connect(self.cache_path) as con:
                rows = con.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
            lines = len(self.samples_path.read_text().splitlines()) if self.samples_path.exists() else 0
            self.seen.append((delivered, rows, lines))
            if not batch:
                return
            for req, resp in zip(batch, self.generate(batch)):
                on_response(req, resp)
                delivered += 1


def test_every_answer_is_written_before_the_next_requests_go_out(tmp_path):
    """Writes are grouped per pull: when the backend pulls, every answer it delivered is in the cache and every
    example those answers finished is in samples.jsonl (a kill loses at most what is in flight)."""
    run_dir, cache = tmp_path / "w" / "run", tmp_path / "w" / "cache.sqlite"
    b = _WatchedBackend(cache, run_dir / "samples.jsonl")
    m = run_from_config(_cfg(tmp_path, "w", [f"cache.path={cache}"]), run_dir, backend=b).to_dict()
    assert m["counts"]["examples"] == N and b.calls == N  # the toy method asks one request per example
    assert [d for d, _, _ in b.seen] == list(range(0, N + 1, 5)) + ([N] if N % 5 else [])
    assert all(rows == delivered == lines for delivered, rows, lines in b.seen), b.seen


def test_freezing_every_few_examples_changes_no_output(tmp_path, monkeypatch):
    """EvalLoop._grown freezes the collector's objects every FREEZE_EVERY examples admitted or finished: with a
    freeze every 3 examples the run writes the same records and metrics as with none, and nothing stays frozen."""
    import gc

    import recbench.run.loop as loop

    def run(name):
        b = ScriptedBackend(reverse, batch_size=5)
        m = run_from_config(_cfg(tmp_path, name), tmp_path / name / "run", backend=b).to_dict()
        lines = [json.loads(x) for x in (tmp_path / name / "run" / "samples.jsonl").read_text().splitlines()]
        for r in lines:
            for c in r["calls"]:
                c.pop("latency_s", None)
        return {k: v for k, v in m.items() if k not in ("this_invocation", "run_dir")}, sorted(lines, key=lambda r: r["id"])

    before = gc.get_freeze_count()
    monkeypatch.setattr(loop, "FREEZE_EVERY", 10**9)
    plain = run("plain")
    freezes = []
    monkeypatch.setattr(loop, "FREEZE_EVERY", 3)
    freeze = gc.freeze
    monkeypatch.setattr(loop.gc, "freeze", lambda: (freezes.append(1), freeze()))
    assert run("frozen") == plain
    assert len(freezes) > N // 3 + 2  # every 3 admitted, every 3 finished while streaming, and the run's own two
    assert gc.get_freeze_count() == before == 0


def test_the_young_generation_is_collected_less_often_while_the_loop_runs(tmp_path):
    """EvalLoop.run raises the young generation's threshold to YOUNG_GC_THRESHOLD while it streams (the answers
    see it) and puts the caller's thresholds back afterwards, also when the run is interrupted."""
    import gc

    from recbench.run.loop import YOUNG_GC_THRESHOLD

    seen = []

    def answer(r):
        seen.append(gc.get_threshold())
        return reverse(r)

    before = gc.get_threshold()
    assert before[0] < YOUNG_GC_THRESHOLD
    run_from_config(_cfg(tmp_path, "g", ["limit=6"]), tmp_path / "g" / "run", backend=ScriptedBackend(answer))
    assert seen and set(seen) == {(YOUNG_GC_THRESHOLD, *before[1:])}
    assert gc.get_threshold() == before

    def interrupt(r):
        raise KeyboardInterrupt  # Ctrl-C while the backend answers: the run ends

    with pytest.raises(KeyboardInterrupt):
        run_from_config(_cfg(tmp_path, "g2", ["limit=6"]), tmp_path / "g2" / "run", backend=ScriptedBackend(interrupt))
    assert gc.get_threshold() == before
