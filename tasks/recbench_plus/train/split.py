"""Train / held-out split of RecBench+ queries by source user (or user group), with answer-item leakage removed.

The held-out part is a deterministic function of the evaluation data (a stable hash of each query's split key), so
`task=recbench_plus_ml100k_heldout` evaluates exactly the queries that training never sees. Training queries may come
from a larger build of the same KG; any of them that shares a split key, a query text or a ground-truth item with
the held-out part is dropped.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable, Sequence

from omegaconf import DictConfig, OmegaConf

from recbench.kg.graph import normalize_title
from recbench.api.errors import ConfigError
from recbench.tasks.recbench_plus.task import RecBenchPlusTask
from recbench.api.types import Example

PARTS = ("train", "heldout")


def split_key(example: Example) -> str:
    """The unit a query is split by: its source user, else its user group (demographics: record position)."""
    user = str(example.data.get("source_user") or "")
    if user:
        return f"user:{user}"
    group = example.id.rsplit("-", 1)[0]  # '<type>:<group position>-<query position>' -> the group record
    return f"group:{example.meta.get('group_type', '')}:{group}"


def in_heldout(key: str, fraction: float, seed: int) -> bool:
    """Stable hash assignment of a split key to the held-out part (share `fraction` of keys)."""
    h = int(hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()[:12], 16)
    return h / float(16 ** 12) < fraction


def answer_items(example: Example) -> set[str]:
    """Ground-truth answer items of a query: catalogue ids when known, and normalized titles."""
    out = {f"id:{i}" for i in example.data.get("gt_ids") or []}
    out |= {f"title:{normalize_title(str(t))}" for t in example.data.get("gt_titles") or []}
    return out


def query_key(example: Example) -> str:
    """Whitespace/case-normalized query text."""
    return " ".join(str(example.data.get("query", "")).lower().split())


@dataclass
class Split:
    """The two parts, and how many pool queries were dropped for each leakage reason."""

    train: list[Example]
    heldout: list[Example]
    dropped: dict[str, int]


def split_queries(eval_examples: Sequence[Example], pool: Iterable[Example], fraction: float = 0.5,
                  seed: int = 0) -> Split:
    """Held-out = eval queries whose split key hashes into `fraction`; train = pool queries that leak nothing."""
    if not 0.0 < fraction < 1.0:
        raise ConfigError(f"split.fraction must be in (0, 1), got {fraction}")
    heldout = [e for e in eval_examples if in_heldout(split_key(e), fraction, seed)]
    keys = {split_key(e) for e in heldout}
    texts = {query_key(e) for e in heldout}
    items = set().union(*(answer_items(e) for e in heldout)) if heldout else set()
    train, dropped = [], {"heldout_key": 0, "query_text": 0, "answer_item": 0, "no_ground_truth": 0}
    for e in pool:
        if split_key(e) in keys or in_heldout(split_key(e), fraction, seed):
            dropped["heldout_key"] += 1
        elif query_key(e) in texts:
            dropped["query_text"] += 1
        elif answer_items(e) & items:
            dropped["answer_item"] += 1
        elif not e.data.get("gt_titles"):
            dropped["no_ground_truth"] += 1
        else:
            train.append(e)
    return Split(train=train, heldout=heldout, dropped=dropped)


def _plain(node) -> dict:
    """A config node (a DictConfig, a task's Settings dict, or None) as a plain nested dict."""
    if OmegaConf.is_config(node):
        return OmegaConf.to_container(node, resolve=True)
    return {k: _plain(v) if isinstance(v, dict) else v for k, v in (node or {}).items()}


def _eval_cfg(cfg: DictConfig) -> DictConfig:
    """The task config of the evaluation build (the `split.pool` overrides removed)."""
    c = _plain(cfg)
    c.pop("split", None)
    return OmegaConf.create(c)


class HeldoutRecBenchPlusTask(RecBenchPlusTask):
    """RecBench+ restricted to one part of the train / held-out split (task.split.part: heldout | train)."""

    def load(self) -> list[Example]:
        """The configured part; `train` draws from a build with task.split.pool overrides (e.g. more queries)."""
        sp = self.cfg.split
        part = str(sp.part)
        if part not in PARTS:
            raise ConfigError(f"task.split.part '{part}' is not valid; valid: {', '.join(PARTS)}")
        fraction, seed = float(sp.fraction), int(sp.seed)
        base = _eval_cfg(self.cfg)
        eval_task = RecBenchPlusTask(base)
        evaluated = eval_task.load()
        pool_task = None
        if part == "train":
            pool_task = RecBenchPlusTask(OmegaConf.merge(base, OmegaConf.create(_plain(sp.get("pool")))))
        s = split_queries(evaluated, pool_task.load() if pool_task else [], fraction, seed)
        self.split_info = {"heldout": len(s.heldout), "train": len(s.train), "dropped": s.dropped}
        if part == "heldout":
            if not s.heldout:
                raise ConfigError(f"task.split.fraction={fraction}: no held-out queries; raise the fraction")
            return self._adopt(eval_task, s.heldout)
        if not s.train:
            raise ConfigError(f"no training queries left after removing leakage {s.dropped}; build more "
                              "(task.split.pool.data.build.per_type) or lower task.split.fraction")
        return self._adopt(pool_task, s.train)

    def _adopt(self, loaded: RecBenchPlusTask, examples: list[Example]) -> list[Example]:
        """Take over the KG, histories and resolver of the task that loaded the examples."""
        if loaded.kg is not None:
            self._set_kg(loaded.kg)
        self.histories = loaded.histories
        return examples

    def identity(self) -> dict:
        """Task identity plus the split settings."""
        out = super().identity()
        out["split"] = _plain(self.cfg.get("split"))
        return out
