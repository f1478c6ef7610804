"""Shard run dirs (run.shard=I run.shards=N): what a shard records about itself (shard.json), its own response
cache, the checks that N shard dirs are parts of one run, and the files of the merged run dir.

A shard dir is a run dir plus `shard.json` (ShardInfo: its index, the whole selection's size and id hash, its own
example ids, content fingerprints of the task's data files and of recbench's code); a shard writes its own response
cache (`responses.sqlite` in the run dir, seeded from cache.path at its first start; a sweep job's own cache file
under the submitit presets), so no SQLite file is written by two hosts. The merge (recbench/run/merge.py) reads shards through `read_shard`, refuses them with `check_shards` (one ShardError line:
a gap, an overlap, an unfinished shard, or a difference in config, code or data), and writes the merged run dir with
`write_merged`.

What a shard records, the checks that read those records back and the merged dir written from them are one contract
(what makes N shard dirs the parts of one run), kept in one module so the two sides cannot drift.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from recbench.api.errors import CannotRun
from recbench.store.finished import CODE_SUFFIXES, code_roots, path_values
from recbench.store.rundir import unsharded_name
from recbench.store.schema import (
    JOB_FAILED,
    ErrorRecord,
    RunResult,
    SampleRecord,
    SchemaError,
    dedupe_first,
    load_jsonl,
    read_config,
    read_prompts,
)

SHARD_FILE = "shard.json"
CACHE_FILE = "responses.sqlite"  # a shard's own response cache, in its run dir
MERGED_FILE = "merged.json"  # marks a run dir written by a merge (a later merge may replace it)
SHARD_VERSION = 1
#: config keys that may differ between the shards of one run: the shard keys themselves, where caches live, and
#: settings that change how the work is spread, never an answer or a score
IGNORED_KEYS = ("run.shard", "run.shards", "cache.path", "cache.derived_dir", "cache.enabled", "run.progress",
                "run.chunk_size", "model.backend.base_url", "model.backend.concurrency")
_MAX_FILES = 5000


class ShardError(CannotRun):
    """Shard dirs that cannot be merged into one run: one line naming the dirs, what differs and the fix."""


@dataclass
class ShardInfo:
    """shard.json: which part of which selection a shard dir holds, and what it was computed from."""

    shard: int
    shards: int
    selection: int  # examples in the whole run's selection (after limit), over all shards
    selection_sha256: str  # sha256 of the selection's ids, sorted
    ids: list[str] = field(default_factory=list)  # this shard's examples, in selection order
    data: Optional[str] = None  # content fingerprint of the task's data files (None: too many files to hash)
    code: Optional[str] = None  # content fingerprint of recbench's code and configs
    version: int = SHARD_VERSION

    @staticmethod
    def of(shard: int, shards: int, selection: list[Any], own: list[Any], task_node: dict[str, Any]) -> "ShardInfo":
        """The info of shard `shard` of `shards`, given the whole selection's examples and this shard's."""
        return ShardInfo(shard=int(shard), shards=int(shards), selection=len(selection),
                         selection_sha256=ids_sha256(e.id for e in selection), ids=[str(e.id) for e in own],
                         data=data_fingerprint(task_node), code=code_fingerprint())

    @staticmethod
    def read(run_dir: str | Path) -> "ShardInfo":
        """shard.json of a shard dir (SchemaError naming the file when unreadable or of an unknown version)."""
        p = Path(run_dir) / SHARD_FILE
        try:
            d = json.loads(p.read_text(encoding="utf-8"))
            if d.get("version") != SHARD_VERSION:
                raise SchemaError(f"{p}: shard.json version {d.get('version')!r} is not readable by this recbench "
                                  f"(reads {SHARD_VERSION}); rerun the shard with this recbench")
            return ShardInfo(shard=int(d["shard"]), shards=int(d["shards"]), selection=int(d["selection"]),
                             selection_sha256=str(d["selection_sha256"]), ids=[str(x) for x in d["ids"]],
                             data=d.get("data"), code=d.get("code"))
        except FileNotFoundError:
            raise ShardError(f"{Path(run_dir)} is not a shard run dir (no {SHARD_FILE}): shards are runs made with "
                             "run.shard=I run.shards=N") from None
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise SchemaError(f"{p}: not a valid shard.json ({type(e).__name__}: {e}); rerun the shard's command to "
                              "rewrite it") from None

    def write(self, run_dir: str | Path) -> None:
        """Write shard.json (atomic)."""
        from recbench.store.runstore import write_json_atomic

        write_json_atomic(Path(run_dir) / SHARD_FILE, asdict(self))


def ids_sha256(ids: Iterable[Any]) -> str:
    """sha256 of a set of example ids (sorted, one per line): the same selection gives the same hash anywhere."""
    return hashlib.sha256("\n".join(sorted(str(i) for i in ids)).encode("utf-8")).hexdigest()


def _files(root: Path, suffixes: tuple[str, ...] = ()) -> Optional[list[Path]]:
    """The files under root (root itself when a file), sorted; hidden folders and __pycache__ left out; None past
    _MAX_FILES files."""
    if root.is_file():
        return [root]
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
        for name in sorted(filenames):
            if not suffixes or name.endswith(suffixes):
                out.append(Path(dirpath, name))
        if len(out) > _MAX_FILES:
            return None
    return out


def _tree_hash(roots: Iterable[Path], suffixes: tuple[str, ...] = ()) -> Optional[str]:
    """sha256 over every file under the roots: its path relative to its root and the sha256 of its bytes (so a copy
    of the same files elsewhere, or with other modification times, hashes the same); None past _MAX_FILES files."""
    from recbench.api.types import file_sha256

    entries = []
    for root in roots:
        files = _files(root, suffixes)
        if files is None:
            return None
        entries += [[root.name, str(f.relative_to(root)) if f != root else "", file_sha256(f)] for f in files]
    return hashlib.sha256(json.dumps(entries).encode()).hexdigest()


def data_fingerprint(task_node: dict[str, Any]) -> Optional[str]:
    """A content fingerprint of the files and folders the task config names (None past _MAX_FILES files)."""
    return _tree_hash(sorted(set(path_values(task_node))))


def code_fingerprint() -> Optional[str]:
    """A content fingerprint of recbench's code and configs (.py, .j2, .yaml, .json under the package and conf)."""
    return _tree_hash(code_roots(), CODE_SUFFIXES)


def open_shard(run_dir: str | Path, info: ShardInfo, cache_path: str | Path, seed: bool) -> Path:
    """Write a shard's shard.json and give the path of its own cache file: cache.path when it is already this job's
    own (a sweep job under the submitit presets, whose RECBENCH_JOB_CACHE_DIR is per job: conf/hydra/job_cache/
    per_job.yaml), else <run dir>/responses.sqlite, seeded (when `seed`) from cache.path at the shard's first start so
    answers paid for earlier are hits."""
    info.write(run_dir)
    job_dir = os.environ.get("RECBENCH_JOB_CACHE_DIR")
    if job_dir and Path(cache_path).parent.resolve() == Path(job_dir).resolve():
        return Path(cache_path)
    own = Path(run_dir) / CACHE_FILE
    if seed and not own.exists():  # (a run that asks no model needs no copy)
        from recbench.store.cache_tools import seed_copy

        seed_copy(cache_path, own)
    return own


# ---- reading and checking shards ------------------------------------------------------------------------------
@dataclass
class ShardDir:
    """One shard dir as the merge reads it."""

    dir: Path
    info: ShardInfo
    config: dict[str, Any]
    versions: dict[str, Any]
    metrics: Optional[dict[str, Any]]
    records: list[SampleRecord]
    errors: list[ErrorRecord]
    prompts: dict[str, list[dict[str, str]]]

    @property
    def label(self) -> str:
        """'shard I of N (<dir>)'."""
        return f"shard {self.info.shard} of {self.info.shards} ({self.dir})"

    @property
    def cache_file(self) -> Optional[Path]:
        """The shard's own response cache (open_shard): in its run dir, else its cache.path (a sweep job's own file;
        the shared cache itself for a shard run without cache), when the file exists."""
        p = self.dir / CACHE_FILE
        if not p.is_file():
            p = Path(str((self.config.get("cache") or {}).get("path") or p))
        return p if p.is_file() else None


def read_shard(run_dir: str | Path) -> ShardDir:
    """A shard dir's files, read under its run-dir lock (a shard still running raises RunDirInUse)."""
    from recbench.store.runstore import RunLock

    d = Path(run_dir)
    if not d.is_dir():
        raise ShardError(f"no such shard dir: {d}")
    info = ShardInfo.read(d)
    lock = RunLock(d)
    lock.acquire()
    try:
        def json_file(name: str) -> Optional[dict[str, Any]]:
            p = d / name
            if not p.is_file():
                return None
            try:
                return json.loads(p.read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError) as e:
                raise SchemaError(f"{p}: not valid JSON ({e}); rerun the shard's command to rewrite it") from None

        metrics = json_file("metrics.json")
        run = ShardDir(dir=d, info=info, config=read_config(d), versions=json_file("versions.json") or {},
                       metrics=metrics, records=[], errors=[], prompts={})
        if metrics is None:  # not finished (check_shards says so): its files may end in a torn line
            return run
        samples, errors = d / "samples.jsonl", d / "errors.jsonl"
        run.records = dedupe_first(load_jsonl(samples, SampleRecord.from_dict)) if samples.is_file() else []
        run.errors = load_jsonl(errors, ErrorRecord.from_dict) if errors.is_file() else []
        run.prompts = read_prompts(d / "prompts.jsonl")
        return run
    finally:
        lock.release()


def find_shard_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """Shard dirs named directly, or found (a shard.json) under named folders such as a sweep dir; sorted, unique."""
    out: list[Path] = []
    for p in map(Path, paths):
        if not p.exists():
            raise ShardError(f"no such shard dir or folder: {p}")
        if (p / SHARD_FILE).is_file() or not p.is_dir():
            out.append(p)
        else:
            out += sorted(f.parent for f in p.rglob(SHARD_FILE))
    return list(dict.fromkeys(out))


def merged_dir(shard_dir: str | Path) -> Optional[Path]:
    """Where the shards of a shard dir merge by default: the same folder named without run.shard / run.shards (the
    run dir of the same command without them); None when the dir's name does not carry the shard."""
    d = Path(shard_dir)
    name = unsharded_name(d.name)
    return None if name == d.name else d.parent / name


def group_by_merged_dir(dirs: Iterable[Path]) -> dict[Optional[Path], list[Path]]:
    """Shard dirs grouped by the run dir they merge into (merged_dir)."""
    groups: dict[Optional[Path], list[Path]] = {}
    for d in dirs:
        groups.setdefault(merged_dir(d), []).append(d)
    return groups


def _flat(d: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(d, dict):
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: d}


def _ignored(key: str) -> bool:
    return any(key == k or key.startswith(k + ".") for k in IGNORED_KEYS)


def check_shards(shards: list[ShardDir]) -> list[str]:
    """Refuse shard dirs that are not the N parts of one run (ShardError, one line): different shard counts, a
    shard given twice (an overlap), a missing shard (a gap), a shard that has not finished, or shards whose config
    (IGNORED_KEYS aside), code (git commit, package versions) or data (fingerprint, selection) differ. Returns the
    warnings: shards run from one commit with different uncommitted edits (the code fingerprint)."""
    if not shards:
        raise ShardError("no shard dir given: name the shard run dirs (or a folder holding them)")
    first = shards[0]
    n = first.info.shards
    for s in shards[1:]:
        if s.info.shards != n:
            raise ShardError(f"shards of different runs: {first.label} but {s.label}; merge the shards of one "
                             "run.shards=N together")
    seen: dict[int, ShardDir] = {}
    for s in shards:
        if s.info.shard in seen:
            raise ShardError(f"overlapping shards: {seen[s.info.shard].dir} and {s.dir} are both shard "
                             f"{s.info.shard} of {n}; give each shard once")
        seen[s.info.shard] = s
    missing = [i for i in range(n) if i not in seen]
    if missing:
        runs = ", ".join(f"run.shard={i}" for i in missing[:3]) + (", ..." if len(missing) > 3 else "")
        raise ShardError(f"missing shard(s) {', '.join(map(str, missing))} of {n} (shards are numbered 0..{n - 1}; "
                         f"{len(seen)} given): run the same command with run.shards={n} and {runs} (one process each), "
                         f"then merge all {n}")
    for s in shards:
        if s.metrics is None:
            raise ShardError(f"{s.label} has not finished (no metrics.json): rerun its command, which resumes it, "
                             "then merge again")
    base = {k: v for k, v in _flat(first.config).items() if not _ignored(k)}
    for s in shards[1:]:
        other = {k: v for k, v in _flat(s.config).items() if not _ignored(k)}
        diff = [k for k in dict.fromkeys([*base, *other]) if base.get(k, "<unset>") != other.get(k, "<unset>")]
        if diff:
            k = diff[0]
            raise ShardError(f"shards of different configs: {k} is {base.get(k, '<unset>')!r} in {first.label} but "
                             f"{other.get(k, '<unset>')!r} in {s.label}"
                             + (f" (and {len(diff) - 1} more key(s))" if len(diff) > 1 else "")
                             + "; shards merge only when run by one command")
    warnings = []
    for s in shards[1:]:
        for what, a, b in (("git commit", first.versions.get("git_commit"), s.versions.get("git_commit")),
                           ("package versions", first.versions.get("packages"), s.versions.get("packages"))):
            if a != b:
                raise ShardError(f"shards ran different code: {what} differs between {first.label} and {s.label}; "
                                 "rerun the stale shard(s) from the same checkout, then merge")
        if first.info.code != s.info.code and not warnings:
            warnings.append(f"{first.label} and {s.label} ran the same git commit with different uncommitted edits "
                            "to recbench's files (code fingerprint); merged anyway: commit before launching shards, "
                            "or rerun the stale ones")
        ia, ib = first.versions.get("backend_identity"), s.versions.get("backend_identity")
        if ia and ib and ia != ib:
            raise ShardError(f"shards asked different models: backend identity {ia} in {first.label} but {ib} in "
                             f"{s.label}; serve the same model to every shard")
        if (first.info.data, first.info.selection, first.info.selection_sha256) != \
                (s.info.data, s.info.selection, s.info.selection_sha256):
            raise ShardError(f"shards read different data: the task's data files or the examples selected differ "
                             f"between {first.label} and {s.label}; rerun the stale shard(s) on the same data, then "
                             "merge")
    return warnings


# ---- the merged run dir -----------------------------------------------------------------------------------------
def prepare_out(out: Path, shards: list[ShardDir]) -> None:
    """Refuse an --out that is a shard or holds a run not written by a merge; empty one written by an earlier merge."""
    if any(out.resolve() == s.dir.resolve() for s in shards):
        raise ShardError(f"--out {out} is one of the shard dirs; merge into another folder")
    if not out.exists():
        return
    if (out / MERGED_FILE).is_file():
        for name in ("samples.jsonl", "prompts.jsonl", "errors.jsonl", "metrics.json", ".finished.json"):
            (out / name).unlink(missing_ok=True)
    elif (out / "samples.jsonl").exists() or (out / "metrics.json").exists():
        raise ShardError(f"--out {out} already holds a run that is not a merge of shards (samples.jsonl or "
                         "metrics.json); merge into another folder, or move that run away")


def write_merged(out: Path, shards: list[ShardDir], records: list[SampleRecord], config_text: str,
                 result: RunResult, warnings: Optional[list[str]] = None) -> None:
    """The merged run dir: samples (in the given order), every shard's prompts and errors, config.yaml, the first
    shard's versions.json, merged.json (which dirs, when) and metrics.json last (a reader never sees a metrics.json
    without its samples)."""
    import time

    from recbench.store.redact import redact_text
    from recbench.store.runstore import RunLock, RunStore, write_json_atomic

    out.mkdir(parents=True, exist_ok=True)
    lock = RunLock(out)
    lock.acquire()
    try:
        prepare_out(out, shards)
        store = RunStore(out, lock=False)
        try:
            store.write_text("config.yaml", redact_text(config_text))
            for s in shards:
                for key, messages in s.prompts.items():
                    store.add_prompt(key, messages)
            store.append_many(records)
            for s in shards:
                for e in s.errors:
                    store.append_error(e)
            write_json_atomic(out / "versions.json", shards[0].versions)
            write_json_atomic(out / MERGED_FILE, {"shards": len(shards), "dirs": [str(s.dir) for s in shards],
                                                  "created": time.time(), "warnings": list(warnings or [])})
            store.write_result(result)
            (out / JOB_FAILED).unlink(missing_ok=True)  # left by a refused merge at the end of a sweep
        finally:
            store.close()
    finally:
        lock.release()
