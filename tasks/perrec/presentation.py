"""PerRecBench in reports, declared: the paper's Table 1 layout (model rows; method x difficulty columns; the row
average; the published rows), the reference rows by difficulty, and PTC against group size (a figure)."""
from __future__ import annotations

from typing import Any

import pandas as pd

from recbench.report.plots import Plot, plt, png, row_label
from recbench.report.presentation import Breakdown, Presentation, PublishedRows, TableSpec
from recbench.tasks.perrec.data import DIFFICULTY_BY_SIZE

#: difficulty = group size: easy 2 users, medium 3, hard 4
DIFFICULTY = Breakdown("difficulty", order=tuple(DIFFICULTY_BY_SIZE.values()), subset_key="task.difficulties")
GROUP_SIZE = {label: size for size, label in DIFFICULTY_BY_SIZE.items()}


def published_name(configs: list[dict[str, Any]], task: str) -> str:
    """The task name published numbers know a row's runs by: 'perrec_released' for runs of the released files
    (config task.format=released, as task=perrec_released sets), else the task name."""
    formats = {str((c.get("task") or {}).get("format")) for c in configs}
    return "perrec_released" if formats == {"released"} else task


TABLE1 = TableSpec(
    id="perrec-table1", title="PerRecBench: PTC by method and difficulty (Table 1 layout)", rows="models",
    columns=("method", "value"), metrics=("ptc",), breakdown=DIFFICULTY, overall=False, average=True,
    method_order=("pointwise", "pairwise", "listwise"), say_not_run=True,
    caption=("ptc (Kendall tau on per-user ranks); easy/medium/hard = groups of 2/3/4 users; "
             "average over the row's cells (missing if any cell is missing); "
             "bold = best, underlined = second best per column (ties share the mark)."),
    published=PublishedRows(
        name_runs=published_name, number_format=".2f",
        caption=(" Rows '(published)': Tan et al. 2025, Table 1, for the same model (comparable setting: "
                 "perrec_released, task.profile=true); {mark} = the published value (±0.005 rounding) lies outside "
                 "the measured 95% CI ({flagged} cell(s)).")))

REFERENCE = TableSpec(
    id="perrec-reference", title="PerRecBench: reference rows (no model)", rows="references", columns=("value",),
    metrics=("ptc",), breakdown=DIFFICULTY, marks=False, say_not_run=True,
    caption="ptc of the model-free baselines by difficulty.")


#: a build over several categories (groups with a `domain`; runs break their metrics down by it): PTC per domain
DOMAINS = TableSpec(
    id="perrec-domains", title="PerRecBench: PTC by domain (category of a multi-category build)", rows="all",
    columns=("value",), metrics=("ptc",), breakdown=Breakdown("domain"), overall=False,
    caption="ptc by the groups' category (a build over several categories; each member described by its ratings "
            "in that category); shown only for runs with domains.")


def ptc_vs_group_size(agg: pd.DataFrame, view: Any, benchmark: str) -> list[Plot]:
    """PTC against group size (easy=2, medium=3, hard=4 users), one line per configuration."""
    sub = agg[(agg["benchmark"] == benchmark) & (agg["slice"] == DIFFICULTY.key) & (agg["metric"] == "ptc")
              & agg["value"].isin(list(GROUP_SIZE)) & agg["mean"].notna()]
    if sub.empty:
        return []
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    for keys, g in sub.groupby(["task", "model", "method", "variant"], sort=True):
        g = g.assign(size=g["value"].map(GROUP_SIZE)).sort_values("size")
        label = row_label(dict(zip(["task", "model", "method", "variant"], keys)))
        err = [(g["mean"] - g["ci_low"]).fillna(0), (g["ci_high"] - g["mean"]).fillna(0)]
        ax.errorbar(g["size"], g["mean"], yerr=err, marker="o", capsize=3, linestyle="--" if keys[1] == "none" else "-",
                    label=label)
    ax.set_xticks(sorted(set(sub["value"].map(GROUP_SIZE))))
    ax.set_xlabel("group size (users ranked)")
    ax.set_ylabel("PTC ↑")
    ax.set_title("PerRecBench: PTC vs group size (95% CI)", fontsize=10)
    ax.legend(fontsize=7, loc="best")
    return [Plot(id="ptc-vs-group-size", title="PTC vs group size", png_base64=png(fig))]


PRESENTATION = Presentation(benchmark="perrec", title="PerRecBench", order=0, tables=(TABLE1, REFERENCE, DOMAINS),
                            plots=(ptc_vs_group_size,))
