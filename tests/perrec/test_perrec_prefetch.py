"""Listwise prompts built ahead in a forked child (tasks/perrec/prefetch.py): the child's prompts are the
loop's prompts, a run with it writes the same records and prompts as one without, and the loop's side takes,
skips and falls back as documented."""
from __future__ import annotations

import json
import os
import signal
import time

import pytest
from omegaconf import OmegaConf

from recbench.api.types import Example
from recbench.run.loop import EvalLoop
from recbench.store.response_cache import ResponseCache
from recbench.store.runstore import RunStore
from recbench.tasks.perrec import prefetch
from recbench.tasks.perrec.task import PerRecTask
from recbench.testing.openai_stub import listwise_answer
from tests.doubles import ScriptedBackend
from recbench.run.construct import bundled_data

pytestmark = [pytest.mark.fast,
              pytest.mark.skipif("fork" not in prefetch.mp.get_all_start_methods(), reason="no fork here")]


def _examples(n: int) -> list[Example]:
    return [Example(id=f"g{i:03d}", data={"i": i}, meta={}) for i in range(n)]


def _build(ex: Example) -> tuple[str, list[str], list[str]]:
    return f"prompt {ex.id} built by {os.getpid()}", ["User A"], [f"u{ex.data['i']}"]


def test_the_child_builds_in_order_and_skipped_examples_are_dropped(monkeypatch):
    monkeypatch.setattr(prefetch, "CHUNK", 7)
    exs = _examples(50)
    pf = prefetch.Prefetch(_build, exs, 3)
    try:
        assert pf.take("g001") is None  # before the child's start: the caller builds it
        got = pf.take("g003")
        assert got is not None and got[0].startswith("prompt g003 built by ") and got[0] != _build(exs[3])[0]
        assert got[1:] == (["User A"], ["u3"])
        assert pf.take("g010")[2] == ["u10"]  # g004..g009 skipped by the loop: dropped
        assert pf.take("g005") is None  # passed: never waited for
        assert [pf.take(f"g{i:03d}")[2] for i in range(11, 50)] == [[f"u{i}"] for i in range(11, 50)]
        assert pf.take("g049") is None and pf.take("nope") is None  # the child ended: nothing left, no wait
    finally:
        pf.close()
    assert not pf._proc.is_alive()


def test_close_stops_a_child_that_is_still_building(monkeypatch):
    monkeypatch.setattr(prefetch, "CHUNK", 1)
    pf = prefetch.Prefetch(_build, _examples(5000), 0)
    assert pf.take("g000")[2] == ["u0"]
    pf.close()
    assert not pf._proc.is_alive() and pf.take("g100") is None


def _failing_in_child(parent: int, how: str):
    def build(ex: Example) -> tuple[str, list[str], list[str]]:
        if os.getpid() != parent and ex.data["i"] == 10:
            if how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise ValueError("no such user")
        return _build(ex)
    return build


@pytest.mark.parametrize("how", ["raise", "kill"])
def test_a_child_that_fails_or_dies_hands_the_rest_back(monkeypatch, how):
    """An error in the child's build ends it with its end mark; a killed child is noticed: either way the loop's side
    stops waiting (returns None) and builds the rest itself."""
    monkeypatch.setattr(prefetch, "CHUNK", 4)
    monkeypatch.setattr(prefetch, "WAIT_S", 0.2)
    parent = os.getpid()
    pf = prefetch.Prefetch(_failing_in_child(parent, how), _examples(40), 0)
    try:
        t0 = time.monotonic()
        got = [pf.take(f"g{i:03d}") for i in range(40)]
        assert time.monotonic() - t0 < 20
        sent = [g for g in got if g is not None]
        assert [g[2] for g in sent] == [[f"u{i}"] for i in range(len(sent))]  # what came, came in order
        assert got[len(sent):] == [None] * (40 - len(sent))  # from there on: built by the caller
        # the chunks before the failing one came in full when the child ended with its mark; a killed child's last
        # chunks may still have been in its queue's buffer
        assert len(sent) == 8 if how == "raise" else len(sent) <= 8
    finally:
        pf.close()
    assert not pf._proc.is_alive()


def test_available_needs_enough_examples():
    assert not prefetch.available(prefetch.MIN_EXAMPLES - 1)
    assert prefetch.available(prefetch.MIN_EXAMPLES) == ("fork" in prefetch.mp.get_all_start_methods())


def _run(tmp_path, name: str, min_examples: int, monkeypatch, chunk_size=None) -> tuple[list[dict], list[str], object]:
    monkeypatch.setattr(prefetch, "MIN_EXAMPLES", min_examples)
    monkeypatch.setattr(prefetch, "CHUNK", 5)
    task = PerRecTask(OmegaConf.create({"name": "perrec", "data_dir": bundled_data("perrec_sample"),
                                        "difficulties": ["easy", "medium", "hard"], "retrieval_k": 4,
                                        "history_max": 200, "profile": False, "profile_max_tokens": 32,
                                        "profile_history": 30, "legacy_tau": False}))
    examples = task.load()
    method = task.make_method(OmegaConf.create({"name": "listwise", "max_tokens": 64, "constrained": False}),
                              OmegaConf.create({"temperature": 0.0, "top_p": 1.0, "seed": 0}))
    backend = ScriptedBackend(lambda r: listwise_answer(r.message_dicts()), batch_size=16)
    store = RunStore(tmp_path / name)
    EvalLoop(task, method, backend, ResponseCache(tmp_path / f"{name}.sqlite"), store, chunk_size=chunk_size,
             progress=False).run(examples)
    prompts = sorted((tmp_path / name / "prompts.jsonl").read_text().splitlines())
    return sorted((r.to_dict() for r in store.records()), key=lambda r: r["id"]), prompts, method


@pytest.mark.parametrize("chunk_size", [None, 8])
def test_a_run_with_the_child_writes_what_a_run_without_it_writes(tmp_path, monkeypatch, chunk_size):
    plain, plain_prompts, m0 = _run(tmp_path, "plain", 10 ** 9, monkeypatch, chunk_size)
    ahead, ahead_prompts, m1 = _run(tmp_path, "ahead", 1, monkeypatch, chunk_size)
    assert m0._ahead is None and m1._ahead  # the child ran only where asked
    for r in plain + ahead:
        for c in r["calls"]:
            c.pop("latency_s", None)
    assert len(plain) > 20 and json.dumps(ahead, sort_keys=True) == json.dumps(plain, sort_keys=True)
    assert ahead_prompts == plain_prompts
    assert m1._ahead._done and not m1._ahead._got  # every prompt the child built was taken
    assert not m1._ahead._proc.is_alive()  # the loop closed it


class _Failing(ScriptedBackend):
    def stream(self, next_requests, on_response):  # the backend fails after its first pull
        next_requests(4)
        raise RuntimeError("backend gone")


def _task_and_method() -> tuple[PerRecTask, object]:
    task = PerRecTask(OmegaConf.create({"name": "perrec", "data_dir": bundled_data("perrec_sample"),
                                        "difficulties": ["easy", "medium", "hard"], "retrieval_k": 4,
                                        "history_max": 200, "profile": False, "profile_max_tokens": 32,
                                        "profile_history": 30, "legacy_tau": False}))
    return task, task.make_method(OmegaConf.create({"name": "listwise", "max_tokens": 64, "constrained": False}),
                                  OmegaConf.create({"temperature": 0.0, "top_p": 1.0, "seed": 0}))


def test_the_loop_starts_the_child_over_the_examples_it_runs_and_closes_it_however_it_ends(tmp_path, monkeypatch):
    """Method.prefetch is called by the loop with the examples not yet finished, in order; what it started is closed
    when the loop ends by an error too; a method run outside the loop (plan mode, a test) starts nothing."""
    task, method = _task_and_method()
    examples = task.load()
    answer = lambda r: listwise_answer(r.message_dicts())  # noqa: E731
    store = RunStore(tmp_path / "run")
    EvalLoop(task, method, ScriptedBackend(answer, batch_size=16), ResponseCache(tmp_path / "c.sqlite"), store,
             progress=False).run(examples[:10])  # 10 finished; too few examples for a child
    assert method._ahead is None
    monkeypatch.setattr(prefetch, "MIN_EXAMPLES", 1)
    seen: list[list[str]] = []
    real = method.prefetch
    monkeypatch.setattr(method, "prefetch", lambda exs: seen.append([e.id for e in exs]) or real(exs))
    with pytest.raises(RuntimeError, match="backend gone"):
        EvalLoop(task, method, _Failing(answer, batch_size=16), ResponseCache(tmp_path / "c2.sqlite"),
                 store, progress=False).run(examples)
    assert seen == [[e.id for e in examples[10:]]]  # the examples the loop runs, in its order
    assert method._ahead is not None and not method._ahead._proc.is_alive()  # closed by the loop
    _, fresh = _task_and_method()
    fresh.prepare(examples)
    next(fresh.run(examples[0]))
    assert fresh._ahead is None


def test_a_killed_run_leaves_no_child_behind(tmp_path):
    """SIGKILL the loop's process while its child waits on a full queue: the child sees its parent gone and exits."""
    import subprocess
    import sys
    import time

    import psutil

    script = tmp_path / "parent.py"
    script.write_text(
        "import os, signal, sys, time\n"
        "from recbench.api.types import Example\n"
        "from recbench.tasks.perrec import prefetch\n"
        "prefetch.CHUNK = 1\n"
        "exs = [Example(id=f'g{i}', data={}, meta={}) for i in range(5000)]\n"
        "pf = prefetch.Prefetch(lambda ex: (ex.id, [], []), exs, 0)\n"
        "assert pf.take('g0') is not None\n"
        "print(pf._proc.pid, flush=True)\n"
        "time.sleep(1.5)\n"  # the child fills the queue (64 chunks) and waits
        "os.kill(os.getpid(), signal.SIGKILL)\n")
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert p.returncode == -9, p.stderr
    child = int(p.stdout.split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if psutil.Process(child).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the prefetch child {child} still runs 10 s after its parent was killed")
