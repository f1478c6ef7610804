"""LLMRec metrics on hand-checked fixtures, and HR/NDCG against an independent implementation (pytrec_eval)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from recbench.tasks.llmrec import metrics as M

pytestmark = pytest.mark.fast


def test_hit_and_ndcg_hand_checked():
    ranked = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]
    assert M.ranking_metrics(ranked, "a") == {"hr@1": 1.0, "ndcg@1": 1.0, "hr@5": 1.0, "ndcg@5": 1.0,
                                             "hr@10": 1.0, "ndcg@10": 1.0}
    m = M.ranking_metrics(ranked, "c")  # rank 3: 1/log2(4) = 0.5
    assert (m["hr@1"], m["hr@5"], m["ndcg@5"], m["ndcg@10"]) == (0.0, 1.0, 0.5, 0.5)
    m = M.ranking_metrics(ranked, "g")  # rank 7: outside top 5; 1/log2(8) = 1/3
    assert (m["hr@5"], m["ndcg@5"], m["hr@10"]) == (0.0, 0.0, 1.0)
    assert m["ndcg@10"] == pytest.approx(1 / 3)
    assert M.ranking_metrics(ranked, "zz") == {k: 0.0 for k in m}
    assert M.ranking_metrics([], "a")["hr@10"] == 0.0  # a failed parse is a miss, not dropped


def test_batch_metrics_match_list_metrics_and_ties_are_pessimistic():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(200, 100))
    target = rng.integers(0, 100, size=200)
    batch = M.ranking_metrics_batch(scores, target)
    for u in range(200):
        ranked = list(np.argsort(-scores[u], kind="stable"))
        one = M.ranking_metrics(ranked, target[u])
        for k, v in one.items():
            assert batch[k][u] == pytest.approx(v)
    tied = M.ranking_metrics_batch(np.zeros((1, 100)), np.array([0]))
    assert tied["hr@10"][0] == 0.0  # all tied: the target is ranked last


def test_hr_ndcg_agree_with_pytrec_eval():
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = np.random.default_rng(1)
    qrel, run, ours = {}, {}, {}
    for u in range(300):
        cands = [f"i{j}" for j in rng.permutation(100)]
        target = cands[int(rng.integers(100))]
        ranked = cands[: int(rng.integers(1, 21))]  # a model answer: a list of 1..20 items
        q = f"u{u}"
        qrel[q] = {target: 1}
        run[q] = {d: float(len(ranked) - i) for i, d in enumerate(ranked)}  # distinct descending scores
        ours[q] = M.ranking_metrics(ranked, target)
    ev = pytrec_eval.RelevanceEvaluator(qrel, {"recall.1,5,10", "ndcg_cut.1,5,10"})
    res = ev.evaluate(run)
    hits = 0
    for q, m in ours.items():
        for k in (1, 5, 10):
            # one relevant item: HR@k == recall@k
            assert m[f"hr@{k}"] == pytest.approx(res[q][f"recall_{k}"]), (q, k)
            assert m[f"ndcg@{k}"] == pytest.approx(res[q][f"ndcg_cut_{k}"]), (q, k)
        hits += m["hr@10"]
    assert 0 < hits < 300  # the fixture exercises both hits and misses


def test_rmse_mae_clamp_to_rating_range():
    pred, true = [6.0, 0.5, 3.0], [5.0, 1.0, 4.0]  # clamped: 5, 1, 3 -> errors 0, 0, -1
    assert M.mae(pred, true) == pytest.approx(1 / 3)
    assert M.rmse(pred, true) == pytest.approx(math.sqrt(1 / 3))
    assert M.rmse([2.0, 4.0], [3.0, 3.0]) == pytest.approx(1.0)
    assert M.mae([1.5], [4.0]) == pytest.approx(2.5)
    assert math.isnan(M.rmse([], []))


def test_rouge_hand_checked():
    r = M.rouge("the cat sat", "the cat sat on the mat")
    # unigrams: P = 3/3, R = 3/6 -> F = 2/3; bigrams: P = 2/2, R = 2/5 -> F = 4/7; LCS = 3 -> same as ROUGE-1
    assert r["rouge1"] == pytest.approx(200 / 3)
    assert r["rouge2"] == pytest.approx(400 / 7)
    assert r["rougeL"] == pytest.approx(200 / 3)
    assert M.rouge("", "anything")["rouge1"] == 0.0


def test_bleu4_hand_checked_and_corpus_equals_sacrebleu():
    import sacrebleu

    assert M.sentence_bleu4("great product for the price", "great product for the price") == pytest.approx(100.0)
    assert M.corpus_bleu4(["completely unrelated words"], ["great product for the price"]) == 0.0
    # hand check: hyp has 6 tokens, ref 6 tokens, p1 = 5/6, p2 = 3/5, p3 = 2/4, p4 = 1/3, BP = 1
    hyp, ref = "i love this shampoo so much", "i love this shampoo very much"
    expected = 100 * math.exp(sum(math.log(p) for p in (5 / 6, 3 / 5, 2 / 4, 1 / 3)) / 4)
    assert M.corpus_bleu4([hyp], [ref]) == pytest.approx(expected, abs=1e-6)
    hyps, refs = ["nice lipstick", "it works", "bad smell"], ["nice lipstick color", "it works well", "smells bad"]
    assert M.corpus_bleu4(hyps, refs) == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)
