"""Report plots (matplotlib, Agg) as base64 PNG data URIs: headline bars with CI whiskers and parse-failure rates;
benchmarks add their own figures in their Presentation (recbench.report.presentation: `plots`)."""
from __future__ import annotations

import base64
import io
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from recbench.report.collect import OVERALL  # noqa: E402


if TYPE_CHECKING:
    from recbench.report.tables import ReportView


@dataclass
class Plot:
    """One embedded figure."""

    id: str
    title: str
    png_base64: str
    section: str = ""  # the report section (benchmark id); "" = the generic figures

    @property
    def data_uri(self) -> str:
        """The image as a data: URI (the page stays self-contained)."""
        return f"data:image/png;base64,{self.png_base64}"


def png(fig) -> str:
    """A matplotlib figure as base64 PNG (the figure is closed)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def row_label(r) -> str:
    """'model · method [variant]' (the method alone for reference rows)."""
    base = r["method"] if r["model"] == "none" else f"{r['model']} · {r['method']}"
    return base + (f" [{r['variant']}]" if r["variant"] else "")


def headline_bars(agg: pd.DataFrame, view: "ReportView") -> list[Plot]:
    """Per task: the headline metric of every configuration, with 95% CI whiskers (none drawn where unknown)."""
    plots = []
    for task in sorted(set(agg["task"])):
        metric = view.headlines.get(task)
        sub = agg[(agg["task"] == task) & (agg["slice"] == OVERALL[0]) & (agg["metric"] == metric)
                  & agg["mean"].notna()]
        if sub.empty:
            continue
        sub = sub.sort_values(["model", "method"])
        labels = [row_label(r) for _, r in sub.iterrows()]
        means = sub["mean"].astype(float).tolist()
        lo = [m - l if not math.isnan(l) else 0.0 for m, l in zip(means, sub["ci_low"].astype(float))]
        hi = [h - m if not math.isnan(h) else 0.0 for m, h in zip(means, sub["ci_high"].astype(float))]
        colors = ["#9e9e9e" if m == "none" else "#3f6fb5" for m in sub["model"]]
        fig, ax = plt.subplots(figsize=(max(4.0, 0.55 * len(labels) + 2), 3.2))
        ax.bar(range(len(labels)), means, yerr=[lo, hi], capsize=4, color=colors)
        ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=8)
        arrow = "↑" if view.higher_is_better(metric) else "↓"
        ax.set_ylabel(f"{metric} {arrow}")
        ax.set_title(f"{task}: {metric} (95% CI; grey = reference rows)", fontsize=10)
        ax.axhline(0, color="black", linewidth=0.6)
        plots.append(Plot(id=f"bars-{task}", title=f"{task}: {metric}", png_base64=png(fig),
                          section=view.benchmark_of(task)))
    return plots


def parse_failure_rates(agg: pd.DataFrame) -> list[Plot]:
    """Share of examples whose answer could not be parsed, per model-backed configuration; no figure when no answer
    failed (the tables' pf counts say so), and a small one for a few configurations."""
    sub = agg[(agg["slice"] == OVERALL[0]) & (agg["model"] != "none")]
    sub = sub.drop_duplicates(["task", "model", "method", "variant"])
    sub = sub[sub["examples"].notna() & (sub["examples"].fillna(0) > 0)]
    if sub.empty:
        return []
    sub = sub.sort_values(["task", "model", "method"])
    labels = [f"{r['task']} · {row_label(r)}" for _, r in sub.iterrows()]
    rates = (sub["parse_failed"].fillna(0).astype(float) / sub["examples"].astype(float)).tolist()
    if not any(r > 0 for r in rates):
        return []
    fig, ax = plt.subplots(figsize=(4.5 if len(labels) <= 3 else 6.5, 0.32 * len(labels) + 1.0))
    ax.barh(range(len(labels)), rates, color="#c0504d")
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(1e-9, max(rates)) * 1.15 if max(rates) > 0 else 1.0)
    ax.set_xlabel("parse-failure rate")
    for i, r in enumerate(rates):
        ax.text(r, i, f" {r:.1%}", va="center", fontsize=7)
    ax.set_title("Parse failures (model runs)", fontsize=10)
    return [Plot(id="parse-failures", title="Parse-failure rates", png_base64=png(fig))]


def all_plots(agg: pd.DataFrame, view: "ReportView") -> list[Plot]:
    """Every plot of the report: headline bars, each benchmark's own figures, parse-failure rates."""
    if agg.empty:
        return []
    plots = headline_bars(agg, view)
    for b, shown in view.benchmarks.items():
        for draw in shown.plots:
            for p in draw(agg, view, b):
                p.section = b
                plots.append(p)
    return plots + parse_failure_rates(agg)
