"""PerRecTask.score / truth take one sort of a group for both and a tau without kendall_tau_ranks' checks where the
ids are distinct strings: the values must equal the plain path's (true_order + kendall_tau_ranks, scipy's tau-b) and
the plain truth dict, on random groups with tied relative ratings, repeated ids, non-string ids and mismatched
orders (which must fail as before)."""
import math
import random

import pytest
from scipy import stats

from recbench.api.types import Example, Outcome
from recbench.stats.bootstrap import kendall_tau_ranks
from recbench.tasks.perrec.data import true_order
from recbench.tasks.perrec.task import PerRecTask, _tau
from tests.helpers import compose_cfg

pytestmark = pytest.mark.fast


def _plain_truth(users):
    order = true_order(users)
    users = sorted(users, key=lambda u: order.index(u["user_id"]))
    return {"order": order, "relative_rating": {u["user_id"]: u["relative_rating"] for u in users},
            "rating": {u["user_id"]: u["rating"] for u in users},
            "avg_rating": {u["user_id"]: u["avg_rating"] for u in users}}


def _group(rng, n, ids):
    rel = [rng.choice([-1.0, 0.0, 0.5, 0.5, 1.25, rng.uniform(-2, 2)]) for _ in range(n)]  # ties on purpose
    return [{"user_id": ids[i], "relative_rating": rel[i], "rating": float(rng.randint(1, 5)),
             "avg_rating": round(rng.uniform(1, 5), 4)} for i in range(n)]


def test_score_and_truth_equal_the_plain_path_and_scipy():
    task = PerRecTask(compose_cfg(["task=perrec"]).task)
    rng = random.Random(7)
    for k in range(3000):
        n = rng.randint(1, 7)
        ids = [f"u{rng.randint(0, 99)}" for _ in range(n)] if k % 10 == 0 else [f"u{i}" for i in rng.sample(range(99), n)]
        users = _group(rng, n, ids)
        ex = Example(id=str(k), data={"users": users})
        pred = list(true_order(users))
        rng.shuffle(pred)
        got, truth = task.score(ex, Outcome(prediction={"order": pred})), task.truth(ex)
        assert truth == _plain_truth(users) and list(truth["relative_rating"]) == list(_plain_truth(users)["relative_rating"])
        want = kendall_tau_ranks(true_order(users), pred)
        assert (math.isnan(got["ptc"]) and math.isnan(want)) or got["ptc"] == want
        if len(set(ids)) == n and n >= 2:  # scipy's tau-b of the true vs predicted ranks (today's value: last bit aside)
            ranks = {u: i for i, u in enumerate(pred)}
            assert got["ptc"] == pytest.approx(stats.kendalltau(range(n), [ranks[u] for u in true_order(users)]).statistic,
                                               rel=1e-15, abs=1e-15)


def test_tau_takes_the_checked_path_on_odd_orders():
    assert _tau(["a", "b", "c"], ["c", "a", "b"]) == kendall_tau_ranks(["a", "b", "c"], ["c", "a", "b"])
    assert _tau(["a", "b"], ("b", "a")) == -1.0  # a tuple: the checked path
    for truth, pred in ((["a", "b"], ["a", "c"]), (["a", "b"], ["a", "a"]), (["a", "b"], ["a"])):
        with pytest.raises(ValueError, match="orderings name different ids"):
            _tau(truth, pred)
    with pytest.raises(KeyError):  # as kendall_tau_ranks: text-equal ids of another type are not found
        kendall_tau_ranks(["1", "2"], [1, 2])
    with pytest.raises(KeyError):
        _tau(["1", "2"], [1, 2])


def test_truth_memo_follows_the_example_and_its_users():
    task = PerRecTask(compose_cfg(["task=perrec"]).task)
    users = [{"user_id": "a", "relative_rating": 0.0, "rating": 3.0, "avg_rating": 3.0},
             {"user_id": "b", "relative_rating": 1.0, "rating": 4.0, "avg_rating": 3.0}]
    ex = Example(id="1", data={"users": users})
    assert task.truth(ex)["order"] == ["b", "a"]
    ex.data["users"] = [dict(users[0], relative_rating=2.0), users[1]]  # new users list: sorted again
    assert task.truth(ex)["order"] == ["a", "b"]
    other = Example(id="2", data={"users": users})
    assert task.score(other, Outcome(prediction={"order": ["b", "a"]}))["ptc"] == 1.0
