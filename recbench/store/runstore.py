"""The run directory's writer: samples.jsonl (appended per finished example), prompts, errors, metrics.json,
config and versions, under an OS lock so one run dir has one writer. Readers use recbench.store.schema.read_run."""
from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import socket
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from recbench.store.diskspace import DiskFull, disk_full, is_full, writing  # noqa: F401 - DiskFull: what a failed write raises
from recbench.store.schema import (
    ErrorRecord,
    PlanResult,
    RunResult,
    SampleRecord,
    dedupe_first,
    load_jsonl,
    read_prompts,
)
from recbench.store.versions import git_commit, package_versions

LOCK_NAME = ".recbench.lock"
#: the advice of a full-disk error under a run dir
RUNDIR_FIX = ("write the runs elsewhere (RECBENCH_RUNS_DIR=... or hydra.run.dir=...); finished examples are kept and "
              "the same command goes on")


class RunDirInUse(RuntimeError):
    """Another live process holds the run dir."""


def _json_default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, (set, tuple)):
        return list(o)
    return str(o)


def clean_nan(obj: Any) -> Any:
    """Replace NaN/inf by None so the JSON is standard (missing stays missing, never zero)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: clean_nan(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean_nan(v) for v in obj]
    return obj


#: the encoders json.dumps(obj, default=_json_default, ensure_ascii=False[, allow_nan=False]) builds on every call,
#: built once (an encoder keeps no state between calls: the same text)
_STRICT = json.JSONEncoder(ensure_ascii=False, allow_nan=False, default=_json_default)
_LENIENT = json.JSONEncoder(ensure_ascii=False, default=_json_default)


def dumps_line(obj: Any) -> str:
    """One JSON line (NaN -> null), the form of every *.jsonl file in a run dir."""
    try:  # most records hold no NaN: one pass without the copy (same text: tuples are written as lists either way)
        return _STRICT.encode(obj) + "\n"
    except ValueError:
        return _LENIENT.encode(clean_nan(obj)) + "\n"


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write JSON via a temp file and rename, so readers never see half a file (no temp file is left on failure;
    a full disk raises DiskFull)."""
    text = json.dumps(clean_nan(obj), indent=2, default=_json_default, allow_nan=False)  # refused before any write
    write_text_atomic(path, text)


def write_text_atomic(path: Path, text: str) -> None:
    """Write text via a temp file and rename; on any failure the temp file is removed and the old file kept."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with writing(path, "", RUNDIR_FIX, tmp=tmp):
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)


def repair_tail(path: Path) -> int:
    """Cut a torn last line (left by a killed process) off a JSON-lines file, saving the torn bytes beside it
    (`<name>.torn-<time>`); returns the number of bytes moved."""
    if not path.exists() or path.stat().st_size == 0:
        return 0
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - 1))
        if f.read(1) == b"\n":
            return 0
    data = path.read_bytes()
    keep = data.rfind(b"\n") + 1
    torn = data[keep:]
    path.with_name(f"{path.name}.torn-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}").write_bytes(torn)
    with open(path, "r+b") as f:
        f.truncate(keep)
    return len(torn)


class RunLock:
    """An OS file lock on a run dir (filelock): released by the OS when the holder dies, so it never goes stale."""

    def __init__(self, run_dir: Path):
        from filelock import FileLock, Timeout

        self._timeout = Timeout
        self.path = run_dir / LOCK_NAME
        self.owner_path = run_dir / (LOCK_NAME + ".owner")
        self._lock = FileLock(str(self.path), timeout=0)

    def acquire(self) -> None:
        """Take the lock or raise RunDirInUse naming the holder's pid and host."""
        try:
            self._lock.acquire()
        except self._timeout:
            owner = {}
            try:
                owner = json.loads(self.owner_path.read_text())
            except (OSError, ValueError):
                pass
            raise RunDirInUse(f"run dir in use by pid {owner.get('pid', '?')} (host {owner.get('host', '?')}): "
                              f"{self.path.parent}. Wait for that run to finish, or stop it; a lock left by a killed "
                              "process is released by the OS and never blocks") from None
        try:
            with writing(self.owner_path, "", RUNDIR_FIX):
                self.owner_path.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                                       "since": time.time()}))
        except BaseException:
            self._lock.release()
            raise

    def release(self) -> None:
        """Release the lock (idempotent)."""
        if self._lock.is_locked:
            self.owner_path.unlink(missing_ok=True)
            self._lock.release()


class RunStore:
    """Append-only per-example records and the run's summary files; the one writer of a run dir."""

    def __init__(self, run_dir: str | Path, *, lock: bool = True):
        self.dir = Path(run_dir)
        with writing(self.dir, "the run dir", RUNDIR_FIX):
            self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = RunLock(self.dir) if lock else None
        if self._lock:
            self._lock.acquire()
        self.samples_path = self.dir / "samples.jsonl"
        self.errors_path = self.dir / "errors.jsonl"
        self.prompts_path = self.dir / "prompts.jsonl"
        self.metrics_path = self.dir / "metrics.json"
        try:
            with writing(self.dir, "the run dir", RUNDIR_FIX):
                self.repaired_bytes = repair_tail(self.prompts_path) + repair_tail(self.samples_path)
            self._prompt_keys: set[str] = set(read_prompts(self.prompts_path))
            recs = load_jsonl(self.samples_path, SampleRecord.from_dict) if self.samples_path.exists() else []
        except BaseException:
            self.close()
            raise
        self.duplicates = len(recs) - len(uniq := dedupe_first(recs))
        self._records = uniq
        self._ids = {r.id for r in uniq}
        self._prompts = open(self.prompts_path, "a", encoding="utf-8")
        self._samples = open(self.samples_path, "a", encoding="utf-8")

    def records(self) -> list[SampleRecord]:
        """All finished-example records so far (unique ids, first wins)."""
        return list(self._records)

    def finished_ids(self) -> set[str]:
        """Ids of examples already finished in this run dir."""
        return set(self._ids)

    def append(self, record: SampleRecord) -> None:
        """Append one finished example and flush (survives SIGKILL of this process)."""
        self.append_many([record])

    def append_many(self, records: Iterable[SampleRecord]) -> None:
        """Append finished examples in one write, prompts first (a sample never refers to a prompt not on disk)."""
        lines, new, ids = [], [], set()
        for r in records:
            if r.id in self._ids or r.id in ids:
                continue
            ids.add(r.id)
            new.append(r)
            lines.append(dumps_line(r.to_dict()))
        if lines:
            with writing(self.prompts_path, "", RUNDIR_FIX):
                self._prompts.flush()
            with writing(self.samples_path, "", RUNDIR_FIX):
                self._samples.write("".join(lines))
                self._samples.flush()
            self._ids |= ids  # finished only once on disk
            self._records += new

    def add_prompt(self, key: str, messages: Optional[list[dict[str, str]]],
                   line: Optional[Callable[[], str]] = None) -> None:
        """Record a prompt once (samples.jsonl refers to it by key); `line`, when given, writes its prompts.jsonl line
        (the JSON of {"key", "messages"}) without encoding the messages again (`messages` may then be None)."""
        if key not in self._prompt_keys:
            self._prompt_keys.add(key)
            try:  # as `with writing(...)`, without its cost per prompt
                text = line() if line is not None else json.dumps({"key": key, "messages": messages}, ensure_ascii=False)
                self._prompts.write(text + "\n")
            except BaseException as e:
                if is_full(e):
                    raise disk_full(self.prompts_path, "", RUNDIR_FIX) from None
                raise

    def missing_prompts(self) -> dict[str, str]:
        """{prompt hash: call key prefix} of the calls in samples.jsonl whose prompt is not in prompts.jsonl (the
        file was deleted or cut short): what restore_prompts can look up in the response cache."""
        out: dict[str, str] = {}
        for r in self._records:
            for c in r.calls:
                if c.prompt and c.prompt not in self._prompt_keys and c.key:
                    out.setdefault(c.prompt, c.key)
        return out

    def append_error(self, record: ErrorRecord) -> None:
        """Record an example abandoned because of a backend error (retried on the next run)."""
        with writing(self.errors_path, "", RUNDIR_FIX):
            with open(self.errors_path, "a", encoding="utf-8") as f:
                f.write(dumps_line(record.to_dict()))

    def write_result(self, result: RunResult) -> None:
        """metrics.json (typed, with the schema version)."""
        write_json_atomic(self.metrics_path, result.to_dict())

    def write_plan(self, plan: PlanResult) -> None:
        """plan.json (mode=plan)."""
        write_json_atomic(self.dir / "plan.json", plan.to_dict())

    def write_text(self, name: str, text: str) -> None:
        """A small text file in the run dir (atomic: a failed write keeps the old file and leaves no temp file)."""
        write_text_atomic(self.dir / name, text)

    def write_versions(self, extra: dict[str, Any] | None = None) -> None:
        """versions.json: python, platform, key package versions, the git commit of the checkout."""
        write_json_atomic(
            self.dir / "versions.json",
            {"python": sys.version.split()[0], "platform": platform.platform(), "packages": package_versions(),
             "git_commit": git_commit(), **(extra or {})},
        )

    def close(self) -> None:
        """Close the files and release the run-dir lock (always released; a full disk met while flushing the
        last buffered lines raises DiskFull after that)."""
        failed: Optional[BaseException] = None
        for f in (getattr(self, "_samples", None), getattr(self, "_prompts", None)):
            if f is not None and not f.closed:
                try:
                    with writing(f.name, "", RUNDIR_FIX):
                        f.close()
                except DiskFull as e:
                    failed = failed or e
                    with contextlib.suppress(OSError):
                        f.close()  # the buffer is dropped; a torn last line is repaired on the next run
        if self._lock:
            self._lock.release()
        if failed is not None:
            raise failed


def restore_prompts(store: RunStore, cache: Any) -> tuple[int, int]:
    """Write back to prompts.jsonl the prompts that finished examples refer to but the file lacks (deleted or cut
    short), from the requests the response cache holds under the calls' keys; a prompt is written only when its
    hash matches. Returns (restored, still missing)."""
    from recbench.store.response_cache import messages_hash

    missing = store.missing_prompts()
    if not missing:
        return 0, 0
    found = cache.requests_by_prefix(list(missing.values()))
    restored = 0
    for h, prefix in missing.items():
        messages = (found.get(prefix) or {}).get("messages")
        try:
            ok = isinstance(messages, list) and messages_hash(messages) == h
        except (KeyError, TypeError):
            ok = False
        if ok:
            store.add_prompt(h, messages)
            restored += 1
    if restored:
        with writing(store.prompts_path, "", RUNDIR_FIX):
            store._prompts.flush()
    return restored, len(missing) - restored
