"""Finished reruns: reuse metrics.json when nothing it was computed from has changed (config, code, input files,
run-dir files), so a completed run asked again costs no model load, data load or re-aggregation."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from recbench.store.runstore import RunLock, write_json_atomic

# ---- finished reruns: reuse metrics.json when nothing it was computed from has changed ----------------------
FINISHED_NAME = ".finished.json"


CODE_SUFFIXES = (".py", ".j2", ".yaml", ".yml", ".json")


_MAX_INPUT_FILES = 5000


def _file_id(path: str, content: bool) -> tuple[str, int, Any]:
    """(path, size, mtime_ns), or (path, size, content hash) for small code files whose mtime others may touch."""
    import hashlib

    st = os.stat(path)
    if content:
        with open(path, "rb") as f:
            return (path, st.st_size, hashlib.sha1(f.read()).hexdigest())
    return (path, st.st_size, st.st_mtime_ns)


def _stat_tree(root: Path, out: list[tuple[str, int, Any]], suffixes: tuple[str, ...] = (), content: bool = False) -> bool:
    """The identity (_file_id) of every file under root (a file or a folder); False past _MAX_INPUT_FILES."""
    try:
        if root.is_file():
            out.append(_file_id(str(root), content))
            return True
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
            for name in sorted(filenames):
                if suffixes and not name.endswith(suffixes):
                    continue
                out.append(_file_id(os.path.join(dirpath, name), content))
                if len(out) > _MAX_INPUT_FILES:
                    return False
    except OSError:
        return False
    return True


def code_roots() -> list[Path]:
    """The recbench package, its benchmarks, knowledge graphs and configs (found without importing them)."""
    import importlib.util

    roots = [Path(__file__).resolve().parents[1]]  # the recbench package
    for part in ("recbench.tasks", "recbench.kg", "recbench.conf"):  # top-level folders installed inside it
        spec = importlib.util.find_spec(part)
        roots += [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
    return roots


def path_values(node: Any) -> list[Path]:
    """Every string in a config node that names an existing file or folder (data files of a task)."""
    if isinstance(node, dict):
        return [p for v in node.values() for p in path_values(v)]
    if isinstance(node, (list, tuple)):
        return [p for v in node for p in path_values(v)]
    if isinstance(node, str) and ("/" in node or os.sep in node) and len(node) < 4096:
        p = Path(node)
        return [p] if p.exists() else []
    return []


def inputs_fingerprint(config_text: str, task_node: dict[str, Any]) -> str | None:
    """A hash of everything a finished run's metrics.json is computed from besides its samples: the resolved
    config, the task's data files (size and mtime) and recbench's code (content); None where it cannot be told
    cheaply (more than _MAX_INPUT_FILES files)."""
    import hashlib

    files: list[tuple[str, int, int]] = []
    for root in code_roots():
        if not _stat_tree(root, files, CODE_SUFFIXES, content=True):
            return None
    for p in sorted(set(path_values(task_node))):
        if not _stat_tree(p, files):
            return None
    h = hashlib.sha256(config_text.encode())
    h.update(json.dumps(files).encode())
    return h.hexdigest()


def _file_state(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def _run_state(run_dir: Path, inputs: str) -> dict[str, Any]:
    """What a finished run dir must still look like for its metrics.json to be reused."""
    import hashlib

    metrics = run_dir / "metrics.json"
    return {"inputs": inputs, "samples": _file_state(run_dir / "samples.jsonl"),
            "errors": _file_state(run_dir / "errors.jsonl"), "prompts": _file_state(run_dir / "prompts.jsonl"),
            "config": _file_state(run_dir / "config.yaml"),  # a deleted config.yaml is written again
            "metrics_sha256": hashlib.sha256(metrics.read_bytes()).hexdigest() if metrics.exists() else None}


def mark_finished(run_dir: str | Path, inputs: str | None) -> None:
    """After a complete run: remember the state its metrics.json was computed from (nothing when unknown)."""
    d = Path(run_dir)
    marker = d / FINISHED_NAME
    if inputs is None:
        marker.unlink(missing_ok=True)
        return
    state = _run_state(d, inputs)
    write_json_atomic(marker, state)


def reuse_finished(run_dir: str | Path, inputs: str | None, this_invocation: dict[str, Any],
                   invocation_cost: Any = None) -> dict[str, Any] | None:
    """metrics.json of a complete run whose samples, config, data and code are unchanged, with this invocation's
    counters (nothing ran) written in; None when anything differs (the caller then runs the loop as usual).
    Takes the run-dir lock like a run does."""
    d = Path(run_dir)
    marker = d / FINISHED_NAME
    if inputs is None or not marker.is_file() or not (d / "metrics.json").is_file():
        return None
    lock = RunLock(d)
    lock.acquire()
    try:
        try:
            saved = json.loads(marker.read_text(encoding="utf-8"))
            if saved != _run_state(d, inputs):
                return None
            metrics = json.loads((d / "metrics.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if metrics.get("complete") is not True or metrics.get("run_dir") != str(d):
            return None
        n = int(metrics.get("counts", {}).get("examples", 0))
        metrics["this_invocation"] = {**this_invocation, "examples_total": n, "examples_skipped": n}
        if isinstance(metrics.get("cost"), dict):
            metrics["cost"]["this_invocation"] = invocation_cost
        for block in (metrics.get("extra") or {}).values():  # a pass of its own (the judge's): nothing ran either
            if isinstance(block, dict) and isinstance(block.get("this_invocation"), dict):
                block["this_invocation"] = {k: 0 if isinstance(v, (int, float)) else v
                                            for k, v in block["this_invocation"].items()}
        write_json_atomic(d / "metrics.json", metrics)
        write_json_atomic(marker, _run_state(d, inputs))
        return metrics
    finally:
        lock.release()
