"""The config-only benchmark: a brand-new task from a YAML file in a user's own config folder, the sandbox,
config errors that name the key and the valid options, data formats, parsers and the metric registry."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
from jinja2.exceptions import SecurityError

from recbench.run.evaluate import run_from_config
from recbench.api.errors import ConfigError
from tests.helpers import read_samples
from recbench.api import metrics as M
from recbench.tasks.generic import parsers as P
from recbench.tasks.generic.task import GenericTask, SandboxError, check_template
from tests.doubles import ScriptedBackend
from tests.helpers import compose_cfg, run_cli

pytestmark = pytest.mark.fast
REPO = Path(__file__).resolve().parents[2]

ROWS = [
    {"qid": "q1", "likes": "space operas, Dune", "item": "Foundation", "label": "yes", "kind": "book"},
    {"qid": "q2", "likes": "cozy mysteries", "item": "a gory slasher film", "label": "no", "kind": "film"},
    {"qid": "q3", "likes": "jazz, Miles Davis", "item": "Kind of Blue", "label": "yes", "kind": "album"},
    {"qid": "q4", "likes": "vegan recipes", "item": "a steakhouse voucher", "label": "no", "kind": "gift"},
]

TASK_YAML = """\
# a brand-new benchmark, defined only here
name: {name}
_target_: {target}
data:
  path: {data}
  id_field: qid
prompt:
  system: Answer with yes or no.
  template: |
    Someone enjoys {{{{ likes }}}}. Would they enjoy {{{{ item }}}}? Answer yes or no.
parser:
  kind: choice
  choices: ["yes", "no"]
constrained: false
ground_truth: label
metrics: [accuracy]
headline_metric: null
breakdown_by: [kind]
max_tokens: 4
"""


def user_config(tmp: Path, name: str = "pref_yesno", target: str = "recbench.tasks.generic.task.GenericTask",
                rows=ROWS) -> Path:
    """A user's own config folder holding task/<name>.yaml and its JSONL data (nothing inside the repo)."""
    conf = tmp / "my_conf"
    (conf / "task").mkdir(parents=True, exist_ok=True)
    data = tmp / "my_data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (conf / "task" / f"{name}.yaml").write_text(TASK_YAML.format(name=name, target=target, data=data))
    return conf


def _cli(args: list[str], tmp: Path, extra_env: dict | None = None, timeout: int = 900):
    env = {**os.environ, "RECBENCH_RUNS_DIR": str(tmp / "runs"), "RECBENCH_CACHE_DIR": str(tmp / "cache"),
           **(extra_env or {})}
    return subprocess.run([sys.executable, "-m", "recbench", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture()
def cli(tmp_path, monkeypatch, capfd):
    """`python -m recbench <args>` in this process, runs and cache under tmp_path (returncode, stdout, stderr)."""
    monkeypatch.setenv("RECBENCH_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("RECBENCH_CACHE_DIR", str(tmp_path / "cache"))

    def go(args: list[str]):
        r = run_cli(args, capfd)
        return SimpleNamespace(returncode=r.code, stdout=r.out, stderr=r.err)

    return go


# ---- the must-show --------------------------------------------------------------------------
@pytest.mark.slow  # the real model, end to end in its own interpreter
def test_brand_new_yes_no_benchmark_from_a_user_yaml_runs_end_to_end_with_smollm2(tmp_path):
    conf = user_config(tmp_path)
    r = _cli([f"hydra.searchpath=[file://{conf}]", "task=pref_yesno", "method=zero_shot", "run.progress=false"],
             tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    run_dir = tmp_path / "runs" / "pref_yesno" / "smollm2" / "zero_shot" / "default"
    m = json.loads((run_dir / "metrics.json").read_text())
    assert m["task"]["name"] == "pref_yesno" and m["model"] == "smollm2" and m["complete"]
    assert m["counts"]["examples"] == 4 and m["counts"]["model_calls"] == 4
    assert m["headline_metric"] == "accuracy" and 0.0 <= m["metrics"]["accuracy"]["mean"] <= 1.0
    assert set(m["breakdown"]["kind"]) == {"book", "film", "album", "gift"}
    recs = read_samples(run_dir)  # calls carry their messages again (stored once in prompts.jsonl)
    assert [r["id"] for r in recs] == ["q1", "q2", "q3", "q4"]
    for rec in recs:  # the real prompt went to the model, and its real answer was parsed and scored
        assert "Would they enjoy" in rec["calls"][0]["messages"][-1]["content"]
        assert rec["parse_status"] in ("ok", "repaired", "failed")
        assert rec["metrics"]["accuracy"] == (1.0 if rec["prediction"] == next(
            x["label"] for x in ROWS if x["qid"] == rec["id"]) else 0.0)


def test_user_yaml_runs_through_the_cli_with_a_reference_row(tmp_path, cli):
    conf = user_config(tmp_path)
    r = cli([f"hydra.searchpath=[file://{conf}]", "task=pref_yesno", "method=random", "run.progress=false"])
    assert r.returncode == 0, r.stderr[-2000:]
    m = json.loads((tmp_path / "runs/pref_yesno/none/random/default/metrics.json").read_text())
    assert m["counts"]["examples"] == 4 and m["metrics"]["accuracy"]["n"] == 4
    # a misspelt task name in the user folder: the error lists the user's task among the valid choices
    bad = cli([f"hydra.searchpath=[file://{conf}]", "task=pref_yesnoo", "method=random"])
    assert bad.returncode == 2 and "Did you mean 'pref_yesno'?" in bad.stderr and "generic_yesno" in bad.stderr


def test_template_reaching_python_internals_gets_a_sandbox_error(tmp_path, cli):
    with pytest.raises(SandboxError) as e:
        check_template("{{ ''.__class__.__mro__[1].__subclasses__() }}")
    assert isinstance(e.value.__cause__, SecurityError)
    with pytest.raises(SandboxError):
        check_template("{{ row.__init__.__globals__ }}", row={"a": 1})
    # the same template in a task YAML: the run stops with a config error before anything is evaluated
    conf = user_config(tmp_path)
    y = conf / "task" / "pref_yesno.yaml"
    y.write_text(y.read_text().replace("Someone enjoys {{ likes }}.", "{{ likes.__class__.__mro__[1].__subclasses__() }}"))
    r = cli([f"hydra.searchpath=[file://{conf}]", "task=pref_yesno", "method=random"])
    assert r.returncode == 2 and "sandbox" in r.stderr and "task.prompt.template" in r.stderr, r.stderr
    assert not list((tmp_path / "runs").rglob("samples.jsonl")) or all(
        p.stat().st_size == 0 for p in (tmp_path / "runs").rglob("samples.jsonl"))


def test_own_task_class_through_target(tmp_path):
    """`_target_` may name the user's own class (here a GenericTask subclass with an extra metric)."""
    pkg = tmp_path / "userpkg"
    pkg.mkdir()
    (pkg / "my_tasks.py").write_text(textwrap.dedent("""
        from recbench.tasks.generic.task import GenericTask

        class ShortAnswerTask(GenericTask):
            def score(self, example, outcome):
                out = super().score(example, outcome)
                out["short"] = float(len(outcome.details.get("answer", "")) <= 5)
                return out
    """))
    conf = user_config(tmp_path, name="own_task", target="my_tasks.ShortAnswerTask")
    sys.path.insert(0, str(pkg))
    try:
        cfg = compose_cfg([f"hydra.searchpath=[file://{conf}]", "task=own_task", "method=zero_shot",
                           f"cache.path={tmp_path / 'c.sqlite'}", "run.progress=false"])
        m = run_from_config(cfg, tmp_path / "run", backend=ScriptedBackend(lambda r: "yes")).to_dict()
    finally:
        sys.path.remove(str(pkg))
    assert m["metrics"]["short"]["mean"] == 1.0
    assert m["metrics"]["accuracy"]["mean"] == 0.5  # 'yes' is right for q1 and q3


# ---- config errors name the key and the valid options ---------------------------------------------------
def _task_cfg(tmp_path, **changes):
    conf = user_config(tmp_path)
    cfg = compose_cfg([f"hydra.searchpath=[file://{conf}]", "task=pref_yesno", "method=zero_shot"])
    from omegaconf import OmegaConf

    for k, v in changes.items():
        OmegaConf.update(cfg, f"task.{k}", v, merge=False)
    return cfg.task


@pytest.mark.parametrize("change, words", [
    ({"parser.kind": "chioce"}, ["task.parser.kind", "Did you mean 'choice'?", "json_field", "regex"]),
    ({"metrics": ["acuracy"]}, ["task.metrics", "Did you mean 'accuracy'?", "ndcg", "rouge1"]),
    ({"metrics": ["hr@x5"]}, ["task.metrics", "whole number, e.g. hr@10"]),
    ({"headline_metric": "f1"}, ["task.headline_metric", "Valid choices: accuracy"]),
    ({"parser.choices": ["yes"]}, ["task.parser.choices"]),
    ({"data.path": "/nonexistent.jsonl"}, ["task.data.path", "/nonexistent.jsonl"]),
    ({"prompt.template": None}, ["task.prompt.template"]),
])
def test_config_errors_name_the_key_and_valid_options(tmp_path, change, words):
    with pytest.raises(ConfigError) as e:
        GenericTask(_task_cfg(tmp_path, **change)).load()
    for w in words:
        assert w in str(e.value), str(e.value)


def test_data_errors_name_the_field(tmp_path):
    t = GenericTask(_task_cfg(tmp_path, ground_truth="lable"))
    with pytest.raises(ConfigError, match=r"task.ground_truth 'lable'.*Did you mean 'label'\?.*Fields: qid"):
        t.load()
    t = GenericTask(_task_cfg(tmp_path, **{"prompt.template": "{{ itme }}"}))
    with pytest.raises(ConfigError, match=r"task.prompt.template: 'itme' is undefined"):
        t.load()


# ---- formats, parsers, metrics ---------------------------------------------------------------------------
def test_csv_and_json_data_give_the_same_examples(tmp_path):
    import pandas as pd

    base = GenericTask(_task_cfg(tmp_path)).load()
    pd.DataFrame(ROWS).to_csv(tmp_path / "d.csv", index=False)
    (tmp_path / "d.json").write_text(json.dumps(ROWS))
    for f in ("d.csv", "d.json"):
        exs = GenericTask(_task_cfg(tmp_path, **{"data.path": str(tmp_path / f)})).load()
        assert [(e.id, e.data, e.meta) for e in exs] == [(e.id, e.data, e.meta) for e in base]
    pytest.importorskip("pyarrow", reason="parquet needs pyarrow")
    pd.DataFrame(ROWS).to_parquet(tmp_path / "d.parquet")
    exs = GenericTask(_task_cfg(tmp_path, **{"data.path": str(tmp_path / "d.parquet")})).load()
    assert [e.id for e in exs] == ["q1", "q2", "q3", "q4"]


def test_parsers():
    assert P.build({"kind": "choice", "choices": ["yes", "no"]})("Yes.").value == "yes"
    assert P.build({"kind": "number", "lo": 1, "hi": 5})("I'd say 7 stars").value == 5.0
    p = P.build({"kind": "json_field", "field": "answer"})
    assert p('Sure: {"answer": "no", "why": "x"}').value == "no" and not p('{"other": 1}').ok
    assert P.build({"kind": "list", "sep": "|"})("a | b | c").value == ["a", "b", "c"]
    rx = P.build({"kind": "regex", "pattern": r"answer:\s*(\w+)"})
    assert rx("Final answer: maybe").value == "maybe" and not rx("nothing").ok
    assert not P.build({"kind": "text"})("   ").ok


def test_metric_registry_values():
    assert M.resolve("accuracy")("Yes", "yes") == 1.0 and M.resolve("accuracy")("4.0", 4) == 1.0
    assert M.resolve("mae")(3, 5) == 2.0
    hr = M.resolve("hr@2")
    assert hr.name == "hr@2" and hr(["a", "b", "c"], "b") == 1.0 and hr(["a", "b", "c"], "c") == 0.0
    nd = M.resolve({"name": "ndcg", "k": 3})
    assert nd.name == "ndcg@3" and nd(["x", "b"], "b") == pytest.approx(1 / math.log2(3))
    assert M.resolve("kendall_tau")(["a", "b", "c"], ["a", "b", "c"]) == pytest.approx(1.0)
    assert M.resolve("kendall_tau")(["c", "b", "a"], ["a", "b", "c"]) == pytest.approx(-1.0)
    # items the answer left out are appended worst-first: [a] + [c, b] against [a, b, c]
    assert M.resolve("kendall_tau")(["a"], ["a", "b", "c"]) == pytest.approx(1 / 3)
    assert M.resolve("bleu")("the cat sat on the mat", "the cat sat on the mat") == pytest.approx(100.0)
    assert M.resolve("rougeL")("the cat sat", "the cat sat") == pytest.approx(100.0)
    rm = M.resolve("rmse")
    assert rm.record_name == "squared_error" and rm(1, 3) == 4.0
    with pytest.raises(ConfigError, match="takes no parameter"):
        M.resolve({"name": "accuracy", "k": 3})


def test_rmse_is_a_corpus_metric_in_extra(tmp_path):
    rows = [{"qid": f"r{i}", "likes": "x", "item": "y", "label": v, "kind": "k"} for i, v in enumerate([1, 3, 5])]
    conf = user_config(tmp_path, rows=rows)
    cfg = compose_cfg([f"hydra.searchpath=[file://{conf}]", "task=pref_yesno", "method=zero_shot",
                       "task.parser.kind=number", "+task.parser.lo=1", "+task.parser.hi=5", "task.metrics=[mae, rmse]",
                       f"cache.path={tmp_path / 'c.sqlite'}", "run.progress=false"])
    m = run_from_config(cfg, tmp_path / "run", backend=ScriptedBackend(lambda r: "3")).to_dict()
    assert m["metrics"]["mae"]["mean"] == pytest.approx(4 / 3)
    assert m["extra"]["rmse"] == pytest.approx(math.sqrt(8 / 3))
