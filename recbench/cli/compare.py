"""`python -m recbench.compare RUN_DIR RUN_DIR [...]`: paired verdicts between runs as a terminal table and JSON."""
from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from recbench.stats.paired import FIRST_RESAMPLES, REFINE_BELOW, TARGET_MC_SE
from recbench.stats.verdicts import (
    CI_MEANING,
    CompareError,
    Comparison,
    check_margin,
    ci_disagrees,
    compare_runs,
    family_line,
    letters,
    load_systems,
    verdict_of,
    write_json,
)
from recbench.store.schema import SchemaError


# ---- terminal -----------------------------------------------------------------------------------------
def _fmt(x: float | None, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    s = f"{x:.{digits}f}"
    return "0." + "0" * digits if s.startswith("-") and float(s) == 0 else s


def _fmt_p(p: float | None) -> str:
    if p is None or not math.isfinite(p):
        return "-"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


WIDTH = 120  # the terminal width the tables and legend lines are fitted to (narrower on a narrower terminal)
#: short column headers (one header line at 120 columns); LEGEND says what each one is
COLS = ("metric", "slice", "n", "a", "b", "diff", "95% CI", "test", "p", "p ±", "p adj", "fam", "verdict")
NUMERIC = {"n", "a", "b", "diff", "p", "p adj", "fam", "p eq", "p eq adj", "p ni", "p ni adj"}
MARGIN_COLS = ("metric", "slice", "n", "diff", "test", "p eq", "p eq adj", "equiv", "p ni", "p ni adj", "b non-inf")


def _console(console=None):
    from rich.console import Console

    return console or Console(width=min(WIDTH, Console().width) if sys.stdout.isatty() else WIDTH, highlight=False)


def _verdict_cell(c: Comparison) -> tuple[str, bool, bool]:
    """The verdict naming the better run by its label (never 'a'/'b', which the significance letters use), with *
    (CI and adjusted verdict disagree) and ≈ (below the noise floor)."""
    verdict = c.verdict or verdict_of(c)
    if c.better:  # the run's name within its pair, cut like the mean columns' headers, so the row fits 120 columns
        names = dict(zip((c.run_a, c.run_b), pair_names(c.run_a, c.run_b)))
        better = names.get(c.better, c.better)
        verdict = f"{better if len(better) <= 12 else short_label(better, 10)} better"
    flagged, noisy = ci_disagrees(c), bool(c.below_noise_floor)
    return verdict + (" *" if flagged else "") + (" ≈" if noisy else ""), flagged, noisy


def _record_key(c: Comparison) -> tuple:
    return (c.run_a, c.run_b, c.slice, c.n, c.mean_a, c.mean_b, c.ci_low, c.ci_high, c.p_value, c.p_adjusted,
            c.verdict)


def fold_twins(comparisons: Sequence[Comparison]) -> tuple[list[Comparison], dict[str, list[str]]]:
    """The records to show and the metrics folded into an earlier one: a metric whose records equal an earlier
    metric's on every pair and slice (ptc_parsed and ptc when every answer parsed) is one row, as the run summary
    folds it."""
    by_metric: dict[str, list[Comparison]] = {}
    for c in comparisons:
        by_metric.setdefault(c.metric, []).append(c)
    keys = {m: [_record_key(c) for c in cs] for m, cs in by_metric.items()}
    folded: dict[str, list[str]] = {}
    for m in by_metric:
        twin = next((k for k in folded if keys[k] == keys[m]), None)
        if twin is None:
            folded[m] = []
        else:
            folded[twin].append(m)
    dropped = {m for twins in folded.values() for m in twins}
    return [c for c in comparisons if c.metric not in dropped], {k: v for k, v in folded.items() if v}


def _precision_cell(c: Comparison) -> str:
    """How exact the p is, short: 'exact', '±0.0013' (Monte Carlo se), the test's own ('binomial', 'scipy', 't')."""
    if c.test == "none":
        return "-"
    if c.p_mc_se is not None:
        return f"±{c.p_mc_se:.1g}"
    return {"mcnemar": "exact", "wilcoxon": "scipy", "t": "t dist"}.get(c.test, "exact")


def _precision_legend(comparisons: Sequence[Comparison]) -> str:
    """What the 'p ±' column says (the JSON's p_precision says it per record)."""
    bound = max((c.p_error for c in comparisons if c.p_error is not None), default=None)
    lattice = f"; lattice FFT, rounding <= {bound:.0e}" if bound is not None else ""
    return f"p ± = precision of p: exact (all sign vectors{lattice}) or ±s = its Monte Carlo standard error"


def pair_names(run_a: str, run_b: str) -> tuple[str, str]:
    """The two runs' labels without the path parts they share at the start or the end (bm25_history/limit=12 vs
    random/limit=12: bm25_history, random): what tells them apart in a column header or a verdict."""
    a, b = run_a.split("/"), run_b.split("/")
    while len(a) > 1 and len(b) > 1 and a[0] == b[0]:
        a, b = a[1:], b[1:]
    while len(a) > 1 and len(b) > 1 and a[-1] == b[-1]:
        a, b = a[:-1], b[:-1]
    return ("/".join(a), "/".join(b)) if a != b else (run_a, run_b)


def short_label(label: str, width: int = 12) -> str:
    """A run's label cut to a column header's width (its end kept: the method name is last)."""
    return label if len(label) <= width else "…" + label[-(width - 1):]


def _header(col: str, run_a: str, run_b: str) -> str:
    """A column's header in one pair's table: 'a' and 'b' (the runs' means) and 'b non-inf' carry the runs' labels."""
    name_a, name_b = pair_names(run_a, run_b)
    if col == "a":
        return short_label(name_a)
    if col == "b" or col.startswith("b "):
        return short_label(name_b) + col[1:]
    return col


def _pair_tables(console, cols: Sequence[str], pairs: dict[tuple[str, str], list[tuple[str, ...]]], *,
                 title: str = "") -> list[int]:
    """One rich table per pair of runs (a vs b in its title); a metric or test every row shares is a legend item, not a
    column. Returns the indices of the shared columns."""
    from rich.table import Table

    rows = [r for rs in pairs.values() for r in rs]
    same = [i for i, col in enumerate(cols) if col in ("metric", "test", "fam", "p ±") and rows
            and len({r[i] for r in rows}) == 1]
    for (run_a, run_b), prows in pairs.items():
        t = Table(title=f"{title}{run_a}  vs  {run_b}  (diff = {run_a} − {run_b})", title_justify="left")
        for i, col in enumerate(cols):
            if i not in same:
                squeezable = col in ("slice", "verdict")  # the others keep their width: a number is never folded
                t.add_column(_header(col, run_a, run_b), justify="right" if col in NUMERIC else "left", no_wrap=True,
                             overflow="ellipsis" if squeezable else "fold",
                             min_width=None if squeezable else max(len(_header(col, run_a, run_b)),
                                                                   *(len(r[i]) for r in prows)))
        for r in prows:
            t.add_row(*(v for k, v in enumerate(r) if k not in same))
        console.print(t)
    return same


def print_table(comparisons: Sequence[Comparison], correction: str, console=None) -> None:
    """A rich table of the comparisons per pair of runs (the first run named first), with legend lines under it."""
    console = _console(console)
    pairs: dict[tuple[str, str], list[tuple[str, ...]]] = {}
    flagged = noisy = False
    shown, folded = fold_twins(comparisons)
    for c in shown:
        verdict, f, n = _verdict_cell(c)
        flagged, noisy = flagged or f, noisy or n
        pairs.setdefault((c.run_a, c.run_b), []).append((
            c.metric, c.slice, str(c.n), _fmt(c.mean_a, 3), _fmt(c.mean_b, 3), _fmt(c.diff, 3),
            f"[{_fmt(c.ci_low, 3)}, {_fmt(c.ci_high, 3)}]", c.test, _fmt_p(c.p_value), _precision_cell(c),
            _fmt_p(c.p_adjusted),
            str(c.family_size) if c.test != "none" else "-", verdict))
    rows = [r for rs in pairs.values() for r in rs]
    console.print("paired comparisons" + (f" of {rows[0][0]}" if len({r[0] for r in rows}) == 1 else ""))
    same = _pair_tables(console, COLS, pairs)
    shared = "".join(f"; {COLS[i]}: {rows[0][i]}" for i in same if COLS[i] != "metric")
    for line in (f"means of each run (the first named first); diff = first - second; 95% CI = unadjusted paired "
                 f"bootstrap{shared}",
                 f"p adj = {correction} within each family (one metric and slice, over its pairs of runs); "
                 "fam = family size", _precision_legend(comparisons),
                 *(f"{' = '.join([*twins, kept])} on every slice and pair (one row shown; the json has both)"
                   for kept, twins in folded.items())):
        console.print(line)
    _footnotes(comparisons, correction, console, flagged=flagged, noisy=noisy)


def _footnotes(comparisons: Sequence[Comparison], correction: str, console, *, flagged: bool, noisy: bool) -> None:
    """The family line, the * and ≈ footnotes, metrics without a direction, significance letters and notes."""
    line = family_line(comparisons)
    if line:
        console.print(line)
    if flagged:
        console.print(f"* the CI is the {CI_MEANING};")
        console.print(f"  the verdict uses the p adjusted over the family ({correction} over 'fam' pairs), so near the "
                      "threshold the two can disagree")
    if noisy:
        console.print("≈ |diff| is below the noise floor of either run: decoding the same examples again with another "
                      "batch size")
        console.print("  (audit.noise; metrics.json extra.noise_floor) moved this metric by up to that much (the larger "
                      "end of its 95% CI),")
        console.print("  so the difference may be numerical noise")
    for d in ("none", "unknown"):
        names = sorted({c.metric for c in comparisons if c.direction == d})
        if names:
            console.print(f"{'no direction (descriptive)' if d == 'none' else 'direction unknown (not registered)'}: "
                          f"{', '.join(names)}: differences and p-values only, never 'better' or letters")
    for task, metric in dict.fromkeys((c.task, c.metric) for c in comparisons if c.slice == "all" and c.test != "none"):
        try:
            groups = letters(comparisons, metric, task=task)
        except CompareError:
            continue
        console.print(f"significance groups ({task} {metric}, all; best first; a shared letter = not distinguishable): "
                      + ", ".join(f"{row} {lt}" for row, lt in groups.items()))
    for note in dict.fromkeys(c.note for c in comparisons if c.note and c.test != "none"):
        console.print(f"note: {note}")


def _yes_no(x: bool | None) -> str:
    return "-" if x is None else ("yes" if x else "no")


def noninferiority_direction(metric: str, direction: str, margin: float, run_a: str = "a", run_b: str = "b") -> str:
    """What the non-inferiority column tests, exactly, for a metric of this direction (the runs by their labels)."""
    a, b = run_a, run_b
    if direction == "higher":
        return (f"{metric} (higher is better): {short_label(b)} non-inf = yes rejects H0 '{a} - {b} >= {margin:g}', "
                f"i.e. shows {b} is not worse than {a} by {margin:g} or more")
    if direction == "lower":
        return (f"{metric} (lower is better): {short_label(b)} non-inf = yes rejects H0 '{a} - {b} <= -{margin:g}', "
                f"i.e. shows {b} is not worse than {a} by {margin:g} or more")
    why = "no direction (descriptive)" if direction == "none" else "direction unknown (not registered)"
    return f"no non-inferiority verdict for {metric}: {why}, so no side is worse; equivalence only"


def print_margin_table(comparisons: Sequence[Comparison], correction: str, console=None) -> None:
    """Equivalence (TOST within +-margin) and non-inferiority of b to a, one table per pair of runs."""
    comps = [c for c in comparisons if c.margin is not None]
    if not comps:
        return
    console = _console(console)
    pairs: dict[tuple[str, str], list[tuple[str, ...]]] = {}
    for c in comps:
        pairs.setdefault((c.run_a, c.run_b), []).append((
            c.metric, c.slice, str(c.n), _fmt(c.diff, 3), c.equivalence_test or "none", _fmt_p(c.p_equivalence),
            _fmt_p(c.p_equivalence_adj), _yes_no(c.equivalent), _fmt_p(c.p_noninferior), _fmt_p(c.p_noninferior_adj),
            _yes_no(c.noninferior)))
    margins = ", ".join(f"{m:g}" for m in sorted({c.margin for c in comps}))
    console.print(f"equivalence within ±{margins} (TOST) and non-inferiority of the second run named to the first")
    same = _pair_tables(console, MARGIN_COLS, pairs, title="margin: ")
    rows = [r for rs in pairs.values() for r in rs]
    shared = "".join(f"; {MARGIN_COLS[i]}: {rows[0][i]}" for i in same if MARGIN_COLS[i] != "metric")
    for line in (f"p eq = TOST p, the larger one-sided p of diff <= -{margins} and of diff >= +{margins}; "
                 f"equiv = equivalent (p eq adj < alpha){shared}",
                 *dict.fromkeys(noninferiority_direction(c.metric, c.direction, c.margin, c.run_a, c.run_b)
                                for c in comps),
                 "to test a against b instead, swap the two run arguments",
                 f"adj = {correction} within each family (one metric and slice, over its pairs of runs), TOST and "
                 "non-inferiority apart",
                 "test: t = paired t; score-exact = exact unconditional score test of 0/1 units"):
        console.print(line)
    for c in comps:
        if c.margin_note and c.equivalence_test == "t":
            console.print(f"margin note ({c.run_a} vs {c.run_b}, {c.metric}, {c.slice}): {c.margin_note}")


def build_parser() -> argparse.ArgumentParser:
    """The command-line arguments."""
    p = argparse.ArgumentParser(prog="python -m recbench.compare", description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", help="run dirs or sweep dirs")
    p.add_argument("--metric", action="append", help="compare only this metric (repeatable; default: all shared)")
    p.add_argument("--test", default="auto", choices=("auto", "permutation", "wilcoxon", "mcnemar", "t"),
                   help="auto = exact McNemar for 0/1 metrics, else sign-flip permutation")
    p.add_argument("--correction", default="holm", choices=("holm", "bh", "none"),
                   help="multiple-comparison correction within each family: one metric and slice, over its pairs of "
                        "runs (the sweep report's families)")
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--json", dest="json_path", help="write one record per (pair, metric, slice) to this file")
    p.add_argument("--resamples", type=int, default=None,
                   help="bootstrap and permutation resamples (default: 9999 bootstrap; permutation adaptive: "
                        f"{FIRST_RESAMPLES:,} sign vectors, and below p {REFINE_BELOW:g} more until the Monte Carlo standard "
                        f"error is at most {TARGET_MC_SE:g}, p to 3 decimals)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pool-seeds", action="store_true",
                   help="runs that differ only in the seed are one row, averaged per example (Miller 2024)")
    p.add_argument("--no-slices", action="store_true", help="overall only, no breakdown slices")
    p.add_argument("--margin", type=str, default=None, metavar="D",
                   help="also test equivalence within +-D (two one-sided tests) and non-inferiority of b to a by D, on "
                        "each metric's scale, on the same units and families (docs/verdicts.md)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry: compare, print the table, optionally write JSON; exit 2 with one line on bad input."""
    args = build_parser().parse_args(argv)
    margin = None
    if args.margin is not None:
        try:
            margin = check_margin(args.margin)
        except CompareError as e:
            print(f"recbench: {e}", file=sys.stderr)
            return 2
    try:  # the runs are read once, for the comparison and the per-template verdicts (60,000 examples: seconds each)
        systems = load_systems(args.runs, pool_seeds_=args.pool_seeds)
        comps = compare_runs(systems, metrics=args.metric, test=args.test, correction=args.correction,
                             alpha=args.alpha, n_resamples=args.resamples, seed=args.seed,
                             slices=not args.no_slices, margin=margin)
    except (CompareError, SchemaError) as e:
        print(f"recbench: error: {e}", file=sys.stderr)
        return 2
    print_table(comps, args.correction)
    print_margin_table(comps, args.correction)
    from recbench.audits.templates import audited_templates, template_verdicts
    from recbench.report.template_verdicts import print_template_verdicts

    by_template = [] if sum(audited_templates(s) >= 2 for s in systems) < 2 else \
        template_verdicts(systems, metrics=args.metric, correction=args.correction, alpha=args.alpha, seed=args.seed,
                          n_resamples=args.resamples)
    print_template_verdicts(by_template)  # runs asked with audit.templates=K: the verdict under each template
    if args.json_path:
        write_json(comps, args.json_path)
        print(f"wrote {len(comps)} records to {args.json_path}")
        if by_template:
            extra = str(Path(args.json_path).with_suffix("")) + ".templates.json"
            write_json(by_template, extra)
            print(f"wrote {len(by_template)} per-template records to {extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
