"""PerRecBench reference rows without a model: a seeded random order, BM25-retrieved history, user and item averages."""
from __future__ import annotations


import numpy as np

from recbench.api.task import ReferenceMethod, TaskView
from recbench.api.types import Example, Outcome
from recbench.tasks.perrec import settings
from recbench.tasks.perrec.prompting import presentation_order


class RandomOrder(ReferenceMethod[TaskView]):
    """Reference row: a seeded random ranking (expected PTC 0); method.seed, or the run seed when null."""

    name = "random"
    settings_rules = settings.RANDOM
    conf_defaults = True  # a hand-built {"name": "random"} gets seed: null from conf/method/perrec/random.yaml

    def predict(self, example: Example) -> Outcome:
        """The group's users in a seeded random order."""
        seed = self.cfg.seed
        rng = np.random.default_rng([self.seed if seed is None else int(seed), 1, *example.id.encode()])
        users = example.data["users"]
        return Outcome(prediction={"order": [users[i]["user_id"] for i in rng.permutation(len(users))]})


class BM25History(ReferenceMethod[TaskView]):
    """Reference row without an LLM: the user's relative ratings of the BM25-retrieved history items predict the preference."""

    name = "bm25_history"

    def predict(self, example: Example) -> Outcome:
        """Users by the mean relative rating of their BM25-retrieved history items, highest first."""
        users = example.data["users"]

        def score(u: dict) -> float:
            items = u["retrieved"]
            return float(np.mean([h["rating"] - u["avg_rating"] for h in items])) if items else 0.0

        scores = {u["user_id"]: score(u) for u in users}
        order = [u["user_id"] for u in sorted(users, key=lambda u: -scores[u["user_id"]])]
        return Outcome(prediction={"order": order, "scores": scores})


class AverageRating(ReferenceMethod[TaskView]):
    """Rating reference row without a model: predict one average for every user, either the user's own average
    (`source="user"`: the rank order is then a seeded tie-break) or the query item's average rating by users
    outside the group (`source="item"`)."""

    source: str = "user"  # "user" | "item"

    def predict(self, example: Example) -> Outcome:
        """One average rating for every user; users by predicted minus own average rating (seeded tie order)."""
        users = presentation_order(example, self.seed)
        if self.source == "user":
            preds = {u["user_id"]: float(u["avg_rating"]) for u in users}
        else:
            item_avg = float(example.data["item_avg_rating"])
            preds = {u["user_id"]: item_avg for u in users}
        order = [u["user_id"] for u in sorted(users, key=lambda u: -(preds[u["user_id"]] - u["avg_rating"]))]
        return Outcome(prediction={"order": order, "ratings": preds})


class UserAverage(AverageRating):
    """Rating reference row: predict each user's own average rating (method `user_avg`)."""

    name = "user_avg"
    source = "user"


class ItemAverage(AverageRating):
    """Rating reference row: predict the query item's average rating for every user (method `item_avg`)."""

    name = "item_avg"
    source = "item"
