"""`python -m recbench.report RUN_OR_SWEEP_DIR ... [-o OUT] [--latex]`: write report.md, report.html and CSVs (and
booktabs LaTeX tables with --latex)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from recbench.report.config_keys import ConfigKeys
from recbench.store.paths import PathRefused, existing_dir, writable_dir
from recbench.store.schema import SchemaError
from recbench.report.writer import write_report


def main(argv: list[str] | None = None) -> int:
    """Command-line entry."""
    ap = argparse.ArgumentParser(prog="python -m recbench.report", description=__doc__)
    ap.add_argument("dirs", nargs="+", help="run dirs and/or sweep dirs (searched recursively for metrics.json)")
    ap.add_argument("-o", "--out", help="output folder (default: <first dir>/report)")
    ap.add_argument("--title", default="recbench report")
    ap.add_argument("--formats", default="md,csv,html", help="comma-separated subset of md,csv,html")
    ap.add_argument("--latex", action="store_true",
                    help="also write booktabs tables: OUT/latex/<table>.tex and OUT/report.tex (pdflatex report.tex)")
    ap.add_argument("--config-keys", metavar="YAML",
                    help="a YAML replacing conf/report/config_keys.yaml (which config keys make one configuration)")
    ap.add_argument("--max-parse-failure-rate", type=float, default=0.5, metavar="R",
                    help="a run counts as a summary's best method only with a parse-failure share under R "
                         "(default 0.5, as report.max_parse_failure_rate; 1 counts every run)")
    a = ap.parse_args(argv)
    if not 0 < a.max_parse_failure_rate <= 1:
        print(f"recbench: error: --max-parse-failure-rate={a.max_parse_failure_rate}: must be in (0, 1]",
              file=sys.stderr)
        return 2
    out = Path(a.out) if a.out else Path(a.dirs[0]) / "report"
    try:
        for d in a.dirs:
            existing_dir(d, d, "pass run dirs or sweep dirs (runs/..., or a sweep's folder)")
        writable_dir(out, f"--out {out}", "the report")
        written = write_report(a.dirs, out, title=a.title, formats=a.formats.split(",") + (["tex"] if a.latex else []),
                               config_keys=ConfigKeys.load(a.config_keys) if a.config_keys else None,
                               max_parse_failure_rate=a.max_parse_failure_rate)
    except (FileNotFoundError, SchemaError, PathRefused) as e:
        print(f"recbench: error: {e}", file=sys.stderr)
        return 2
    for k, p in written.items():
        print(f"{k:10s} {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
