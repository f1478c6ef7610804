"""The command line: reference rows end to end, config errors that list valid choices."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.full

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


# ---- method configs live with their benchmark: conf/method/<benchmark>/<name>.yaml; method=<name> still works ----
def _run_dir(overrides: list[str], runs: Path) -> Path:
    """The run dir Hydra would make for these overrides, as the entry point passes them (relative to the runs dir)."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    from recbench.cli.overrides import add_default_method, method_paths
    from recbench.run.construct import register_resolvers

    register_resolvers()
    GlobalHydra.instance().clear()
    os.environ["RECBENCH_RUNS_DIR"] = str(runs)
    try:
        with initialize_config_module(config_module="recbench.conf", version_base="1.3"):
            cfg = compose(config_name="config", overrides=method_paths(add_default_method(overrides)),
                          return_hydra_config=True)
        HydraConfig.instance().set_config(cfg)
        return Path(str(cfg.hydra.run.dir)).relative_to(runs)
    finally:
        GlobalHydra.instance().clear()
        del os.environ["RECBENCH_RUNS_DIR"]


@pytest.mark.fast
def test_a_method_name_picks_the_folder_of_the_chosen_tasks_benchmark():
    from recbench.cli.overrides import method_paths

    assert method_paths(["method=listwise", "limit=12"]) == ["method=perrec/listwise", "limit=12"]  # default task
    assert method_paths(["task=recbench_plus", "method=popular_match"]) == [
        "task=recbench_plus", "method=recbench_plus/popular_match"]
    # the same name, a different config per benchmark
    assert method_paths(["task=llmrec_rating", "method=random"])[1] == "method=llmrec/random"
    assert method_paths(["task=generic_yesno", "method=random"])[1] == "method=generic/random"
    assert method_paths(["task=perrec_released", "method=random"])[1] == "method=perrec/random"  # via its defaults
    # sweeps: each value; a glob over the folder's names
    assert method_paths(["-m", "method=random,bm25_history,listwise"]) == [
        "-m", "method=perrec/random,perrec/bm25_history,perrec/listwise"]
    assert method_paths(["-m", "method=glob(pairwise_*)"])[1] == (
        "method=perrec/pairwise_cot,perrec/pairwise_fewshot,perrec/pairwise_sc")
    assert method_paths(["-m", "task=llmrec_rating,llmrec_direct", "method=zero_shot"])[2] == "method=llmrec/zero_shot"
    # left as given: a path, a name no folder holds (the checks list the valid ones)
    assert method_paths(["method=perrec/listwise"]) == ["method=perrec/listwise"]
    assert method_paths(["method=listwse"]) == ["method=listwse"]
    # a method of another benchmark keeps its folder: the task's own check names the valid methods
    assert method_paths(["task=perrec", "method=popular_match"])[1] == "method=recbench_plus/popular_match"


@pytest.mark.fast
def test_a_task_sweep_over_benchmarks_with_different_configs_for_the_name_is_refused():
    from recbench.api.errors import ConfigError
    from recbench.cli.overrides import method_paths

    with pytest.raises(ConfigError, match=r"method=random is a different config for each benchmark that the task= "
                                          r"sweep spans \(llmrec/random, perrec/random\): sweep one benchmark's tasks"):
        method_paths(["-m", "task=perrec,llmrec_rating", "method=random"])
    # one config for every swept task: fine (listwise is PerRecBench's only; the llmrec combination is refused later)
    assert method_paths(["-m", "task=perrec,llmrec_rating", "method=listwise"])[2] == "method=perrec/listwise"


@pytest.mark.fast
def test_the_composed_method_is_its_benchmarks_yaml_and_the_run_dir_keeps_the_plain_name(tmp_path):
    import yaml

    from recbench.cli.catalogue import conf_dir
    from tests.helpers import compose_cfg

    for task, bench in [("perrec", "perrec"), ("llmrec_direct", "llmrec"), ("generic_yesno", "generic")]:
        cfg = compose_cfg([f"task={task}", "method=random"])
        assert dict(cfg.method) == yaml.safe_load((conf_dir() / "method" / bench / "random.yaml").read_text())
    assert compose_cfg(["method=perrec/listwise"]).method == compose_cfg(["method=listwise"]).method
    assert _run_dir(["model=smollm2", "method=listwise", "limit=12"], tmp_path) == Path(
        "perrec/smollm2/listwise/limit=12")
    assert _run_dir(["task=recbench_plus", "method=popular_match"], tmp_path) == Path(
        "recbench_plus/none/popular_match/default")
    assert _run_dir(["task=recbench_plus"], tmp_path) == Path("recbench_plus/smollm2/assistant/default")  # default


@pytest.mark.fast
def test_a_users_own_method_and_task_configs_still_resolve(tmp_path):
    from recbench.cli.overrides import method_paths

    (tmp_path / "method").mkdir()
    (tmp_path / "method" / "mine.yaml").write_text("name: mine\n")
    (tmp_path / "method" / "random.yaml").write_text("name: random\n")  # the user's own, same name: theirs
    (tmp_path / "task").mkdir()
    (tmp_path / "task" / "mytask.yaml").write_text("defaults:\n  - generic_yesno\n  - _self_\nname: mytask\n")
    (tmp_path / "task" / "own.yaml").write_text("name: own\n_target_: recbench.tasks.llmrec.task.RatingTask\n")
    sp = f"hydra.searchpath=[file://{tmp_path}]"
    assert method_paths([sp, "method=mine"])[1] == "method=mine"
    assert method_paths([sp, "method=random"])[1] == "method=random"
    assert method_paths([sp, "task=mytask", "method=zero_shot"])[2] == "method=generic/zero_shot"
    assert method_paths([sp, "task=own", "method=zero_shot"])[2] == "method=llmrec/zero_shot"
    # a typo under the user's task lists its benchmark's methods and the user's own
    from recbench.api.errors import ConfigError
    from recbench.cli.overrides import check_overrides

    with pytest.raises(ConfigError, match=r"^Unknown method 'zero_sht'. Did you mean 'zero_shot'\? Valid choices for "
                                          r"method with task=mytask: mine, popularity, random, random_items, zero_shot "
                                          r"\(every task's"):
        check_overrides([sp, "task=mytask", "method=zero_sht"])


@pytest.mark.full
def test_a_mistyped_method_is_named_as_typed_and_a_sweep_lists_combinations_as_typed(tmp_path):
    r = cli("method=listwse", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.startswith("recbench: config error: Unknown method 'listwse'. Did you mean 'listwise'? Valid "
                               "choices for method with task=perrec: bm25_history, item_avg, listwise,"), r.stderr
    r = cli("-m", "task=recbench_plus", "method=assistant,popular_match", "model=gpt4o",
            env_extra={"OPENAI_API_KEY": ""}, cwd=tmp_path)
    assert r.returncode == 2 and "sweep not started: 1 of 2 combination(s) cannot run" in r.stderr, r.stderr
    assert "\n  method=assistant: model gpt4o: environment variable OPENAI_API_KEY is not set" in r.stderr, r.stderr
