"""Training records for RecBench+: the evaluation prompts (assistant method) with ground-truth answer lists."""
from __future__ import annotations

from importlib import resources
from typing import Any, Optional, Sequence

from omegaconf import DictConfig, OmegaConf

from recbench.tasks.recbench_plus import metrics as M
from recbench.tasks.recbench_plus.train.split import HeldoutRecBenchPlusTask
from recbench.api.types import Example


def task_config(cfg: DictConfig, part: str) -> DictConfig:
    """conf/task/<cfg.task_config>.yaml with cfg.task overrides and split.part = part."""
    from recbench.run.construct import register_resolvers

    register_resolvers()
    path = resources.files("recbench.conf").joinpath("task", f"{cfg.task_config}.yaml")
    if not path.is_file():
        raise FileNotFoundError(f"task_config={cfg.task_config}: no conf/task/{cfg.task_config}.yaml")
    t = OmegaConf.merge(OmegaConf.load(str(path)), cfg.get("task") or {}, {"split": {"part": part}})
    if "split" not in OmegaConf.load(str(path)):
        raise ValueError(f"task_config={cfg.task_config} has no `split:` block; use a held-out task config such as "
                         "recbench_plus_ml100k_heldout")
    return t


def load_part(cfg: DictConfig, part: str = "train") -> tuple[HeldoutRecBenchPlusTask, list[Example]]:
    """The split task and its examples of one part (train | heldout)."""
    task = HeldoutRecBenchPlusTask(task_config(cfg, part))
    examples = task.load()
    if cfg.get("max_queries"):
        examples = examples[: int(cfg.max_queries)]
    return task, examples


def target(example: Example) -> str:
    """The ground-truth list in the answer format the assistant method parses: 'A (1995) [SEP] B (1990)'."""
    return f" {M.SEP} ".join(str(t) for t in example.data["gt_titles"])


def prompts(task: HeldoutRecBenchPlusTask, examples: Sequence[Example], method: Optional[DictConfig] = None) -> list[list[dict[str, str]]]:
    """The chat messages the evaluation method sends for each query (system + user)."""
    m = task.make_method(OmegaConf.create(OmegaConf.to_container(method) if method is not None else {"name": "assistant"}))
    return [m.messages(e) for e in examples]


def sft_records(task, examples: Sequence[Example], method: Optional[DictConfig] = None) -> list[dict[str, Any]]:
    """Prompt-completion chat records for trl's SFTTrainer (loss on the completion only)."""
    return [{"prompt": p, "completion": [{"role": "assistant", "content": target(e)}], "example_id": e.id}
            for p, e in zip(prompts(task, examples, method), examples)]


def rft_records(task, examples: Sequence[Example], method: Optional[DictConfig] = None) -> list[dict[str, Any]]:
    """Prompt-only chat records for trl's GRPOTrainer; example_id lets the reward find the query."""
    return [{"prompt": p, "example_id": e.id} for p, e in zip(prompts(task, examples, method), examples)]
