"""PerRecBench-specific metric code: the legacy tau of the first released evaluation script."""
from __future__ import annotations

from typing import Hashable, Sequence

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
