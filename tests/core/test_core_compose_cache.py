"""A plain run composed once (cli/single_run.py) and its config kept on disk (store/compose_cache.py): the same
command again reads it back and writes the same run dir (.hydra/ included); an edited config file is a new key; a
command with its own config folders, the cache turned off or a torn file composes as before; a sweep and a config
error go through hydra.main and the checks unchanged."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from recbench.cli import single_run
from recbench.store import compose_cache
from tests.helpers import run_cli
from tests.toy import TOY, isolate

pytestmark = pytest.mark.fast


@pytest.fixture()
def cli(tmp_path, monkeypatch, capfd):
    """`python -m recbench <TOY> <args>` in this process, runs, cache and compose cache under tmp_path."""
    isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("RECBENCH_COMPOSE_CACHE_DIR", str(tmp_path / "compose"))
    return lambda *args: run_cli([*TOY, *args], capfd)


def _hydra_files(run_dir: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((run_dir / ".hydra").iterdir())}


def test_the_same_command_again_reads_the_composed_config_back(tmp_path, cli, monkeypatch):
    calls = []
    real = single_run._compose
    monkeypatch.setattr(single_run, "_compose", lambda *a: calls.append(a) or real(*a))
    first = cli("limit=6")
    assert first.code == 0, first.err
    kept = list((tmp_path / "compose").glob("*.pkl"))
    assert len(kept) == 1 and len(calls) == 1
    run_dir = next((tmp_path / "runs").rglob("metrics.json")).parent
    before = _hydra_files(run_dir)
    again = cli("limit=6")
    assert again.code == 0, again.err
    assert len(calls) == 1, "the second run composed again"
    assert _hydra_files(run_dir) == before  # config.yaml, hydra.yaml, overrides.yaml: as Hydra wrote them
    assert cli("limit=7").code == 0 and len(calls) == 2  # other overrides: another key


def test_the_key_follows_the_config_files_and_refuses_own_folders(tmp_path, monkeypatch):
    conf = tmp_path / "conf"
    (conf / "task").mkdir(parents=True)
    f = conf / "task" / "t.yaml"
    f.write_text("name: t\n")
    trees = [(conf, None)]
    key = compose_cache.key_for(["task=t"], "app", trees)
    assert key == compose_cache.key_for(["task=t"], "app", trees)
    assert key != compose_cache.key_for(["task=t", "limit=2"], "app", trees)
    f.write_text("name: t2\n")
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 1_000_000))
    assert compose_cache.key_for(["task=t"], "app", trees) != key  # an edited file: a new key
    own = tmp_path / "own"
    (own / "model").mkdir(parents=True)
    args = ["task=t", f"hydra.searchpath=[file://{own}]"]
    with_own = single_run._trees("recbench.conf", args)
    assert (own, None) in with_own
    before = compose_cache.key_for(args, "app", with_own)
    (own / "model" / "m.yaml").write_text("name: m\n")
    assert compose_cache.key_for(args, "app", single_run._trees("recbench.conf", args)) != before  # a new own file
    assert single_run._trees("recbench.conf", ["hydra.searchpath=[somewhere]"]) is None
    monkeypatch.setenv("RECBENCH_COMPOSE_CACHE", "0")
    assert compose_cache.key_for(["task=t"], "app", trees) is None


def test_a_torn_or_unwritable_cache_is_a_miss(tmp_path, monkeypatch):
    monkeypatch.setenv("RECBENCH_COMPOSE_CACHE_DIR", str(tmp_path / "c"))
    compose_cache.save("k", {"a": 1})
    assert compose_cache.load("k") == {"a": 1}
    (tmp_path / "c" / "k.pkl").write_bytes(b"\x80\x05torn")
    assert compose_cache.load("k") is None and compose_cache.load(None) is None
    (tmp_path / "ro").write_text("a file where the folder would be")
    monkeypatch.setenv("RECBENCH_COMPOSE_CACHE_DIR", str(tmp_path / "ro"))
    compose_cache.save("k", {"a": 1})  # no error
    assert compose_cache.load("k") is None


def test_the_folder_keeps_at_most_max_files(tmp_path, monkeypatch):
    monkeypatch.setenv("RECBENCH_COMPOSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compose_cache, "MAX_FILES", 4)
    monkeypatch.setattr(compose_cache, "KEEP", 2)
    for i in range(5):
        compose_cache.save(f"k{i}", i)
        os.utime(tmp_path / f"k{i}.pkl", ns=(i * 10**9, i * 10**9))
    assert sorted(p.name for p in tmp_path.glob("*.pkl")) == ["k3.pkl", "k4.pkl"]  # the newest


def test_only_a_plain_run_takes_the_one_compose():
    assert single_run.plain_run(["task=toy", "limit=3", "+x=1"])
    assert not single_run.plain_run(["-m", "task=toy"])
    assert not single_run.plain_run(["--cfg", "job"])
    assert not single_run.plain_run(["hydra.mode=MULTIRUN", "task=toy"])
    assert not single_run.plain_run(["~limit"])


def test_a_config_error_after_a_kept_compose_still_lists_the_choices(tmp_path, cli):
    assert cli("limit=6").code == 0
    r = cli("limit=6", "run.bogus_key=1")
    assert r.code == 2 and "Unknown config key 'run.bogus_key'" in r.err


def test_a_python_without_hydra_plugins_composes_and_keeps(tmp_path, cli, monkeypatch):
    """No Hydra plugin installed (no `hydra_plugins` namespace, as in the vLLM venv): the key leaves plugins out and
    the run goes on, composed once and kept, instead of failing on the import."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "hydra_plugins" else real(name, *a))
    trees = single_run._trees("recbench.conf", [])
    assert trees is not None and all("hydra_plugins" not in str(p) for p, _ in trees)
    r = cli("limit=6")
    assert r.code == 0, r.err
    assert len(list((tmp_path / "compose").glob("*.pkl"))) == 1
