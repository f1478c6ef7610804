"""job_failed.json: why a sweep job stopped at run time (the sweep goes on); written and read only through `JobFailed`."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from recbench.store.records import SchemaError


# ---- job_failed.json ------------------------------------------------------------------------------------
#: the file a sweep job that failed at run time leaves in its run dir (the sweep goes on)
JOB_FAILED = "job_failed.json"
#: versions of job_failed.json: 1 = error, exit_code, overrides, traceback_tail (files before versioning: the same)
JOB_FAILED_VERSION = 1


@dataclass
class JobFailed:
    """job_failed.json: why a sweep job stopped (the error, one line), the exit code it counts as, its overrides and
    the end of its traceback."""

    error: str
    exit_code: int
    overrides: list[str] = field(default_factory=list)
    traceback_tail: str = ""

    @staticmethod
    def of(error: BaseException, exit_code: int, overrides: Iterable[str]) -> "JobFailed":
        """The record of an exception: 'Type: message' and the last 3000 characters of its traceback."""
        import traceback

        tb = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        return JobFailed(error=f"{type(error).__name__}: {error}", exit_code=int(exit_code),
                         overrides=[str(o) for o in overrides], traceback_tail=tb[-3000:])

    def to_dict(self) -> dict[str, Any]:
        """The job_failed.json form (schema_version first)."""
        return {"schema_version": JOB_FAILED_VERSION, **asdict(self)}

    @staticmethod
    def from_dict(d: Any, where: str = JOB_FAILED) -> "JobFailed":
        """From job_failed.json content (no schema_version: version 1); SchemaError naming the file otherwise."""
        if not isinstance(d, dict):
            raise SchemaError(f"{where}: a JSON {type(d).__name__}, not an object")
        v = d.get("schema_version", 1)
        if v != JOB_FAILED_VERSION:
            raise SchemaError(f"{where}: schema_version {v!r} is not readable by this recbench (reads "
                              f"{JOB_FAILED_VERSION}); upgrade recbench")
        try:
            overrides = d.get("overrides") or []
            if not isinstance(overrides, list):
                raise TypeError("'overrides' is not a list")
            return JobFailed(error=str(d["error"]), exit_code=int(d["exit_code"]), overrides=[str(o) for o in overrides],
                             traceback_tail=str(d.get("traceback_tail") or ""))
        except (KeyError, TypeError, ValueError) as e:
            raise SchemaError(f"{where}: malformed ({type(e).__name__}: {e})") from None

    def write(self, run_dir: str | Path) -> Path:
        """Write job_failed.json into the run dir (made if needed), secrets in the texts masked; returns its path."""
        from recbench.store.redact import redact_text

        d = Path(run_dir)
        d.mkdir(parents=True, exist_ok=True)
        f = d / JOB_FAILED
        f.write_text(redact_text(json.dumps(self.to_dict(), indent=2)) + "\n", encoding="utf-8")
        return f


def read_job_failed(run_dir: str | Path) -> Optional[JobFailed]:
    """The run dir's job_failed.json (None when there is none); SchemaError naming the file when it cannot be read."""
    p = Path(run_dir) / JOB_FAILED
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise SchemaError(f"{p}: unreadable ({type(e).__name__})") from None
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise SchemaError(f"{p}: not valid JSON ({e.msg})") from None
    return JobFailed.from_dict(d, where=str(p))
