"""Issue 39 must-show, with real answers: SmolLM2 explanations of the bundled LLMRec sample (a reference run, a
greedy run cut at 16 tokens, a sampled run) judged pairwise by the stub OpenAI-compatible judges: the one preferring
the longer answer (position-consistent, length-biased: both found by the audit, win rates with CIs, a Bradley-Terry
ranking of the three runs in the report) and the one always answering A (0% position consistency, only ties)."""
from __future__ import annotations

from pathlib import Path

import pytest

from recbench.report import write_report
from recbench.run.evaluate import run_from_config
from recbench.store.judge_records import judge_records
from recbench.testing.openai_stub import StubServer
from recbench.testing.stub_judges import judge_always_a, judge_prefers_longer
from tests.helpers import compose_cfg

pytestmark = pytest.mark.slow
KEY = "judge_validity"


def _cfg(tmp_path: Path, *extra: str):
    return compose_cfg(["task=llmrec_explanation", "method=zero_shot", "limit=6", "run.progress=false",
                        f"cache.path={tmp_path / 'cache.sqlite'}", *extra])


def _judged(tmp_path: Path, stub: StubServer, served: str) -> list[str]:
    return ["judge=openai-server", "judge.protocol=pairwise", f"judge.reference={tmp_path / 'ref'}",
            f"judge.backend.base_url={stub.base_url}", f"judge.backend.model={served}"]


def test_real_answers_judged_pairwise_by_stub_judges(tmp_path, smollm2):
    run_from_config(_cfg(tmp_path), tmp_path / "ref", backend=smollm2)
    with StubServer(answer_fn=judge_prefers_longer) as longer, StubServer(answer_fn=judge_always_a) as always_a:
        short = run_from_config(_cfg(tmp_path, "method.max_tokens=16", *_judged(tmp_path, longer, "longer")),
                                tmp_path / "short", backend=smollm2)
        sampled = run_from_config(_cfg(tmp_path, "sampling.temperature=0.9", *_judged(tmp_path, longer, "longer")),
                                  tmp_path / "sampled", backend=smollm2)
        biased = run_from_config(_cfg(tmp_path, "sampling.temperature=0.9", *_judged(tmp_path, always_a, "always-a")),
                                 tmp_path / "always_a", backend=smollm2)
        assert always_a.answered == 12 and longer.answered == 24
    for r in (short, sampled):
        b = r.audits[KEY]
        assert b.position.consistent.mean == 1.0 and b.position.n_pairs == 6
        win = r.metrics["judge_win_rate"]
        assert b.scores["judge_win_rate"].mean == pytest.approx(win.mean) and win.ci_low <= win.mean <= win.ci_high
    assert short.metrics["judge_win_rate"].mean == 0.0  # cut at 16 tokens: always the shorter answer
    b = biased.audits[KEY]
    assert b.position.consistent.mean == 0.0 and biased.metrics["judge_win_rate"].mean == 0.5
    assert any("position-consistent on 0%" in f for f in b.findings)
    assert {x.prediction for x in judge_records(tmp_path / "always_a")["openai-server-pairwise"].records} == {"tie"}
    md = Path(write_report([tmp_path / "short", tmp_path / "sampled"], tmp_path / "rep", formats=("md",))["md"])
    part = md.read_text().split("### Judge ranking")[1].split("\n### ")[0].split("\n## ")[0]
    rows = [x for x in part.splitlines() if x.startswith("| llmrec_explanation")]
    assert len(rows) == 3 and "(reference)" in part
    assert rows[-1].split("|")[4].strip().endswith("max_tokens=16, sampling.temperature=0.0]")  # ranked last
