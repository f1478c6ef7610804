"""PerRecBench-specific metric code: the legacy tau of the first released evaluation script, and the corpus rating
errors over all users."""
from __future__ import annotations

import math
from typing import Any, Hashable, Optional, Sequence

from recbench.stats.bootstrap import tau_permutation


def kendall_tau_legacy(true_order: Sequence[Hashable], pred_order: Sequence[Hashable]) -> float:
    """The originally released PerRecBench computation: tau over the two ranked id lists themselves."""
    try:
        ordered = sorted(true_order)  # the ids' own order (numbers numerically, strings lexically)
    except TypeError:
        ordered = sorted(true_order, key=str)
    codes = {u: i for i, u in enumerate(ordered)}
    truth, pred = [codes[u] for u in true_order], [codes[u] for u in pred_order]
    by_truth = sorted(range(len(truth)), key=truth.__getitem__)  # tau(x, y) = tau of y read in x's order
    return tau_permutation([pred[i] for i in by_truth])


def rating_errors(records: Sequence[Any]) -> dict[str, Optional[float]]:
    """Rating MAE and RMSE over all users of the groups whose ratings were fully predicted (per-group mae / mse
    weighted by meta.group_size), the users (n) and groups behind them; all None when no group has ratings."""
    rs = [r for r in records if not math.isnan(r.value("mae"))]
    if not rs:
        return {"mae": None, "rmse": None, "n": None, "groups": None}
    n = sum(int(r.meta.get("group_size", 1)) for r in rs)
    mae = sum(r.value("mae") * int(r.meta.get("group_size", 1)) for r in rs) / n
    mse = sum(r.value("mse") * int(r.meta.get("group_size", 1)) for r in rs) / n
    return {"mae": mae, "rmse": math.sqrt(mse), "n": n, "groups": len(rs)}
