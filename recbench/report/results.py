"""results.json beside a sweep report: every run's metrics (and every failed job) in one typed file a script can load."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from recbench.report.numbers import number
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


@dataclass
class ResultsRow:
    """One run: identity, completeness, counts (metrics.json's) and overall metrics."""

    run_dir: str
    task: str
    model: str
    method: str
    variant: str
    seed: Any
    complete: bool
    counts: dict[str, Any]
    metrics: dict[str, MetricValue]


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
    return ResultsRow(run_dir=str(run.dir), task=run.task, model=run.model, method=run.method, variant=variant,
                      seed=run.seed, complete=bool(res.complete), counts=asdict(res.counts), metrics=metrics)


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
    path.write_text(json.dumps(asdict(results), indent=2, default=str) + "\n", encoding="utf-8")
    return path


def load_results(path: str | Path) -> Results:
    """Read a results.json back into typed objects; an unknown schema_version is a one-line error naming the file."""
    path = Path(path)
    d = json.loads(path.read_text(encoding="utf-8"))
    if d.get("schema_version") != RESULTS_SCHEMA_VERSION:
        raise ValueError(f"{path}: schema_version {d.get('schema_version')!r} is not {RESULTS_SCHEMA_VERSION}. "
                         "Fix: regenerate it with python -m recbench.report <sweep dir>")
    runs = [ResultsRow(**{**r, "metrics": {k: MetricValue(**m) for k, m in r["metrics"].items()}}) for r in d["runs"]]
    return Results(d["schema_version"], runs, [FailedJob(**f) for f in d.get("failed_jobs") or []])
