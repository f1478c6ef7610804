"""GRPO reward components against the RecBench+ metric code on fixed answers with hand-computed values."""
from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from recbench.run.construct import bundled_data, register_resolvers
from recbench.tasks.recbench_plus import metrics as M
from recbench.tasks.recbench_plus.task import RecBenchPlusTask
from recbench.tasks.recbench_plus.train.reward import RecBenchPlusReward, completion_text

pytestmark = pytest.mark.fast

WEIGHTS = {"recall": 1.0, "cmr": 0.5, "format": 0.2, "hallucination": 0.5}


@pytest.fixture(scope="module")
def reward():
    register_resolvers()
    cfg = OmegaConf.load("conf/task/recbench_plus.yaml")
    cfg.data.path = bundled_data("recbench_plus_sample")
    task = RecBenchPlusTask(cfg)
    examples = task.load()
    return RecBenchPlusReward(task, examples, WEIGHTS)


# explicit:0 asks for movies starring Olga Castellano; GT = The Hollow Orchard (2008), Lonely Compass (1985).
# The Velvet Echo and Savage Parade also star her (not in the user's history); Velvet Voyage does not.
@pytest.mark.parametrize("answer, want", [
    ("The Hollow Orchard (2008) [SEP] Lonely Compass (1985)", dict(recall=1.0, cmr=1.0, format=1.0, hallucination=0.0)),
    ("The Hollow Orchard [SEP] Zzyzx Quorble Fandango", dict(recall=0.5, cmr=1.0, format=1.0, hallucination=-0.5)),
    ("Lonely Compass [SEP] Velvet Voyage", dict(recall=0.5, cmr=0.5, format=1.0, hallucination=0.0)),
    ("The Velvet Echo [SEP] Savage Parade", dict(recall=0.0, cmr=1.0, format=1.0, hallucination=0.0)),
    ("1. The Hollow Orchard\n2. Lonely Compass", dict(recall=0.0, cmr=None, format=0.5, hallucination=0.0)),
    ("Sorry, I cannot help with that.", dict(recall=0.0, cmr=None, format=0.0, hallucination=0.0)),
])
def test_condition_query_components(reward, answer, want):
    got = reward.components("explicit:0", answer)
    assert got == pytest.approx(want)
    total = sum(WEIGHTS[k] * v for k, v in want.items() if v is not None)
    assert reward.total("explicit:0", answer) == pytest.approx(total)


def test_components_are_the_evaluation_metrics(reward):
    """recall / cmr are exactly what an evaluation run scores for the same answer."""
    task, ex = reward.task, reward.examples["explicit:0"]
    answer = "Lonely Compass [SEP] Velvet Voyage [SEP] Zzyzx Quorble Fandango"
    off = M.official_scores(answer, ex.data["gt_titles"], gt_ids=ex.data["gt_ids"],
                            name2id=task._official_name2id("movie"),
                            check=lambda i: task.kg.satisfies(str(i), [tuple(c) for c in ex.data["conditions"]]))
    got = reward.components("explicit:0", answer)
    assert (got["recall"], got["cmr"]) == (off["recall"], off["cmr"])
    assert (off["recall"], off["cmr"]) == pytest.approx((0.5, 0.5))
    assert got["hallucination"] == pytest.approx(-1 / 3)


def test_interest_query_official_title_matching(reward):
    """No id matching and no CMR on interest queries; answers lose their year, so 'Wild Compass' (ratio 0.774 to
    'Wild Compass (1963)') misses while 'The Paper Harbor' (0.821) hits: recall 1/3, as the official evaluator."""
    got = reward.components("interest:0-0", "Wild Compass (1963) [SEP] The Paper Harbor")
    assert got == pytest.approx(dict(recall=1 / 3, cmr=None, format=1.0, hallucination=0.0))


def test_trl_reward_functions(reward):
    """The functions trl calls: one per component, named for its log, conversational completions, None for no CMR."""
    funcs = reward.funcs()
    assert [f.__name__ for f in funcs] == list(WEIGHTS) and reward.weight_list() == list(WEIGHTS.values())
    comps = [[{"role": "assistant", "content": "The Hollow Orchard [SEP] Zzyzx Quorble Fandango"}],
             [{"role": "assistant", "content": "Wild Compass [SEP] The Paper Harbor"}]]
    out = {f.__name__: f(prompts=[[], []], completions=comps, example_id=["explicit:0", "interest:0-0"],
                         trainer_state=None) for f in funcs}
    assert out["recall"] == pytest.approx([0.5, 1 / 3]) and out["cmr"][0] == 1.0 and out["cmr"][1] is None
    assert out["hallucination"] == pytest.approx([-0.5, 0.0]) and out["format"] == [1.0, 1.0]
    assert completion_text("A [SEP] B") == "A [SEP] B"
    with pytest.raises(ValueError, match="unknown reward component"):
        RecBenchPlusReward(reward.task, [], {"ndcg": 1.0})
