"""Sharded runs (run.shard=I run.shards=N) and their merge (python -m recbench.merge): which examples a shard holds
(sha256 of the id, after limit), that the merged metrics.json equals the unsharded run's exactly (a model method
through a scripted backend, a model-free method, a corpus metric, an empty shard), that a shard resumes, and that
shards which are not the parts of one run are refused with one line, exit 2."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from recbench.api.config import validate
from recbench.api.errors import ConfigError
from recbench.cli.merge import main as merge_main
from recbench.run.construct import build_task, select_examples, shard_of, take_shard
from recbench.run.evaluate import run_from_config
from recbench.run.merge import merge_shards
from recbench.store.cache_tools import stats
from recbench.store.runstore import RunLock
from recbench.store.schema import find_run_dirs
from tests.toy import TOY, toy_cfg

pytestmark = pytest.mark.fast

REPO = Path(__file__).resolve().parents[2]
LIMIT = ["limit=20"]
N = 3


def comparable(metrics: dict) -> dict:
    """metrics.json without what differs by design: this invocation's counters and timing, the run dir's path."""
    out = {k: v for k, v in metrics.items() if k not in ("this_invocation", "run_dir")}
    if isinstance(out.get("cost"), dict):
        out["cost"] = {k: v for k, v in out["cost"].items() if k != "this_invocation"}
    return out


def shard_dir(root: Path, i: int, n: int = N) -> Path:
    """Where a shard goes: the run-dir name Hydra gives `run.shard=I run.shards=N`."""
    return root / f"run.shard={i},run.shards={n}"


def run_shards(root: Path, overrides: list[str], cache: Path, n: int = N, **kw) -> list[Path]:
    """Run all n shards of the toy run (each with the shared cache `cache` as its seed) into root."""
    dirs = []
    for i in range(n):
        d = shard_dir(root, i, n)
        run_from_config(toy_cfg([*overrides, f"run.shard={i}", f"run.shards={n}", f"cache.path={cache}"]), d, **kw)
        dirs.append(d)
    return dirs


def merge_cli(capsys, *args) -> tuple[int, list[str]]:
    """python -m recbench.merge in-process: (exit code, its stderr lines)."""
    capsys.readouterr()  # what the runs before it printed
    code = merge_main([str(a) for a in args])
    return code, capsys.readouterr().err.strip().splitlines()


# ---- which examples a shard holds -------------------------------------------------------------------------------
IDS = ["easy-00", "easy-01", "easy-02", "easy-03", "easy-04", "easy-05", "easy-06", "medium-01", "medium-04"]
#: pinned: the first 8 bytes of sha256(id), big-endian, modulo 3
SHARDS_OF_IDS = [0, 1, 1, 1, 1, 1, 0, 2, 2]


def test_shard_of_is_sha256_of_the_id():
    assert [shard_of(i, 3) for i in IDS] == SHARDS_OF_IDS
    assert shard_of("easy-00", 3) == int(hashlib.sha256(b"easy-00").hexdigest()[:16], 16) % 3
    assert [shard_of(i, 1) for i in IDS] == [0] * len(IDS)


@pytest.mark.full
def test_shard_of_is_the_same_in_every_process():
    """Python's hash() of a str changes with PYTHONHASHSEED; the shard does not."""
    code = "from recbench.run.construct import shard_of; print([shard_of(i, 3) for i in %r])" % IDS
    for seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": seed},
                             capture_output=True, text=True, cwd=REPO)
        assert out.stdout.strip() == str(SHARDS_OF_IDS), out.stderr


def test_limit_is_applied_before_sharding():
    cfg = toy_cfg(LIMIT)
    task = build_task(cfg)
    selection = select_examples(task.load(), 20, "stratified", 0, task.breakdown_by)
    parts = [take_shard(selection, i, N) for i in range(N)]
    ids = [[e.id for e in p] for p in parts]
    assert sorted(sum(ids, [])) == sorted(e.id for e in selection)  # the union is the unsharded selection, once each
    assert [len(x) for x in ids] == [6, 12, 2]
    assert all(shard_of(i, N) == k for k, part in enumerate(ids) for i in part)
    assert take_shard(selection, None, 1) == selection


@pytest.mark.parametrize("overrides, message", [
    (["run.shards=3"], "run.shards=3 needs run.shard=I, a whole number in [0, 2]: one shard per process (all of them "
                       "as one sweep: -m 'run.shard=range(3)' run.shards=3)"),
    (["run.shard=3", "run.shards=3"], "run.shard=3: must be a whole number in [0, 2] with run.shards=3 (shards are "
                                      "numbered from 0)"),
    (["run.shard=1"], "run.shard=1: must be a whole number in [0, 0] with run.shards=1 (shards are numbered from 0)"),
    (["run.shard=-1", "run.shards=2"], "run.shard=-1: must be a whole number in [0, 1] with run.shards=2 (shards are "
                                       "numbered from 0)"),
    (["run.shard=0", "run.shards=0"], "run.shards=0: must be a whole number >= 1 (the number of shards; 1 = the whole "
                                      "run)"),
])
def test_shard_keys_are_checked_with_one_line(overrides, message):
    with pytest.raises(ConfigError) as e:
        validate(toy_cfg(overrides))
    assert str(e.value) == message


# ---- the merge equals the unsharded run -------------------------------------------------------------------------
@pytest.mark.parametrize("method", [["method=toy_rank"], ["method=toy_popular", "model=none"]],
                         ids=["model method", "model-free"])
def test_merged_metrics_equal_the_unsharded_run(tmp_path, method):
    overrides = [*LIMIT, *method]
    unsharded = run_from_config(toy_cfg(overrides, tmp_path / "ref"), tmp_path / "unsharded").to_dict()
    shared = tmp_path / "shared.sqlite"
    dirs = run_shards(tmp_path / "runs", overrides, shared)
    for i, d in enumerate(dirs):  # each shard: its own cache file in its run dir; the shared cache is never written
        info = json.loads((d / "shard.json").read_text())
        assert (info["shard"], info["shards"], info["selection"]) == (i, N, 20)
        assert [r["id"] for r in map(json.loads, (d / "samples.jsonl").read_text().splitlines())] == info["ids"]
    assert not shared.exists()
    merged = merge_shards(dirs, out=tmp_path / "merged")
    assert comparable(merged.result.to_dict()) == comparable(unsharded)
    assert comparable(json.loads((tmp_path / "merged" / "metrics.json").read_text())) == comparable(unsharded)
    assert merged.result.counts.examples == 20 and merged.result.complete
    if method[0] == "method=toy_rank":  # a corpus metric (root mean square of toy_miss), over the merged records
        assert merged.result.extra["toy_miss_rms"] == pytest.approx(
            (sum(r["metrics"]["toy_miss"] ** 2 for r in map(json.loads, (tmp_path / "unsharded" / "samples.jsonl")
                                                            .read_text().splitlines())) / 20) ** 0.5)
    # the records: the same prediction and per-example metrics for every example
    recs = {p: {r["id"]: (r["prediction"], r["metrics"]) for r in map(json.loads, (tmp_path / p / "samples.jsonl")
                                                                        .read_text().splitlines())}
            for p in ("unsharded", "merged")}
    assert recs["merged"] == recs["unsharded"] and len(recs["merged"]) == 20
    # the merged config is the run's own, without the shard keys (the cache it was seeded from aside)
    cfgs = [yaml.safe_load((tmp_path / p / "config.yaml").read_text()) for p in ("unsharded", "merged")]
    for c in cfgs:
        c.pop("cache")
    assert cfgs[0] == cfgs[1] and cfgs[1]["run"]["shard"] is None and cfgs[1]["run"]["shards"] == 1
    if method[0] == "method=toy_rank":  # the shards' answers went into the shared cache: 20 prompts, one row each
        assert [s["rows"] for s in merged.cache["sources"]] == [6, 12, 2]
        assert stats(shared)["rows"] == 20
    else:
        assert merged.cache is None or stats(shared)["rows"] == 0


def test_a_shard_starts_from_a_copy_of_the_shared_cache_and_never_writes_it(tmp_path):
    shared = tmp_path / "shared.sqlite"
    run_from_config(toy_cfg([*LIMIT, "limit=8", f"cache.path={shared}"]), tmp_path / "first8")  # pays for 8 answers
    before = shared.stat().st_mtime_ns, stats(shared)["rows"]
    m = run_from_config(toy_cfg([*LIMIT, "run.shard=1", f"run.shards={N}", f"cache.path={shared}"]),
                        shard_dir(tmp_path, 1)).to_dict()
    # shard 1 holds 12 of the 20: 5 of them among the first 8 (answered from the copy), 7 asked now
    assert (m["this_invocation"]["cache_hits"], m["this_invocation"]["backend_calls"]) == (5, 7)
    assert stats(shard_dir(tmp_path, 1) / "responses.sqlite")["rows"] == 8 + 7
    assert (shared.stat().st_mtime_ns, stats(shared)["rows"]) == before


@pytest.mark.full
def test_merge_of_the_bundled_data_equals_the_unsharded_run(tmp_path):
    """The same on recbench's own sample data (the default task): a model-free reference row and a scripted model."""
    from tests.doubles import ScriptedBackend
    from tests.helpers import compose_cfg, listwise_answer

    for method, backend in (("bm25_history", None), ("listwise", ScriptedBackend(listwise_answer))):
        base = [f"method={method}", "limit=12", "run.progress=false"]
        cfg = compose_cfg([*base, f"cache.path={tmp_path / method / 'ref.sqlite'}"])
        unsharded = run_from_config(cfg, tmp_path / method / "unsharded", backend=backend).to_dict()
        dirs = []
        for i in range(N):
            d = shard_dir(tmp_path / method, i)
            run_from_config(compose_cfg([*base, f"run.shard={i}", f"run.shards={N}",
                                         f"cache.path={tmp_path / method / 'shared.sqlite'}"]), d, backend=backend)
            dirs.append(d)
        merged = merge_shards(dirs, out=tmp_path / method / "merged")
        assert comparable(merged.result.to_dict()) == comparable(unsharded), method
        assert merged.result.counts.examples == 12


def test_an_empty_shard_merges(tmp_path):
    overrides = ["limit=2", "method=toy_popular", "model=none"]
    unsharded = run_from_config(toy_cfg(overrides, tmp_path), tmp_path / "unsharded").to_dict()
    dirs = run_shards(tmp_path / "runs", overrides, tmp_path / "shared.sqlite", n=5)
    sizes = [json.loads((d / "metrics.json").read_text())["counts"]["examples"] for d in dirs]
    assert sizes == [1, 0, 1, 0, 0]
    assert comparable(merge_shards(dirs, out=tmp_path / "merged").result.to_dict()) == comparable(unsharded)


def test_a_shard_cut_short_is_refused_then_resumes_and_merges_the_same(tmp_path, capsys):
    unsharded = run_from_config(toy_cfg(LIMIT, tmp_path / "ref"), tmp_path / "unsharded").to_dict()
    dirs = run_shards(tmp_path / "runs", LIMIT, tmp_path / "shared.sqlite")
    cut = dirs[1]  # as a killed process leaves it: 4 whole lines, a torn one, no metrics.json
    lines = (cut / "samples.jsonl").read_text().splitlines(keepends=True)
    (cut / "samples.jsonl").write_text("".join(lines[:4]) + lines[4][:30])
    (cut / "metrics.json").unlink()
    code, err = merge_cli(capsys, *dirs, "--out", tmp_path / "merged")
    assert code == 2 and err == [f"recbench: cannot merge: shard 1 of 3 ({cut}) has not finished (no metrics.json): "
                                 "rerun its command, which resumes it, then merge again"]
    again = run_from_config(toy_cfg([*LIMIT, "run.shard=1", f"run.shards={N}",
                                     f"cache.path={tmp_path / 'shared.sqlite'}"]), cut).to_dict()
    assert again["this_invocation"]["examples_skipped"] == 4 and again["complete"]
    assert again["this_invocation"]["cache_hits"] == 8  # its own cache kept the answers paid before the cut
    code, err = merge_cli(capsys, *dirs, "--out", tmp_path / "merged")
    assert code == 0 and err[-1].startswith("recbench: merged 3 shard(s), 20 example(s), into ")
    assert comparable(json.loads((tmp_path / "merged" / "metrics.json").read_text())) == comparable(unsharded)
    # merging again replaces the earlier merge
    assert merge_cli(capsys, *dirs, "--out", tmp_path / "merged")[0] == 0
    assert len((tmp_path / "merged" / "samples.jsonl").read_text().splitlines()) == 20


def test_default_out_is_the_run_dir_without_shard_keys_and_searches_show_it_not_the_shards(tmp_path, capsys):
    root = tmp_path / "runs" / "toy" / "none" / "toy_popular"
    dirs = [root / f"limit=20,run.shard={i},run.shards={N}" for i in range(N)]
    for i, d in enumerate(dirs):
        run_from_config(toy_cfg([*LIMIT, "method=toy_popular", "model=none", f"run.shard={i}", f"run.shards={N}"],
                                tmp_path), d)
    code, err = merge_cli(capsys, root)  # a folder: searched for shard dirs, each run merged into its own dir
    assert code == 0 and err[-1].startswith(f"recbench: merged 3 shard(s), 20 example(s), into {root / 'limit=20'};")
    assert find_run_dirs([tmp_path / "runs"]) == [(root / "limit=20").resolve()]
    assert find_run_dirs([dirs[0]]) == [dirs[0].resolve()]  # a shard named itself is still readable


# ---- refused: one line, exit 2 ----------------------------------------------------------------------------------
@pytest.fixture
def three(tmp_path) -> list[Path]:
    """The 3 shards of the toy run (model-free)."""
    return run_shards(tmp_path / "runs", [*LIMIT, "method=toy_popular", "model=none"], tmp_path / "shared.sqlite")


def test_a_missing_shard_and_an_overlapping_shard_are_refused(tmp_path, three, capsys):
    out = tmp_path / "merged"
    assert merge_cli(capsys, three[0], three[2], "--out", out) == (2, [
        "recbench: cannot merge: missing shard(s) 1 of 3 (shards are numbered 0..2; 2 given): run the same command "
        "with run.shards=3 and run.shard=1 (one process each), then merge all 3"])
    dup = shutil.copytree(three[1], tmp_path / "again")
    assert merge_cli(capsys, *three, dup, "--out", out) == (2, [
        f"recbench: cannot merge: overlapping shards: {three[1]} and {dup} are both shard 1 of 3; give each shard "
        "once"])
    assert not out.exists()


def test_shards_of_different_runs_are_refused(tmp_path, three, capsys):
    free = [*LIMIT, "method=toy_popular", "model=none"]
    four = run_shards(tmp_path / "four", free, tmp_path / "shared.sqlite", n=4)
    code, err = merge_cli(capsys, three[0], three[1], four[2], "--out", tmp_path / "m")
    assert code == 2 and err == [f"recbench: cannot merge: shards of different runs: shard 0 of 3 ({three[0]}) but "
                                 f"shard 2 of 4 ({four[2]}); merge the shards of one run.shards=N together"]
    other = shard_dir(tmp_path / "seed1", 2)
    run_from_config(toy_cfg([*free, "seed=1", "run.shard=2", f"run.shards={N}"], tmp_path), other)
    code, err = merge_cli(capsys, three[0], three[1], other, "--out", tmp_path / "m")
    assert code == 2 and err == [f"recbench: cannot merge: shards of different configs: seed is 0 in shard 0 of 3 "
                                 f"({three[0]}) but 1 in shard 2 of 3 ({other}) (and 1 more key(s)); shards merge "
                                 "only when run by one command"]  # the other key: sampling.seed (${seed})


def test_shards_of_different_data_or_code_are_refused(tmp_path, capsys):
    data = shutil.copytree(REPO / "tests" / "toy" / "data", tmp_path / "data")
    free = [*LIMIT, "method=toy_popular", "model=none", f"task.data_dir={data}"]
    dirs = run_shards(tmp_path / "runs", free, tmp_path / "shared.sqlite")
    # shard 2 again after a rating in the data file changed (the same examples are selected)
    f = data / "examples.jsonl"
    f.write_text(f.read_text().replace('"score": 2.0}', '"score": 2.5}', 1))
    redo = shard_dir(tmp_path / "redo", 2)
    run_from_config(toy_cfg([*free, "run.shard=2", f"run.shards={N}"], tmp_path), redo)
    code, err = merge_cli(capsys, dirs[0], dirs[1], redo, "--out", tmp_path / "m")
    assert code == 2 and err == [f"recbench: cannot merge: shards read different data: the task's data files or the "
                                 f"examples selected differ between shard 0 of 3 ({dirs[0]}) and shard 2 of 3 ({redo}); "
                                 "rerun the stale shard(s) on the same data, then merge"]
    # another commit (versions.json): refused; the same commit with other uncommitted edits: merged with a warning
    versions = json.loads((dirs[1] / "versions.json").read_text())
    (dirs[1] / "versions.json").write_text(json.dumps({**versions, "git_commit": "0" * 40}))
    code, err = merge_cli(capsys, *dirs, "--out", tmp_path / "m")
    assert code == 2 and err == [f"recbench: cannot merge: shards ran different code: git commit differs between "
                                 f"shard 0 of 3 ({dirs[0]}) and shard 1 of 3 ({dirs[1]}); rerun the stale shard(s) "
                                 "from the same checkout, then merge"]
    (dirs[1] / "versions.json").write_text(json.dumps(versions))
    info = json.loads((dirs[1] / "shard.json").read_text())
    (dirs[1] / "shard.json").write_text(json.dumps({**info, "code": "edited"}))
    f.write_text(f.read_text().replace('"score": 2.5}', '"score": 2.0}', 1))  # the data as the shards read it
    code, err = merge_cli(capsys, *dirs, "--out", tmp_path / "m")
    assert code == 0 and err[0].startswith(f"recbench: warning: shard 0 of 3 ({dirs[0]}) and shard 1 of 3 "
                                           f"({dirs[1]}) ran the same git commit with different uncommitted edits")
    assert json.loads((tmp_path / "m" / "merged.json").read_text())["warnings"] == [err[0][len("recbench: warning: "):]]


def test_a_running_shard_an_occupied_out_and_a_moved_example_are_refused(tmp_path, three, capsys):
    lock = RunLock(three[1])
    lock.acquire()
    try:
        code, err = merge_cli(capsys, *three, "--out", tmp_path / "m")
    finally:
        lock.release()
    assert code == 2 and len(err) == 1 and err[0].startswith(f"recbench: cannot merge: run dir in use by pid {os.getpid()}")
    run_from_config(toy_cfg([*LIMIT, "method=toy_popular", "model=none"], tmp_path), tmp_path / "unsharded")
    assert merge_cli(capsys, *three, "--out", tmp_path / "unsharded") == (2, [
        f"recbench: cannot merge: --out {tmp_path / 'unsharded'} already holds a run that is not a merge of shards "
        "(samples.jsonl or metrics.json); merge into another folder, or move that run away"])
    info = json.loads((three[0] / "shard.json").read_text())
    (three[0] / "shard.json").write_text(json.dumps({**info, "ids": [*info["ids"], "easy-01"]}))
    assert merge_cli(capsys, *three, "--out", tmp_path / "m") == (2, [
        f"recbench: cannot merge: shard 0 of 3 ({three[0]}) lists example 'easy-01', which belongs to shard 1: its "
        "shard.json was edited or written by another recbench; rerun the shard"])
    assert merge_cli(capsys, tmp_path / "unsharded") == (2, [
        f"recbench: cannot merge: no shard dir (a folder with shard.json) in {tmp_path / 'unsharded'}: shards are "
        "runs made with run.shard=I run.shards=N"])


# ---- a sweep of shards merges when it ends ----------------------------------------------------------------------
@pytest.mark.full
def test_a_sweep_of_shards_is_merged_at_its_end_and_a_gap_fails_the_sweep(tmp_path):
    env = {**os.environ, "RECBENCH_RUNS_DIR": str(tmp_path / "runs"), "RECBENCH_CACHE_DIR": str(tmp_path / "cache")}

    def recbench(*args):
        return subprocess.run([sys.executable, "-m", "recbench", *args, *TOY, "method=toy_popular", "model=none",
                               *LIMIT], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)

    single = recbench()
    assert single.returncode == 0, single.stderr[-2000:]
    expected = json.loads((tmp_path / "runs/toy/none/toy_popular/limit=20/metrics.json").read_text())
    swept = recbench("-m", f"run.shard=range({N})", f"run.shards={N}", f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert swept.returncode == 0, swept.stderr[-2000:]
    merged = tmp_path / "sweep/toy/none/toy_popular/limit=20"
    assert comparable(json.loads((merged / "metrics.json").read_text())) == comparable(expected)
    report = (tmp_path / "sweep" / "report" / "runs.csv").read_text()
    assert "limit=20" in report and "run.shard=" not in report  # the report shows the merged run, not its shards
    gap = recbench("-m", "run.shard=0,1", f"run.shards={N}", f"hydra.sweep.dir={tmp_path / 'gap'}")
    assert gap.returncode == 2
    assert ("recbench: cannot merge: missing shard(s) 2 of 3 (shards are numbered 0..2; 2 given): run the same command "
            "with run.shards=3 and run.shard=2 (one process each), then merge all 3") in gap.stderr.splitlines()
    failed = json.loads((tmp_path / "gap/toy/none/toy_popular/limit=20/job_failed.json").read_text())
    assert failed["exit_code"] == 2 and "missing shard(s) 2 of 3" in failed["error"]
