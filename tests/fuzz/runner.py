"""Runs `python -m recbench ...` in this process (no interpreter start-up per case: the suite stays in minutes) and
takes the snapshots the fuzz suite compares: every file under a case's folder by name, size and sha256."""
from __future__ import annotations

import functools
import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from tests.helpers import CliResult as Result
from tests.helpers import run_cli as invoke  # `python -m recbench ...` in this process

__all__ = ["Result", "invoke"]

#: environment that would point a case at files outside its own folder
_FOREIGN_ENV = ("RECBENCH_OPENAI_BASE_URL", "RECBENCH_JOB_CACHE_DIR", "PERREC_RELEASED", "OPENAI_API_KEY")


@dataclass
class Ctx:
    """A case's folder: data copy, runs dir, cache dir, the stub server's URL, and a way to run recbench again."""

    tmp: Path
    url: str = "http://127.0.0.1:9/v1"
    stub: Any = None
    invoke: Callable[..., Result] = field(default=lambda *a: None)  # type: ignore[assignment]
    saved: dict[str, Any] = field(default_factory=dict)  # what a planter keeps for its check
    cleanup: list[Callable[[], Any]] = field(default_factory=list)  # run when the case ends

    @property
    def data(self) -> Path:
        return self.tmp / "data"

    @property
    def runs(self) -> Path:
        return self.tmp / "runs"

    @property
    def cache(self) -> Path:
        return self.tmp / "cache"

    def run_dir(self) -> Path:
        """The one run dir under runs/ (the folder holding config.yaml)."""
        dirs = [p.parent for p in self.runs.rglob("config.yaml") if p.parent.name != ".hydra"]
        assert len(dirs) == 1, dirs
        return dirs[0]

    def expand(self, args: tuple[str, ...]) -> list[str]:
        """The overrides with {data}, {url} and {tmp} filled in."""
        return [a.format(data=self.data, url=self.url, tmp=self.tmp) for a in args]


def isolate(monkeypatch: Any, tmp: Path) -> None:
    """Point recbench's runs and cache dirs into the case's folder, run from there, no Hydra traceback noise."""
    for k in _FOREIGN_ENV:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("RECBENCH_RUNS_DIR", str(tmp / "runs"))
    monkeypatch.setenv("RECBENCH_CACHE_DIR", str(tmp / "cache"))
    monkeypatch.setenv("HYDRA_FULL_ERROR", "0")
    monkeypatch.chdir(tmp)


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under root: relative path -> ('dir',) | ('link', target) | ('file', size, sha256)."""
    out: dict[str, tuple] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = ("link", os.readlink(p))
        elif p.is_dir():
            out[rel] = ("dir",)
        elif p.is_file():
            data = p.read_bytes()
            out[rel] = ("file", len(data), hashlib.sha256(data).hexdigest())
    return out


def diff(before: dict[str, tuple], after: dict[str, tuple]) -> list[str]:
    """What changed between two snapshots, one line per path."""
    return ([f"new {k}" for k in sorted(set(after) - set(before))] +
            [f"gone {k}" for k in sorted(set(before) - set(after))] +
            [f"changed {k}" for k in sorted(set(before) & set(after)) if before[k] != after[k]])


def copy_data(name: str, dest: Path) -> None:
    """A copy of a bundled data set ('perrec_sample', 'llmrec_sample/p5', ...), or of the released PerRecBench
    layout built from the bundled sample ('perrec_released'), at dest."""
    from recbench.run.construct import bundled_data

    src = _released() if name == "perrec_released" else Path(bundled_data(name))
    shutil.copytree(src, dest)


@functools.lru_cache(maxsize=1)
def _released() -> Path:
    """The bundled PerRecBench sample written once in the released layout (a session-wide temp folder)."""
    import pandas as pd

    from recbench.run.construct import bundled_data
    from recbench.tasks.perrec.data import load_examples
    from recbench.tasks.perrec.released import write_released

    src = Path(bundled_data("perrec_sample"))
    out = Path(tempfile.mkdtemp(prefix="recbench-fuzz-released-")) / "released"
    test = list(load_examples(str(src), 4, 200))
    ratings = pd.read_csv(src / "ratings.csv.gz")
    items = pd.read_json(src / "items.jsonl", lines=True, dtype=False)
    return write_released(out, test, [], ratings, items)


def start_server(mode: Optional[str]) -> Any:
    """A stub OpenAI server for a case: None (none), 'ok', 'flaky' (30% faults of every retryable kind), 'auth'
    (wants a key the case does not send), 'garbage' (answers no parser reads), or one fault on every attempt."""
    from recbench.testing.openai_stub import FLAKY_FAULTS, StubServer, rate_schedule

    if mode is None or mode == "down":
        return None
    if mode == "ok":
        return StubServer().start()
    if mode == "flaky":
        return StubServer(schedule=rate_schedule(0.3, FLAKY_FAULTS), retry_after_s=0.05, slow_s=1.0).start()
    if mode == "auth":
        return StubServer(expected_key="sk-fuzz-right-key").start()
    if mode == "null-once":
        return StubServer(schedule=lambda key, attempt: "null" if attempt == 1 else None).start()
    if mode == "garbage":
        return StubServer(answer_fn=lambda messages: "I cannot rank people.").start()
    return StubServer(schedule=lambda key, attempt: mode, retry_after_s=0.05, slow_s=1.0).start()
