"""The memorization probe's report figure: coverage by popularity decile, one line per configuration, with the
control set's false-recall rate as a dotted line of the same colour; declared in PRESENTATION below."""
from __future__ import annotations

from typing import Any, Optional

import pandas as pd

from recbench.report.audit_tables import AuditCell, p_text, row_labels, sort_runs
from recbench.report.numbers import number
from recbench.report.plots import Plot, plt, png, row_label
from recbench.report.presentation import Presentation
from recbench.report.tables import Table, _header


def coverage_by_decile(agg: pd.DataFrame, view: Any, benchmark: str) -> list[Plot]:
    """Coverage (95% CI) against popularity decile (1 = least rated tenth of the catalogue, 10 = most rated)."""
    sub = agg[(agg["benchmark"] == benchmark) & (agg["slice"] == "popularity_decile") & (agg["metric"] == "coverage")
              & agg["mean"].notna()]
    if sub.empty:
        return []
    ctrl = agg[(agg["benchmark"] == benchmark) & (agg["slice"] == "set") & (agg["value"] == "control")
               & (agg["metric"] == "false_recall")]
    fig, ax = plt.subplots(figsize=(6.0, 3.6))
    keys = ["task", "model", "method", "variant"]
    for k, g in sub.groupby(keys, sort=True):
        g = g.assign(d=g["value"].astype(int)).sort_values("d")
        label = f"{k[0]} · {row_label(dict(zip(keys, k)))}"
        line = ax.errorbar(g["d"], g["mean"], yerr=[(g["mean"] - g["ci_low"]).fillna(0).clip(lower=0),
                                                     (g["ci_high"] - g["mean"]).fillna(0).clip(lower=0)],
                           marker="o", capsize=3, label=label)
        c = ctrl[(ctrl[keys] == pd.Series(dict(zip(keys, k)))).all(axis=1)]
        if not c.empty and pd.notna(c["mean"].iloc[0]):
            ax.axhline(float(c["mean"].iloc[0]), linestyle=":", color=line[0].get_color(), linewidth=1)
    ax.set_xticks(range(1, 11))
    ax.set_xlim(0.5, 10.5)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("popularity decile (1 = least rated, 10 = most rated)")
    ax.set_ylabel("coverage (share recalled)")
    ax.set_title("Memorization: coverage by popularity decile (95% CI; dotted = control set)", fontsize=10)
    ax.legend(fontsize=7, loc="best")
    return [Plot(id=f"memorization-deciles-{benchmark}", title="Coverage by popularity decile", png_base64=png(fig))]


def _rate(metric: str, r: dict[str, Any]) -> AuditCell:
    """A rate with its Wilson interval (k of n) as one cell."""
    return AuditCell(metric=metric, mean=number(r.get("rate")), ci_low=number(r.get("ci_low")),
                     ci_high=number(r.get("ci_high")), n=r.get("n"))


CONTRAST_COLUMNS = [("coverage", "real items (Wilson)"), ("false recall", "control items (Wilson)"),
                    ("coverage − control", "diff (Newcombe)"), ("coverage − control", "Fisher p (one-sided)"),
                    ("coverage − control", "verdict")]


def contrast_table(runs: list[Any]) -> Optional[Table]:
    """The probe's verdict as the terminal prints it: both rates with Wilson intervals, coverage minus control with
    its Newcombe interval, the one-sided Fisher exact p and flagged / not flagged at the run's alpha."""
    probed = sort_runs([r for r in runs if isinstance(r.result.extra.get("memorization"), dict)])
    if not probed:
        return None
    labels, rows, alpha = row_labels(probed), [], None
    for r in probed:
        m = r.result.extra["memorization"]
        d = m["difference"]
        alpha = d.get("alpha", alpha)
        verdict = None if d.get("p_value") is None else "FLAGGED" if d.get("flagged") else "not flagged"
        rows.append((labels[id(r)], [
            _rate("coverage", m["real"]), _rate("false_recall", m["control"]),
            AuditCell(metric="difference", mean=number(d.get("estimate")), ci_low=number(d.get("ci_low")),
                      ci_high=number(d.get("ci_high"))),
            AuditCell(metric="p_value", shown=None if d.get("p_value") is None else p_text(d["p_value"])),
            AuditCell(metric="verdict", shown=verdict)]))
    caption = ("Rates with Wilson score intervals (never [0, 0] when nothing was recalled, unlike the bootstrap "
               "intervals of the table above); the difference with Newcombe's hybrid score interval; flagged when the "
               f"one-sided Fisher exact p is below alpha = {alpha:g} (docs/memorization.md).")
    return Table(id="memorization-contrast", title="Memorization probe: real against control items", caption=caption,
                 row_header=["task", "model", "method"], header=_header(CONTRAST_COLUMNS), columns=CONTRAST_COLUMNS,
                 rows=rows, section="memorization")


PRESENTATION = Presentation(benchmark="memorization", title="Memorization probe", order=50,
                            plots=(coverage_by_decile,), run_tables=(contrast_table,))
