"""The PerRecBench task: rank a group of users who rated the same item by their relative preference (PTC)."""
from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

from recbench.metrics import kendall_tau_legacy, kendall_tau_ranks
from recbench.task import Task
from recbench.tasks.perrec.data import load_examples, true_order
from recbench.tasks.perrec.methods import BM25History, Listwise, Pairwise, Pointwise, RandomOrder
from recbench.types import Example, Outcome


class PerRecTask(Task):
    """PerRecBench (Tan et al. 2025): PTC = Kendall tau between true and predicted per-user ranks."""

    name = "perrec"
    methods = {m.name: m for m in (Pointwise, Pairwise, Listwise, RandomOrder, BM25History)}
    breakdown_by = ("difficulty",)
    headline_metric = "ptc"

    def load(self) -> list[Example]:
        """Groups of the configured difficulties, in file order."""
        exs = load_examples(str(self.cfg.data_dir), int(self.cfg.retrieval_k), int(self.cfg.history_max))
        wanted = set(self.cfg.difficulties)
        return [e for e in exs if e.meta["difficulty"] in wanted]

    def score(self, example: Example, outcome: Outcome) -> dict[str, float]:
        """ptc (parse failures score 0, the expected tau of a random ranking) and ptc_parsed (NaN on failure)."""
        order = outcome.prediction.get("order") if isinstance(outcome.prediction, dict) else None
        if outcome.parse_status == "failed" or not order:
            return {"ptc": 0.0, "ptc_parsed": math.nan}
        truth = true_order(example.data["users"])
        tau = kendall_tau_legacy(truth, order) if self.cfg.legacy_tau else kendall_tau_ranks(truth, order)
        return {"ptc": tau, "ptc_parsed": tau}

    def identity(self) -> dict[str, Any]:
        """Task name, data folder and a hash of its groups file, and the settings that change prompts or scores."""
        groups = Path(str(self.cfg.data_dir)) / "groups.jsonl"
        digest = hashlib.sha256(groups.read_bytes()).hexdigest()[:16] if groups.exists() else None
        return {"name": self.name, "data_dir": str(self.cfg.data_dir), "groups_sha256": digest,
                "retrieval_k": int(self.cfg.retrieval_k), "profile": bool(self.cfg.profile),
                "legacy_tau": bool(self.cfg.legacy_tau)}
