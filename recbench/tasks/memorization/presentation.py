"""The memorization probe's report figure: coverage by popularity decile, one line per configuration, with the
control set's false-recall rate as a dotted line of the same colour; declared in PRESENTATION below."""
from __future__ import annotations

from typing import Any

import pandas as pd

from recbench.report.plots import Plot, plt, png, row_label
from recbench.report.presentation import Presentation


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


PRESENTATION = Presentation(benchmark="memorization", title="Memorization probe", order=50,
                            plots=(coverage_by_decile,))
