"""`python -m recbench.results [RUNS_ROOT] --sql "SELECT ..."`: one SQL query over every run dir under a folder, through
DuckDB views of the files as they are on disk (recbench/store/sql_views.py: runs, metrics, samples); printed as a
Markdown table, CSV or JSON. Read-only: only SELECT queries run. A query DuckDB cannot read is one line, exit 2."""
from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Optional

from recbench.store.records import SchemaError

EXAMPLES = """examples:
  python -m recbench.results runs --sql "SELECT model, method, mean, ci_low, ci_high FROM metrics
      WHERE slice = 'history' AND value = 'long' AND metric = 'ptc' ORDER BY mean DESC LIMIT 5"
  python -m recbench.results runs --sql "DESCRIBE metrics"          (the columns of a view)
views: runs (one row per run dir), metrics (run x slice x value x metric, with CIs), samples (one row per example)"""


class QueryRefused(ValueError):
    """A query that is not one read-only SELECT, or that DuckDB cannot parse or bind."""


def run_query(con: Any, sql: str) -> tuple[list[str], list[tuple]]:
    """(column names, rows) of one SELECT; QueryRefused (one line) for anything else or a query DuckDB refuses."""
    import duckdb

    try:
        statements = con.extract_statements(sql)
        if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
            kinds = ", ".join(s.type.name for s in statements) or "nothing"
            raise QueryRefused(f"read-only: one SELECT query at a time (this is {kinds})")
        cur = con.execute(sql)
        return [d[0] for d in cur.description], cur.fetchall()
    except duckdb.Error as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise QueryRefused(f"SQL error: {first}") from None


def _plain(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v if isinstance(v, (str, int, float, bool)) or v is None else str(v)


def _cell(v: Any) -> str:
    v = _plain(v)
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


def render(cols: list[str], rows: list[tuple], fmt: str) -> str:
    """The rows as md (a pipe table), csv or json (a list of objects)."""
    if fmt == "json":
        return json.dumps([{c: _plain(v) for c, v in zip(cols, r)} for r in rows], ensure_ascii=False, indent=1)
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(cols)
        w.writerows([_cell(v) for v in r] for r in rows)
        return buf.getvalue().rstrip("\n")
    esc = [lambda s: s.replace("|", "\\|").replace("\n", " ")][0]
    lines = ["| " + " | ".join(map(esc, cols)) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(esc(_cell(v)) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    """CLI: 0 with the rows printed; 2 with one `recbench:` line (no run dirs, a schema it cannot read, bad SQL)."""
    ap = argparse.ArgumentParser(prog="python -m recbench.results", description=__doc__, epilog=EXAMPLES,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", nargs="*", help="runs root, sweep or run dirs (default: $RECBENCH_RUNS_DIR or runs)")
    ap.add_argument("--sql", required=True, help="one SELECT over the views runs, metrics, samples")
    ap.add_argument("--format", choices=("md", "csv", "json"), default="md")
    ap.add_argument("--time", action="store_true", help="print the connect and query seconds on stderr")
    a = ap.parse_args(argv)
    from recbench.store.rundir import runs_root
    from recbench.store.sql_views import connect

    roots = a.root or [str(runs_root())]
    t0 = time.perf_counter()
    try:
        missing = [r for r in roots if not Path(r).exists()]
        if missing:
            raise SchemaError(f"no such runs root, sweep or run dir: {missing[0]}")
        con = connect(roots)
        t1 = time.perf_counter()
        cols, rows = run_query(con, a.sql)
    except (SchemaError, QueryRefused) as e:
        print(f"recbench: {e}", file=sys.stderr)
        return 2
    t2 = time.perf_counter()
    print(render(cols, rows, a.format))
    if a.time:
        print(f"recbench.results: {len(rows)} rows; connect {t1 - t0:.2f}s, query {t2 - t1:.2f}s", file=sys.stderr)
    return 0
