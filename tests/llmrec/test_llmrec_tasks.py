"""The five LLMRec tasks end to end through the real app (scripted model), baselines, and the real data loaders."""
from __future__ import annotations

import re

import pytest
from tests.doubles import ScriptedBackend
from hydra.utils import get_class
from tests.llmrec.llmrec_helpers import compose_cfg

from recbench.tasks.llmrec import metrics as M
from recbench.tasks.llmrec.data import first_sentence, leave_last_out, load_p5, load_reviews
from recbench.api.types import Outcome

pytestmark = pytest.mark.fast


def make_task(*overrides):
    cfg = compose_cfg(*overrides)
    return get_class(cfg.task._target_)(cfg.task)


def prompt_candidates(req) -> list[str]:
    """Candidate ids in the order the prompt lists them (the lines after 'candidates')."""
    user = req.messages[-1][1]
    block = user[user.lower().rindex("candidates"):]
    return re.findall(r"^(\d+): ", block, flags=re.M)


@pytest.mark.parametrize("kind", ["sequential", "direct"])
def test_ranking_zero_shot_scores_the_answer_it_got(run_cfg, kind):
    task = make_task(f"task=llmrec_{kind}")
    ex = {e.id: e for e in task.load()}
    backend = ScriptedBackend(lambda r: str([int(i) for i in prompt_candidates(r)[:10]]))
    metrics, recs = run_cfg(backend, f"task=llmrec_{kind}", "method=zero_shot", "model=smollm2", "limit=25")
    assert metrics["counts"]["examples"] == 25 and metrics["counts"]["parse_ok"] == 25
    for r in recs:
        e = ex[r["id"]]
        assert r["prediction"] == e.data["candidates"][:10]  # the prompt lists the frozen candidates in order
        assert r["metrics"]["hr@10"] == M.hit_at_k(e.data["candidates"][:10], e.data["target"], 10)
        assert r["metrics"]["ndcg@10"] == pytest.approx(M.ndcg_at_k(e.data["candidates"], e.data["target"], 10))
    assert metrics["extra"]["share_in_candidates"] == 1.0


def test_ranking_invalid_items_are_counted_and_failures_kept(run_cfg):
    def answer(r):
        c = prompt_candidates(r)
        if int(r.example_id) % 3 == 0:
            return "I am not able to help with that."
        return f"['{c[0]}', '{c[0]}', 'Glitter Unicorn Hair Dust', '{c[1]}']"

    metrics, recs = run_cfg(ScriptedBackend(answer), "task=llmrec_sequential", "method=zero_shot", "model=smollm2",
                            "limit=30", "run.limit_strategy=first")  # the first 30 ids: every third one fails
    assert metrics["counts"]["examples"] == 30  # nothing dropped
    assert metrics["counts"]["parse_failed"] == 10
    failed = [r for r in recs if r["parse_status"] == "failed"]
    assert all(r["prediction"] == [] and r["metrics"]["hr@10"] == 0.0 for r in failed)
    ok = [r for r in recs if r["parse_status"] != "failed"]
    assert all(r["parse_status"] == "repaired" and len(r["prediction"]) == 2 for r in ok)
    x = metrics["extra"]
    # 20 parsed answers name 4 items each (+ the 10 failures name none): 40 valid, 20 duplicates, 20 hallucinated
    assert x["items_named"]["named"] == 80
    assert x["share_in_candidates"] == 0.5
    m = metrics["metrics"]  # the list metrics' answer errors, per answer (api/item_lists.py)
    assert m["invalid_rate"]["mean"] == pytest.approx(0.25) and m["duplicate_rate"]["mean"] == pytest.approx(0.25)
    assert m["out_of_candidates_rate"]["mean"] == 0.0 and m["history_copy_rate"]["mean"] == 0.0
    assert m["invalid_rate"]["n"] == 20  # the 10 failed answers name nothing: undefined


def test_rating_zero_shot_parse_statuses_and_fallback(run_cfg):
    task = make_task("task=llmrec_rating")
    truth = {e.id: e.data["rating"] for e in task.load()}
    answers = iter(["4", "I think 5 stars", "banana", "7"] * 10)
    metrics, recs = run_cfg(ScriptedBackend(lambda r: next(answers)), "task=llmrec_rating", "method=zero_shot",
                            "model=smollm2", "limit=20", "run.chunk_size=1")
    c = metrics["counts"]
    assert (c["examples"], c["parse_ok"], c["parse_repaired"], c["parse_failed"]) == (20, 5, 10, 5)
    preds = {r["id"]: (3.0 if r["prediction"] is None else r["prediction"]) for r in recs}
    assert {r["prediction"] for r in recs} == {4.0, 5.0, None}  # "7" clamped to 5
    ids = list(preds)
    assert metrics["extra"]["rmse"] == pytest.approx(M.rmse([preds[i] for i in ids], [truth[i] for i in ids]))
    assert metrics["metrics"]["mae"]["mean"] == pytest.approx(M.mae([preds[i] for i in ids], [truth[i] for i in ids]))
    assert metrics["extra"]["n_fallback"] == 5


def test_rating_parse_ignores_an_echoed_scale():
    task = make_task("task=llmrec_rating")
    ex = task.load()[0]
    from recbench.api.types import Response

    assert task.parse(Response("The user's rating history (1 being"), ex).parse_status == "failed"
    out = task.parse(Response("4 (1 being lowest and 5 being highest)"), ex)
    assert (out.prediction, out.parse_status) == (4.0, "repaired")
    assert task.parse(Response("3"), ex).parse_status == "ok"
    assert task.parse(Response("The user rated the product 3 out"), ex).prediction == 3.0


@pytest.mark.parametrize("kind", ["explanation", "summary"])
def test_text_tasks_score_against_their_reference(run_cfg, kind):
    task = make_task(f"task=llmrec_{kind}")
    ex = task.load()[0]
    ref = task.reference(ex)
    assert ref == (ex.data["review_title"] if kind == "summary" else first_sentence(ex.data["review_text"]))
    perfect = task.score(ex, Outcome(ref))
    assert perfect["bleu4"] == pytest.approx(100.0) and perfect["rougeL"] == pytest.approx(100.0)
    metrics, recs = run_cfg(ScriptedBackend(lambda r: 'Summary: "Great product, works well."\nExtra line'),
                            f"task=llmrec_{kind}", "method=zero_shot", "model=smollm2", "limit=15",
                            "run.limit_strategy=first")  # the first 15 examples, as refs below
    assert all(r["prediction"] == "Great product, works well." and r["parse_status"] == "repaired" for r in recs)
    refs = [task.reference(e) for e in task.load()[:15]]
    assert metrics["extra"]["corpus_bleu4"] == pytest.approx(M.corpus_bleu4(["Great product, works well."] * 15, refs))
    assert set(metrics["metrics"]) == {"bleu4", "rouge1", "rouge2", "rougeL"}


def test_prompts_carry_description_behaviour_and_format():
    seq = make_task("task=llmrec_sequential")
    e = seq.load()[0]
    msg = seq.messages(e)[-1]["content"]
    hist = [seq.data.titles[i][:20] for i in e.data["history"]]
    assert all(h in msg for h in hist) and "chronological order" in msg and "python list" in msg
    assert msg.index(hist[0]) < msg.index(hist[-1])
    direct = make_task("task=llmrec_direct")
    assert "no particular order" in direct.messages(direct.load()[0])[-1]["content"]
    rating = make_task("task=llmrec_rating")
    r = rating.load()[0]
    msg = rating.messages(r)[-1]["content"]
    assert r.data["item_title"] in msg and "exact number" in msg and r.data["history"][0]["title"] in msg
    summ = make_task("task=llmrec_summary")
    s = summ.load()[0]
    assert s.data["review_text"] in summ.messages(s)[-1]["content"]
    assert s.data["review_title"] not in summ.messages(s)[-1]["content"] or s.data["review_title"] in s.data["review_text"]


@pytest.mark.full  # every baseline over the whole bundled sample
def test_baselines_beat_chance_on_the_sample(run_cfg):
    res = {}
    for m in ("random", "popularity", "item_knn", "mf"):
        metrics, _ = run_cfg(None, "task=llmrec_sequential", f"method={m}", name=m)
        res[m] = metrics["metrics"]["hr@10"]["mean"]
        assert metrics["model"] == "none" and metrics["counts"]["examples"] == 300
    assert res["random"] == pytest.approx(0.1, abs=0.05)
    assert res["item_knn"] > res["mf"] > res["popularity"] > res["random"]
    rating = {}
    for m in ("global_mean", "user_mean", "item_mean"):
        metrics, _ = run_cfg(None, "task=llmrec_rating", f"method={m}", name=m)
        rating[m] = metrics["extra"]["rmse"]
    assert rating["user_mean"] < rating["global_mean"] and rating["item_mean"] < rating["global_mean"]
    metrics, recs = run_cfg(None, "task=llmrec_summary", "method=lead", name="lead")
    assert metrics["metrics"]["rouge1"]["mean"] > 0


def test_real_p5_beauty_loads_at_full_scale(p5_dir):
    d = load_p5(str(p5_dir))
    assert len(d.sequences) == 22363 and len(d.items) == 12101
    assert sum(map(len, d.sequences.values())) == 198502
    assert d.titles["1"].startswith("OPI Nail Lacquer")


def test_real_p5_popularity_on_frozen_candidates(run_cfg, p5_dir, tmp_path):
    from recbench.tasks.llmrec.candidates import freeze

    cfg = compose_cfg("task=llmrec_direct_p5")
    path = cfg.task.candidates.path
    import os
    if not os.path.exists(path):
        path = str(tmp_path / "direct.jsonl.gz")
        freeze(str(p5_dir), "direct", path)
    metrics, recs = run_cfg(None, "task=llmrec_direct_p5", "method=popularity", f"task.data_dir={p5_dir}",
                            f"task.candidates.path={path}", "limit=3000")
    assert metrics["counts"]["examples"] == 3000
    assert 0.25 < metrics["metrics"]["hr@10"]["mean"] < 0.36  # ~0.305 on all 22,363 users, chance = 0.10


def test_real_amazon2023_rating_baselines(run_cfg, az23_dir):
    df = load_reviews(str(az23_dir))
    train, test = leave_last_out(df)
    assert df["user_id"].nunique() == 253 and len(test) == 253 and len(train) + len(test) == len(df)
    assert not df["text"].str.contains("<br", regex=False).any()
    out = {}
    for m in ("global_mean", "user_mean", "item_mean"):
        metrics, _ = run_cfg(None, "task=llmrec_rating_az23", f"method={m}", f"task.data_dir={az23_dir}", name=m)
        assert metrics["counts"]["examples"] == 253
        out[m] = (metrics["extra"]["rmse"], metrics["extra"]["mae"])
    assert out["user_mean"][0] < out["global_mean"][0]
    assert out["global_mean"][0] == pytest.approx(1.072, abs=0.01)
