"""Honest progress (issue 23, item 3): the bar counts answered model requests of an exact total for single-round
methods (a growing one, marked '+', otherwise), finished examples beside them, with a rate; it appears only when a
model is asked, after the one line that says which model started and how long that took. Pinned with the scripted
double backend on the toy task."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import pytest

from recbench.run.evaluate import run_from_config
from recbench.store.response_cache import ResponseCache
from recbench.run.construct import build_task, select_examples
from recbench.run.loop import EvalLoop
from recbench.run.progress import model_label
from recbench.store.runstore import RunStore
from tests.doubles import ScriptedBackend
from tests.helpers import compose_cfg
from tests.toy import toy_cfg
from tests.toy.scripted import reverse

pytestmark = pytest.mark.fast

BAR = re.compile(r"requests (\d+)/(\d+)(\+?) \| examples (\d+)/(\d+)")


class Watching(ScriptedBackend):
    """A scripted backend that notes what the bar says (answered, total, exact) each time it is handed a batch."""

    def __init__(self, answer_fn, batch_size: int = 4):
        super().__init__(answer_fn, batch_size=batch_size)
        self.loop: EvalLoop | None = None
        self.seen: list[tuple[int, int, bool]] = []

    def generate(self, requests):
        p = self.loop._progress  # type: ignore[union-attr]
        self.seen.append((p.answered, p.total, p.exact))
        return super().generate(requests)


def _run(tmp_path: Path, overrides: list[str], backend=None, run: str = "run") -> EvalLoop:
    """The app's loop (task, method, examples, cache, run store) with the bar on, answered by `backend`."""
    cfg = toy_cfg(overrides, tmp_path)
    task = build_task(cfg)
    method = task.make_method(cfg.method, cfg.sampling)
    examples = select_examples(task.load(), cfg.limit, cfg.run.limit_strategy, int(cfg.seed), task.breakdown_by)
    cache, store = ResponseCache(cfg.cache.path), RunStore(tmp_path / run)
    loop = EvalLoop(task, method, backend if method.needs_backend else None, cache, store,
                    chunk_size=cfg.run.chunk_size, progress=True)
    if isinstance(backend, Watching):
        backend.loop = loop
    try:
        loop.run(examples)
    finally:
        store.close()
        cache.close()
    return loop


def _bars(err: str) -> list[tuple[int, int, bool, int, int]]:
    """Every state the bar drew: (answered, total, growing, examples done, examples)."""
    return [(int(a), int(t), m == "+", int(d), int(e)) for a, t, m, d, e in BAR.findall(err)]


def test_single_round_total_is_exact_before_the_first_answer(tmp_path, capsys):
    be = Watching(reverse)
    loop = _run(tmp_path, ["limit=12"], be)
    assert be.seen == [(0, 12, True), (4, 12, True), (8, 12, True)]  # 12 requests known up front, 4 per batch
    assert loop._progress.answered == be.calls == 12 and loop._progress.examples_done == 12
    err = capsys.readouterr().err
    bars = _bars(err)
    assert bars[0] == (0, 12, False, 0, 12) and bars[-1] == (12, 12, False, 12, 12)
    assert re.search(r"\d(req/s|s/req)\]", err)  # a rate from the answers


def test_multi_round_total_grows_and_is_marked(tmp_path, capsys):
    be = Watching(reverse)
    loop = _run(tmp_path, ["method.rounds=2", "limit=6"], be)
    totals = [t for _, t, _ in be.seen]
    assert totals == sorted(totals) and totals[0] < be.calls  # later rounds add requests
    assert not any(exact for *_, exact in be.seen)
    assert loop._progress.answered == be.calls == loop._progress.total
    bars = _bars(capsys.readouterr().err)
    assert bars[0][2] and bars[0][1] < be.calls  # '+': more to come
    assert bars[-1] == (be.calls, be.calls, False, 6, 6)  # the finished run's total is final


def test_chunked_single_round_grows_too(tmp_path, capsys):
    be = Watching(reverse)
    _run(tmp_path, ["limit=12", "run.chunk_size=4"], be)
    assert be.seen[0] == (0, 4, False)  # only the 4 examples in progress are known
    bars = _bars(capsys.readouterr().err)
    assert bars[0][:3] == (0, 4, True) and bars[-1] == (12, 12, False, 12, 12)


def test_cached_answers_are_not_counted_as_requests(tmp_path, capsys):
    _run(tmp_path, ["limit=6"], ScriptedBackend(reverse), run="a")
    capsys.readouterr()
    be = ScriptedBackend(reverse)
    _run(tmp_path, ["limit=12"], be, run="b")
    bars = _bars(capsys.readouterr().err)
    assert be.calls == 6
    assert bars[0] == (0, 6, False, 6, 12) and bars[-1] == (6, 6, False, 12, 12)  # 6 examples done from the cache


def test_errors_are_answers_and_their_examples_count_as_done(tmp_path, capsys):
    def flaky(req):
        if "Item C" in req.messages[-1][1]:  # examples of 3+ items fail
            raise RuntimeError("boom")
        return reverse(req)

    loop = _run(tmp_path, ["limit=12"], ScriptedBackend(flaky))
    assert loop.stats.backend_errors == 8 and loop._progress.answered == 12 and loop._progress.examples_done == 12
    assert _bars(capsys.readouterr().err)[-1] == (12, 12, False, 12, 12)


def test_no_bar_when_no_model_is_asked(tmp_path, capsys):
    _run(tmp_path, ["method=toy_popular", "limit=12"])
    assert "requests" not in capsys.readouterr().err
    _run(tmp_path, ["limit=6"], ScriptedBackend(reverse), run="a")
    capsys.readouterr()
    be = ScriptedBackend(reverse)
    _run(tmp_path, ["limit=6"], be, run="b")  # every answer from the cache
    assert be.calls == 0 and "requests" not in capsys.readouterr().err


def test_one_line_says_which_model_started_before_the_bar(tmp_path, capsys):
    cfg = toy_cfg(["limit=6", "run.progress=true"], tmp_path)
    run_from_config(cfg, tmp_path / "a")
    err = capsys.readouterr().err
    lines = [ln for ln in re.split(r"[\r\n]", err) if ln.strip()]
    started = [i for i, ln in enumerate(lines) if re.fullmatch(r"recbench: model toy_scripted \(toy\) ready in "
                                                               r"\d+\.\d s", ln)]
    assert len(started) == 1 and started[0] < next(i for i, ln in enumerate(lines) if BAR.search(ln))
    run_from_config(cfg, tmp_path / "b")  # every answer cached: no model started, no bar
    assert "ready in" not in (err := capsys.readouterr().err) and "requests" not in err


def test_the_started_line_says_how_the_backend_loaded_and_masks_url_secrets(capsys):
    from recbench.run.progress import announce_start

    announce_start(compose_cfg(["model=smollm2"]).model, 3.71, {"how": "cached weights", "import_s": 2.93})
    assert capsys.readouterr().err == ("recbench: model smollm2 (hf: SmolLM2-135M-Instruct.Q4_1.gguf) ready in 3.7 s "
                                       "(cached weights, 2.9 s of it importing transformers)\n")
    announce_start(compose_cfg(["model=smollm2"]).model, 3.81, {"how": "cached weights", "import_s": 2.15,
                                                                 "torch_import_s": 1.02})
    assert capsys.readouterr().err.endswith("ready in 3.8 s (cached weights, of it 1.0 s importing torch and 2.1 s "
                                            "transformers)\n")
    node = {"name": "srv", "backend": {"_target_": "recbench.backends.openai.OpenAIBackend",
                                       "base_url": "http://u:secret@h:8000/v1?key=k"}}
    announce_start(node, 0.0)
    err = capsys.readouterr().err
    assert "secret" not in err and "key=k" not in err and err.startswith("recbench: model srv (openai: http://")


def test_model_label_names_the_file():
    cfg = compose_cfg(["model=smollm2"])
    assert model_label(cfg.model) == f"smollm2 (hf: {cfg.model.backend.gguf_file})"


def test_in_a_log_file_the_line_catches_up_after_a_batch_lands(capsys):
    """Not a terminal (capsys): tqdm draws the first answer of a batch and holds back the rest, which arrive within
    microseconds; the line is redrawn once the burst is over, so it does not sit at 1/32 with a one-answer ETA."""
    import time

    from recbench.run.progress import RequestProgress

    p = RequestProgress("toy/m", 32, exact=True)
    p.start(32)
    for _ in range(16):  # one batch lands
        p.request_answered()
    time.sleep(0.5)
    assert _bars(capsys.readouterr().err)[-1][0] == 16
    for _ in range(16):
        p.request_answered()
    p.close()
    assert _bars(capsys.readouterr().err)[-1][0] == 32


# ---- issue 30, item 1: progress that moves inside a batch ------------------------------------------------------
class Decoding(ScriptedBackend):
    """A scripted batch engine that reports its work as the hf backend does: a prefill, then `steps` decoding steps
    (one row stops after each of the last rows-1 steps), then the batch's token count."""

    def __init__(self, answer_fn, batch_size: int = 4, steps: int = 12, step_s: float = 0.02, prefill_s: float = 0.1):
        super().__init__(answer_fn, batch_size=batch_size)
        self.steps, self.step_s, self.prefill_s = steps, step_s, prefill_s

    def generate(self, requests):
        import time

        from recbench.backends.decoding import batch_started

        batch = batch_started(len(requests), 64)
        time.sleep(self.prefill_s)
        live = len(requests)
        for k in range(self.steps):
            time.sleep(self.step_s)
            after = live - 1 if self.steps - k < live else live
            batch.step(live, after)
            live = after
        out = super().generate(requests)
        batch.finish(sum(r.completion_tokens for r in out))
        return out


LINE = re.compile(r"requests (\d+)/8 \| examples \d+/8 \|[^|]*\| (batch of 4: (?:prefill \d+ s|step (\d+)/64, (\d) "
                  r"decoding) \| )?\[\d\d:\d\d<(≤?)([\d:]+|\?), ([\d.]+ tok/s|[^\]]+)\]")


def test_in_a_log_file_the_batch_moves_in_whole_lines_with_an_eta_from_its_steps(tmp_path, capsys, monkeypatch):
    from recbench.run import progress

    monkeypatch.setattr(progress, "LOG_EVERY_S", 0.05)  # a line at least every 50 ms while nothing lands
    be = Decoding(reverse)
    _run(tmp_path, ["limit=8"], be)
    err = capsys.readouterr().err
    assert "\r" not in err and be.batches == [4, 4]
    states = [m.groups() for m in map(LINE.search, err.splitlines()) if m]
    assert len(states) == len([ln for ln in err.splitlines() if "requests" in ln]) >= 6  # every bar line parsed
    first = [s for s in states if s[0] == "0" and s[2] is not None]
    assert first and all(s[4] == "≤" and s[6].endswith("tok/s") for s in first)  # before a batch ends: a bound
    assert [int(s[2]) for s in first] == sorted(int(s[2]) for s in first)  # the steps only move forward
    second = [s for s in states if s[0] == "4" and s[2] is not None]
    assert second and all(s[4] == "" and s[5] != "?" for s in second)  # then: from the first batch's steps
    later = [s for s in states if s[0] != "0"]  # once a batch has been timed, never a one-answer ETA (7:00:23)
    assert all(s[4] == "" and s[5] != "?" and int(s[5][-2:]) + 60 * int(s[5][:-3]) <= 60 for s in later)
    assert states[-1][0] == "8" and states[-1][1] is None


def _batch(rows: int, steps: int, prefill_s: Optional[float], decode_s: float, max_tokens: int = 20):
    """A DecodeBatch that started prefill_s + decode_s ago and has made `steps` steps."""
    import time

    from recbench.backends.decoding import DecodeBatch

    b = DecodeBatch(rows, max_tokens, started=time.monotonic() - (prefill_s or 0.0) - decode_s)
    b.steps, b.prefill_s, b.tokens = steps, prefill_s, rows * steps
    return b


def test_batch_eta_from_the_timed_steps_hand_computed():
    from recbench.run.progress_eta import BatchHistory, batch_eta

    done = BatchHistory()
    first = _batch(4, 10, 1.0, 2.0)
    first.done = True
    done.add(first)  # 0.2 s per step, 1.0 s prefill, 10 steps a batch
    eta, bound = batch_eta(8, done, None)
    assert eta == pytest.approx(2 * (1.0 + 10 * 0.2), abs=0.02) and not bound
    # a batch at step 5 after 0.5 s prefill and 1.0 s decoding: 0.2 s per step over 15 steps; prefill mean 0.75;
    # 5 steps to go in it (1.0 s), then one more batch of 4: 0.75 + 10 x 0.2 = 2.75
    eta, bound = batch_eta(8, done, _batch(4, 5, 0.5, 1.0))
    assert eta == pytest.approx(1.0 + 2.75, abs=0.02) and not bound
    # before any batch finished: the token limit (20 steps) bounds the steps of a batch
    eta, bound = batch_eta(8, BatchHistory(), _batch(4, 5, 0.5, 1.0))
    assert eta == pytest.approx((20 - 5) * 0.2 + (0.5 + 20 * 0.2), abs=0.02) and bound
    assert batch_eta(8, BatchHistory(), _batch(4, 0, None, 0.0)) == (None, False)  # nothing timed yet


def test_request_eta_waits_for_two_answers():
    from recbench.run.progress_eta import request_eta

    assert request_eta(119, 1, 211.96) is None  # one answer says nothing about the rest (issue 30's 7:00:23)
    assert request_eta(6, 4, 8.0) == pytest.approx(12.0)


def test_the_started_line_names_the_threads(capsys):
    from recbench.run.progress import announce_start

    announce_start(compose_cfg(["model=smollm2"]).model, 3.71, {"how": "cached weights", "import_s": 2.93,
                                                                 "threads": "1 thread (auto: 2 cores, load 5.2 from "
                                                                            "other processes)"})
    assert capsys.readouterr().err.endswith("(cached weights, 2.9 s of it importing transformers); 1 thread (auto: "
                                            "2 cores, load 5.2 from other processes)\n")
