"""`python -m recbench.cache merge|stats`: merge per-job response caches, or count what one holds."""
from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from typing import Optional

from recbench.store.cache_tools import cache_files, merge, stats


def _fmt_time(t: Optional[float]) -> str:
    import time

    return "-" if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def main(argv: Optional[list[str]] = None) -> int:
    """CLI: merge SRC... DEST (files or folders of *.sqlite) | stats PATH... [--json]."""
    ap = argparse.ArgumentParser(prog="python -m recbench.cache",
                                 description="Merge per-job response caches into one, or describe caches.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("merge", help="copy the rows of SRC caches (files, or folders searched for *.sqlite) into DEST")
    m.add_argument("paths", nargs="+", metavar="SRC... DEST")
    m.add_argument("--json", action="store_true", help="print the summary as JSON")
    s = sub.add_parser("stats", help="rows, size, time span and rows per model of each cache")
    s.add_argument("paths", nargs="+", metavar="PATH")
    s.add_argument("--json", action="store_true", help="print as JSON")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "merge":
            if len(args.paths) < 2:
                ap.error("merge needs at least one SRC and a DEST")
            res = merge(args.paths[:-1], args.paths[-1], progress=not args.json)
            if args.json:
                print(json.dumps(res, indent=1))
            else:
                for r in res["sources"]:
                    print(f"{r['path']}: {r['rows']} rows, {r['added']} new")
                print(f"{res['dest']}: {res['rows_before']} -> {res['rows_after']} rows "
                      f"({len(res['sources'])} source file(s))")
        else:
            all_stats = [stats(p) for p in cache_files(args.paths)]
            if args.json:
                print(json.dumps(all_stats, indent=1))
            for st in [] if args.json else all_stats:
                print(f"{st['path']}: {st['rows']} rows, {st['bytes'] / 1e6:.1f} MB, "
                      f"{_fmt_time(st['first_created'])} .. {_fmt_time(st['last_created'])}")
                for model, k in st["models"].items():
                    print(f"  {k:>9}  {model}")
    except (FileNotFoundError, ValueError, sqlite3.DatabaseError) as e:
        print(f"recbench: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
