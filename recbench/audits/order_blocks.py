"""The order audit's metrics.json blocks as typed records (`OrderBlock`, `PairOrderBlock`) and its two report
tables, declared as data (recbench/audits/order.py registers them with the audit)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from recbench.api.audits import Block
from recbench.api.audit_tables import AuditColumn, AuditTable


@dataclass
class FirstSlot(Block):
    """The first-ranked display slot against uniform (chi-square), pooled over the K orders."""

    counts: list[int] = field(default_factory=list)
    expected: list[float] = field(default_factory=list)
    share: list[float] = field(default_factory=list)
    n: int = 0
    chi2: Optional[float] = None
    p_value: Optional[float] = None
    note: str = ""


@dataclass
class OrderBlock(Block):
    """metrics.json extra.order_audit."""

    orders: int = 0
    examples: int = 0
    metric: str = ""
    per_order: list[Optional[float]] = field(default_factory=list)
    mean_over_orders: Optional[float] = None
    sd_over_orders: Optional[float] = None
    averaged_over_orders: Optional[float] = None
    order0: Optional[float] = None
    kendalls_w_mean: Optional[float] = None
    kendalls_w_n: int = 0
    kendalls_w_complete_rankings: int = 0
    kendalls_w_note: str = ""
    first_slot: Optional[FirstSlot] = None


@dataclass
class PairOrderBlock(Block):
    """metrics.json extra.pair_order_consistency."""

    n: int = 0
    consistent: Optional[float] = None
    inconsistent: Optional[float] = None
    first_slot_wins_inconsistent: Optional[float] = None
    second_slot_wins_inconsistent: Optional[float] = None


#: first-slot share columns shown one by one; slots beyond are summed into one derived column
MAX_SLOTS = 10


def _slots(blocks: list[OrderBlock]) -> int:
    return max(len(b.first_slot.share) if b.first_slot else 0 for b in blocks)


def _at(values: list[Any], j: int) -> Any:
    return values[j] if j < len(values) else None


def _order_columns(blocks: list[OrderBlock]) -> list[AuditColumn]:
    """K, the headline per order, over orders, Kendall's W, first-slot shares (beyond MAX_SLOTS summed) and test."""
    k_max, slots = max(len(b.per_order) for b in blocks), _slots(blocks)
    g = "first-ranked display slot"
    cols = [AuditColumn("", "K", lambda b: b.orders, "int", "orders")]
    cols += [AuditColumn("headline per display order", f"order {j}", lambda b, j=j: _at(b.per_order, j))
             for j in range(k_max)]
    cols += [AuditColumn("over orders", "mean", lambda b: b.mean_over_orders),
             AuditColumn("over orders", "sd", lambda b: b.sd_over_orders),
             AuditColumn("over orders", "averaged", lambda b: b.averaged_over_orders),
             AuditColumn("Kendall's W", "W", lambda b: b.kendalls_w_mean, metric="kendalls_w"),
             AuditColumn("Kendall's W", "n", lambda b: b.kendalls_w_n, "int", "kendalls_w_n")]
    share = lambda b: b.first_slot.share if b.first_slot else []  # noqa: E731
    cols += [AuditColumn(g, f"slot {s + 1}", lambda b, s=s: _at(share(b), s), metric="first_slot_share")
             for s in range(min(slots, MAX_SLOTS))]
    if slots > MAX_SLOTS:
        cols.append(AuditColumn(g, f"slots {MAX_SLOTS + 1}+", lambda b: sum(share(b)[MAX_SLOTS:]) if share(b)[MAX_SLOTS:] else None,
                                metric="first_slot_share"))
    fs = lambda b: b.first_slot or FirstSlot()  # noqa: E731
    return cols + [AuditColumn(g, "n", lambda b: fs(b).n if b.first_slot else None, "int", "first_slot_n"),
                   AuditColumn(g, "chi2", lambda b: fs(b).chi2, "2", "chi2"),
                   AuditColumn(g, "p", lambda b: fs(b).p_value, "p", "p_value")]


def _order_caption(blocks: list[OrderBlock]) -> str:
    more = f" Slots beyond {MAX_SLOTS} are summed into one column." if _slots(blocks) > MAX_SLOTS else ""
    return ("Order audit (audit.orders=K; metrics.json extra.order_audit): each example asked in K display orders "
            "(order 0 = the plain run, so its value is the headline). 'over orders': mean and sample sd of the K "
            "per-order means, and the per-example mean over orders averaged over examples (the order-robust "
            "score). Kendall's W: agreement of the K rankings of an example, averaged over the n examples whose K "
            "answers all parsed (1 = the same ranking whatever the order). First-ranked display slot: share of "
            "answers (pooled over orders) that put the item shown in that slot first; chi-square against the "
            "uniform expectation for the mix of group sizes. The K answers to one example are not independent: "
            "read p as descriptive." + more)


ORDER_TABLE = AuditTable(
    id="order-audit", title="Order audit: score, agreement and first slot across display orders",
    caption=_order_caption, key="order_audit", columns=_order_columns, section="order-audit")

PAIR_TABLE = AuditTable(
    id="pair-order-consistency", title="Pairwise order consistency", key="pair_order_consistency",
    section="order-audit", metric_column=False,
    columns=(AuditColumn("", "n", lambda b: b.n, "int", "pairs"),
             AuditColumn("share of comparisons", "consistent", lambda b: b.consistent, metric="consistent"),
             AuditColumn("share of comparisons", "inconsistent", lambda b: b.inconsistent, metric="inconsistent"),
             AuditColumn("inconsistent ones won by", "slot 1 (primacy)", lambda b: b.first_slot_wins_inconsistent,
                         metric="first_slot_wins"),
             AuditColumn("inconsistent ones won by", "slot 2 (recency)", lambda b: b.second_slot_wins_inconsistent,
                         metric="second_slot_wins")),
    caption=("Pairwise order consistency (metrics.json extra.pair_order_consistency): every comparison asked in "
             "both orders (A,B) and (B,A); n = comparisons whose two answers parsed. Consistent: the same item won "
             "in both orders. Among the inconsistent ones, the share won by the slot shown first both times (a "
             "primacy bias) or second both times (a recency bias). A dash: no inconsistent comparison."))
