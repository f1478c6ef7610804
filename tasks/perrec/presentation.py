"""PerRecBench in reports: the paper's Table 1 layout, the reference rows, and PTC against group size."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from recbench.report.collect import OVERALL  # noqa: E402
from recbench.report.plots import Plot, png, row_label  # noqa: E402
from recbench.report.tables import Cell, Index, ReportView, Table, _header, _label, _row_order, cell_from, mark_best  # noqa: E402

#: Table 1 of Tan et al. 2025: model rows; method x difficulty columns; average
LAYOUT = {"methods": ["pointwise", "pairwise", "listwise"], "metric": "ptc", "slice": "difficulty",
          "slice_values": ["easy", "medium", "hard"], "group_size": {"easy": 2, "medium": 3, "hard": 4}}


def perrec_tables(idx: Index, view: ReportView, benchmark: str) -> list[Table]:
    """Table 1 (model rows; method x difficulty columns; average) and the reference rows."""
    lay = LAYOUT
    df = idx.df[idx.df["benchmark"] == benchmark]
    if df.empty:
        return []
    metric, sl = lay["metric"], lay["slice"]
    diffs = [d for d in lay["slice_values"] if d in set(df[df["slice"] == sl]["value"])]
    diffs += sorted(set(df[df["slice"] == sl]["value"]) - set(diffs))
    tables = []
    llm = df[df["model"] != "none"]
    if not llm.empty:
        base = list(lay["methods"])
        # each layout method, then its variants (listwise_cot, listwise_fewshot, ...), then anything else
        methods = sorted(set(llm["method"]), key=lambda m: (next((i for i, b in enumerate(base) if m == b or
                                                                  m.startswith(b + "_")), len(base)), m))
        columns = [(m, d) for m in methods for d in diffs
                   if not llm[(llm["method"] == m) & (llm["slice"] == sl) & (llm["value"] == d)].empty]
        variants = sorted(set(llm["variant"]))
        rows = []
        for task in sorted(set(llm["task"])):
            for model in _row_order(list(set(llm[llm["task"] == task]["model"]))):
                for var in variants:
                    cells = [cell_from(idx.get(task, model, m, var, sl, d, metric), metric) for m, d in columns]
                    if all(c.missing for c in cells):
                        continue
                    avg = Cell(metric=metric, derived=True,
                               mean=None if any(c.missing for c in cells) else sum(c.mean for c in cells) / len(cells))
                    label = [model] + ([var or "default"] if len(variants) > 1 else []) + \
                        ([task] if len(set(llm["task"])) > 1 else [])
                    rows.append((label, cells + [avg]))
        cols = columns + [("average", "")]
        head = ["model"] + (["variant"] if len(variants) > 1 else []) + (["task"] if len(set(llm["task"])) > 1 else [])
        t = Table(id="perrec-table1", title="PerRecBench: PTC by method and difficulty (Table 1 layout)",
                  caption=f"{metric} (Kendall tau on per-user ranks); easy/medium/hard = groups of 2/3/4 users; "
                          "average over the row's cells (missing if any cell is missing); "
                          "bold = best, underlined = second best per column.",
                  row_header=head, header=_header(cols), columns=cols, rows=rows)
        mark_best(t, view)
        tables.append(t)
    ref = df[df["model"] == "none"]
    if not ref.empty:
        cols = [(d,) for d in diffs] + [("all",)]
        rows = []
        for task in sorted(set(ref["task"])):
            for method in sorted(set(ref[ref["task"] == task]["method"])):
                for var in sorted(set(ref[(ref["task"] == task) & (ref["method"] == method)]["variant"])):
                    cells = [cell_from(idx.get(task, "none", method, var, sl, d, metric), metric) for d in diffs]
                    cells.append(cell_from(idx.get(task, "none", method, var, *OVERALL, metric), metric))
                    rows.append(([_label(method, var)], cells))
        tables.append(Table(id="perrec-reference", title="PerRecBench: reference rows (no model)",
                            caption=f"{metric} of the model-free baselines by difficulty.",
                            row_header=["baseline"], header=_header(cols), columns=cols, rows=rows))
    return tables



def ptc_vs_group_size(agg: pd.DataFrame, view: ReportView, benchmark: str) -> list[Plot]:
    """PTC against group size (easy=2, medium=3, hard=4 users), one line per configuration."""
    lay = LAYOUT
    sizes = lay["group_size"]
    sub = agg[(agg["benchmark"] == benchmark) & (agg["slice"] == lay["slice"]) & (agg["metric"] == lay["metric"])
              & agg["value"].isin(list(sizes)) & agg["mean"].notna()]
    if sub.empty:
        return []
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    for keys, g in sub.groupby(["task", "model", "method", "variant"], sort=True):
        g = g.assign(size=g["value"].map(sizes)).sort_values("size")
        label = row_label(dict(zip(["task", "model", "method", "variant"], keys)))
        ax.errorbar(g["size"], g["mean"], yerr=[(g["mean"] - g["ci_low"]).fillna(0), (g["ci_high"] - g["mean"]).fillna(0)],
                    marker="o", capsize=3, linestyle="--" if keys[1] == "none" else "-", label=label)
    ax.set_xticks(sorted(set(sub["value"].map(sizes))))
    ax.set_xlabel("group size (users ranked)")
    ax.set_ylabel("PTC ↑")
    ax.set_title("PerRecBench: PTC vs group size (95% CI)", fontsize=10)
    ax.legend(fontsize=7, loc="best")
    return [Plot(id="ptc-vs-group-size", title="PTC vs group size", png_base64=png(fig))]
