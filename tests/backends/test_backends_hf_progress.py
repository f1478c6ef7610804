"""The hf backend reports its work inside a batch as it happens (real SmolLM2): the prefill, then every decoding step
with the rows still decoding, then the batch's real token count; the run's progress line shows those steps before
any answer lands, and its ETA comes from the timed steps."""
from __future__ import annotations

import re

import pytest

from recbench.api.types import Request, SamplingParams
from recbench.backends.decoding import listening

pytestmark = pytest.mark.slow

QUESTIONS = ("Name three colours.", "Count from one to ten.", "Say hi.")


def _requests(max_tokens: int) -> list[Request]:
    sp = SamplingParams(temperature=0.0, max_tokens=max_tokens)
    return [Request(messages=(("user", q),), sampling=sp) for q in QUESTIONS]


def test_every_decoding_step_is_reported_with_the_rows_still_decoding(smollm2):
    seen = []
    with listening(lambda b: seen.append((b.steps, b.live, b.tokens, b.prefill_s is not None, b.done))):
        out = smollm2.generate(_requests(24))
    assert all(r.ok for r in out)
    assert seen[0] == (0, 3, 0, False, False)  # the batch starts in prefill
    steps = [s for s in seen if not s[4]][1:]
    assert [s[0] for s in steps] == list(range(1, len(steps) + 1))  # one report per step, in order
    longest = max(r.completion_tokens for r in out)
    assert len(steps) in (longest, longest - 1) or len(steps) == 24  # generate runs until the longest row ends
    lives = [s[1] for s in steps]
    assert lives == sorted(lives, reverse=True) and all(s[3] for s in steps)  # rows only stop decoding
    final = seen[-1]
    assert final[4] and final[2] == sum(r.completion_tokens for r in out)  # the real token count at the end
    assert steps[-1][2] >= final[2] - 3  # the steps counted every live row's token (eos rows once more at most)


def test_the_progress_line_moves_within_the_batch(smollm2, capsys, monkeypatch):
    from recbench.run import progress

    monkeypatch.setattr(progress, "LOG_EVERY_S", 0.2)  # a log-file line at least every 0.2 s
    p = progress.RequestProgress("perrec/listwise", 3, exact=True)
    p.start(3)
    try:
        out = smollm2.generate(_requests(48))
        for _ in out:
            p.request_answered()
            p.example_done()
    finally:
        p.close()
    err = capsys.readouterr().err
    assert "\r" not in err  # a log file: whole lines
    lines = err.splitlines()
    mid = [ln for ln in lines if ln.startswith("perrec/listwise: requests 0/3") and "step " in ln]
    assert mid, err  # decoding steps shown while no answer had landed
    assert re.search(r"batch of 3: step \d+/48, [0-3] decoding \| \[\d\d:\d\d<≤\d\d:\d\d, \d+\.\d tok/s\]", mid[-1])
    assert lines[-1].startswith("perrec/listwise: requests 3/3 | examples 3/3")
