"""`python -m recbench.audit RUN_DIR [--metric M]`: the order-audit block of a run dir's records, as JSON."""
from __future__ import annotations

from typing import Optional

from recbench.audits.order import audit_aggregates


def main(argv: Optional[list[str]] = None) -> int:
    """`python -m recbench.audit RUN_DIR [--metric M]`: the order-audit block of a run dir's records, as JSON (works
    on an unfinished run: what samples.jsonl holds so far)."""
    import argparse
    import json

    import sys

    from recbench.store.paths import PathRefused, existing_dir
    from recbench.store.schema import SchemaError, read_run

    ap = argparse.ArgumentParser(prog="python -m recbench.audit", description=main.__doc__)
    ap.add_argument("run_dir")
    ap.add_argument("--metric", default=None, help="per-example metric to summarise (default: the run's headline)")
    a = ap.parse_args(argv)
    try:
        existing_dir(a.run_dir, f"RUN_DIR {a.run_dir}", "pass a run dir (runs/<task>/<model>/<method>/<variant>)")
        run = read_run(a.run_dir, require_result=False)
    except (SchemaError, PathRefused) as e:
        print(f"recbench: error: {e}", file=sys.stderr)
        return 2
    recs = list(run.samples())
    metric = a.metric or getattr(run.result, "headline_metric", None)
    if metric is None:  # an unfinished run has no metrics.json: the first metric of the records
        metric = next(iter(recs[0].metrics), "score") if recs else "score"
    print(json.dumps({"run_dir": a.run_dir, "examples": len(recs), **{k: b.to_dict() for k, b in audit_aggregates(recs, metric).items()}}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
