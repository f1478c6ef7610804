"""RecBench+ in reports: recall / precision / CMR / FTR by query type, with and without history."""
from __future__ import annotations

from recbench.report.collect import OVERALL
from recbench.report.tables import Index, ReportView, Table, _header, _row_order, cell_from, mark_best

LAYOUT = {"slice": "query_type", "slice_values": ["explicit", "implicit", "misinformed", "interest", "demographics"],
          "metrics": ["recall", "precision", "cmr", "ftr"],
          # method -> history column label
          "history": {"assistant": "without history", "assistant_history": "with history"}}


def recbench_plus_tables(idx: Index, view: ReportView, benchmark: str) -> list[Table]:
    """RecBench+ by query type (recall/precision/CMR/FTR), with and without history."""
    lay = LAYOUT
    df = idx.df[idx.df["benchmark"] == benchmark]
    if df.empty:
        return []
    sl = lay["slice"]
    present = set(df[df["slice"] == sl]["value"])
    types = [t for t in lay["slice_values"] if t in present] + sorted(present - set(lay["slice_values"]))
    metrics = [m for m in lay["metrics"] if m in set(df["metric"])]
    columns = [(t, m) for t in types + ["all"] for m in metrics
               if not df[(df["metric"] == m) & (((df["slice"] == sl) & (df["value"] == t)) |
                                                ((df["slice"] == "all") & (t == "all")))].empty]
    hist = lay.get("history", {})
    rows = []
    multi_task = len(set(df["task"])) > 1
    for task in sorted(set(df["task"])):
        sub = df[df["task"] == task]
        for model in _row_order(list(set(sub["model"]))):
            for method in sorted(set(sub[sub["model"] == model]["method"]), key=lambda m: (m not in hist, m)):
                for var in sorted(set(sub[(sub["model"] == model) & (sub["method"] == method)]["variant"])):
                    cells = [cell_from(idx.get(task, model, method, var, *((sl, t) if t != "all" else OVERALL), m), m)
                             for t, m in columns]
                    label = [model, hist.get(method, method) + (f" [{var}]" if var else "")] + ([task] if multi_task else [])
                    rows.append((label, cells))
    t = Table(id="recbench-plus", title="RecBench+: by query type",
              caption="recall / precision (official fuzzy title matching), CMR (condition match rate) and FTR "
                      "(answers not following the list format; lower is better) per query type; "
                      "bold = best, underlined = second best per column.",
              row_header=["model", "history"] + (["task"] if multi_task else []), header=_header(columns),
              columns=columns, rows=rows)
    mark_best(t, view)
    return [t]
