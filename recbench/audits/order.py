"""Order audit (`audit.orders=K`): re-ask each example with K seeded display orders, and summarise how the answers move.

A method that shows items in an order declares `order_auditable = True` (api/task.py `Method`) and accepts
`run(example, order=k)`: order 0 is its usual display order, order k > 0 a seeded permutation; with an `order`
argument it returns `Outcome.display` (api/types.py `Display`: ids in display-slot order, and best-first, None when
the answer failed). `OrderAudit` drives the K sub-generators of one example side by side (each step yields the union
of their pending requests, so the extra requests go through the same cache, deduplication and batching), and
returns the order-0 outcome with `details["audit"]` holding every order's display, ranking, parse status and
metrics. `audit_aggregates` turns those records into the numbers metrics.json carries.
"""
from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any, Iterable, Optional

import numpy as np

from recbench.api.audits import Audit, register
from recbench.api.errors import ConfigError
from recbench.audits.order_blocks import ORDER_TABLE, PAIR_TABLE, OrderBlock, PairOrderBlock
from recbench.store.schema import SampleRecord
from recbench.stats.order_agreement import first_slot_test, kendalls_w, pair_consistency, tied_kendalls_w
from recbench.api.task import Method, Task, side_by_side
from recbench.api.types import Example, MethodGen, Outcome


def is_order_auditable(method: Any, task: Optional[Task] = None) -> bool:
    """True when a method (instance or class) declares that it shows an order that can be permuted."""
    value = getattr(type(method) if not isinstance(method, type) else method, "order_auditable", False)
    if isinstance(value, property):  # decided per task (e.g. only where the prompt lists candidates)
        holder = method if not isinstance(method, type) else SimpleNamespace(task=task)
        return bool(value.fget(holder))
    return value is True


def maybe_audit(task: Task, method: Method, audit_cfg: Any) -> Method:
    """The method itself when audit.orders is 0 (off), else an OrderAudit around it; a one-line ConfigError when
    the method shows no order to permute."""
    k = int((audit_cfg or {}).get("orders", 0) or 0)
    if k == 0:
        return method
    if k < 2:
        raise ConfigError(f"audit.orders={k}: must be 0 (off) or >= 2 display orders")
    if not is_order_auditable(method):
        ok = [n for n, cls in task.methods.items() if is_order_auditable(cls, task)]
        raise ConfigError(f"audit.orders={k}: method '{method.name}' of task '{task.name}' shows no display order to "
                          f"permute; order-auditable methods here: {', '.join(ok) or 'none'} (or set audit.orders=0)")
    return OrderAudit(method, k)


class OrderAudit(Method):
    """Wraps an order-auditable method: K display orders per example, the order-0 outcome as the example's outcome."""

    def __init__(self, inner: Method, orders: int):  # noqa: D107 - no Method.__init__: the inner method holds the config
        self.inner, self.orders = inner, int(orders)
        self.task, self.cfg, self.sampling_cfg = inner.task, inner.cfg, inner.sampling_cfg
        self.name = inner.name
        self.needs_backend = inner.needs_backend
        self.single_round = inner.single_round

    def prepare(self, examples: list[Example]) -> None:
        """The inner method's one-off work."""
        self.inner.prepare(examples)

    def run(self, example: Example, template: Optional[int] = None) -> MethodGen:
        """Drive the K orders' generators together; return order 0's outcome with details['audit'] (`template`: the
        template audit's paraphrase, passed on to every order)."""
        more = {} if template is None else {"template": template}  # audit.templates on too (recbench.audits.templates)
        gens = [self.inner.run(example, order=k, **more) for k in range(self.orders)]  # type: ignore[call-arg]
        outcomes = yield from side_by_side(gens)
        per_order = []
        for k, o in enumerate(outcomes):
            assert o is not None
            shown, ranked = (o.display.shown, o.display.ranked) if o.display is not None else (None, None)
            per_order.append({"order": k, "shown": shown, "ranked": ranked,
                              "parse_status": o.parse_status, "metrics": self.task.score(example, o)})
        first = outcomes[0]
        assert first is not None
        details = {**first.details, "audit": {"orders": per_order}}
        return Outcome(first.prediction, first.parse_status, details, order_pairs=first.order_pairs, notes=first.notes)


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


def audit_aggregates(records: Iterable[SampleRecord], headline_metric: str) -> dict[str, Any]:
    """metrics.json's order-audit block from records carrying details['audit'] ({} when none do): the headline per
    order, its mean/sd over orders, Kendall's W of the K rankings per example (averaged), the first-ranked display
    slot against uniform (chi-square), and pairwise order consistency where records carry details['order_pairs']."""
    recs = [r for r in records if isinstance(r.details, dict)]
    out: dict[str, Any] = {}
    audited = [r for r in recs if "audit" in r.details]
    if audited:
        out["order_audit"] = _order_block(audited, headline_metric)
    pairs = [p for r in recs for p in (r.details.get("order_pairs") or [])]
    if pairs:
        out["pair_order_consistency"] = pair_order_block(pairs)
    return out


def _order_block(records: list[SampleRecord], metric: str) -> dict[str, Any]:
    k = min(len(r.details["audit"]["orders"]) for r in records)
    vals = np.array([[float(o["metrics"].get(metric, math.nan)) for o in r.details["audit"]["orders"][:k]]
                     for r in records])
    with np.errstate(invalid="ignore"):
        per_order = [float(np.nanmean(vals[:, j])) if np.isfinite(vals[:, j]).any() else math.nan for j in range(k)]
        per_example = np.nanmean(vals, axis=1) if np.isfinite(vals).any() else np.full(len(records), math.nan)
    ws, ws_complete, firsts, sizes, first_by_order = [], [], [], [], [[] for _ in range(k)]
    for r in records:
        orders = r.details["audit"]["orders"][:k]
        if any(not o.get("ranked") or not o.get("shown") for o in orders):
            continue  # a failed answer has no ranking: the example leaves W and the slot test
        shown0 = orders[0]["shown"]
        ranks, complete = rank_matrix(shown0, [o["ranked"] for o in orders])
        if len(shown0) >= 2:
            w = kendalls_w(ranks) if complete else tied_kendalls_w(ranks)
            ws.append(w)
            if complete:
                ws_complete.append(w)
        for j, o in enumerate(orders):
            if o["ranked"][0] in o["shown"]:
                slot = o["shown"].index(o["ranked"][0])
                firsts.append(slot)
                sizes.append(len(o["shown"]))
                first_by_order[j].append(slot)
    block: dict[str, Any] = {
        "orders": k, "examples": len(records), "metric": metric,
        "per_order": per_order,
        "mean_over_orders": float(np.mean(per_order)) if per_order else math.nan,
        "sd_over_orders": float(np.std(per_order, ddof=1)) if k >= 2 else math.nan,
        "averaged_over_orders": float(np.nanmean(per_example)) if np.isfinite(per_example).any() else math.nan,
        "order0": per_order[0] if per_order else math.nan,
        "kendalls_w_mean": float(np.mean(ws)) if ws else math.nan,
        "kendalls_w_n": len(ws),
        "kendalls_w_complete_rankings": len(ws_complete),
        "kendalls_w_note": "ties (items a ranking leaves out) share the mean remaining rank; tie-corrected W",
    }
    if firsts:
        t = first_slot_test(firsts, sizes)
        block["first_slot"] = {"counts": t.observed, "expected": [round(e, 4) for e in t.expected],
                               "share": [c / len(firsts) for c in t.observed], "n": len(firsts),
                               "chi2": t.chi2, "p_value": t.p_value,
                               "note": "pooled over the K orders of every example (rankings of the same example "
                                       "are not independent: read p as descriptive)"}
    return block


def pair_order_block(pairs: list[Any]) -> dict[str, Any]:
    """Order consistency of comparisons asked in both orders: pairs of (first shown won in order AB, in order BA)."""
    c = pair_consistency([bool(p[0]) for p in pairs], [bool(p[1]) for p in pairs])
    return {"n": c.n, "consistent": c.consistent, "inconsistent": 1 - c.consistent,
            "first_slot_wins_inconsistent": c.first_slot_wins_inconsistent,
            "second_slot_wins_inconsistent": (1 - c.first_slot_wins_inconsistent
                                              if not math.isnan(c.first_slot_wins_inconsistent) else math.nan)}


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

    def aggregate(self, cfg: Any, task: Any, records: list[Any]) -> dict[str, Any]:
        """extra.order_audit and extra.pair_order_consistency."""
        return audit_aggregates(records, task.headline_metric)


register(DisplayOrders())
