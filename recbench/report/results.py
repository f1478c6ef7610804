"""results.json beside a sweep report: every run's metrics (and every failed job) in one typed file a script can load."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from recbench.report.collect import RunIdentity
from recbench.report.numbers import number
from recbench.store.result import Counts
from recbench.store.schema import JOB_FAILED, SchemaError, read_job_failed

#: version of the results.json layout (bump on incompatible changes)
RESULTS_SCHEMA_VERSION = 1


@dataclass
class MetricValue:
    """One overall metric of a run: mean and its CI (None where undefined), n examples behind it."""

    mean: Optional[float]
    ci_low: Optional[float]
    ci_high: Optional[float]
    n: int


#: the key order of a run in results.json
ROW_KEYS = ("run_dir", "task", "model", "method", "variant", "seed", "complete", "counts", "metrics")


@dataclass
class ResultsRow(RunIdentity):
    """One run: its identity (RunIdentity, as the report names it), run dir, variant label, completeness, counts
    (metrics.json's, typed) and overall metrics."""

    run_dir: str
    variant: str
    complete: bool
    counts: Counts
    metrics: dict[str, MetricValue]

    def to_dict(self) -> dict[str, Any]:
        """The results.json form."""
        d = asdict(self)
        return {k: d[k] for k in ROW_KEYS}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "ResultsRow":
        """From results.json."""
        return ResultsRow(**{**d, "counts": Counts.from_dict(d.get("counts") or {}),
                             "metrics": {k: MetricValue(**m) for k, m in d["metrics"].items()}})


@dataclass
class FailedJob:
    """A sweep job that stopped at run time: its run dir and the error it left in job_failed.json."""

    run_dir: str
    error: str
    exit_code: int
    overrides: list[str] = field(default_factory=list)


@dataclass
class Results:
    """The whole results.json."""

    schema_version: int
    runs: list[ResultsRow]
    failed_jobs: list[FailedJob] = field(default_factory=list)


def results_row(run: Any, variant: str = "") -> ResultsRow:
    """A ResultsRow from a report's ReportedRun (recbench.report.collect.ReportedRun)."""
    res = run.result
    metrics = {name: MetricValue(number(s.mean), number(s.ci_low), number(s.ci_high), int(s.n or 0))
               for name, s in res.metrics.items()}
    return ResultsRow(**vars(run.identity()), run_dir=str(run.dir), variant=variant, complete=bool(res.complete),
                      counts=res.counts, metrics=metrics)


def failed_jobs(paths: Iterable[str | Path]) -> list[FailedJob]:
    """Every job_failed.json under the given dirs (recbench.store.schema.JobFailed; an unreadable one is listed with
    exit code 2 and the reason)."""
    out = []
    for p in paths:
        for f in sorted(Path(p).rglob(JOB_FAILED)):
            try:
                rec = read_job_failed(f.parent)
            except SchemaError as e:
                out.append(FailedJob(run_dir=str(f.parent), error=f"unreadable: {e}", exit_code=2))
                continue
            if rec is not None:
                out.append(FailedJob(run_dir=str(f.parent), error=rec.error, exit_code=rec.exit_code,
                                     overrides=rec.overrides))
    return out


def build_results(runs: list[Any], labels: dict[int, str], failed: list[FailedJob]) -> Results:
    """Results of the report's runs (labels: id(run) -> variant label) and the failed jobs."""
    return Results(RESULTS_SCHEMA_VERSION, [results_row(r, labels.get(id(r), "")) for r in runs], failed)


def write_results(results: Results, path: str | Path) -> Path:
    """Write results.json (NaN never appears: undefined values are null)."""
    path = Path(path)
    d = {"schema_version": results.schema_version, "runs": [r.to_dict() for r in results.runs],
         "failed_jobs": [asdict(f) for f in results.failed_jobs]}
    path.write_text(json.dumps(d, indent=2, default=str) + "\n", encoding="utf-8")
    return path


def load_results(path: str | Path) -> Results:
    """Read a results.json back into typed objects; an unknown schema_version is a one-line error naming the file."""
    path = Path(path)
    d = json.loads(path.read_text(encoding="utf-8"))
    if d.get("schema_version") != RESULTS_SCHEMA_VERSION:
        raise ValueError(f"{path}: schema_version {d.get('schema_version')!r} is not {RESULTS_SCHEMA_VERSION}. "
                         "Fix: regenerate it with python -m recbench.report <sweep dir>")
    runs = [ResultsRow.from_dict(r) for r in d["runs"]]
    return Results(d["schema_version"], runs, [FailedJob(**f) for f in d.get("failed_jobs") or []])
