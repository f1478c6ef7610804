"""Frozen candidate files: hash-checked on load, never resampled, deterministic to freeze, valid negatives."""
from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from recbench.run.construct import bundled_data
from recbench.tasks.llmrec.candidates import CandidateFileError, freeze, load_candidates
from recbench.tasks.llmrec.data import load_p5

from tests.llmrec.llmrec_helpers import compose_cfg

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("kind", ["sequential", "direct"])
def test_bundled_candidates_match_recorded_hash_and_are_valid(kind):
    cfg = compose_cfg(f"task=llmrec_{kind}")
    data = load_p5(cfg.task.data_dir)
    cands = load_candidates(cfg.task.candidates.path, cfg.task.candidates.sha256, data)
    assert set(cands) == set(data.sequences)
    for u, rec in cands.items():
        c = rec["candidates"]
        assert len(c) == 100 and len(set(c)) == 100
        assert rec["target"] == data.sequences[u][-1]
        negatives = set(c) - {rec["target"]}
        assert len(negatives) == 99 and not negatives & set(data.sequences[u])  # never interacted
    positions = {rec["candidates"].index(rec["target"]) for rec in cands.values()}
    assert len(positions) > 50  # shuffled: the positive's position carries no signal


def test_refreezing_reproduces_the_recorded_hash(tmp_path):
    cfg = compose_cfg("task=llmrec_direct")
    man = freeze(cfg.task.data_dir, "direct", tmp_path / "c.jsonl.gz")
    assert man["sha256"] == cfg.task.candidates.sha256
    assert (tmp_path / "c.jsonl.gz").read_bytes() == Path(cfg.task.candidates.path).read_bytes()


def test_sequential_and_direct_negatives_are_sampled_independently():
    data = load_p5(bundled_data("llmrec_sample/p5"))
    s = load_candidates(bundled_data("llmrec_sample/p5/candidates_sequential.jsonl.gz"), None, data)
    d = load_candidates(bundled_data("llmrec_sample/p5/candidates_direct.jsonl.gz"), None, data)
    assert sum(set(s[u]["candidates"]) != set(d[u]["candidates"]) for u in s) == len(s)


def test_altered_or_missing_candidate_files_are_refused(tmp_path):
    cfg = compose_cfg("task=llmrec_sequential")
    data = load_p5(cfg.task.data_dir)
    src = Path(cfg.task.candidates.path)
    with pytest.raises(CandidateFileError, match="recorded"):
        load_candidates(src, "0" * 64, data)
    bad = tmp_path / "c.jsonl.gz"
    lines = gzip.decompress(src.read_bytes()).decode().splitlines()
    lines[0] = lines[0].replace('"candidates":["', '"candidates":["9999","', 1)
    bad.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    shutil.copy(str(src) + ".manifest.json", str(bad) + ".manifest.json")
    with pytest.raises(CandidateFileError):
        load_candidates(bad, cfg.task.candidates.sha256, data)
    with pytest.raises(CandidateFileError, match="manifest"):
        load_candidates(bad, None, data)  # even without a recorded hash, the manifest catches the edit
    with pytest.raises(CandidateFileError, match="Freeze it once"):
        load_candidates(tmp_path / "absent.jsonl.gz", None, data)


def test_task_load_refuses_a_wrong_recorded_hash():
    from hydra.utils import get_class

    cfg = compose_cfg("task=llmrec_direct", "task.candidates.sha256=" + "f" * 64)
    with pytest.raises(CandidateFileError):
        get_class(cfg.task._target_)(cfg.task).load()


@pytest.mark.slow  # ~25-90 s on 2 shared cores: freezes 22,363 users
def test_full_p5_direct_candidates_reproduce_the_recorded_hash(p5_dir, tmp_path):
    """Freezing the full split again (22,363 users) gives byte-identical content: the hash in conf holds anywhere."""
    cfg = compose_cfg("task=llmrec_direct_p5", f"task.data_dir={p5_dir}")
    man = freeze(str(p5_dir), "direct", tmp_path / "direct.jsonl.gz")
    assert man["users"] == 22363 and man["sha256"] == cfg.task.candidates.sha256
    cands = load_candidates(tmp_path / "direct.jsonl.gz", cfg.task.candidates.sha256, load_p5(str(p5_dir)))
    assert len(cands) == 22363


def test_a_missing_candidate_file_is_frozen_on_first_use_then_hash_checked(tmp_path, capsys):
    """A fresh clone: the task freezes its candidates itself (progress bar), reproducing the recorded hash."""
    from hydra.utils import get_class

    recorded = compose_cfg("task=llmrec_sequential").task.candidates
    path = tmp_path / "cache" / "llmrec_candidates" / "seq.jsonl.gz"
    cfg = compose_cfg("task=llmrec_sequential", f"task.candidates.path={path}")
    examples = get_class(cfg.task._target_)(cfg.task).load()
    assert path.read_bytes() == Path(recorded.path).read_bytes()  # byte-identical to the bundled frozen file
    err = capsys.readouterr().err
    assert "is missing; freezing sequential candidates once" in err and "matches the recorded hash" in err
    assert len(examples) == len(load_p5(cfg.task.data_dir).sequences)
    stamp = path.stat().st_mtime_ns
    get_class(cfg.task._target_)(cfg.task).load()  # second use: loaded and checked, never resampled
    assert path.stat().st_mtime_ns == stamp and "freezing" not in capsys.readouterr().err


def test_first_use_freeze_that_misses_the_recorded_hash_is_refused_and_removed(tmp_path):
    from hydra.utils import get_class

    path = tmp_path / "direct.jsonl.gz"
    cfg = compose_cfg("task=llmrec_direct", f"task.candidates.path={path}", "task.candidates.sha256=" + "0" * 64)
    with pytest.raises(CandidateFileError, match="not the recorded 0000"):
        get_class(cfg.task._target_)(cfg.task).load()
    assert not path.exists() and not Path(str(path) + ".manifest.json").exists()


@pytest.mark.slow  # ~35-100 s on 2 shared cores: freezes 22,363 users, then item-kNN over all of them
def test_p5_sequential_item_knn_runs_on_a_fresh_clone(p5_dir, tmp_path):
    """`python -m recbench task=llmrec_sequential_p5 method=item_knn` with no frozen file: freezes, checks, runs."""
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "RECBENCH_CACHE_DIR": str(tmp_path / "cache"), "RECBENCH_RUNS_DIR": str(tmp_path / "runs"),
           "RECBENCH_SHARED_DATA": str(p5_dir.parent)}
    r = subprocess.run([sys.executable, "-m", "recbench", "task=llmrec_sequential_p5", "method=item_knn",
                        "run.progress=false"], cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "matches the recorded hash" in r.stderr
    assert (tmp_path / "cache" / "llmrec_candidates" / "beauty_p5_sequential.jsonl.gz").is_file()
    m = __import__("json").loads(next((tmp_path / "runs").rglob("metrics.json")).read_text())
    assert m["counts"]["examples"] == 22363 and m["complete"]
    assert 0.29 < m["metrics"]["ndcg@10"]["mean"] < 0.31  # 0.2993 measured (item-kNN, recency 0.7)


def test_loaded_candidates_share_the_catalogue_id_strings():
    """100,000 users x 100 candidates hold one string per catalogue item, not 10 M copies (issue 29 memory)."""
    data = load_p5(bundled_data("llmrec_sample/p5"))
    cands = load_candidates(bundled_data("llmrec_sample/p5/candidates_sequential.jsonl.gz"), None, data)
    own = {i: i for i in data.titles}
    ids = [c for rec in cands.values() for c in rec["candidates"]]
    assert len(ids) == 100 * len(cands) and all(own[c] is c for c in ids)

