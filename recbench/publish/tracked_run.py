"""A run (or a sweep) with its tracker around it: the tracker run starts before the run and ends FINISHED only
after every metric and artifact is logged; a crash ends it FAILED (Ctrl-C: KILLED). A tracker that cannot be reached,
or fails while logging, costs the run nothing: one `recbench: tracking:` line says so and how to log it later."""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional

from recbench.publish.content import params_of, run_content, run_report_html, start_tags
from recbench.publish.tracker import FAILED, FINISHED, KILLED, Tracker, TrackerUnreachable, make_tracker
from recbench.store.redact import redact_text
from recbench.store.schema import RunResult

#: the file in a sweep dir naming the sweep's parent tracker run, read by each job (jobs may be other processes)
SWEEP_FILE = ".tracking.json"


def say(line: str) -> None:
    """One `recbench: tracking:` line on stderr (secrets in a URI masked)."""
    print(f"recbench: tracking: {redact_text(line)}", file=sys.stderr, flush=True)


def open_tracker(node: dict[str, Any]) -> Optional[Tracker]:
    """The tracker the node names, checked; None (and one line) when it cannot be reached or is not installed."""
    name = str(node.get("name") or "?")
    try:
        tracker = make_tracker(node)
        tracker.check()
        return tracker
    except TrackerUnreachable as e:
        where = node.get("uri") or node.get("dir") or ""
        say(f"{name}{' at ' + str(where) if where else ''} cannot be reached ({e}); the run goes on untracked "
            f"(log it later: python -m recbench.track RUN_DIR{' --uri ' + str(where) if where else ''})")
        return None


def _safe(tracker: Tracker, what: str, call: Callable[[], Any]) -> bool:
    """call(); a tracker failure is one line, never the run's failure. True when it worked."""
    try:
        call()
        return True
    except Exception as e:  # noqa: BLE001 - the run's results are on disk whatever the tracker does
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        say(f"{tracker.name} failed while {what} ({type(e).__name__}: {first}); the results are on disk: "
            f"python -m recbench.track RUN_DIR --uri {tracker.where}")
        return False


def _sweep_file(run_dir: Path) -> dict[str, Any]:
    """SWEEP_FILE of the sweep a job's run dir is in ({} outside a tracked sweep)."""
    for p in Path(run_dir).resolve().parents:
        f = p / SWEEP_FILE
        if f.is_file():
            try:
                d = json.loads(f.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return {}
            return d if isinstance(d, dict) else {}
    return {}


def sweep_parent(run_dir: Path, tracker: Tracker) -> Optional[str]:
    """The sweep's parent run this job's run joins (SWEEP_FILE in a folder above), when it names this tracker."""
    d = _sweep_file(run_dir)
    return d.get("parent") if d.get("tracker") == tracker.name else None


def log_finished(tracker: Tracker, run_dir: Path, node: dict[str, Any], complete: bool) -> None:
    """Log a finished run dir into the tracker run started last and end it: FINISHED when complete, else FAILED
    (examples abandoned); the run dir's older tracker runs are retired after a FINISHED one."""
    with tempfile.TemporaryDirectory(prefix="recbench-track-") as tmp:
        html = run_report_html(run_dir, Path(tmp)) if node.get("report", True) else None
        content = run_content(run_dir, samples_max_mb=float(node.get("samples_max_mb") or 50), report_html=html)
        tracker.log(content)
    tracker.end(FINISHED if complete else FAILED)
    if complete and tracker.run_ref is not None:
        tracker.retire(content, keep=tracker.run_ref)


def run_tracked(run: Callable[[], RunResult], node: Optional[dict[str, Any]], run_dir: str | Path,
                config_text: Callable[[], str]) -> RunResult:
    """run() with the tracker the `tracking` node names around it (no node: run() alone). config_text gives the
    resolved config as YAML (its secrets are masked here, as config.yaml's are)."""
    if not node or _sweep_file(Path(run_dir)).get("unreachable"):  # the sweep said so once, in one line
        return run()
    tracker = open_tracker(node)
    if tracker is None:
        return run()
    import yaml

    d = Path(run_dir).resolve()
    started = _safe(tracker, "starting its run", lambda: tracker.start(
        "/".join(d.parts[-4:]), params_of(yaml.safe_load(redact_text(config_text())) or {}), start_tags(d),
        sweep_parent(d, tracker)))
    if not started:
        return run()
    try:
        result = run()
    except KeyboardInterrupt:
        _safe(tracker, "ending its run", lambda: tracker.end(KILLED))
        raise
    except BaseException:
        _safe(tracker, "ending its run", lambda: tracker.end(FAILED))
        raise
    if not _safe(tracker, "logging the results", lambda: log_finished(tracker, d, node, result.complete)):
        _safe(tracker, "ending its run", lambda: tracker.end(FAILED))
    return result


def start_sweep(node: Optional[dict[str, Any]], sweep_dir: Path, overrides: list[str]) -> None:
    """The sweep's parent run, named in SWEEP_FILE for its jobs (nothing without a node or a reachable tracker)."""
    if not node:
        return
    sweep_dir.mkdir(parents=True, exist_ok=True)
    tracker = open_tracker(node)
    if tracker is None:  # its jobs run untracked without a line each
        (sweep_dir / SWEEP_FILE).write_text(json.dumps({"tracker": node.get("name"), "unreachable": True}),
                                            encoding="utf-8")
        return
    ref: list[str] = []
    if _safe(tracker, "starting the sweep's run", lambda: ref.append(tracker.start_sweep(
            sweep_dir.resolve(), {"overrides": redact_text(" ".join(overrides))[:6000]}))):
        (sweep_dir / SWEEP_FILE).write_text(json.dumps({"tracker": tracker.name, "parent": ref[0]}), encoding="utf-8")


def end_sweep(node: Optional[dict[str, Any]], sweep_dir: Path, failed: bool) -> None:
    """End the sweep's parent run with the sweep report; FAILED when a job failed."""
    f = sweep_dir / SWEEP_FILE
    if not node or not f.is_file() or _sweep_file(sweep_dir / "job").get("unreachable"):
        return
    tracker = open_tracker(node)
    if tracker is None:
        return
    parent = json.loads(f.read_text(encoding="utf-8")).get("parent")
    report = sweep_dir / "report" / "report.html"
    _safe(tracker, "ending the sweep's run", lambda: tracker.end_sweep(parent, FAILED if failed else FINISHED,
                                                                       report if report.is_file() else None))
