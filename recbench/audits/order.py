"""Order audit (`audit.orders=K`): re-ask each example with K seeded display orders, and summarise how the answers move.

A method that shows items in an order declares "order" in `Method.variants` (api/task.py) and honours
`run(example, Variant(order=k))` (api/variant.py): order 0 is its usual display order, order k > 0 a seeded
permutation; it then returns `Outcome.display` (api/types.py `Display`: ids in display-slot order, and best-first,
None when the answer failed). `OrderAudit` (a `VariantAudit`, audits/variants.py) asks the K orders of one example
side by side and returns the order-0 outcome with every order's answer typed in `SampleRecord.variants`.
`audit_aggregates` turns those records into the typed blocks metrics.json carries (built once, by the audit).
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Optional

import numpy as np

from recbench.api.audits import Audit, Block, register
from recbench.api.errors import ConfigError
from recbench.audits.order_blocks import ORDER_TABLE, PAIR_TABLE, FirstSlot, OrderBlock, PairOrderBlock
from recbench.store.schema import SampleRecord
from recbench.stats.order_agreement import first_slot_test, kendalls_w, pair_consistency, tied_kendalls_w
from recbench.api.task import Method, Task, honours
from recbench.api.variant import answers_of
from recbench.audits.variants import VariantAudit, innermost


def is_order_auditable(method: Any, task: Optional[Task] = None) -> bool:
    """True when a method (instance or class) declares that it shows an order that can be permuted."""
    return honours(method, "order", task)


def maybe_audit(task: Task, method: Method, audit_cfg: Any) -> Method:
    """The method itself when audit.orders is 0 (off), else an OrderAudit around it; a one-line ConfigError when
    the method shows no order to permute."""
    k = int((audit_cfg or {}).get("orders", 0) or 0)
    if k == 0:
        return method
    if k < 2:
        raise ConfigError(f"audit.orders={k}: must be 0 (off) or >= 2 display orders")
    if not is_order_auditable(innermost(method)):
        ok = [n for n, cls in task.methods.items() if is_order_auditable(cls, task)]
        raise ConfigError(f"audit.orders={k}: method '{method.name}' of task '{task.name}' shows no display order to "
                          f"permute; order-auditable methods here: {', '.join(ok) or 'none'} (or set audit.orders=0)")
    return OrderAudit(method, k)


class OrderAudit(VariantAudit):
    """Wraps an order-auditable method: K display orders per example (Variant.order = 0..K-1), the order-0 outcome as
    the example's outcome, every order's answer in Outcome.variants."""

    def __init__(self, inner: Method, orders: int):  # noqa: D107
        super().__init__(inner, "order", orders)
        self.orders = int(orders)


# ---- aggregates ---------------------------------------------------------------------------------------------
def rank_matrix(shown: list[str], rankings: list[list[str]]) -> tuple[np.ndarray, bool]:
    """(K, m) ranks of the shown items under each ranking (best = 1); items a ranking leaves out share the
    average of the remaining ranks. Second value: whether every ranking was complete (no ties)."""
    m = len(shown)
    out = np.zeros((len(rankings), m))
    complete = True
    for j, ranked in enumerate(rankings):
        pos = {it: i + 1 for i, it in enumerate(dict.fromkeys(x for x in ranked if x in set(shown)))}
        rest = m - len(pos)
        complete &= rest == 0
        tail = (len(pos) + 1 + m) / 2
        out[j] = [pos.get(it, tail) for it in shown]
    return out, complete


def order_answers(record: SampleRecord) -> list[Any]:
    """The record's answers to the order audit's own variants (every display order, plain template and seed)."""
    return [a for a in answers_of(record.variants, template=0, seed=0) if a.variant.order is not None]


def audit_aggregates(records: Iterable[SampleRecord], headline_metric: str) -> dict[str, Block]:
    """metrics.json's order-audit blocks, typed, from records carrying order variants ({} when none do): the headline
    per order, its mean/sd over orders, Kendall's W of the K rankings per example (averaged), the first-ranked display
    slot against uniform (chi-square), and pairwise order consistency where records carry details['order_pairs']."""
    recs = list(records)
    out: dict[str, Block] = {}
    audited = [(r, answers) for r in recs if (answers := order_answers(r))]
    if audited:
        out["order_audit"] = _order_block(audited, headline_metric)
    pairs = [p for r in recs if isinstance(r.details, dict) for p in (r.details.get("order_pairs") or [])]
    if pairs:
        out["pair_order_consistency"] = pair_order_block(pairs)
    return out


def _agreement(audited: list[tuple[SampleRecord, list[Any]]], k: int) -> tuple[list[float], int, list[int], list[int]]:
    """Kendall's W of each example's K rankings (whose answers all parsed), how many had complete rankings, and the
    first-ranked display slot of every answer with the number of items shown."""
    ws, complete_n, firsts, sizes = [], 0, [], []
    for _, answers in audited:
        orders = answers[:k]
        if any(not o.ranked or not o.shown for o in orders):
            continue  # a failed answer has no ranking: the example leaves W and the slot test
        shown0 = orders[0].shown
        ranks, complete = rank_matrix(shown0, [o.ranked for o in orders])
        if len(shown0) >= 2:
            ws.append(kendalls_w(ranks) if complete else tied_kendalls_w(ranks))
            complete_n += int(complete)
        for o in orders:
            if o.ranked[0] in o.shown:
                firsts.append(o.shown.index(o.ranked[0]))
                sizes.append(len(o.shown))
    return ws, complete_n, firsts, sizes


def _order_block(audited: list[tuple[SampleRecord, list[Any]]], metric: str) -> OrderBlock:
    k = min(len(answers) for _, answers in audited)
    vals = np.array([[float(_num(o.metrics.get(metric))) for o in answers[:k]] for _, answers in audited])
    with np.errstate(invalid="ignore"):
        per_order = [float(np.nanmean(vals[:, j])) if np.isfinite(vals[:, j]).any() else math.nan for j in range(k)]
        per_example = np.nanmean(vals, axis=1) if np.isfinite(vals).any() else np.full(len(audited), math.nan)
    ws, complete_n, firsts, sizes = _agreement(audited, k)
    first_slot = None
    if firsts:
        t = first_slot_test(firsts, sizes)
        first_slot = FirstSlot(counts=t.observed, expected=[round(e, 4) for e in t.expected],
                               share=[c / len(firsts) for c in t.observed], n=len(firsts), chi2=t.chi2,
                               p_value=t.p_value,
                               note="pooled over the K orders of every example (rankings of the same example are "
                                    "not independent: read p as descriptive)")
    return OrderBlock(
        orders=k, examples=len(audited), metric=metric, per_order=per_order,
        mean_over_orders=float(np.mean(per_order)) if per_order else math.nan,
        sd_over_orders=float(np.std(per_order, ddof=1)) if k >= 2 else math.nan,
        averaged_over_orders=float(np.nanmean(per_example)) if np.isfinite(per_example).any() else math.nan,
        order0=per_order[0] if per_order else math.nan,
        kendalls_w_mean=float(np.mean(ws)) if ws else math.nan, kendalls_w_n=len(ws),
        kendalls_w_complete_rankings=complete_n,
        kendalls_w_note="ties (items a ranking leaves out) share the mean remaining rank; tie-corrected W",
        first_slot=first_slot)


def _num(v: Any) -> float:
    return math.nan if v is None else float(v)


def pair_order_block(pairs: list[Any]) -> PairOrderBlock:
    """Order consistency of comparisons asked in both orders: pairs of (first shown won in order AB, in order BA)."""
    c = pair_consistency([bool(p[0]) for p in pairs], [bool(p[1]) for p in pairs])
    return PairOrderBlock(n=c.n, consistent=c.consistent, inconsistent=1 - c.consistent,
                          first_slot_wins_inconsistent=c.first_slot_wins_inconsistent,
                          second_slot_wins_inconsistent=(1 - c.first_slot_wins_inconsistent
                                                         if not math.isnan(c.first_slot_wins_inconsistent)
                                                         else math.nan))


class DisplayOrders(Audit):
    """audit.orders=K as an audit: the OrderAudit wrapper, and the order blocks of any records that carry them."""

    key = "order_audit"
    rank = 10
    blocks = {"order_audit": OrderBlock, "pair_order_consistency": PairOrderBlock}
    tables = (ORDER_TABLE, PAIR_TABLE)

    def enabled(self, cfg: Any) -> bool:
        """audit.orders is set."""
        return bool(int((cfg.get("audit") or {}).get("orders", 0) or 0))

    def wrap(self, task: Any, method: Any, cfg: Any) -> Any:
        """K display orders per example."""
        return maybe_audit(task, method, cfg.get("audit"))

    def variants_per_example(self, cfg: Any) -> int:
        """K display orders."""
        return int((cfg.get("audit") or {}).get("orders", 0) or 0) or 1

    def aggregate(self, cfg: Any, task: Any, records: list[Any]) -> dict[str, Block]:
        """extra.order_audit and extra.pair_order_consistency (computed here only, once per run)."""
        return audit_aggregates(records, task.headline_metric)


AUDIT = register(DisplayOrders())
