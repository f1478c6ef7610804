"""RecBench+ in reports, declared: recall / precision / CMR / FTR by query type, with and without history, the
published reference rows, and the model-free baselines in their own table."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from recbench.report.presentation import Breakdown, Presentation, PublishedRows, TableSpec
from recbench.tasks.recbench_plus.data import QUERY_TYPES

QUERY_TYPE = Breakdown("query_type", order=tuple(QUERY_TYPES), subset_key="task.types")
METRICS = ("recall", "precision", "cmr", "ftr")


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


def published_name(configs: list[dict[str, Any]], task: str) -> str:
    """The name published numbers know a row's runs by: 'released:<domain>' for runs of the released query files
    (task.data.kind=released) of one domain with the whole answer list scored (method.k=0), 'released:<domain>:k=K'
    with a cut-off K, else the task name."""
    names = set()
    for cfg in configs:
        kind = ((cfg.get("task") or {}).get("data") or {}).get("kind")
        dom, k = _domain(cfg), int((cfg.get("method") or {}).get("k") or 0)
        names.add(f"released:{dom}" + (f":k={k}" if k else "") if kind == "released" and dom else None)
    return names.pop() if len(names) == 1 and None not in names else task


BY_QUERY_TYPE = TableSpec(
    id="recbench-plus", title="RecBench+: by query type", rows="models", columns=("value", "metric"), metrics=METRICS,
    breakdown=QUERY_TYPE, method_order=("assistant", "assistant_history"), method_header="history",
    method_labels={"assistant": "without history", "assistant_history": "with history"},
    caption=("recall / precision (official fuzzy title matching), CMR (condition match rate) and FTR "
             "(answers not following the list format; lower is better) per query type; "
             "bold = best, underlined = second best per column."),
    published=PublishedRows(
        name_runs=published_name,
        caption=(" Rows '(published)': the numbers published for the same model, method and data (released "
                 "query files of the same domain; sources in data/published/{benchmark}.yaml and each cell's "
                 "tooltip); {mark} = the published value lies outside the measured 95% CI ({flagged} cell(s)).")))

REFERENCE = TableSpec(
    id="recbench-plus-reference", title="RecBench+: reference rows (no model)", rows="references",
    columns=("value", "metric"), metrics=METRICS, breakdown=QUERY_TYPE, marks=False,
    caption=("the same metrics for the model-free baselines (popular_match: the most-rated items carrying the "
             "entities the query names; bm25_items: BM25 of the item text against the query), by query type."))

PRESENTATION = Presentation(benchmark="recbench_plus", title="RecBench+", order=1, tables=(BY_QUERY_TYPE, REFERENCE))
