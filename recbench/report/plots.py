"""Report plots (matplotlib, Agg) as base64 PNG data URIs: headline bars with CI whiskers, PTC vs group size,
parse-failure rates."""
from __future__ import annotations

import base64
import io
import math
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from recbench.report.collect import OVERALL  # noqa: E402
from recbench.report.layouts import Layouts  # noqa: E402


@dataclass
class Plot:
    """One embedded figure."""

    id: str
    title: str
    png_base64: str

    @property
    def data_uri(self) -> str:
        """The image as a data: URI (the page stays self-contained)."""
        return f"data:image/png;base64,{self.png_base64}"


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _row_label(r) -> str:
    base = r["method"] if r["model"] == "none" else f"{r['model']} · {r['method']}"
    return base + (f" [{r['variant']}]" if r["variant"] else "")


def headline_bars(agg: pd.DataFrame, headlines: dict[str, str], layouts: Layouts) -> list[Plot]:
    """Per task: the headline metric of every configuration, with 95% CI whiskers (none drawn where unknown)."""
    plots = []
    for task in sorted(set(agg["task"])):
        metric = headlines.get(task)
        sub = agg[(agg["task"] == task) & (agg["slice"] == OVERALL[0]) & (agg["metric"] == metric)
                  & agg["mean"].notna()]
        if sub.empty:
            continue
        sub = sub.sort_values(["model", "method"])
        labels = [_row_label(r) for _, r in sub.iterrows()]
        means = sub["mean"].astype(float).tolist()
        lo = [m - l if not math.isnan(l) else 0.0 for m, l in zip(means, sub["ci_low"].astype(float))]
        hi = [h - m if not math.isnan(h) else 0.0 for m, h in zip(means, sub["ci_high"].astype(float))]
        colors = ["#9e9e9e" if m == "none" else "#3f6fb5" for m in sub["model"]]
        fig, ax = plt.subplots(figsize=(max(4.0, 0.55 * len(labels) + 2), 3.2))
        ax.bar(range(len(labels)), means, yerr=[lo, hi], capsize=4, color=colors)
        ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=8)
        arrow = "↑" if layouts.higher_is_better(metric) else "↓"
        ax.set_ylabel(f"{metric} {arrow}")
        ax.set_title(f"{task}: {metric} (95% CI; grey = reference rows)", fontsize=10)
        ax.axhline(0, color="black", linewidth=0.6)
        plots.append(Plot(id=f"bars-{task}", title=f"{task}: {metric}", png_base64=_png(fig)))
    return plots


def ptc_vs_group_size(agg: pd.DataFrame, layouts: Layouts) -> list[Plot]:
    """PerRecBench: PTC against group size (easy=2, medium=3, hard=4 users), one line per configuration."""
    lay = layouts.benchmarks["perrec"]
    sizes = lay["group_size"]
    sub = agg[(agg["benchmark"] == "perrec") & (agg["slice"] == lay["slice"]) & (agg["metric"] == lay["metric"])
              & agg["value"].isin(list(sizes)) & agg["mean"].notna()]
    if sub.empty:
        return []
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    for keys, g in sub.groupby(["task", "model", "method", "variant"], sort=True):
        g = g.assign(size=g["value"].map(sizes)).sort_values("size")
        label = _row_label(dict(zip(["task", "model", "method", "variant"], keys)))
        ax.errorbar(g["size"], g["mean"], yerr=[(g["mean"] - g["ci_low"]).fillna(0), (g["ci_high"] - g["mean"]).fillna(0)],
                    marker="o", capsize=3, linestyle="--" if keys[1] == "none" else "-", label=label)
    ax.set_xticks(sorted(set(sub["value"].map(sizes))))
    ax.set_xlabel("group size (users ranked)")
    ax.set_ylabel("PTC ↑")
    ax.set_title("PerRecBench: PTC vs group size (95% CI)", fontsize=10)
    ax.legend(fontsize=7, loc="best")
    return [Plot(id="ptc-vs-group-size", title="PTC vs group size", png_base64=_png(fig))]


def parse_failure_rates(agg: pd.DataFrame) -> list[Plot]:
    """Share of examples whose answer could not be parsed, per model-backed configuration."""
    sub = agg[(agg["slice"] == OVERALL[0]) & (agg["model"] != "none")]
    sub = sub.drop_duplicates(["task", "model", "method", "variant"])
    sub = sub[sub["examples"].notna() & (sub["examples"].fillna(0) > 0)]
    if sub.empty:
        return []
    sub = sub.sort_values(["task", "model", "method"])
    labels = [f"{r['task']} · {_row_label(r)}" for _, r in sub.iterrows()]
    rates = (sub["parse_failed"].astype(float) / sub["examples"].astype(float)).tolist()
    fig, ax = plt.subplots(figsize=(6.5, 0.32 * len(labels) + 1.2))
    ax.barh(range(len(labels)), rates, color="#c0504d")
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(1e-9, max(rates)) * 1.15 if max(rates) > 0 else 1.0)
    ax.set_xlabel("parse-failure rate")
    for i, r in enumerate(rates):
        ax.text(r, i, f" {r:.1%}", va="center", fontsize=7)
    ax.set_title("Parse failures (model runs)", fontsize=10)
    return [Plot(id="parse-failures", title="Parse-failure rates", png_base64=_png(fig))]


def all_plots(agg: pd.DataFrame, headlines: dict[str, str], layouts: Layouts) -> list[Plot]:
    """Every plot of the report."""
    if agg.empty:
        return []
    return headline_bars(agg, headlines, layouts) + ptc_vs_group_size(agg, layouts) + parse_failure_rates(agg)
