"""PerRecBench in reports: the paper's Table 1 layout, the reference rows, and PTC against group size."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import json  # noqa: E402

import pandas as pd  # noqa: E402
from typing import Optional  # noqa: E402

from recbench.report.collect import OVERALL  # noqa: E402
from recbench.report.plots import Plot, png, row_label  # noqa: E402
from recbench.report.published_rows import OUTSIDE_MARK, published_cells  # noqa: E402
from recbench.report.tables import (Cell, Index, ReportView, Table, _header, _label, _row_order, cell_from,  # noqa: E402
                                    mark_best, slices_not_run)


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
        row_keys: list[tuple[str, str, str]] = []
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
                    row_keys.append((task, model, var))
        cols = columns + [("average", "")]
        head = ["model"] + (["variant"] if len(variants) > 1 else []) + (["task"] if len(set(llm["task"])) > 1 else [])
        caption = (f"{metric} (Kendall tau on per-user ranks); easy/medium/hard = groups of 2/3/4 users; "
                   "average over the row's cells (missing if any cell is missing); "
                   "bold = best, underlined = second best per column (ties share the mark).")
        t = Table(id="perrec-table1", title="PerRecBench: PTC by method and difficulty (Table 1 layout)",
                  caption=caption, row_header=head, header=_header(cols), columns=cols, rows=rows)
        mark_best(t, view)
        flagged = add_published_rows(t, row_keys, llm, metric, sl)
        if flagged is not None:
            t.caption += (f" Rows '(published)': Tan et al. 2025, Table 1, for the same model (comparable setting: "
                          f"perrec_released, task.profile=true); {OUTSIDE_MARK} = the published value (±0.005 "
                          f"rounding) lies outside the measured 95% CI ({flagged} cell(s)).")
        gap = slices_not_run(llm, sl, lay["slice_values"])
        if gap:
            t.caption += f" Not run: {gap}."
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
        gap = slices_not_run(ref, sl, lay["slice_values"])
        tables.append(Table(id="perrec-reference", title="PerRecBench: reference rows (no model)",
                            caption=f"{metric} of the model-free baselines by difficulty."
                                    + (f" Not run: {gap}." if gap else ""),
                            row_header=["baseline"], header=_header(cols), columns=cols, rows=rows))
    return tables



def published_task(df: pd.DataFrame) -> str:
    """The task name published numbers know the rows of df by: 'perrec_released' for runs of the released files
    (config task.format=released, as task=perrec_released sets), else the task name."""
    from recbench.report.tables import _run_config

    dirs = {s["run_dir"] for src in df["sources"] for s in json.loads(src) if " " not in s["run_dir"]}
    formats = {str((_run_config(d).get("task") or {}).get("format")) for d in dirs}
    return "perrec_released" if formats == {"released"} else str(df["task"].iloc[0])


def add_published_rows(t: Table, row_keys: list[tuple[str, str, str]], llm: pd.DataFrame, metric: str,
                       sl: str) -> Optional[int]:
    """Insert a '<model> (published)' row under each measured row the published Table 1 applies to
    (recbench.report.published: a released-files run of a model with a published row) and mark each measured cell whose
    published value lies outside its 95% CI. Returns how many cells were flagged, or None when no row applies."""
    from recbench.report.published import compare

    flagged, any_row, out = 0, False, []
    for (labels, cells), (task, model, var) in zip(t.rows, row_keys):
        out.append((labels, cells))
        sub = llm[(llm["task"] == task) & (llm["model"] == model) & (llm["variant"] == var)]
        name = published_task(sub)
        measured = [{**r, "task": name} for r in sub[(sub["slice"] == sl) & (sub["metric"] == metric)].to_dict("records")]
        by = {(r["method"], r["value"]): r for r in compare(measured)}
        if not by:
            continue
        any_row = True
        pcells, n = published_cells(t.columns, cells, by, lambda col: metric, fmt=".2f")
        flagged += n
        vals = [c.mean for c in pcells[:-1]]
        pcells[-1] = Cell(metric=metric, derived=True,
                          mean=None if not vals or any(v is None for v in vals) else sum(vals) / len(vals))
        out.append(([f"{labels[0]} (published)"] + labels[1:], pcells))
    t.rows = out
    return flagged if any_row else None


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
