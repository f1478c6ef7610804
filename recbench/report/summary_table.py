"""The cross-benchmark summary table: one row per model (its best eligible method per task) and per reference
baseline, one column per task's headline metric."""
from __future__ import annotations

from typing import Optional

from recbench.report.collect import OVERALL
from recbench.report.judged import name_the_judge
from recbench.report.tables import (Cell, Index, ReportView, Table, _header, cell_from, fallback_of, mark_best,
                                    method_label, parse_failure_rate)


def _arrow(hib: Optional[bool]) -> str:
    return " ↑" if hib else (" ↓" if hib is False else "")


def summary_table(idx: Index, view: ReportView) -> Table:
    """One row per model (its best eligible method per task) and per reference baseline; one column per task headline.

    A model's run is eligible for "best method" only when its parse-failure rate is under
    view.max_parse_failure_rate (1 = every run counts); a model with runs but none eligible shows "no valid run"."""
    headlines = view.headlines
    bound = view.max_parse_failure_rate
    df = idx.df[(idx.df["slice"] == OVERALL[0])]
    order = {b: i for i, b in enumerate(view.benchmarks)}
    tasks = sorted(set(df["task"]), key=lambda t: (order.get(view.benchmark_of(t), 99), t))
    cols = [(view.title(view.benchmark_of(t)), f"{t}: {headlines.get(t, '?')}"
             + _arrow(view.higher_is_better(headlines.get(t, "")))) for t in tasks]
    rows = []
    row_keys = sorted({(m, None) for m in set(df[df["model"] != "none"]["model"])} |
                      {("none", me) for me in set(df[df["model"] == "none"]["method"])},
                      key=lambda k: (k[0] == "none", k[0], k[1] or ""))
    excluded: list[str] = []
    for model, ref_method in row_keys:
        cells = []
        for task in tasks:
            metric = headlines.get(task, "")
            sub = df[(df["task"] == task) & (df["model"] == model) & (df["metric"] == metric)]
            if ref_method is not None:
                sub = sub[sub["method"] == ref_method]
            sub = sub[sub["mean"].notna()]
            if sub.empty:
                cells.append(Cell(metric=metric))
                continue
            rates = sub.apply(parse_failure_rate, axis=1)
            ok = (rates < bound) | (bound >= 1)  # a bound of 1 counts every run
            eligible = sub[ok] if ref_method is None else sub
            for (_, r), rate, good in zip(sub.iterrows(), rates, ok):
                if ref_method is None and not good:
                    excluded.append(f"{model} · {task} · {method_label(r['method'], r['variant'])} "
                                    f"({rate:.0%} parse failures)")
            if eligible.empty:
                cells.append(Cell(metric=metric, shown="no valid run",
                                  note=f"every run has >= {bound:.0%} parse failures"))
                continue
            best = eligible.sort_values("mean", ascending=view.higher_is_better(metric) is False).iloc[0]
            c = cell_from(best, metric)
            c.fallback = fallback_of(idx, task, model, best["method"], best["variant"], metric)
            if ref_method is None:
                c.chosen = method_label(best["method"], best["variant"])
                c.note = f"best method: {c.chosen}"
            cells.append(c)
        label = [model, "best per task"] if ref_method is None else [ref_method, "reference (no model)"]
        rows.append((label, cells))
    caption = ("Headline metric per task (↑ higher / ↓ lower is better), 95% bootstrap CI, n = examples behind the "
               "cell, pf = parse failures. Model rows show their best method per task (named under the value and in "
               f"the CSV's '· method' column) among runs with under {bound:.0%} parse failures; 'no valid run' when "
               "none qualifies. Equal values (3 decimals) are ties and share the mark; a model tied with a reference "
               "row is not marked second best. Seeds are averaged (sd shown). A dash means not run.")
    if excluded:
        caption += " Not eligible: " + "; ".join(excluded) + "."
    t = Table(id="summary", title="Cross-benchmark summary", caption=caption,
              row_header=["model / baseline", "kind"], header=_header(cols), columns=cols, rows=rows)
    name_the_judge(t)  # a judged headline names its judge
    mark_best(t, view, reference_rows=[i for i, (lbl, _) in enumerate(rows) if lbl[1] == "reference (no model)"])
    return t
