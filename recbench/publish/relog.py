"""Re-logging finished run dirs into a tracker (`python -m recbench.track`), idempotently: a run dir whose
metrics.json is already logged (same hash, FINISHED) is skipped; otherwise it is logged anew and its older tracker
runs are retired, so each run dir has one live tracker run. A sweep's runs go under the sweep's one parent run."""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from recbench.publish.content import RunContent, run_content, run_report_html, start_tags, sweep_dir_of
from recbench.publish.tracker import FAILED, FINISHED, Tracker
from recbench.store.schema import JOB_FAILED, SchemaError, find_run_dirs


@dataclass
class Relogged:
    """What a re-log did: run dirs logged, skipped as already logged, refused (each with its one-line reason)."""

    logged: list[Path] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def _sweep_params(sweep: Path) -> dict[str, str]:
    """The sweep's overrides (Hydra's multirun.yaml), as the live sweep's parent run records them."""
    import yaml

    try:
        cfg = yaml.safe_load((sweep / "multirun.yaml").read_text(encoding="utf-8")) or {}
        overrides = ((cfg.get("hydra") or {}).get("overrides") or {}).get("task") or []
    except (OSError, yaml.YAMLError):
        overrides = []
    return {"overrides": " ".join(map(str, overrides))[:6000]}


def _log_one(tracker: Tracker, content: RunContent, parent: Optional[str], report: bool) -> str:
    tracker.start(content.name, content.params, start_tags(content.run_dir), parent)
    with tempfile.TemporaryDirectory(prefix="recbench-track-") as tmp:
        html = run_report_html(content.run_dir, Path(tmp)) if report else None
        if html is not None:
            content.artifacts.append(html)
        tracker.log(content)
    ok = content.result.complete and not (content.run_dir / JOB_FAILED).exists()
    tracker.end(FINISHED if ok else FAILED)
    tracker.retire(content, keep=str(tracker.run_ref))
    return FINISHED if ok else FAILED


def relog(paths: list[str], tracker: Tracker, node: dict[str, Any], say: Callable[[str], None] = print) -> Relogged:
    """Log every run dir under the paths (run or sweep dirs) that the tracker does not already hold."""
    done = Relogged()
    sweeps: dict[Path, tuple[str, bool]] = {}  # sweep dir -> (parent run, any run failed)
    for d in find_run_dirs(paths):
        try:
            content = run_content(d, samples_max_mb=float(node.get("samples_max_mb") or 50))
        except SchemaError as e:
            done.refused.append(str(e))
            say(f"recbench: {e}")
            continue
        have = tracker.existing(content)
        if have is not None:
            done.skipped.append(d)
            say(f"already logged  {d} ({tracker.name} run {have})")
            continue
        sweep = sweep_dir_of(d)
        parent = None
        if sweep is not None:
            if sweep not in sweeps:
                sweeps[sweep] = (tracker.start_sweep(sweep, _sweep_params(sweep)), False)
            parent = sweeps[sweep][0]
        status = _log_one(tracker, content, parent, bool(node.get("report", True)))
        if sweep is not None and status != FINISHED:
            sweeps[sweep] = (sweeps[sweep][0], True)
        done.logged.append(d)
        say(f"logged          {d} ({tracker.name} run {tracker.run_ref}, {status})")
    for sweep, (ref, failed) in sweeps.items():
        report = sweep / "report" / "report.html"
        tracker.end_sweep(ref, FAILED if failed else FINISHED, report if report.is_file() else None)
    return done
