"""The run dir read through its schema: one reader (`read_run`) over the typed records of every file.

A run dir (see recbench/store/runstore.py for the writer) holds:
- metrics.json  -> RunResult (store/result.py: schema_version, aggregates with CIs, breakdowns, counts, metric_info)
- samples.jsonl -> SampleRecord per finished example, each with its CallRecords (store/records.py; prompts by hash)
- prompts.jsonl -> {key, messages} once per distinct prompt
- errors.jsonl  -> ErrorRecord per example abandoned after a backend error (retried on the next run)
- config.yaml, versions.json; plan.json -> PlanResult (mode=plan)
- job_failed.json -> JobFailed (store/job_failed.py; a sweep job that stopped at run time)

Every reader (report, compare, plan, viewers, task reports) goes through `read_run`. The record classes are named here
too, so `from recbench.store.schema import RunResult` reads the schema from one place.
"""
from __future__ import annotations

import dataclasses
import gc
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional

from recbench.store.job_failed import JOB_FAILED, JOB_FAILED_VERSION, JobFailed, read_job_failed
from recbench.store.records import CallRecord, ErrorRecord, SampleRecord, SchemaError
from recbench.store.result import (
    READABLE_VERSIONS,
    SCHEMA_VERSION,
    Aggregate,
    Counts,
    MetricSummary,
    PlanResult,
    RunResult,
    SliceResult,
)

__all__ = ["JOB_FAILED", "JOB_FAILED_VERSION", "READABLE_VERSIONS", "SCHEMA_VERSION", "Aggregate", "CallRecord",
           "Counts", "ErrorRecord", "JobFailed", "MetricSummary", "PlanResult", "RunDir", "RunResult", "SampleRecord",
           "SchemaError", "SliceResult", "dedupe_first", "find_run_dirs", "iter_jsonl", "load_jsonl", "read_config",
           "read_job_failed", "read_prompts", "read_result", "read_run"]

log = logging.getLogger(__name__)


# ---- reading ----------------------------------------------------------------------------------------------
#: what to do about a damaged line of a run dir's JSON-lines file
_LINE_FIX = ("a rerun of the same command repairs a torn last line; fix or delete this line by hand (a deleted "
             "samples.jsonl line is run again)")


def _numbered_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, JSON object) of a JSON-lines file; a line that is not UTF-8, not JSON or not an object raises
    SchemaError naming file and line."""
    with open(path, "rb") as f:
        for no, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                d = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as e:
                raise SchemaError(f"{path}:{no}: not UTF-8 text (byte {raw[e.start:e.start + 1]!r} at column "
                                  f"{e.start + 1}); {_LINE_FIX}") from None
            except json.JSONDecodeError as e:
                raise SchemaError(f"{path}:{no}: not valid JSON ({e.msg}); {_LINE_FIX}") from None
            if not isinstance(d, dict):
                raise SchemaError(f"{path}:{no}: a JSON {type(d).__name__}, not a record (object); {_LINE_FIX}")
            yield no, d


def iter_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSON-lines file; a malformed line raises SchemaError naming file and line."""
    for _, d in _numbered_jsonl(path):
        yield d


def load_jsonl(path: Path, parse: Callable[[dict[str, Any]], Any]) -> list[Any]:
    """parse(object) for each line of a JSON-lines file; a line parse cannot read raises SchemaError naming file
    and line (never a raw KeyError / TypeError)."""
    out = []
    was_on = gc.isenabled()
    gc.disable()  # records hold no cycles: full collections over the growing list (60,000 records) free nothing
    try:
        for no, d in _numbered_jsonl(path):
            try:
                out.append(parse(d))
            except SchemaError as e:
                raise SchemaError(f"{path}:{no}: {e}; {_LINE_FIX}") from None
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                raise SchemaError(f"{path}:{no}: not a valid record ({type(e).__name__}: {e}); {_LINE_FIX}") from None
    finally:
        if was_on:
            gc.enable()
    return out


def _prompt_entry(d: dict[str, Any]) -> tuple[str, list[dict[str, str]]]:
    if not isinstance(d["messages"], list):
        raise TypeError("'messages' is not a list")
    return str(d["key"]), d["messages"]


def read_prompts(path: str | Path) -> dict[str, list[dict[str, str]]]:
    """prompts.jsonl as {hash: messages} ({} when absent)."""
    p = Path(path)
    return dict(load_jsonl(p, _prompt_entry)) if p.exists() else {}


def dedupe_first(records: Iterable[Any]) -> list[Any]:
    """Records with unique ids (the first of each id wins); warns when a duplicate was dropped."""
    seen: set[str] = set()
    out = []
    for r in records:
        if r.id in seen:
            continue
        seen.add(r.id)
        out.append(r)
    return out


# ---- judge records (docs/judges.md) ------------------------------------------------------------------------
#: the folder of a run dir holding each judge's records, judge/<tag>/samples.jsonl
JUDGE_DIR = "judge"


def judge_tag(name: str, protocol: str, repeat: int = 0) -> str:
    """The folder name of one judge's records: <name>-<protocol>, and -repeat<k> for the k-th repeat."""
    return f"{name}-{protocol}" + (f"-repeat{repeat}" if repeat else "")


def judged_tag(config: dict[str, Any]) -> Optional[str]:
    """The tag of the judge whose metrics join a run's records, from the run's config (None: no judge)."""
    j = config.get("judge") or {}
    return judge_tag(str(j["name"]), str(j["protocol"])) if j.get("name") not in (None, "none") else None


def join_judged(records: list[SampleRecord], run_dir: str | Path, tag: Optional[str]) -> list[SampleRecord]:
    """The run's records with the judge's per-example metrics (judge/<tag>/samples.jsonl) joined by example id: the
    one place judged metrics meet the run's (its aggregate, and every reader through read_run). A record the judge
    has not judged keeps its own metrics; nothing changes without a tag or judge records."""
    path = Path(run_dir) / JUDGE_DIR / str(tag) / "samples.jsonl"
    if tag is None or not path.exists():
        return records
    judged = {r.id: r.metrics for r in dedupe_first(load_jsonl(path, SampleRecord.from_dict))}
    return [dataclasses.replace(r, metrics={**r.metrics, **judged[r.id]}) if r.id in judged else r for r in records]


@dataclass
class RunDir:
    """A run dir, read through the schema: result (metrics.json), config, samples, errors, prompts."""

    dir: Path
    result: Optional[RunResult]
    config: dict[str, Any]
    _samples: Optional[list[SampleRecord]] = field(default=None, repr=False)

    def samples(self, with_prompts: bool = False) -> list[SampleRecord]:
        """The finished examples (unique ids, first wins), optionally with each call's messages."""
        if self._samples is None or with_prompts:
            path = self.dir / "samples.jsonl"
            recs = load_jsonl(path, SampleRecord.from_dict) if path.exists() else []
            uniq = dedupe_first(recs)
            if len(uniq) < len(recs):
                log.warning("%s: %d duplicate example id(s) ignored (the first record of each id is used)",
                            path, len(recs) - len(uniq))
            if with_prompts:
                prompts = read_prompts(self.dir / "prompts.jsonl")
                for r in uniq:
                    for c in r.calls:
                        c.messages = prompts.get(c.prompt or "")
                return join_judged(uniq, self.dir, judged_tag(self.config))
            self._samples = join_judged(uniq, self.dir, judged_tag(self.config))
        return self._samples

    def errors(self) -> list[ErrorRecord]:
        """Examples abandoned after backend errors (and not finished since)."""
        path = self.dir / "errors.jsonl"
        if not path.exists():
            return []
        done = {s.id for s in self.samples()}
        return [e for e in load_jsonl(path, ErrorRecord.from_dict) if e.id not in done]

    @property
    def task(self) -> str:
        """The task name."""
        return self.result.task_name if self.result else str(self.config.get("task", {}).get("name", ""))


def read_config(run_dir: Path) -> dict[str, Any]:
    """config.yaml of a run dir as a nested dict ({} when absent)."""
    p = Path(run_dir) / "config.yaml"
    if not p.exists():
        return {}
    import yaml

    try:
        cfg = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise SchemaError(f"{p}: not valid YAML ({type(e).__name__}); rerun the same command to rewrite it") from None
    if not isinstance(cfg, dict):
        raise SchemaError(f"{p}: not a mapping; rerun the same command to rewrite it")
    return cfg


def read_result(run_dir: str | Path) -> RunResult:
    """metrics.json of a run dir as a RunResult (SchemaError naming the file when missing or unreadable)."""
    p = Path(run_dir) / "metrics.json"
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise SchemaError(f"{p}: missing; is {run_dir} a run dir? (run `python -m recbench ...` to make one)") from e
    except json.JSONDecodeError as e:
        raise SchemaError(f"{p}: not valid JSON ({e.msg}); rerun the same command to rebuild it") from e
    except UnicodeDecodeError:
        raise SchemaError(f"{p}: not UTF-8 text; rerun the same command to rebuild it") from None
    if not isinstance(d, dict):
        raise SchemaError(f"{p}: a JSON {type(d).__name__}, not an object; rerun the same command to rebuild it")
    return RunResult.from_dict(d, where=str(p))


def read_run(run_dir: str | Path, *, require_result: bool = True) -> RunDir:
    """Read a run dir through the schema (metrics.json required unless require_result=False)."""
    d = Path(run_dir)
    if not d.is_dir():
        raise SchemaError(f"no such run dir: {d}")
    result = read_result(d) if (require_result or (d / "metrics.json").exists()) else None
    return RunDir(dir=d, result=result, config=read_config(d))


def find_run_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """Every folder holding a metrics.json under the given run or sweep dirs (sorted, unique); shard dirs only when
    named themselves."""
    found: set[Path] = set()
    for p in map(Path, paths):
        if not p.exists():
            raise SchemaError(f"no such run or sweep dir: {p}")
        if (p / "metrics.json").is_file():
            found.add(p.resolve())
        # a shard of a run (shard.json) is found only by its own name: a folder search shows the merged run instead
        found.update(m.parent.resolve() for m in p.rglob("metrics.json")
                     if m.parent.name != "report" and not (m.parent / "shard.json").is_file())
    return sorted(found)
