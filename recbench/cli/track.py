"""`python -m recbench.track RUN_DIR... --uri URI`: log finished run and sweep dirs into an experiment tracker,
idempotently (a run dir already logged with the same metrics.json is skipped; docs/results_elsewhere.md)."""
from __future__ import annotations

import argparse
import sys
from typing import Optional

from recbench.store.schema import SchemaError


def main(argv: Optional[list[str]] = None) -> int:
    """CLI: 0 when every run dir is logged or already was, 2 when the tracker cannot be reached or a dir is refused."""
    ap = argparse.ArgumentParser(prog="python -m recbench.track", description=__doc__)
    ap.add_argument("dirs", nargs="+", help="run dirs and/or sweep dirs (searched for metrics.json)")
    ap.add_argument("--tracker", choices=("mlflow", "wandb"), default="mlflow")
    ap.add_argument("--uri", help="MLflow tracking URI (sqlite:///runs/mlflow.db, a file store, http://host:5000)")
    ap.add_argument("--experiment", default="recbench", help="MLflow experiment (default recbench)")
    ap.add_argument("--project", default="recbench", help="W&B project (default recbench)")
    ap.add_argument("--dir", default=".", help="W&B: the folder of its wandb/ runs (default .)")
    ap.add_argument("--mode", default=None, help="W&B mode: offline (default, or $WANDB_MODE) | online")
    ap.add_argument("--samples-max-mb", type=float, default=50.0,
                    help="a larger samples.jsonl is linked (its path), not uploaded (default 50)")
    ap.add_argument("--no-report", action="store_true", help="do not build and log each run's report HTML")
    a = ap.parse_args(argv)
    if a.tracker == "mlflow" and not a.uri:
        print("recbench: --uri is required with --tracker mlflow (e.g. --uri sqlite:///runs/mlflow.db)", file=sys.stderr)
        return 2
    node = {"name": a.tracker, "uri": a.uri, "experiment": a.experiment, "project": a.project, "dir": a.dir,
            "mode": a.mode, "samples_max_mb": a.samples_max_mb, "report": not a.no_report}
    from recbench.publish.relog import relog
    from recbench.publish.tracked_run import open_tracker

    tracker = open_tracker(node)
    if tracker is None:
        return 2
    try:
        done = relog(a.dirs, tracker, node)
    except SchemaError as e:
        print(f"recbench: {e}", file=sys.stderr)
        return 2
    print(f"{tracker.name} {tracker.where}: {len(done.logged)} logged, {len(done.skipped)} already logged, "
          f"{len(done.refused)} refused")
    return 2 if done.refused else 0
