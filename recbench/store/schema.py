"""The typed run schema: what a run dir holds, one writer-side model per file and one reader (`read_run`).

A run dir (see recbench/store/runstore.py for the writer) holds:
- metrics.json  -> RunResult (schema_version, aggregates with CIs, breakdowns, counts, metric_info, ...)
- samples.jsonl -> SampleRecord per finished example, each with its CallRecords (prompts by hash)
- prompts.jsonl -> {key, messages} once per distinct prompt
- errors.jsonl  -> ErrorRecord per example abandoned after a backend error (retried on the next run)
- config.yaml, versions.json; plan.json -> PlanResult (mode=plan)
- job_failed.json -> JobFailed (a sweep job that stopped at run time; written and read only through it)

Version history: 1 = the first layout (no metric_info / cluster_by); 2 = adds metric_info and cluster_by.
Every reader (report, compare, plan, viewers, task reports) goes through `read_run`.

Long because it is the one owner of every run-dir file format (records, results, plans, failed sweep jobs) and of
their reader: one place to version and refuse what it does not know.
"""
from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional

from recbench.store.redact import redact_url

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)


class SchemaError(ValueError):
    """A run dir that cannot be read: names the file and what to do."""


def _known(cls: type, d: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in d.items() if k in names}


def _float(v: Any) -> float:
    return math.nan if v is None else float(v)


# ---- per-example records -----------------------------------------------------------------------------
@dataclass
class CallRecord:
    """One model call of an example: answer text, finish reason, tokens, cache use, prompt hash."""

    key: str
    purpose: str = "answer"
    response: str = ""
    finish_reason: str = "stop"
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: Optional[float] = None
    prompt: Optional[str] = None  # hash of the messages in prompts.jsonl
    error: Optional[str] = None
    messages: Optional[list[dict[str, str]]] = None  # filled by readers that ask for prompts
    endpoint: Optional[str] = None  # the server that answered (several servers for one model), URL secrets masked

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "CallRecord":
        """From a samples.jsonl call entry."""
        return CallRecord(**_known(CallRecord, d))

    def to_dict(self) -> dict[str, Any]:
        """The samples.jsonl form (optional fields only when set; messages never: they live in prompts.jsonl)."""
        out: dict[str, Any] = {"key": self.key, "purpose": self.purpose, "response": self.response,
                               "finish_reason": self.finish_reason, "cached": self.cached,
                               "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}
        if self.latency_s is not None:
            out["latency_s"] = round(self.latency_s, 4)
        if self.prompt is not None:
            out["prompt"] = self.prompt
        if self.error is not None:
            out["error"] = self.error
        if self.endpoint is not None:
            out["endpoint"] = redact_url(self.endpoint)
        return out


@dataclass
class SampleRecord:
    """One finished example: prediction, parse status, per-example metrics (None = undefined), model calls."""

    id: str
    meta: dict[str, Any] = field(default_factory=dict)
    prediction: Any = None
    parse_status: str = "ok"  # ok | repaired | failed
    details: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Optional[float]] = field(default_factory=dict)
    calls: list[CallRecord] = field(default_factory=list)
    truth: Any = None  # what the answer is scored against (Task.truth); None in run dirs written before it existed

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "SampleRecord":
        """From one samples.jsonl line."""
        if "id" not in d:
            raise SchemaError("a samples.jsonl record has no 'id'")
        for key, kind in (("meta", dict), ("details", dict), ("metrics", dict), ("calls", list)):
            if d.get(key) is not None and not isinstance(d[key], kind):
                raise SchemaError(f"'{key}' is a {type(d[key]).__name__}, not a {kind.__name__}")
        return SampleRecord(id=str(d["id"]), meta=d.get("meta") or {}, prediction=d.get("prediction"),
                            parse_status=d.get("parse_status", "ok"), details=d.get("details") or {},
                            metrics=d.get("metrics") or {},
                            calls=[CallRecord.from_dict(c) for c in d.get("calls") or []], truth=d.get("truth"))

    def to_dict(self) -> dict[str, Any]:
        """The samples.jsonl form (`truth` only when the task gives one)."""
        out = {"id": self.id, "meta": self.meta, "prediction": self.prediction, "parse_status": self.parse_status,
               "details": self.details, "metrics": self.metrics, "calls": [c.to_dict() for c in self.calls]}
        if self.truth is not None:
            out["truth"] = self.truth
        return out

    def value(self, metric: str) -> float:
        """A per-example metric as a float (NaN when undefined or absent)."""
        return _float(self.metrics.get(metric))


@dataclass
class ErrorRecord:
    """An example abandoned after a backend error (the next run retries it)."""

    id: str
    error: str
    calls: list[CallRecord] = field(default_factory=list)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "ErrorRecord":
        """From one errors.jsonl line."""
        return ErrorRecord(id=str(d["id"]), error=str(d.get("error", "")),
                           calls=[CallRecord.from_dict(c) for c in d.get("calls") or []])

    def to_dict(self) -> dict[str, Any]:
        """The errors.jsonl form."""
        return {"id": self.id, "error": self.error, "calls": [c.to_dict() for c in self.calls]}


# ---- the run result (metrics.json) --------------------------------------------------------------------
@dataclass
class MetricSummary:
    """A metric over a set of examples: mean, bootstrap CI, defined and undefined counts."""

    mean: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan
    n: int = 0
    n_undefined: int = 0

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "MetricSummary":
        """From metrics.json (None = NaN)."""
        return MetricSummary(mean=_float(d.get("mean")), ci_low=_float(d.get("ci_low")), ci_high=_float(d.get("ci_high")),
                             n=int(d.get("n") or 0), n_undefined=int(d.get("n_undefined") or 0))


@dataclass
class SliceResult:
    """The metrics of one breakdown value (e.g. difficulty=easy)."""

    n: int
    metrics: dict[str, MetricSummary]

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "SliceResult":
        """From metrics.json."""
        return SliceResult(n=int(d.get("n") or 0),
                           metrics={k: MetricSummary.from_dict(v) for k, v in (d.get("metrics") or {}).items()})


@dataclass
class Counts:
    """Example, parse, call and token counts of a run (all its records, not only this invocation)."""

    examples: int = 0
    parsed: int = 0
    parse_ok: int = 0
    parse_repaired: int = 0
    parse_failed: int = 0
    parse_failure_rate: Optional[float] = None
    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    backend_errors: int = 0
    finish_length: int = 0  # answers cut by the token limit

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "Counts":
        """From metrics.json."""
        return Counts(**_known(Counts, d))


@dataclass
class RunResult:
    """metrics.json: what a run measured, typed."""

    task: dict[str, Any]
    model: str
    method: str
    headline_metric: str
    metrics: dict[str, MetricSummary]
    breakdown: dict[str, dict[str, SliceResult]] = field(default_factory=dict)
    counts: Counts = field(default_factory=Counts)
    extra: dict[str, Any] = field(default_factory=dict)
    complete: bool = False
    run_dir: str = ""
    this_invocation: dict[str, Any] = field(default_factory=dict)
    cost: Optional[dict[str, Any]] = None
    metric_info: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> direction, binary, aggregation
    cluster_by: Optional[str] = None  # example-meta key of the resampling unit; None = the example
    schema_version: int = SCHEMA_VERSION

    @property
    def task_name(self) -> str:
        """The task's name."""
        return str(self.task.get("name", ""))

    @staticmethod
    def from_dict(d: dict[str, Any], where: str = "metrics.json") -> "RunResult":
        """From metrics.json content; refuses versions this reader does not know, naming the file."""
        v = d.get("schema_version")
        if v not in READABLE_VERSIONS:
            raise SchemaError(f"{where}: schema_version {v!r} is not readable by this recbench (reads "
                              f"{', '.join(map(str, READABLE_VERSIONS))}); upgrade recbench, or rerun the same command "
                              "to rebuild metrics.json from samples.jsonl")
        try:
            return RunResult(
                task=dict(d["task"]), model=str(d.get("model", "none")), method=str(d["method"]),
                headline_metric=str(d.get("headline_metric", "")),
                metrics={k: MetricSummary.from_dict(s) for k, s in (d.get("metrics") or {}).items()},
                breakdown={key: {val: SliceResult.from_dict(b) for val, b in vals.items()}
                           for key, vals in (d.get("breakdown") or {}).items()},
                counts=Counts.from_dict(d.get("counts") or {}), extra=d.get("extra") or {},
                complete=bool(d.get("complete", False)), run_dir=str(d.get("run_dir", "")),
                this_invocation=d.get("this_invocation") or {}, cost=d.get("cost"),
                metric_info=d.get("metric_info") or {}, cluster_by=d.get("cluster_by"), schema_version=int(v))
        except (KeyError, TypeError, ValueError) as e:
            raise SchemaError(f"{where}: malformed ({type(e).__name__}: {e}); rerun the same command to rebuild it") from e

    def to_dict(self) -> dict[str, Any]:
        """The metrics.json form (schema_version first)."""
        d = asdict(self)
        return {"schema_version": SCHEMA_VERSION, **{k: v for k, v in d.items() if k != "schema_version"}}


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


# ---- plan.json -------------------------------------------------------------------------------------------
@dataclass
class PlanResult:
    """plan.json (mode=plan): requests, tokens, cached share, context overflows and cost, without calling a model."""

    task: str
    model: str
    method: str
    examples: int
    already_finished: int
    requests: int = 0
    requests_exact: bool = True
    unique_requests: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    prompt_tokens_uncached: int = 0
    max_prompt_tokens: int = 0
    max_completion_tokens: int = 0
    over_context: int = 0
    context_length: Optional[int] = None
    tokenizer: str = "none"
    cost: Optional[dict[str, Any]] = None
    cost_uncached: Optional[dict[str, Any]] = None
    power: Optional[dict[str, Any]] = None
    notes: list[str] = field(default_factory=list)

    @property
    def cached_share(self) -> Optional[float]:
        """Share of the unique requests already in the response cache."""
        return self.cached / self.unique_requests if self.unique_requests else None

    def to_dict(self) -> dict[str, Any]:
        """The plan.json form."""
        return {"schema_version": SCHEMA_VERSION, **asdict(self), "cached_share": self.cached_share}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "PlanResult":
        """From plan.json."""
        return PlanResult(**_known(PlanResult, d))


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
    for no, d in _numbered_jsonl(path):
        try:
            out.append(parse(d))
        except SchemaError as e:
            raise SchemaError(f"{path}:{no}: {e}; {_LINE_FIX}") from None
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise SchemaError(f"{path}:{no}: not a valid record ({type(e).__name__}: {e}); {_LINE_FIX}") from None
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


@dataclass
class Run:
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
                return uniq
            self._samples = uniq
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


def read_run(run_dir: str | Path, *, require_result: bool = True) -> Run:
    """Read a run dir through the schema (metrics.json required unless require_result=False)."""
    d = Path(run_dir)
    if not d.is_dir():
        raise SchemaError(f"no such run dir: {d}")
    result = read_result(d) if (require_result or (d / "metrics.json").exists()) else None
    return Run(dir=d, result=result, config=read_config(d))


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
