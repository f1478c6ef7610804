"""The command line: reference rows end to end, config errors that list valid choices."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def cli(*args, cwd, env_extra=None):
    env = {**os.environ, "RECBENCH_RUNS_DIR": str(cwd / "runs"), "RECBENCH_CACHE_DIR": str(cwd / "cache")}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "recbench", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def test_reference_rows_bm25_history_beats_random(tmp_path):
    r1 = cli("task=perrec", "method=random", cwd=tmp_path)
    r2 = cli("task=perrec", "method=bm25_history", cwd=tmp_path)
    assert r1.returncode == 0 and r2.returncode == 0, r1.stderr + r2.stderr
    rnd = json.loads((tmp_path / "runs/perrec/none/random/default/metrics.json").read_text())
    bm = json.loads((tmp_path / "runs/perrec/none/bm25_history/default/metrics.json").read_text())
    assert rnd["counts"]["examples"] == bm["counts"]["examples"] == 120
    # the synthetic data plants taste structure: the personalization baseline is clearly above random
    assert bm["metrics"]["ptc"]["ci_low"] > rnd["metrics"]["ptc"]["ci_high"]
    assert bm["metrics"]["ptc"]["mean"] > 0.4 and abs(rnd["metrics"]["ptc"]["mean"]) < 0.2
    assert "ptc" in r2.stdout and "parse failures" in r2.stdout


def test_multirun_sweeps_methods(tmp_path):
    r = cli("-m", "task=perrec", "method=random,bm25_history", "limit=5", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    found = sorted(p.parent.parent.name for p in (tmp_path / "runs" / "sweeps").rglob("metrics.json"))
    assert found == ["bm25_history", "random"]


@pytest.mark.parametrize("arg,expect", [
    ("method=listwse", ["Did you mean 'listwise'", "pairwise", "pointwise"]),
    ("task=perec", ["Did you mean 'perrec'", "Valid choices for task"]),
    ("model=smolm2", ["Did you mean 'smollm2'"]),
    ("limt=3", ["Unknown config key 'limt'", "Did you mean 'limit'"]),
    ("task.retrieval=2", ["Did you mean 'retrieval_k'", "legacy_tau"]),
])
def test_config_errors_list_valid_choices(tmp_path, arg, expect):
    r = cli(arg, cwd=tmp_path)
    assert r.returncode == 2
    for e in expect:
        assert e in r.stderr, r.stderr


def test_bad_data_dir_names_the_file_and_fix(tmp_path):
    r = cli("method=random", f"task.data_dir={tmp_path / 'nope'}", cwd=tmp_path)
    assert r.returncode != 0
    assert "nope/items.jsonl" in r.stderr and "Fix:" in r.stderr
