"""The PerRecBench task: rank a group of users who rated the same item by their relative preference (PTC)."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable, Optional

from recbench.api.metrics import MetricSpec
from recbench.api.errors import ConfigError, suggest
from recbench.stats.bootstrap import kendall_tau_ranks
from recbench.store.schema import SampleRecord
from recbench.stats.baselines import expected_ptc
from recbench.api.task import Task
from recbench.tasks.perrec import settings
from recbench.tasks.perrec.metrics import kendall_tau_legacy, rating_errors
from recbench.tasks.perrec.data import add_strata, history_item_counts, load_examples, query_item_counts
from recbench.tasks.perrec.methods import (BM25History, ItemAverage, Listwise, Pairwise, Pointwise, RandomOrder,
                                           UserAverage)
from recbench.api.types import Example, Outcome, file_sha256
from recbench.tasks.perrec.data import DIFFICULTY_BY_SIZE, HISTORY_LABELS, STRATA_LABELS



class PerRecTask(Task):
    """PerRecBench (Tan et al. 2025): PTC = Kendall tau between true and predicted per-user ranks; MAE/RMSE of ratings."""

    conf_defaults = True  # a hand-built config gets the keys it leaves out from conf/task/<name>.yaml

    name = "perrec"
    methods = {m.name: m for m in (Pointwise, Pairwise, Listwise, RandomOrder, BM25History, UserAverage, ItemAverage)}
    # difficulty first (the primary slice, and what run.limit_strategy=stratified balances); then the strata
    breakdown_by = ("difficulty", "popularity", "history")
    breakdown_order = {"difficulty": tuple(DIFFICULTY_BY_SIZE.values()), "popularity": STRATA_LABELS,
                       "history": HISTORY_LABELS}
    headline_metric = "ptc"
    settings_rules = settings.TASK  # valid values of the task keys, checked before anything is loaded
    #: ptc per group (score); rating MAE / RMSE over all users of the groups with a full rating prediction, group-size
    #: weighted (corpus; only for methods that predict ratings); per-group mae / mse are the standard metrics
    metric_specs = (
        MetricSpec("ptc",
                   meaning="personalization tau correlation: Kendall tau of the true vs predicted ranking of a group's "
                           "users, -1 to 1, 0 = chance (a failed parse scores 0)",
                   doc="Kendall tau of true vs predicted per-user ranks (a failed parse scores 0)"),
        MetricSpec("ptc_parsed",
                   meaning="PTC over the groups whose answer parsed fully",
                   why_n="defined on fully parsed groups only",
                   doc="PTC over fully parsed groups only"),
        MetricSpec("rating_mae",
                   meaning="mean absolute error of predicted ratings over all users of the groups",
                   higher_is_better=False, aggregation="corpus", doc="rating MAE over all users",
                   corpus=lambda records, task: rating_errors(records)["mae"]),
        MetricSpec("rating_rmse",
                   meaning="root mean squared error of predicted ratings over all users of the groups",
                   higher_is_better=False, aggregation="corpus", doc="rating RMSE over all users",
                   corpus=lambda records, task: rating_errors(records)["rmse"]),
        MetricSpec("rating_n",
                   meaning="users behind rating_mae / rating_rmse",
                   higher_is_better=None, doc="users behind rating_mae / rating_rmse (a count: no direction)",
                   corpus=lambda records, task: rating_errors(records)["n"]),
        MetricSpec("rating_groups",
                   meaning="groups behind rating_mae / rating_rmse",
                   higher_is_better=None, doc="groups behind rating_mae / rating_rmse (a count)",
                   corpus=lambda records, task: rating_errors(records)["groups"]),
    )

    def __init__(self, cfg):
        super().__init__(cfg)
        self._heldout: Optional[list[Example]] = None
        self._profiles: Optional[dict[str, str]] = None
        self.strata: dict[str, Any] = {}
        self._last_truth: Optional[tuple[Any, ...]] = None  # (example, its users, _true_order's answer)

    @property
    def released(self) -> bool:
        """True when task.format is 'released' (the official PerRecBench JSON files)."""
        return self.cfg.format == "released"

    def _examples(self, split: str) -> list[Example]:
        k, hmax = int(self.cfg.retrieval_k), int(self.cfg.history_max)
        if self.released:
            from recbench.tasks.perrec.released import load_released

            return list(load_released(str(self.cfg.data_dir), k, hmax, split))
        name = "groups.jsonl" if split == "test" else self.cfg.heldout_file
        if split != "test" and not (Path(str(self.cfg.data_dir)) / name).exists():
            return []
        return list(load_examples(str(self.cfg.data_dir), k, hmax, name))

    def load(self) -> list[Example]:
        """Groups of the configured difficulties, in file order."""
        wanted = set(self.cfg.difficulties)
        test = self._examples("test")
        if self.released:  # no ratings file: count each item's ratings in the members' histories
            self.strata = add_strata(test, history_item_counts(test), "counted in the members' histories")
        else:
            self.strata = add_strata(test, query_item_counts(test, str(self.cfg.data_dir)), "ratings file")
        present = sorted({str(e.meta["difficulty"]) for e in test})
        unknown = [str(d) for d in self.cfg.difficulties if str(d) not in present]
        if test and unknown:  # a filter value the data does not have would silently select fewer (or no) groups
            raise ConfigError(f"task.difficulties: '{unknown[0]}' is not a difficulty of the groups in "
                              f"{self.cfg.data_dir}.{suggest(unknown[0], present)} Difficulties there: {', '.join(present)}")
        if any("domain" in e.meta for e in test):  # a multi-category build: results per category too
            self.breakdown_by = type(self).breakdown_by + ("domain",)
        return [e for e in test if e.meta["difficulty"] in wanted]

    def heldout(self) -> list[Example]:
        """Held-out groups (disjoint query items) for few-shot demonstrations; [] when the data has none."""
        if self._heldout is None:
            self._heldout = self._examples("heldout")
        return self._heldout

    def profile_table(self) -> dict[str, str]:
        """Profiles from task.profile_file (keys 'user' or 'user@query_item'); the released userid2profile.json by default."""
        if self._profiles is None:
            path = self.cfg.profile_file
            if path:
                self._profiles = {str(k): str(v) for k, v in json.loads(Path(str(path)).read_text(encoding="utf-8")).items()}
            elif self.released:
                from recbench.tasks.perrec.released import load_profiles

                self._profiles = load_profiles(str(self.cfg.data_dir))
            else:
                self._profiles = {}
        return self._profiles

    def score(self, example: Example, outcome: Outcome) -> dict[str, float]:
        """ptc (parse failures score 0, the expected tau of a random ranking), ptc_parsed (NaN on failure);
        mae / mse of predicted ratings over the group when the method predicts ratings (pointwise, reference rows)."""
        pred = outcome.prediction if isinstance(outcome.prediction, dict) else {}
        order = pred.get("order")
        out: dict[str, float] = {}
        if outcome.parse_status == "failed" or not order:
            out.update(ptc=0.0, ptc_parsed=math.nan)
        else:
            truth = self._true_order(example)[1]
            tau = kendall_tau_legacy(truth, order) if self.cfg.legacy_tau else _tau(truth, order)
            out.update(ptc=tau, ptc_parsed=tau)
        ratings = pred.get("ratings")
        if isinstance(ratings, dict):
            errs = [ratings[u["user_id"]] - u["rating"] for u in example.data["users"] if ratings.get(u["user_id"]) is not None]
            full = len(errs) == len(example.data["users"]) and outcome.parse_status != "failed"
            out["mae"] = sum(abs(e) for e in errs) / len(errs) if full else math.nan
            out["mse"] = sum(e * e for e in errs) / len(errs) if full else math.nan
        return out

    def truth(self, example: Example) -> dict[str, Any]:
        """The true order (highest relative rating first) and each user's relative rating, rating and average."""
        users, order = self._true_order(example)  # the users in the true order, their ids
        return {"order": order,
                "relative_rating": {u["user_id"]: u["relative_rating"] for u in users},
                "rating": {u["user_id"]: u["rating"] for u in users},
                "avg_rating": {u["user_id"]: u["avg_rating"] for u in users}}

    def _true_order(self, example: Example) -> tuple[list[dict[str, Any]], list[str]]:
        """(the group's users in the true order, their ids): true_order's sort, done once for score() and truth() of
        the same example; ids that repeat take the old path (each user placed at its id's first position)."""
        users = example.data["users"]
        last = self._last_truth
        if last is not None and last[0] is example and last[1] is users:
            return last[2], last[3]
        ranked = sorted(users, key=_neg_relative)  # true_order's sort (stable, highest first)
        order = [u["user_id"] for u in ranked]
        if len(set(order)) != len(order):
            ranked = sorted(users, key=lambda u: order.index(u["user_id"]))
        self._last_truth = (example, users, ranked, order)
        return ranked, order

    def contamination_items(self, example: Example) -> dict[str, Optional[str]]:
        """The contamination split looks at the group's query item (the item every member rated), with its title."""
        return {str(example.data["query_item"]): example.data.get("query_title")}

    def run_facts(self, records: Iterable[SampleRecord]) -> dict[str, Any]:
        """The expected PTC of a random ranking and the strata thresholds (the order blocks are the order audit's)."""
        records = list(records)
        out: dict[str, Any] = {"random_expectation": {"ptc": expected_ptc()}}
        if self.strata:
            out["strata"] = self.strata
        return out

    def identity(self) -> dict[str, Any]:
        """Task name, data folder and a hash of its groups file, and the settings that change prompts or scores."""
        root = Path(str(self.cfg.data_dir))
        groups = root / "groups.jsonl"
        if self.released:
            groups = root / "item2group_avg_diff_sample-easy.json"
        digest = file_sha256(groups)[:16] if groups.exists() else None
        return {"name": self.name, "data_dir": str(self.cfg.data_dir), "groups_sha256": digest,
                "format": self.cfg.format,
                "retrieval_k": int(self.cfg.retrieval_k), "profile": bool(self.cfg.profile),
                "profile_file": self.cfg.profile_file, "legacy_tau": bool(self.cfg.legacy_tau)}


def _neg_relative(user: dict[str, Any]) -> Any:
    return -user["relative_rating"]


def _tau(truth: list[str], pred: Any) -> float:
    """kendall_tau_ranks(truth, pred) where both name the same distinct string ids, without its sorted checks: the same
    sum of concordant less discordant pairs over the same division (tau_permutation's), so the same float; any other
    input goes to kendall_tau_ranks itself."""
    n = len(truth)
    if type(pred) is not list or len(pred) != n or n < 2:
        return kendall_tau_ranks(truth, pred)
    pos = dict(zip(pred, range(n)))
    ranks = [pos.get(u, -1) if type(u) is str else -1 for u in truth]
    if len(pos) != n or -1 in ranks or len(set(truth)) != n:
        return kendall_tau_ranks(truth, pred)
    s = 0
    for i in range(n - 1):
        ri = ranks[i]
        for rj in ranks[i + 1:]:
            s += (rj > ri) - (rj < ri)
    return s / (n * (n - 1) / 2)
