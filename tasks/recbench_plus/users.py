"""The user groups of RecBench+ queries for the fairness gaps: the source user's activity level (history length) and,
where the data has a users table (the bundled sample's users.csv, MovieLens' ml-100k.user), gender, age group and
occupation."""
from __future__ import annotations

from typing import Any, Optional

from recbench.api.item_lists import activity_levels
from recbench.api.types import Example

USER_GROUPS = ("activity", "gender", "age", "occupation")
#: MovieLens-1M's age groups, applied to ml-100k's ages in years
AGE_GROUPS = ("under 18", "18-24", "25-34", "35-44", "45-49", "50-55", "56+")
_AGE_CUTS = ((18, "under 18"), (25, "18-24"), (35, "25-34"), (45, "35-44"), (50, "45-49"), (56, "50-55"))


def age_group(age: Any) -> Optional[str]:
    """A MovieLens-1M age group of an age in years (None: not a number)."""
    try:
        years = float(age)
    except (TypeError, ValueError):
        return None
    return next((label for cut, label in _AGE_CUTS if years < cut), "56+")


def user_groups(examples: list[Example], histories: dict[str, list[str]], users: Any) -> dict[str, Any]:
    """Set each query's `user` and its user groups in its meta (a query without a source user gets none); returns
    how the groups were formed (run facts' strata)."""
    levels, facts = activity_levels({u: len(h) for u, h in histories.items()}) if histories else ({}, {})
    table: dict[str, dict[str, Any]] = {}
    if users is not None:
        for row in users.to_dict(orient="records"):
            table[str(row.get("user_id"))] = row
    for e in examples:
        user = str(e.data.get("source_user") or "")
        if not user:
            continue
        e.meta["user"] = user
        if user in levels:
            e.meta["activity"] = levels[user]
        row = table.get(user)
        if row is not None:
            e.meta.update({k: v for k, v in (("gender", row.get("gender")), ("age", age_group(row.get("age"))),
                                              ("occupation", row.get("occupation"))) if v not in (None, "")})
    strata = {"activity": facts} if facts else {}
    if table:
        strata["age"] = {"of": "the user's age in years", "labels": ", ".join(AGE_GROUPS)}
    return strata
