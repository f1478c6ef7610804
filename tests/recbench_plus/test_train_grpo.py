"""(slow) One tiny GRPO step with SmolLM2 on the bundled sample changes the LoRA adapter; the CSV curve is written;
an SFT adapter trains further from its own weights."""
from __future__ import annotations

import csv
import json

import pytest
from omegaconf import OmegaConf

from recbench.run.construct import bundled_data
from recbench.tasks.recbench_plus.train.common import stage_config
from recbench.training.lora import adapter_tensors

pytestmark = pytest.mark.fast


def sample_overrides(tmp_path, **kw):
    task = OmegaConf.to_container(OmegaConf.load("conf/task/recbench_plus.yaml"))
    task["data"]["path"] = bundled_data("recbench_plus_sample")
    task["split"] = {"pool": {}}
    return {"task": task, "max_queries": 4, **kw}


@pytest.mark.slow
def test_one_grpo_step_changes_the_adapter(tmp_path):
    import torch

    from recbench.tasks.recbench_plus.train.rft import run_rft
    from recbench.tasks.recbench_plus.train.sft import run_sft

    # a 2-step SFT adapter (its LoRA B is no longer zero), then 1 GRPO step from it
    sft = OmegaConf.merge(stage_config("sft"), sample_overrides(tmp_path, out=str(tmp_path / "sft"), steps=2,
                                                                batch_size=2, lr=1e-3, max_length=256))
    info = run_sft(sft)
    assert len(info["losses"]) == 2 and info["train_queries"] == 4
    before = adapter_tensors(str(tmp_path / "sft"))
    rft = OmegaConf.merge(stage_config("rft"), sample_overrides(
        tmp_path, out=str(tmp_path / "rft"), init=str(tmp_path / "sft"), steps=1, group_size=4, grad_accum=1,
        max_completion_length=24, lr=1e-3, temperature=1.2))
    info = run_rft(rft)
    after = adapter_tensors(str(tmp_path / "rft"))
    assert set(after) == set(before)
    moved = [k for k in before if not torch.equal(before[k], after[k])]
    assert moved and any("lora_B" in k for k in moved)
    assert max((before[k] - after[k]).abs().max().item() for k in moved) < 0.1  # one small step, not a new adapter
    assert json.loads((tmp_path / "rft" / "adapter_config.json").read_text())["r"] == 16
    assert not (tmp_path / "rft" / "ref").exists()  # the frozen KL reference copy is not saved
    rows = list(csv.DictReader(open(tmp_path / "rft" / "curve.csv")))
    assert len(rows) == 1 and rows[0]["step"] == "1"
    for col in ("reward", "kl", "rewards/recall/mean", "rewards/format/mean", "rewards/hallucination/mean"):
        assert rows[0][col] != "", col
    assert float(rows[0]["reward_std"]) > 0  # the group's answers differed, so the step had a learning signal
    assert info["rewards"] == [float(rows[0]["reward"])]
    # the reward each policy earns on the RFT prompts: every answer scored by the RFT reward itself
    from recbench.tasks.recbench_plus.train.policy_reward import run_policy_reward
    from recbench.tasks.recbench_plus.train.records import load_part
    from recbench.tasks.recbench_plus.train.reward import RecBenchPlusReward

    res = run_policy_reward(rft, ["base", str(tmp_path / "rft")], 2, str(tmp_path / "reward.json"))
    task, examples = load_part(rft, "train")
    reward = RecBenchPlusReward(task, examples, OmegaConf.to_container(rft.reward))
    for name in ("base", str(tmp_path / "rft")):
        rows = res["answers"][name]
        assert len(rows) == 4 * 2 and res["summary"][name]["answers"] == 8
        assert all(r["reward"] == pytest.approx(reward.total(r["example_id"], r["answer"])) for r in rows)
    (cmp,) = res["comparisons"]  # the one pair
    assert cmp["against"] == "base" and 0 < cmp["permutation_p"] <= 1
    assert cmp["difference"] == pytest.approx(res["summary"][cmp["policy"]]["mean_reward"] - res["summary"]["base"]["mean_reward"])
    assert json.loads((tmp_path / "reward.json").read_text())["resampling_unit"] == "one sampled answer"


def test_policy_comparison_matches_hand_computed_means():
    from recbench.tasks.recbench_plus.train.policy_reward import compare

    rows = lambda xs: {"rows": [{"reward": x} for x in xs], "seconds": 0}  # noqa: E731
    (same,), (far,) = compare({"a": rows([0, 1] * 10), "b": rows([1, 0] * 10)}), \
        compare({"a": rows([0.0] * 12), "b": rows([1.0] * 12)})
    assert same["difference"] == 0 and same["permutation_p"] == pytest.approx(1.0) and same["holm_p"] == pytest.approx(1.0)
    assert far["difference"] == 1.0 and far["ci95"] == [1.0, 1.0] and far["permutation_p"] < 1e-3
    three = compare({"a": rows([0.0] * 12), "b": rows([1.0] * 12), "c": rows([0.0] * 12)})
    assert [(c["policy"], c["against"]) for c in three] == [("b", "a"), ("c", "a"), ("c", "b")]
    assert [c["difference"] for c in three] == [1.0, 0.0, -1.0]
    assert three[1]["holm_p"] == pytest.approx(1.0) and three[0]["holm_p"] <= 3 * three[0]["permutation_p"]
