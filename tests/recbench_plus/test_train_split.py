"""Train / held-out split for RecBench+ fine-tuning: no held-out user, query or answer item reaches training, and the
held-out part is exactly what `task=recbench_plus_ml100k_heldout` evaluates."""
from __future__ import annotations

import pytest
from hydra.utils import get_class
from omegaconf import OmegaConf

from recbench.run.construct import bundled_data, register_resolvers
from recbench.api.errors import ConfigError
from recbench.tasks.recbench_plus.train.records import load_part, rft_records, sft_records, target
from recbench.tasks.recbench_plus.train.split import (HeldoutRecBenchPlusTask, answer_items, in_heldout, query_key,
                                                       split_key, split_queries)
from recbench.tasks.recbench_plus.task import RecBenchPlusTask
from recbench.api.types import Example
from tests.helpers import compose_cfg

pytestmark = pytest.mark.fast


def sample_cfg(part: str, fraction: float = 0.5):
    register_resolvers()
    cfg = OmegaConf.load("conf/task/recbench_plus.yaml")
    cfg.data.path = bundled_data("recbench_plus_sample")
    cfg.split = {"part": part, "fraction": fraction, "seed": 0, "pool": {}}
    return cfg


def assert_no_leak(train, heldout):
    users = {e.data["source_user"] for e in heldout if e.data["source_user"]}
    items = set().union(*(answer_items(e) for e in heldout))
    assert heldout and train
    assert not {e.id for e in train} & {e.id for e in heldout}
    for e in train:
        assert e.data["source_user"] not in users
        assert query_key(e) not in {query_key(h) for h in heldout}
        assert not answer_items(e) & items, e.id
        # the text the model is trained to produce names no held-out answer title
        assert not any(t in target(e).split(" [SEP] ") for h in heldout for t in h.data["gt_titles"])


def test_split_on_bundled_sample_leaks_nothing():
    train = HeldoutRecBenchPlusTask(sample_cfg("train")).load()
    held = HeldoutRecBenchPlusTask(sample_cfg("heldout")).load()
    full = RecBenchPlusTask(sample_cfg("train")).load()
    assert_no_leak(train, held)
    # every held-out query is an evaluation query, chosen by its split key alone
    assert {e.id for e in held} == {e.id for e in full if in_heldout(split_key(e), 0.5, 0)}
    assert len(train) + len(held) < len(full)  # some pool queries dropped for shared answer items


def test_split_drops_each_kind_of_leak():
    def ex(i, user, query, gt_ids, titles):
        return Example(id=i, data={"source_user": user, "query": query, "gt_ids": gt_ids, "gt_titles": titles},
                       meta={"query_type": "explicit"})
    users = [f"u{i}" for i in range(40)]
    held_user = next(u for u in users if in_heldout(f"user:{u}", 0.5, 0))
    free = [u for u in users if not in_heldout(f"user:{u}", 0.5, 0)]
    heldout = [ex("h", held_user, "Movies by Nolan?", [1, 2], ["Memento (2000)", "Insomnia (2002)"])]
    pool = [ex("a", held_user, "other", [9], ["X (1990)"]),                       # held-out user
            ex("b", free[0], "movies by  NOLAN?", [8], ["Y (1991)"]),              # same query text
            ex("c", free[1], "q", [7, 2], ["Z (1992)", "Insomnia (2002)"]),        # shares an answer item
            ex("d", free[2], "q2", [], ["memento (2000)"]),                        # same answer title, no id
            ex("e", free[3], "q3", [5], ["W (1993)"])]                              # clean
    s = split_queries(heldout, pool, 0.5, 0)
    assert [e.id for e in s.heldout] == ["h"] and [e.id for e in s.train] == ["e"]
    assert s.dropped == {"heldout_key": 1, "query_text": 1, "answer_item": 2, "no_ground_truth": 0}
    with pytest.raises(ConfigError, match="fraction"):
        split_queries(heldout, pool, 1.0, 0)


def test_training_records_use_the_evaluation_prompt_and_answer_format():
    cfg = OmegaConf.create({"task_config": "recbench_plus_ml100k_heldout", "task": OmegaConf.to_container(sample_cfg("train"))})
    task, train = load_part(cfg, "train")
    recs = sft_records(task, train)
    m = task.make_method(OmegaConf.create({"name": "assistant"}))
    assert recs[0]["prompt"] == m.messages(train[0])
    answer = recs[0]["completion"][0]["content"]
    assert answer.split(" [SEP] ") == train[0].data["gt_titles"]
    # the evaluation scores the target as a perfect answer
    from recbench.api.types import Outcome
    assert task.score(train[0], Outcome(prediction=answer))["recall"] == 1.0
    assert [r["example_id"] for r in rft_records(task, train)] == [e.id for e in train]


def test_ml100k_heldout_is_what_the_evaluation_loads(shared_data):
    """The eval config (as `python -m recbench task=recbench_plus_ml100k_heldout` composes it) loads exactly the
    held-out part, and the training part (larger pool build) leaks no user, query or answer item into it."""
    cfg = compose_cfg(["task=recbench_plus_ml100k_heldout", "method=assistant", "model=smollm2",
                       f"task.data.path={shared_data / 'ml-100k'}"])
    evaluated = get_class(cfg.task._target_)(cfg.task).load()
    train_cfg = OmegaConf.create({"task_config": "recbench_plus_ml100k_heldout",
                                  "task": {"data": {"path": str(shared_data / "ml-100k")}}})
    task, train = load_part(train_cfg, "train")
    full = RecBenchPlusTask(OmegaConf.masked_copy(cfg.task, [k for k in cfg.task if k != "split"])).load()
    assert {e.id for e in evaluated} == {e.id for e in full if in_heldout(split_key(e), 0.5, 0)}
    assert len(evaluated) == task.split_info["heldout"] == 58
    assert len(train) == task.split_info["train"] == 64
    assert_no_leak(train, evaluated)
    # the answer items really are disjoint at the catalogue level too
    assert not {str(i) for e in train for i in e.data["gt_ids"]} & {str(i) for e in evaluated for i in e.data["gt_ids"]}
