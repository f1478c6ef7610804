"""Issue 39 item 3: the judge-validity audit on every judged run, each statistic recomputed from the judge records
(judge/<tag>/samples.jsonl) with scipy and the krippendorff package; the stub OpenAI-compatible judge that always
answers A (position consistency 0%, the terminal line says so); self-preference; a panel; re-asks; the
Bradley-Terry ranking of runs judged pairwise in the report, and the judge named beside judged numbers."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf
from scipy import stats

from recbench.api.types import Request, Response
from recbench.backends.base import Backend
from recbench.cli.summary import print_summary
from recbench.report import write_report
from recbench.run.evaluate import run_from_config
from recbench.store.judge_records import judge_records
from recbench.store.schema import read_result
from tests.doubles import ScriptedBackend
from tests.helpers import compose_cfg
from tests.llmrec.test_llmrec_judge import ASPECTS, ScriptedJudge, _cfg, _model

pytestmark = pytest.mark.fast
KEY = "judge_validity"
N = 12


def _h(text: str, bits: int = 32) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest(), 16) % (1 << bits)


def _texts(req: Request) -> tuple[str, str]:
    """(text A, text B) of a pairwise judge prompt."""
    body = req.messages[-1][1]
    a, _, b = body.partition("Text B")
    return a, b


def longer_mostly(req: Request) -> str:
    """A pairwise judge preferring the longer answer, except on a hash-chosen third of the prompts (then 'A')."""
    a, b = _texts(req)
    if _h(req.messages[-1][1]) % 3 == 0:
        return json.dumps({"winner": "A", "reason": "first one"})
    return json.dumps({"winner": "A" if len(a) > len(b) else "B", "reason": "more detail"})


def by_length(req: Request) -> str:
    """A pointwise judge whose scores grow with the answer's length (its ' well's) plus hash noise."""
    body = req.messages[-1][1]
    n = body.count(" well")
    return json.dumps({**{a: min(5, 1 + n // 3 + _h(body + a) % 2) for a in ASPECTS}, "reason": "len"})


def _answers(prefix: str):
    """A scripted model whose answer length varies by example (so length bias is measurable)."""
    return ScriptedBackend(lambda req: prefix + " because" * (1 + _h(prefix + req.messages[-1][1]) % 6), name=prefix)


@pytest.fixture(autouse=True)
def _reset():
    ScriptedJudge.calls, ScriptedJudge.stop_after = 0, None
    yield
    ScriptedJudge.answer = staticmethod(lambda req: json.dumps({**{a: 4 for a in ASPECTS}, "reason": "fine"}))


def _pairwise(tmp_path: Path, name: str, model, reference: Path):
    cfg = _cfg(tmp_path, f"limit={N}", "judge.protocol=pairwise", f"judge.reference={reference}")
    return run_from_config(cfg, tmp_path / name, backend=model)


def test_pairwise_statistics_recomputed_from_the_records(tmp_path, capsys):
    run_from_config(_cfg(tmp_path, "judge=none", f"limit={N}"), tmp_path / "ref", backend=_model("It suits."))
    ScriptedJudge.answer = staticmethod(longer_mostly)
    result = _pairwise(tmp_path, "run", _answers("Loved"), tmp_path / "ref")
    b = result.audits[KEY]
    assert read_result(tmp_path / "run").audits[KEY].to_dict() == b.to_dict()  # metrics.json, read back typed
    recs = judge_records(tmp_path / "run")["smollm2-pairwise"].records
    first = [next(o["winner"] for o in r.details["orders"] if o["run_answer_at"] == "A") for r in recs]
    swapped = [next(o["winner"] for o in r.details["orders"] if o["run_answer_at"] == "B") for r in recs]
    consistent = sum((f, s) in (("A", "B"), ("B", "A"), ("tie", "tie")) for f, s in zip(first, swapped))
    assert b.position.n_pairs == N and b.position.consistent.mean == pytest.approx(consistent / N)
    ci = stats.binomtest(consistent, N).proportion_ci(0.95, method="exact")
    assert (b.position.consistent.ci_low, b.position.consistent.ci_high) == pytest.approx((ci.low, ci.high))
    assert b.position.first_position.mean == pytest.approx((first.count("A") + swapped.count("A")) / (2 * N))
    outcome = [{"win": 1, "tie": 0.5, "loss": 0}[r.prediction] for r in recs]
    assert b.scores["judge_win_rate"].mean == pytest.approx(np.mean(outcome))
    assert b.scores["judge_win_rate"].mean == pytest.approx(result.metrics["judge_win_rate"].mean)
    diff = [r.details["answer_length"] - r.details["reference_length"] for r in recs]
    rho = stats.spearmanr(outcome, diff).statistic
    assert b.length_bias["win"].rho == pytest.approx(rho) and b.length_bias["win"].ci_low <= rho
    print_summary(result)
    out = capsys.readouterr().out
    assert "judge validity (smollm2-pairwise" in out


def test_stub_openai_judge_always_answering_a_is_reported_position_inconsistent(tmp_path, capsys):
    """The must-show: a stub OpenAI-compatible server as the judge, always {"winner": "A"}: every pair flips with
    the swap, so position consistency is 0%, every verdict a tie, and the terminal line says so."""
    from recbench.testing.openai_stub import StubServer

    run_from_config(_cfg(tmp_path, "judge=none"), tmp_path / "ref", backend=_model("It suits the user."))
    with StubServer(answer_fn=lambda messages: '{"winner": "A", "reason": "x"}') as stub:
        cfg = compose_cfg(["task=llmrec_explanation", "method=zero_shot", "limit=6", "run.bootstrap_resamples=50",
                           "run.progress=false", f"cache.path={tmp_path / 'cache.sqlite'}", "judge=openai-server",
                           "judge.protocol=pairwise", f"judge.reference={tmp_path / 'ref'}",
                           f"judge.backend.base_url={stub.base_url}", "judge.backend.max_retries=0"])
        result = run_from_config(cfg, tmp_path / "run", backend=_model())
    b = result.audits[KEY]
    assert b.position.consistent.mean == 0.0 and b.position.first_position.mean == 1.0 and b.position.n_pairs == 6
    assert b.scores["judge_win_rate"].mean == 0.5  # every verdict a tie
    assert {r.prediction for r in judge_records(tmp_path / "run")["openai-server-pairwise"].records} == {"tie"}
    print_summary(result)
    out = " ".join(capsys.readouterr().out.split())
    assert "judge position-consistent on 0% [0%, 46%] of 6 pairs: pairwise verdicts are mostly ties" in out
    assert "judge prefers the answer shown first: 100%" in out


class SelfModel(ScriptedBackend):
    """The judged model, with the judge's identity (the judge judges its own answers)."""

    kind = "scripted_judge"

    def identity(self) -> dict:
        return {"kind": self.kind, "name": "judge"}


def test_pointwise_length_bias_and_self_preference(tmp_path, capsys):
    ScriptedJudge.answer = staticmethod(by_length)
    model = SelfModel(lambda req: "It fits" + " well" * (1 + _h(req.messages[-1][1]) % 12))
    result = run_from_config(_cfg(tmp_path, f"limit={N}"), tmp_path / "run", backend=model)
    b = result.audits[KEY]
    recs = judge_records(tmp_path / "run")["smollm2-pointwise"].records
    for a in ASPECTS:
        scores = [r.prediction[a] for r in recs]
        lengths = [r.details["answer_length"] for r in recs]
        assert b.length_bias[a].rho == pytest.approx(stats.spearmanr(scores, lengths).statistic)
        assert b.scores[f"judge_{a}"].mean == pytest.approx(np.mean(scores))
    assert b.self_preference.self_judged and b.self_preference.own_scores["judge_satisfaction"].n == N
    print_summary(result)
    out = " ".join(capsys.readouterr().out.split())
    assert "the judge is the judged model: self-preference possible" in out
    assert "judge scores rise with answer length" in out and "rho" in out


class PanelJudge(Backend):
    """A panel judge built from a catalogue name: scores from a hash of (its name, the prompt), so judges differ."""

    kind = "panel_judge"

    def __init__(self, name: str = "p", batch_size: int = 8):
        self.name, self.batch_size = name, batch_size

    @classmethod
    def static_identity(cls, name: str = "p", **_) -> dict:
        return {"kind": cls.kind, "name": name}

    def identity(self) -> dict:
        return self.static_identity(self.name)

    def generate(self, requests: list[Request]) -> list[Response]:
        return [Response(text=json.dumps({**{a: 1 + _h(self.name + r.messages[-1][1] + a) % 5 for a in ASPECTS},
                                          "reason": self.name}), prompt_tokens=5, completion_tokens=5)
                for r in requests]


def test_panel_alpha_equals_the_krippendorff_package_and_reasks_flip_rate(tmp_path, monkeypatch, capsys):
    import krippendorff

    from recbench.run import judge_settings

    monkeypatch.setattr(judge_settings, "panel_model", lambda name: OmegaConf.create(
        {"name": name, "backend": {"_target_": f"{__name__}.PanelJudge", "name": name}}))
    ScriptedJudge.answer = staticmethod(lambda req: json.dumps(
        {**{a: 1 + _h(req.messages[-1][1] + a + str(req.sampling.seed)) % 5 for a in ASPECTS}, "reason": "r"}))
    cfg = _cfg(tmp_path, f"limit={N}", "judge.panel=[smollm2,qwen2-0.5b,gpt2]", "judge.repeats=2",
               "judge.temperature=0.7")
    result = run_from_config(cfg, tmp_path / "run", backend=_model())
    b = result.audits[KEY]
    dirs = judge_records(tmp_path / "run")
    tags = ["smollm2-pointwise", "qwen2-0.5b-pointwise", "gpt2-pointwise"]
    assert b.panel.judges == tags
    ids = sorted(r.id for r in dirs[tags[0]].records)
    for a in ASPECTS:
        m = np.array([[{r.id: r.prediction[a] for r in dirs[t].records}[i] for i in ids] for t in tags], dtype=float)
        want = krippendorff.alpha(reliability_data=m, level_of_measurement="ordinal")
        assert b.panel.alpha[a].mean == pytest.approx(want, abs=1e-12)
        assert b.panel.alpha[a].ci_low <= b.panel.alpha[a].ci_high
        majority = [stats.mode(col, keepdims=False).mode if len(set(col)) < 3 else np.median(col) for col in m.T]
        assert b.panel.majority[a].mean == pytest.approx(np.mean(majority))
    main = {r.id: r.prediction for r in dirs["smollm2-pointwise"].records}
    again = [{r.id: r.prediction for r in dirs[f"smollm2-pointwise-repeat{k}"].records} for k in (1, 2)]
    changed = sum(main[i][a] != rep[i][a] for rep in again for i in ids for a in ASPECTS)
    assert b.noise.flips.n == 2 * N * len(ASPECTS) and b.noise.flips.mean == pytest.approx(changed / b.noise.flips.n)
    ci = stats.binomtest(changed, b.noise.flips.n).proportion_ci(0.95, method="exact")
    assert (b.noise.flips.ci_low, b.noise.flips.ci_high) == pytest.approx((ci.low, ci.high))
    print_summary(result)
    out = " ".join(capsys.readouterr().out.split())
    assert "judge panel (3 judges) agrees little: Krippendorff's alpha (ordinal)" in out
    assert "judge verdicts change on" in out and "of re-asks (judge.repeats=2, temperature 0.7)" in out


def test_not_judged_no_block(tmp_path):
    result = run_from_config(_cfg(tmp_path, "judge=none"), tmp_path / "run", backend=_model())
    assert KEY not in result.audits and KEY not in result.to_dict()["extra"]


def test_report_ranks_runs_judged_pairwise_with_bradley_terry_and_names_the_judge(tmp_path):
    from recbench.stats.bradley_terry import bradley_terry

    run_from_config(_cfg(tmp_path, "judge=none", f"limit={N}"), tmp_path / "ref", backend=_model("It suits."))
    ScriptedJudge.answer = staticmethod(longer_mostly)
    _pairwise(tmp_path, "A", _answers("Short"), tmp_path / "ref")
    _pairwise(tmp_path, "B", _answers("A much longer explanation of why it fits"), tmp_path / "ref")
    _pairwise(tmp_path, "C", _answers("Medium length, it fits"), tmp_path / "A")  # judged against run A
    md = Path(write_report([tmp_path / d for d in ("A", "B", "C")], tmp_path / "rep", formats=("md",))["md"]).read_text()
    part = md.split("### Judge ranking: Bradley-Terry strengths of runs judged pairwise")[1].split("###")[0]
    rows = [line for line in part.splitlines() if line.startswith("| llmrec_explanation")]
    assert len(rows) == 4  # A, B, C and the reference run
    wins = []
    for d in ("A", "B", "C"):
        jr = judge_records(tmp_path / d)["smollm2-pairwise"]
        ref = str(Path(jr.manifest["reference"]).resolve())
        wins += [(str((tmp_path / d).resolve()), ref, {"win": 1, "tie": 0.5, "loss": 0}[r.prediction])
                 for r in jr.records]
    want = bradley_terry(wins, n_boot=500, seed=0)
    for row, w in zip(rows, want):
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[2] == str(want.index(w) + 1) and cells[4].startswith(f"{w['strength']:.3f}")
        assert f"[{w['ci_low']:.3f}, {w['ci_high']:.3f}]" in cells[4]
    assert "### Judge validity: position, length, self-preference, panel, noise" in md
    assert "Judged metrics (judge_*): judged by smollm2 (pairwise, against" in md


def test_viewer_shows_each_judged_answer_with_both_orders(tmp_path):
    from recbench.cli import view

    run_from_config(_cfg(tmp_path, "judge=none", f"limit={N}"), tmp_path / "ref", backend=_model("It suits."))
    ScriptedJudge.answer = staticmethod(longer_mostly)
    _pairwise(tmp_path, "run", _model(), tmp_path / "ref")
    data = view.load_run(tmp_path / "run")
    assert data["judges"][0]["tag"] == "smollm2-pairwise" and data["judges"][0]["n"] == N
    row = data["rows"][0]
    j = row["judged"][0]
    assert j["judge"] == "smollm2" and j["verdict"] in ("win", "loss", "tie") and j["reason"]
    assert [o["run_answer_at"] for o in j["orders"]] == ["A", "B"] and j["reference_answer"] == "It suits."
    html = view.render(data)
    assert "judged by " in html and "combined verdict" in html and "shown as A" in html


def test_list_metrics_explains_the_judged_metrics():
    from recbench.cli.catalogue import list_metrics

    lines = {x.split()[0]: x for x in list_metrics("llmrec_explanation")}
    assert "LLM judge, pointwise (judge=MODEL)" in lines["judge_persuasiveness"]
    assert "LLM judge, pairwise" in lines["judge_win_rate"] and "both display orders" in lines["judge_win_rate"]
    summary = {x.split()[0] for x in list_metrics("llmrec_summary")}
    assert {"judge_faithfulness", "judge_coverage", "judge_conciseness", "judge_win_rate"} <= summary


def test_stub_judge_preferring_longer_answers_is_consistent_and_length_biased(tmp_path, capsys):
    """recbench.testing.stub_judges.judge_prefers_longer behind the stub server: every pair survives the swap, and
    the audit finds that wins rise with the answer's length over the reference's."""
    from recbench.testing.openai_stub import StubServer
    from recbench.testing.stub_judges import judge_prefers_longer

    run_from_config(_cfg(tmp_path, "judge=none", f"limit={N}"), tmp_path / "ref", backend=_answers("Fine"))
    with StubServer(answer_fn=judge_prefers_longer) as stub:
        cfg = compose_cfg(["task=llmrec_explanation", "method=zero_shot", f"limit={N}", "run.bootstrap_resamples=200",
                           "run.progress=false", f"cache.path={tmp_path / 'cache.sqlite'}", "judge=openai-server",
                           "judge.protocol=pairwise", f"judge.reference={tmp_path / 'ref'}",
                           f"judge.backend.base_url={stub.base_url}", "judge.backend.max_retries=0"])
        result = run_from_config(cfg, tmp_path / "run", backend=_answers("Good"))
    b = result.audits[KEY]
    assert b.position.consistent.mean == 1.0 and b.length_bias["win"].rho > 0.9
    recs = judge_records(tmp_path / "run")["openai-server-pairwise"].records
    for r in recs:
        diff = r.details["answer_length"] - r.details["reference_length"]
        assert r.prediction == ("win" if diff > 0 else "loss" if diff < 0 else "tie")
    print_summary(result)
    out = " ".join(capsys.readouterr().out.split())
    assert "judge wins rise with how much longer the answer is than the reference's (win rho" in out
