"""Task and method keys are checked against the rules their classes declare (recbench.api.config.check_settings):
every shipped YAML passes, and an out-of-range, mistyped or unknown value is one ConfigError naming the key and what
is valid, raised by build_task before any data is read. Run-dir names stay one folder under the runs dir."""
from __future__ import annotations

import pytest
from hydra.utils import get_class
from omegaconf import OmegaConf

from recbench.cli.catalogue import merged, method_group, names, task_benchmark
from recbench.api.config import check_settings, describe, flag, list_of, number, one_of, text, validate, whole
from recbench.run.construct import build_task, check_examples, register_resolvers
from recbench.api.errors import ConfigError, DataError
from recbench.store.rundir import bad_name, discard_unused, safe_name
from recbench.api.types import Example
from tests.toy import SEARCHPATH, toy_cfg

pytestmark = pytest.mark.fast

RULES = {"n": whole(1), "k": whole(0, null=True), "p": number(above=0, hi=1), "t": number(1, 5), "on": flag(),
         "fmt": one_of("recbench", "released"), "levels": list_of(one_of("easy", "medium", "hard")),
         "ks": list_of(whole(1)), "name": text(), "deep.cut": number(lo=0, hi=1),
         "thr": number(above=0, hi=1, null=True, per_key=("movie", "book"))}


@pytest.mark.parametrize("node", [
    {"n": 1, "k": 0, "p": 1, "t": 1.5, "on": False, "fmt": "released", "levels": ["easy"], "ks": [1, 10],
     "name": "x", "deep": {"cut": 0}, "thr": None},
    {"k": None, "p": 0.001, "thr": 0.8},
    {"thr": {"movie": 0.7, "book": 1}},
    {"other": "keys without a rule are not checked", "deep": {"other": 1}},
])
def test_valid_values_pass(node):
    check_settings(node, RULES, "task")


@pytest.mark.parametrize("node, message", [
    ({"n": 0}, "task.n=0: must be a whole number >= 1."),
    ({"n": 2.5}, "task.n=2.5: must be a whole number >= 1."),
    ({"n": True}, "task.n=true: must be a whole number >= 1."),
    ({"n": "abc"}, "task.n=abc: must be a whole number >= 1."),
    ({"k": -1}, "task.k=-1: must be a whole number >= 0, or null."),
    ({"p": 0}, "task.p=0: must be a number in (0, 1]."),
    ({"p": float("nan")}, "task.p=nan: must be a number in (0, 1]."),
    ({"t": 9}, "task.t=9: must be a number in [1, 5]."),
    ({"on": "maybe"}, "task.on=maybe: must be true or false."),
    ({"on": 1}, "task.on=1: must be true or false."),
    ({"fmt": "relased"}, "task.fmt=relased: must be one of recbench, released. Did you mean 'released'?"),
    ({"levels": []}, "task.levels=[]: must be a list of at least 1 element(s), each one of easy, medium, hard."),
    ({"levels": ["easy", "hrad"]}, "task.levels=[easy, hrad]: must be a list of at least 1 element(s), each one of "
                                   "easy, medium, hard. 'hrad' is not. Did you mean 'hard'?"),
    ({"ks": [1, 0]}, "task.ks=[1, 0]: must be a list of at least 1 element(s), each a whole number >= 1. '0' is not."),
    ({"name": None}, "task.name=null: must be a string."),
    ({"deep": {"cut": 2}}, "task.deep.cut=2: must be a number in [0, 1]."),
    ({"thr": {"movie": 2}}, "task.thr={movie: 2}: must be a number in (0, 1], or a mapping {movie: ..., book: ...} "
                            "of such, or null."),
    ({"thr": {"tv": 0.5}}, "task.thr={tv: 0.5}: must be a number in (0, 1], or a mapping"),
])
def test_a_bad_value_is_one_error_naming_key_value_and_what_is_valid(node, message):
    with pytest.raises(ConfigError) as e:
        check_settings(node, RULES, "task")
    assert str(e.value).startswith(message), str(e.value)


def test_describe_reads_as_a_sentence():
    assert describe(whole(1, null=True)) == "a whole number >= 1, or null"
    assert describe(number(above=0, hi=1)) == "a number in (0, 1]"
    assert describe(list_of(text(), min_len=0)) == "a list of at least 0 element(s), each a string"


def _resolved(group: str, name: str) -> dict:
    """conf/<group>/<name>.yaml with its same-group defaults, interpolations resolved (no Hydra compose: fast)."""
    register_resolvers()
    return OmegaConf.to_container(OmegaConf.create({"seed": 0, "node": merged(group, name)}), resolve=True)["node"]


def test_every_shipped_task_and_method_yaml_passes_its_rules():
    """No false refusal: each conf/task/*.yaml, and each conf/method/<benchmark>/*.yaml under every task of that
    benchmark that accepts it."""
    checked = 0
    for t in names("task"):
        node = _resolved("task", t)
        cls = get_class(node["_target_"])
        assert getattr(cls, "settings_rules", None), f"{cls.__name__} declares no settings_rules"
        check_settings(node, cls.settings_rules, "task")
        group = method_group(task_benchmark(t))
        for m, mnode in {m: _resolved(group, m) for m in names(group)}.items():
            mcls = cls.methods.get(mnode.get("kind") or mnode["name"])
            if mcls is not None:
                check_settings(mnode, getattr(mcls, "settings_rules", {}), "method")
                checked += 1
    assert checked >= 60  # 19 tasks x the methods each accepts (104 at the time of writing)


@pytest.mark.parametrize("overrides, message", [
    (["task.levels=[]"], "task.levels=[]: must be a list of at least 1 element(s), each one of easy, medium, hard."),
    (["task.levels=[easy,hrad]"], "task.levels=[easy, hrad]: must be a list of at least 1 element(s), each one of easy, "
                                  "medium, hard. 'hrad' is not. Did you mean 'hard'?"),
    (["method.rounds=3"], "method.rounds=3: must be a whole number in [1, 2]"),
    (["method.max_tokens=0"], "method.max_tokens=0: must be a whole number >= 1"),
    (["method.constrained=maybe"], "method.constrained=maybe: must be true or false"),
])
def test_build_task_refuses_before_reading_data(overrides, message, tmp_path):
    """The task's and the method's rules (ToyTask.settings_rules, ToyRank.settings_rules), checked before the data
    is read: the data folder named here does not exist, and the error is about the key."""
    cfg = toy_cfg([f"task.data_dir={tmp_path / 'no_such_folder'}", *overrides])
    with pytest.raises(ConfigError) as e:
        build_task(cfg)
    assert str(e.value).startswith(message), str(e.value)
    with pytest.raises(ConfigError, match="task.data_dir: no file examples.jsonl"):  # valid keys: read at load
        build_task(toy_cfg([f"task.data_dir={tmp_path / 'no_such_folder'}"])).load()


@pytest.mark.parametrize("name", ["../../x", "..", ".", "a/b", "a\\b", ""])
def test_names_that_are_not_one_folder_are_refused_and_made_safe(name):
    assert bad_name(name)
    safe = safe_name(name)
    assert "/" not in safe and "\\" not in safe and safe.strip(".") and not bad_name(safe)
    cfg = toy_cfg(["method=toy_popular"])
    cfg.task.name = name
    with pytest.raises(ConfigError, match=r"task.name=.*: must be a plain name"):
        validate(cfg)


def test_plain_names_stay_as_they_are():
    for name in ("toy", "toy_rating_v2", "gpt4o-mini", "qwen2.5-7b", "my task"):
        assert safe_name(name) == name and not bad_name(name)


def test_the_run_dir_of_a_traversing_name_stays_under_the_runs_dir(tmp_path, monkeypatch):
    """The guarantee behind the refusal: hydra.run.dir and the sweep subdir resolve every name through rb.name."""
    from pathlib import Path

    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    monkeypatch.setenv("RECBENCH_RUNS_DIR", str(tmp_path / "runs"))
    register_resolvers()
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="recbench.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=[SEARCHPATH, "task=toy", "method=toy_rank", "task.name=../../x",
                                                       "method.name=..", "model.name=../m"], return_hydra_config=True)
    GlobalHydra.instance().clear()
    HydraConfig.instance().set_config(cfg)
    runs = (tmp_path / "runs").resolve()
    run_dir = Path(str(cfg.hydra.run.dir)).resolve()
    sweep_dir = (Path(str(cfg.hydra.sweep.dir)) / str(cfg.hydra.sweep.subdir)).resolve()
    assert runs in run_dir.parents and runs in sweep_dir.parents, (run_dir, sweep_dir)
    assert run_dir.relative_to(runs).parts[:3] == (".._.._x", ".._m", "_.._")


def test_discard_unused_removes_only_a_run_dir_holding_hydra_files(tmp_path):
    root = tmp_path / "runs"
    fresh = root / "toy" / "none" / "toy_popular" / "default"
    (fresh / ".hydra").mkdir(parents=True)
    (fresh / ".hydra" / "config.yaml").write_text("x: 1\n")
    (fresh / "app.log").write_text("")
    keep = root / "toy" / "none" / "toy_other" / "default"
    keep.mkdir(parents=True)
    (keep / "samples.jsonl").write_text('{"id": "a"}\n')
    assert discard_unused(fresh, root) is True
    assert not (root / "toy" / "none" / "toy_popular").exists()  # the folders it left empty went too
    assert (root / "toy" / "none").is_dir() and root.is_dir()  # not those holding other runs, never the root
    assert discard_unused(keep, root) is False and (keep / "samples.jsonl").read_text() == '{"id": "a"}\n'
    assert discard_unused(tmp_path / "never_made", root) is False


def test_check_examples_refuses_none_and_a_duplicate_id():
    ex = [Example(id=i, data={}, meta={}) for i in ("a", "b", "c", "b")]
    with pytest.raises(DataError, match=r"task t: example id 'b' is given twice \(examples 2 and 4 of 4\)"):
        check_examples(ex, "task t")
    with pytest.raises(DataError, match="task t has no example to evaluate"):
        check_examples([], "task t")
    check_examples(ex[:3], "task t")
