"""One run split into 3 shards, launched as one multirun through submitit's local executor (separate processes, laid
out as a SLURM job array: hydra/launcher=slurm differs only in the executor) and merged when the sweep ends: the
merged metrics.json equals the unsharded run's; a shard SIGKILLed in the middle is relaunched by the same command,
resumes, and the merge is still identical; a missing and an overlapping shard are each refused with one line."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="pip install -e '.[dev]' (hydra-submitit-launcher)")

from recbench.store.cache_tools import stats  # noqa: E402
from recbench.store.rundir import unsharded_name  # noqa: E402
from tests.toy import TOY  # noqa: E402
from tests.toy.scripted import ToyBackend  # noqa: E402

pytestmark = pytest.mark.full

REPO = Path(__file__).resolve().parents[2]
LIMIT = 24
SHARDS = 3
KILL_AFTER = 3
BACKEND = "tests.catalogue.test_submitit_shards.KilledOnceBackend"  # imported by the job processes


class KilledOnceBackend(ToyBackend):
    """The toy's scripted model, except that the first process to have answered `kill_after` requests SIGKILLs itself
    (once: it claims `marker` first), as a node failure would; its identity is the toy model's."""

    def __init__(self, marker: str, kill_after: int, **kw):
        super().__init__(**kw)
        self.marker, self.kill_after = marker, kill_after

    def generate(self, requests):
        if self.calls >= self.kill_after:
            try:
                os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL))  # exactly one process claims the kill
            except FileExistsError:
                pass
            else:
                os.kill(os.getpid(), signal.SIGKILL)
        return super().generate(requests)


def recbench(tmp: Path, *args: str, module: str = "recbench") -> subprocess.CompletedProcess:
    env = {**os.environ, "RECBENCH_RUNS_DIR": str(tmp / "runs"), "RECBENCH_CACHE_DIR": str(tmp / "shared")}
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=540)


def comparable(metrics: dict) -> dict:
    """metrics.json without what differs by design: this invocation's counters and timing, the run dir's path."""
    return {k: v for k, v in metrics.items() if k not in ("this_invocation", "run_dir")}


def test_three_shards_through_submitit_local_merge_to_the_unsharded_run(tmp_path):
    # the unsharded run, with a cache of its own: the shards must ask the model themselves
    ref = recbench(tmp_path, *TOY, f"limit={LIMIT}", f"hydra.run.dir={tmp_path / 'unsharded'}",
                   f"cache.path={tmp_path / 'ref.sqlite'}")
    assert ref.returncode == 0, ref.stderr[-3000:]
    expected = json.loads((tmp_path / "unsharded" / "metrics.json").read_text())

    marker = tmp_path / "killed"
    sweep = tmp_path / "runs" / "sweep"
    cmd = ["-m", "hydra/launcher=submitit_local", *TOY, f"limit={LIMIT}", f"run.shard=range({SHARDS})",
           f"run.shards={SHARDS}", f"model.backend._target_={BACKEND}",
           f"+model.backend.marker={marker}", f"+model.backend.kill_after={KILL_AFTER}", "model.backend.batch_size=1",
           f"hydra.sweep.dir={sweep}"]
    first = recbench(tmp_path, *cmd)
    # one job died: one line saying so, exit 3 (rerun the same command), nothing merged, no traceback
    assert marker.exists() and first.returncode == 3, first.stderr[-3000:]
    assert "Traceback" not in first.stderr
    assert [ln for ln in first.stderr.splitlines() if ln.startswith("recbench:")][-1].startswith(
        "recbench: a sweep job died outside recbench")
    shard_dirs = sorted(p.parent for p in sweep.rglob("shard.json"))
    assert len(shard_dirs) == SHARDS
    killed = [d for d in shard_dirs if not (d / "metrics.json").exists()]
    assert len(killed) == 1
    kept = len((killed[0] / "samples.jsonl").read_text().splitlines())
    assert kept == KILL_AFTER  # what it finished before the kill is on disk
    merged_dir = shard_dirs[0].parent / unsharded_name(shard_dirs[0].name)  # the same overrides, no shard keys
    assert not (merged_dir / "metrics.json").exists()

    again = recbench(tmp_path, *cmd)  # the same command: the killed shard resumes, the others are finished reruns
    assert again.returncode == 0, again.stderr[-3000:]
    resumed = json.loads((killed[0] / "metrics.json").read_text())
    assert resumed["this_invocation"]["examples_skipped"] == kept and resumed["complete"]
    merged = json.loads((merged_dir / "metrics.json").read_text())
    assert comparable(merged) == comparable(expected)
    assert merged["counts"]["examples"] == LIMIT and merged["this_invocation"]["merged_shards"] == SHARDS
    assert "recbench: merged 3 shard(s), 24 example(s)" in again.stderr
    # each shard job wrote its own cache file (the per-job one under the sweep dir), none in its run dir
    assert not any((d / "responses.sqlite").exists() for d in shard_dirs)
    assert sorted(stats(p)["rows"] for p in (sweep / "caches").glob("job*/responses.sqlite")) == [3, 6, 15]
    # the shards' own caches were merged into the shared cache: the unsharded command into a new dir asks nothing
    rerun = recbench(tmp_path, *TOY, f"limit={LIMIT}", f"hydra.run.dir={tmp_path / 'from_cache'}")
    assert rerun.returncode == 0
    assert json.loads((tmp_path / "from_cache" / "metrics.json").read_text())["this_invocation"]["backend_calls"] == 0

    # a missing shard, and a shard given twice: each one line, exit 2
    gap = recbench(tmp_path, *map(str, shard_dirs[:2]), "--out", str(tmp_path / "m1"), module="recbench.merge")
    assert gap.returncode == 2 and gap.stderr.strip().splitlines() == [
        "recbench: cannot merge: missing shard(s) 2 of 3 (shards are numbered 0..2; 2 given): run the same command "
        "with run.shards=3 and run.shard=2 (one process each), then merge all 3"]
    dup = tmp_path / "copy_of_shard_1"
    shutil.copytree(shard_dirs[1], dup)
    overlap = recbench(tmp_path, *map(str, shard_dirs), str(dup), "--out", str(tmp_path / "m2"), module="recbench.merge")
    assert overlap.returncode == 2 and overlap.stderr.strip().splitlines() == [
        f"recbench: cannot merge: overlapping shards: {shard_dirs[1]} and {dup} are both shard 1 of 3; give each "
        "shard once"]
    assert not (tmp_path / "m1").exists() and not (tmp_path / "m2").exists()
