"""Markdown tables of bench_scale results: every step before | after, and how each cost grows from one size to another.

    python benchmarks/bench_scale_table.py [--before benchmarks/results/bench_scale_before.json]
                                           [--after benchmarks/results/bench_scale_after.json] [--grow 1M,10M]

The tables of docs/scaling.md ("How far one machine goes") are this output; an "after" file that is absent leaves
the after columns empty.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
ORDER = ("generate (not a recbench step)", "generate (not a recbench step) (wide)", "build", "build (wide)", "run user_avg (first load)", "run user_avg (cached)",
         "run bm25_history (cached)", "compare --metric ptc", "report", "stub listwise run",
         "stub listwise run (http_process)", "view")


def _key(k: tuple[str, str]) -> tuple[float, int, str]:
    units = {"K": 1e3, "M": 1e6, "G": 1e9}
    size = k[0].upper()
    n = float(size[:-1]) * units[size[-1]] if size[-1:] in units else float(size)
    return n, ORDER.index(k[1]) if k[1] in ORDER else len(ORDER), k[1]


def load_rows(path: Path) -> dict[tuple[str, str], dict]:
    """(size, step) -> row of a results file; {} when the file is absent."""
    if not path.exists():
        return {}
    return {(r["size"], r["step"]): r for r in json.loads(path.read_text())["rows"]}


def cell(r: dict | None) -> str:
    """'wall s (cpu s), peak GB, exit, load' of one row, or empty."""
    if not r:
        return " | | | "
    wall = f"{r['wall_s']:.1f} s" if r.get("wall_s") is not None else "-"
    if r.get("cpu_s") is not None:
        wall += f" (cpu {r['cpu_s']:.0f} s)"
    rss = f"{r['peak_rss_gb']:.2f} GB" if r.get("peak_rss_gb") is not None else "-"
    if r.get("peak_rss_gb") is None and r.get("max_tree_rss_gb"):  # killed with time: the watchdog's last poll
        rss = f">= {r['max_tree_rss_gb']:.2f} GB (polled)"
    load = f"{r['load_start'][0]:.0f}-{r['load_end'][0]:.0f}" if r.get("load_start") else f"{r['load_end'][0]:.0f}"
    return f"{wall} | {rss} | {r['exit']} | {load}"


def data_text(r: dict) -> str:
    """What the step worked on: ratings for a build, groups / examples / requests / page size where recorded."""
    bits = [r["data"]] if r.get("data") and not str(r["data"]).startswith("run ") else []
    if isinstance(r.get("groups"), dict):
        bits.append(f"{sum(r['groups'].values()):,} groups")
    for key, fmt in (("examples", "{:,} examples"), ("requests", "{:,} requests"),
                     ("bound_s", "bound {:.0f} s"), ("html_mb", "{} MB page"), ("disk_mb", "{} MB on disk")):
        if r.get(key) is not None:
            bits.append(fmt.format(r[key]))
    return ", ".join(bits)


def main_table(before: dict, after: dict) -> str:
    """One row per (size, step): the before figures and the after figures side by side."""
    lines = ["| size | step | data | before: wall (cpu) | peak RSS | exit | load | after: wall (cpu) | peak RSS | exit | load |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for key in sorted({*before, *after}, key=_key):
        b, a = before.get(key), after.get(key)
        lines.append(f"| {key[0]} | {key[1]} | {data_text(b or a)} | {cell(b)} | {cell(a)} |")
    return "\n".join(lines)


def growth_table(rows: dict, small: str, large: str) -> str:
    """Per step: large / small for wall, CPU and peak RSS (steps that finished at both sizes)."""
    lines = [f"| step | wall {large} / {small} | cpu {large} / {small} | peak RSS {large} / {small} |", "|---|---|---|---|"]
    for (size, step), s in sorted(rows.items(), key=lambda kv: _key(kv[0])):
        g = rows.get((large, step))
        if size != small or not g or s.get("exit") != "ok" or g.get("exit") != "ok":
            continue
        ratio = lambda k: f"{g[k] / s[k]:.1f}x" if s.get(k) and g.get(k) is not None else "-"  # noqa: E731
        lines.append(f"| {step} | {ratio('wall_s')} | {ratio('cpu_s')} | {ratio('peak_rss_gb')} |")
    return "\n".join(lines)


def main() -> None:
    """Print the tables."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", default=str(RESULTS / "bench_scale_before.json"))
    ap.add_argument("--after", default=str(RESULTS / "bench_scale_after.json"))
    ap.add_argument("--grow", default="1M,10M", help="two sizes: SMALL,LARGE")
    a = ap.parse_args()
    before, after = load_rows(Path(a.before)), load_rows(Path(a.after))
    small, large = a.grow.split(",")
    print(main_table(before, after))
    print()
    print("Before:\n\n" + growth_table(before, small, large))
    if after:
        print("\nAfter:\n\n" + growth_table(after, small, large))


if __name__ == "__main__":
    main()
