"""Order audits in reports: one row per run whose metrics.json extra has `order_audit` (audit.orders=K) or
`pair_order_consistency` (comparisons asked in both orders). Benchmark-agnostic: reads only metrics.json."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from recbench.report.collect import Run, variant_labels
from recbench.report.numbers import fmt, number
from recbench.report.tables import Cell, Table, _header, method_label

#: first-slot share columns shown one by one; slots beyond are summed into one derived column
MAX_SLOTS = 10


@dataclass
class AuditCell(Cell):
    """A cell with its own number format: 'int' (counts), 'p' (p-values, 3 significant digits) or decimals."""

    style: str = "3"

    @property
    def text(self) -> str:
        """The displayed value."""
        if self.shown is not None or not self.has_value:
            return super().text
        if self.style == "int":
            return str(int(round(self.mean)))
        if self.style == "p":
            return p_text(self.mean)
        return fmt(self.mean, int(self.style))


def p_text(p: float) -> str:
    """A p-value as shown: 3 significant digits ('0.0123', '4.56e-07')."""
    return f"{p:.3g}"


def _cell(metric: str, v: Any, style: str = "3") -> AuditCell:
    return AuditCell(metric=metric, mean=number(v), style=style)


def _row_labels(runs: list[Run]) -> dict[int, list[str]]:
    """Row labels per run: task, model, method [variant], plus the seed when one configuration has several."""
    labels = variant_labels(runs)
    seeds: dict[tuple, set] = {}
    for r in runs:
        seeds.setdefault((r.task, r.model, r.method, labels[id(r)]), set()).add(str(r.seed))
    out = {}
    for r in runs:
        method = method_label(r.method, labels[id(r)])
        if len(seeds[(r.task, r.model, r.method, labels[id(r)])]) > 1:
            method += f" seed={r.seed}"
        out[id(r)] = [r.task, r.model, method]
    return out


def _sorted(runs: list[Run]) -> list[Run]:
    return sorted(runs, key=lambda r: (r.task, r.model, r.method, str(r.dir)))


def order_audit_table(runs: list[Run]) -> Optional[Table]:
    """One row per audited run: K, the headline per order, mean and sd over orders, the averaged score, Kendall's W
    (n), first-slot shares with the chi-square test against uniform. None when no run has extra.order_audit."""
    audited = _sorted([r for r in runs if isinstance(r.result.extra.get("order_audit"), dict)])
    if not audited:
        return None
    labels = _row_labels(audited)
    blocks = [r.result.extra["order_audit"] for r in audited]
    k_max = max(len(b.get("per_order") or []) for b in blocks)
    slots = max(len((b.get("first_slot") or {}).get("share") or []) for b in blocks)
    shown_slots = min(slots, MAX_SLOTS)
    cols: list[tuple[str, str]] = [("", "K")] + [("headline per display order", f"order {j}") for j in range(k_max)]
    cols += [("over orders", "mean"), ("over orders", "sd"), ("over orders", "averaged"),
             ("Kendall's W", "W"), ("Kendall's W", "n")]
    cols += [("first-ranked display slot", f"slot {s + 1}") for s in range(shown_slots)]
    if slots > MAX_SLOTS:
        cols.append(("first-ranked display slot", f"slots {MAX_SLOTS + 1}+"))
    cols += [("first-ranked display slot", "n"), ("first-ranked display slot", "chi2"),
             ("first-ranked display slot", "p")]
    rows = []
    for r, b in zip(audited, blocks):
        metric = str(b.get("metric") or r.result.headline_metric)
        per = list(b.get("per_order") or [])
        fs = b.get("first_slot") or {}
        share = list(fs.get("share") or [])
        cells = [_cell("orders", b.get("orders"), "int")]
        cells += [_cell(metric, per[j] if j < len(per) else None) for j in range(k_max)]
        cells += [_cell(metric, b.get("mean_over_orders")), _cell(metric, b.get("sd_over_orders")),
                  _cell(metric, b.get("averaged_over_orders")),
                  _cell("kendalls_w", b.get("kendalls_w_mean")), _cell("kendalls_w_n", b.get("kendalls_w_n"), "int")]
        cells += [_cell("first_slot_share", share[s] if s < len(share) else None) for s in range(shown_slots)]
        if slots > MAX_SLOTS:
            rest = share[MAX_SLOTS:]
            cells.append(_cell("first_slot_share", sum(rest) if rest else None))
        cells += [_cell("first_slot_n", fs.get("n"), "int"), _cell("chi2", fs.get("chi2"), "2"),
                  _cell("p_value", fs.get("p_value"), "p")]
        rows.append((labels[id(r)] + [metric], cells))
    caption = ("Order audit (audit.orders=K; metrics.json extra.order_audit): each example asked in K display orders "
               "(order 0 = the plain run, so its value is the headline). 'over orders': mean and sample sd of the K "
               "per-order means, and the per-example mean over orders averaged over examples (the order-robust "
               "score). Kendall's W: agreement of the K rankings of an example, averaged over the n examples whose K "
               "answers all parsed (1 = the same ranking whatever the order). First-ranked display slot: share of "
               "answers (pooled over orders) that put the item shown in that slot first; chi-square against the "
               "uniform expectation for the mix of group sizes. The K answers to one example are not independent: "
               "read p as descriptive.")
    if slots > MAX_SLOTS:
        caption += f" Slots beyond {MAX_SLOTS} are summed into one column."
    return Table(id="order-audit", title="Order audit: score, agreement and first slot across display orders",
                 caption=caption, row_header=["task", "model", "method", "metric"], header=_header(cols),
                 columns=cols, rows=rows, section="order-audit")


def pair_consistency_table(runs: list[Run]) -> Optional[Table]:
    """One row per run whose comparisons were asked in both orders: n, consistent and inconsistent shares, and which
    slot won the inconsistent ones. None when no run has extra.pair_order_consistency."""
    paired = _sorted([r for r in runs if isinstance(r.result.extra.get("pair_order_consistency"), dict)])
    if not paired:
        return None
    labels = _row_labels(paired)
    cols = [("", "n"), ("share of comparisons", "consistent"), ("share of comparisons", "inconsistent"),
            ("inconsistent ones won by", "slot 1 (primacy)"), ("inconsistent ones won by", "slot 2 (recency)")]
    rows = []
    for r in paired:
        b = r.result.extra["pair_order_consistency"]
        rows.append((labels[id(r)], [_cell("pairs", b.get("n"), "int"), _cell("consistent", b.get("consistent")),
                                      _cell("inconsistent", b.get("inconsistent")),
                                      _cell("first_slot_wins", b.get("first_slot_wins_inconsistent")),
                                      _cell("second_slot_wins", b.get("second_slot_wins_inconsistent"))]))
    caption = ("Pairwise order consistency (metrics.json extra.pair_order_consistency): every comparison asked in "
               "both orders (A,B) and (B,A); n = comparisons whose two answers parsed. Consistent: the same item won "
               "in both orders. Among the inconsistent ones, the share won by the slot shown first both times (a "
               "primacy bias) or second both times (a recency bias). A dash: no inconsistent comparison.")
    return Table(id="pair-order-consistency", title="Pairwise order consistency", caption=caption,
                 row_header=["task", "model", "method"], header=_header(cols), columns=cols, rows=rows,
                 section="order-audit")


def audit_tables(runs: list[Run]) -> list[Table]:
    """The order-audit tables of a report (empty when no run was audited)."""
    return [t for t in (order_audit_table(runs), pair_consistency_table(runs)) if t is not None]
