"""PTC vs rating error (the paper's Figure 1 / Figure 3 point): one row per run, Pearson correlation across runs.

    python -m recbench.tasks.perrec.report runs/perrec [more run dirs ...] --out reports/perrec_ptc_vs_rmse

Reads every metrics.json under the given folders whose task is perrec; rows with a rating prediction (pointwise
variants, user/item-average reference rows) carry MAE/RMSE; Pearson r (scipy) of PTC vs MAE and vs RMSE is computed
over those rows. Writes <out>.md, <out>.csv and <out>.png (scatter).
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any, Optional

import pandas as pd
from scipy import stats

from recbench.store.schema import find_run_dirs, read_result


def collect(paths: list[str]) -> pd.DataFrame:
    """One row per perrec run: run dir, model, method, data, n, PTC, MAE, RMSE, parse failure rate."""
    rows = []
    for d in find_run_dirs(paths):
        m = read_result(d)
        if m.task_name != "perrec":
            continue
        ptc = m.metrics.get("ptc")
        rows.append({
            "run": str(d), "model": m.model, "method": m.method,
            "data": Path(str(m.task.settings.get("data_dir", ""))).name, "n": m.counts.examples,
            "ptc": None if ptc is None or math.isnan(ptc.mean) else ptc.mean,
            "mae": m.extra.get("rating_mae"), "rmse": m.extra.get("rating_rmse"),
            "parse_failure_rate": m.counts.parse_failure_rate,
        })
    return pd.DataFrame(rows, columns=["run", "model", "method", "data", "n", "ptc", "mae", "rmse", "parse_failure_rate"])


def correlations(df: pd.DataFrame) -> dict[str, Optional[dict[str, float]]]:
    """Pearson r and p of PTC vs MAE and vs RMSE over the rows that have both (None with fewer than 3 rows)."""
    out: dict[str, Optional[dict[str, float]]] = {}
    for col in ("mae", "rmse"):
        d = df.dropna(subset=["ptc", col])
        if len(d) < 3 or d[col].nunique() < 2 or d["ptc"].nunique() < 2:
            out[col] = None
            continue
        r = stats.pearsonr(d["ptc"].astype(float), d[col].astype(float))
        out[col] = {"r": float(r.statistic), "p": float(r.pvalue), "n": int(len(d))}
    return out


def markdown(df: pd.DataFrame, corr: dict[str, Any]) -> str:
    """The table and the correlations as Markdown."""
    def f(x: Any) -> str:
        return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else (f"{x:.4f}" if isinstance(x, float) else str(x))

    lines = ["| data | model | method | run dir | n | PTC | MAE | RMSE | parse fail |", "|---|---|---|---|---|---|---|---|---|"]
    for _, r in df.sort_values(["data", "model", "method", "run"]).iterrows():
        lines.append(f"| {r['data']} | {r['model']} | {r['method']} | {Path(r['run']).name} | {r['n']} | {f(r['ptc'])} | {f(r['mae'])} | "
                     f"{f(r['rmse'])} | {f(r['parse_failure_rate'])} |")
    lines.append("")

    def fmt(corr: dict[str, Any], where: str) -> None:
        for col, c in corr.items():
            lines.append(f"Pearson r(PTC, {col.upper()}){where} = " + (
                f"{c['r']:+.3f} (p = {c['p']:.3g}, n = {c['n']} runs)" if c else "n/a (fewer than 3 runs with ratings)"))

    fmt(corr, "")
    if df["data"].nunique() > 1:  # per data set too: PTC levels differ between data sets
        for d, sub in df.groupby("data"):
            fmt(correlations(sub), f" [{d}]")
    return "\n".join(lines) + "\n"


def main(argv: Optional[list[str]] = None) -> None:
    """CLI entry."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--out", default=None, help="write <out>.md/.csv/.png")
    a = ap.parse_args(argv)
    df = collect(a.paths)
    corr = correlations(df)
    md = markdown(df, corr)
    print(md)
    if a.out:
        out = Path(a.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".md").write_text(md)
        df.to_csv(out.with_suffix(".csv"), index=False)
        d = df.dropna(subset=["ptc", "rmse"])
        if len(d):
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            fig, ax = plt.subplots(figsize=(5, 4))
            ax.scatter(d["rmse"], d["ptc"])
            for _, r in d.iterrows():
                ax.annotate(f"{r['method']}/{r['data']}", (r["rmse"], r["ptc"]), fontsize=6)
            ax.set_xlabel("RMSE of predicted ratings")
            ax.set_ylabel("PTC (Kendall tau of relative preference)")
            fig.tight_layout()
            fig.savefig(out.with_suffix(".png"), dpi=120)


if __name__ == "__main__":
    main()
