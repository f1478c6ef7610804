"""RecBench+ in reports: recall / precision / CMR / FTR by query type, with and without history, and the
published reference rows."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import pandas as pd

from recbench.report.collect import OVERALL
from recbench.report.published_rows import OUTSIDE_MARK, published_cells
from recbench.report.tables import (Cell, Index, ReportView, Table, _header, _row_order, _run_config, cell_from,
                                    mark_best)

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
    row_keys: list[tuple[str, str, str, str]] = []
    multi_task = len(set(df["task"])) > 1
    ref_rows = []  # model-free reference rows (model "none"): their own table, as PerRecBench's
    for task in sorted(set(df["task"])):
        sub = df[df["task"] == task]
        for method in sorted(set(sub[sub["model"] == "none"]["method"])):
            for var in sorted(set(sub[(sub["model"] == "none") & (sub["method"] == method)]["variant"])):
                cells = [cell_from(idx.get(task, "none", method, var, *((sl, t) if t != "all" else OVERALL), m), m)
                         for t, m in columns]
                ref_rows.append(([method + (f" [{var}]" if var else "")] + ([task] if multi_task else []), cells))
        for model in _row_order([m for m in set(sub["model"]) if m != "none"]):
            for method in sorted(set(sub[sub["model"] == model]["method"]), key=lambda m: (m not in hist, m)):
                for var in sorted(set(sub[(sub["model"] == model) & (sub["method"] == method)]["variant"])):
                    cells = [cell_from(idx.get(task, model, method, var, *((sl, t) if t != "all" else OVERALL), m), m)
                             for t, m in columns]
                    label = [model, hist.get(method, method) + (f" [{var}]" if var else "")] + ([task] if multi_task else [])
                    rows.append((label, cells))
                    row_keys.append((task, model, method, var))
    t = Table(id="recbench-plus", title="RecBench+: by query type",
              caption="recall / precision (official fuzzy title matching), CMR (condition match rate) and FTR "
                      "(answers not following the list format; lower is better) per query type; "
                      "bold = best, underlined = second best per column.",
              row_header=["model", "history"] + (["task"] if multi_task else []), header=_header(columns),
              columns=columns, rows=rows)
    mark_best(t, view)
    flagged = add_published_rows(t, row_keys, df, benchmark, sl)
    if flagged is not None:
        t.caption += (f" Rows '(published)': the numbers published for the same model, method and data (released "
                      f"query files of the same domain; sources in data/published/{benchmark}.yaml and each cell's "
                      f"tooltip); {OUTSIDE_MARK} = the published value lies outside the measured 95% CI "
                      f"({flagged} cell(s)).")
    tables = [t] if rows else []
    if ref_rows:
        tables.append(Table(id="recbench-plus-reference", title="RecBench+: reference rows (no model)",
                            caption="the same metrics for the model-free baselines (popular_match: the most-rated "
                                    "items carrying the entities the query names; bm25_items: BM25 of the item text "
                                    "against the query), by query type.",
                            row_header=["baseline"] + (["task"] if multi_task else []), header=_header(columns),
                            columns=columns, rows=ref_rows))
    return tables


def _domain(cfg: dict[str, Any]) -> Optional[str]:
    """The domain of a released-files run: task.data.domain, else from the file names (book* = book), as the loader
    decides it."""
    data = (cfg.get("task") or {}).get("data") or {}
    if data.get("domain"):
        return str(data["domain"])
    paths = data.get("path")
    paths = [paths] if isinstance(paths, str) else list(paths or [])
    doms = {"book" if Path(str(x)).name.lower().startswith("book") else "movie" for x in paths}
    return doms.pop() if len(doms) == 1 else None


def published_task(df: pd.DataFrame) -> str:
    """The name published numbers know the rows of df by: 'released:<domain>' for runs of the released query files
    (task.data.kind=released) of one domain with the whole answer list scored (method.k=0), 'released:<domain>:k=K'
    with a cut-off K, else the task name."""
    dirs = {s["run_dir"] for src in df["sources"] for s in json.loads(src) if " " not in s["run_dir"]}
    names = set()
    for d in dirs:
        cfg = _run_config(d)
        kind = ((cfg.get("task") or {}).get("data") or {}).get("kind")
        dom, k = _domain(cfg), int((cfg.get("method") or {}).get("k") or 0)
        names.add(f"released:{dom}" + (f":k={k}" if k else "") if kind == "released" and dom else None)
    return names.pop() if len(names) == 1 and None not in names else str(df["task"].iloc[0])


def add_published_rows(t: Table, row_keys: list[tuple[str, str, str, str]], df: pd.DataFrame, benchmark: str,
                       sl: str) -> Optional[int]:
    """Insert a '<model> (published)' row under each measured row a published number applies to (recbench.report.published,
    the benchmark's files) and mark each measured cell whose published value lies outside its 95% CI. Returns how
    many cells were flagged, or None when no row applies."""
    from recbench.report.published import compare, load_benchmark

    published = load_benchmark(benchmark)
    if not published:
        return None
    flagged, any_row, out = 0, False, []
    for (labels, cells), (task, model, method, var) in zip(t.rows, row_keys):
        out.append((labels, cells))
        sub = df[(df["task"] == task) & (df["model"] == model) & (df["method"] == method) & (df["variant"] == var)]
        name = published_task(sub)
        measured = [{**r, "task": name, "value": r["value"] if r["slice"] == sl else "all"}
                    for r in sub.to_dict("records") if r["slice"] in (sl, OVERALL[0])]
        by = {(r["value"], r["metric"]): r for r in compare(measured, published) if r["method"] == method}
        if not by:
            continue
        any_row = True
        pcells, n = published_cells(t.columns, cells, by, lambda col: col[1])
        flagged += n
        out.append(([f"{labels[0]} (published)"] + labels[1:], pcells))
    t.rows = out
    return flagged if any_row else None
