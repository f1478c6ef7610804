"""The judge dirs of a run dir (docs/judges.md): `<run dir>/judge/<tag>/` holds one judge's records
(samples.jsonl, prompts.jsonl, written by RunStore through the run's loop) and judge.json, what they are. Read them
with `judge_records(run_dir)` (the validity audit, the viewer); the run's own readers see the judge's metrics joined
into its records by store/schema.py `join_judged`."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from recbench.store.runstore import write_json_atomic
from recbench.store.schema import (  # noqa: F401 - the judge records' names, importable from here
    JUDGE_DIR,
    SampleRecord,
    SchemaError,
    judge_tag,
    judged_tag,
    read_run,
)

#: the manifest of a judge dir
MANIFEST = "judge.json"
#: the files of a judge dir a changed judge setup starts again (the response cache still answers what it holds)
RECORD_FILES = ("samples.jsonl", "prompts.jsonl", "errors.jsonl")


@dataclass
class JudgeRecords:
    """One judge dir: its tag, its manifest (judge.json: role, judge, protocol, repeat, identities, rubric, template,
    reference, fingerprint) and its judge records (SampleRecords, docs/judges.md)."""

    tag: str
    manifest: dict[str, Any]
    records: list[SampleRecord] = field(default_factory=list)

    @property
    def role(self) -> str:
        """judge, panel or repeat."""
        return str(self.manifest.get("role") or "")

    @property
    def protocol(self) -> str:
        """The protocol the records were judged with."""
        return str(self.manifest.get("protocol") or "")


def read_manifest(judge_dir: str | Path) -> Optional[dict[str, Any]]:
    """judge.json of a judge dir (None when absent); SchemaError naming it when unreadable."""
    p = Path(judge_dir) / MANIFEST
    if not p.exists():
        return None
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SchemaError(f"{p}: not valid JSON ({type(e).__name__}); rerun the same command to rewrite it") from None
    if not isinstance(d, dict):
        raise SchemaError(f"{p}: not an object; rerun the same command to rewrite it")
    return d


def write_manifest(judge_dir: str | Path, manifest: dict[str, Any]) -> None:
    """judge.json, written atomically."""
    Path(judge_dir).mkdir(parents=True, exist_ok=True)
    write_json_atomic(Path(judge_dir) / MANIFEST, manifest)


def start_again_if_changed(judge_dir: str | Path, fingerprint: str) -> bool:
    """Remove a judge dir's records when its judge.json names another fingerprint (another judge, rubric, template,
    reference or answers): they are judged again, from the cache where it holds the answers. True when removed."""
    old = read_manifest(judge_dir)
    if old is None or old.get("fingerprint") == fingerprint:
        return False
    for name in RECORD_FILES:
        (Path(judge_dir) / name).unlink(missing_ok=True)
    return True


def judge_records(run_dir: str | Path) -> dict[str, JudgeRecords]:
    """Every judge dir of a run dir by tag (sorted): its manifest and records ({} when the run was never judged).
    The judge whose metrics the run's records carry is `judged_tag(read_run(run_dir).config)`."""
    root = Path(run_dir) / JUDGE_DIR
    out: dict[str, JudgeRecords] = {}
    for d in sorted(p for p in root.glob("*") if p.is_dir()) if root.is_dir() else []:
        manifest = read_manifest(d)
        if manifest is None:
            continue
        out[d.name] = JudgeRecords(d.name, manifest, read_run(d, require_result=False).samples())
    return out
