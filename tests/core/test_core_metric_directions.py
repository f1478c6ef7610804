"""Every metric a shipped task emits has a declared direction (issue 20, item 1).

Every task config in conf/task runs every method config it accepts (its default, its model-free reference rows and
its prompting variants) on bundled data, model methods through a scripted backend; the test fails on any "not
registered" warning and on any metric or scalar extra of metrics.json whose metric_info is missing or 'unknown'.
Tasks on the real research data (P5, Amazon 2023, MovieLens-100k) run too when ../shared/data is there (slow).
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd
import pytest

from recbench.cli import catalogue
from recbench.run.construct import bundled_data
from recbench.run.evaluate import run_from_config
from recbench.api.errors import ConfigError
from tests.conftest import shared_data_dir
from tests.doubles import ScriptedBackend
from tests.helpers import compose_cfg

SHARED = {"llmrec_direct_p5", "llmrec_sequential_p5", "llmrec_rating_az23", "llmrec_explanation_az23",
          "llmrec_summary_az23", "recbench_plus_ml100k", "recbench_plus_ml100k_heldout",
          "memorization_ml100k", "memorization_ml_latest_small", "memorization_ml1m", "memorization_beauty",
          "memorization_beauty_az23"}
DECLARED = {"higher", "lower", "none"}


def answer(req) -> str:
    """The first allowed choice of a constrained request, else text every parser reads something from."""
    if req.constraint is not None and req.constraint.kind == "choice" and req.constraint.choices:
        return req.constraint.choices[0]
    return 'Toy Story [SEP] Heat [SEP] Heat\n4\n[User A]\n{"ranking": ["User B", "User A"]}'


def _released(root: Path) -> Path:
    """The bundled PerRecBench sample written in the released layout (with held-out groups for few-shot)."""
    from recbench.tasks.perrec.data import load_examples
    from recbench.tasks.perrec.released import write_released

    src = Path(bundled_data("perrec_sample"))
    test = list(load_examples(str(src), 4, 200))
    ratings = pd.read_csv(src / "ratings.csv.gz")
    items = pd.read_json(src / "items.jsonl", lines=True, dtype=False)
    return write_released(root / "released", test, test[:8], ratings, items)


def _task_overrides(task: str, root: Path) -> list[str]:
    """What a task needs to run on bundled data (its config leaves the data path to the user)."""
    if task == "perrec_built":
        return [f"task.data_dir={bundled_data('perrec_sample')}"]
    if task == "perrec_released":
        return [f"task.data_dir={_released(root)}"]
    if task == "recbench_plus_released":
        return [f"task.data.path={Path(bundled_data('recbench_plus_sample')) / 'movie-ExplicitQuery.json'}"]
    if task == "generic_rating_csv":
        rows = [{"id": f"r{i}", "history": "Heat: 4, Alien: 2", "item": f"Film {i}", "rating": 1 + i % 5}
                for i in range(6)]
        pd.DataFrame(rows).to_csv(root / "ratings.csv", index=False)
        return [f"task.data.path={root / 'ratings.csv'}"]
    return []


def _method_overrides(task: str, method: str) -> list[str]:
    if method.endswith("_fewshot") and task in ("perrec", "perrec_built"):
        return ["task.heldout_file=groups.jsonl"]  # demonstrations drawn from the bundle's own groups
    return []


def _methods(task: str) -> list[str]:
    return catalogue.methods_for_task(task)  # conf/method/<the task's benchmark>/ configs its class accepts


TASKS = [pytest.param(t, marks=pytest.mark.slow) if t in SHARED else t for t in catalogue.names("task")]


@pytest.mark.parametrize("task", TASKS)
def test_every_metric_of_every_task_and_method_has_a_declared_direction(task, tmp_path, caplog):
    if task in SHARED and not shared_data_dir().is_dir():
        pytest.skip(f"real data not available at {shared_data_dir()} (set RECBENCH_SHARED_DATA)")
    methods = _methods(task)
    assert methods, f"no method config is accepted by task {task}"
    base = _task_overrides(task, tmp_path)
    caplog.set_level(logging.WARNING, logger="recbench.api.metrics")
    seen: dict[str, dict] = {}
    refused: dict[str, str] = {}
    for method in methods:
        cfg = compose_cfg([f"task={task}", f"method={method}", "limit=4", "run.progress=false",
                           "run.bootstrap_resamples=50", f"cache.path={tmp_path / 'cache.sqlite'}", *base,
                           *_method_overrides(task, method)])
        run_dir = tmp_path / "runs" / method
        try:
            m = run_from_config(cfg, run_dir, backend=ScriptedBackend(answer)).to_dict()
        except ConfigError as e:  # a combination the task refuses by design (e.g. random without choices)
            refused[method] = str(e)
            continue
        written = json.loads((run_dir / "metrics.json").read_text())
        info = written["metric_info"]
        scalars = [k for k, v in written["extra"].items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        for name in list(written["metrics"]) + scalars:
            d = (info.get(name) or {}).get("direction")
            assert d in DECLARED, f"{task} / {method}: metric '{name}' has direction {d!r} in metrics.json " \
                                  "(register it in the task module: higher_is_better=True/False, or None for a count)"
            seen[name] = info[name]
        assert m["metric_info"] == info
    default = catalogue.merged("task", task).get("default_method")
    assert default not in refused and len(refused) < len(methods), refused
    warned = [r.getMessage() for r in caplog.records if "not registered" in r.getMessage()]
    assert not warned, warned
    if task == "recbench_plus":  # the catalogue-resolved metrics (the released files have no catalogue)
        assert seen["invalid_rate"]["direction"] == "lower" and seen["invalid_rate"]["higher_is_better"] is False
        assert seen["duplicate_rate"]["direction"] == "lower"
        assert seen["n_recommended"] == {"higher_is_better": None, "direction": "none", "binary": False,
                                         "aggregation": "mean"}
    print(f"\n{task}: {len(methods) - len(refused)} methods ({', '.join(refused) or 'none'} refused), {len(seen)} "
          "metrics, directions "
          + ", ".join(f"{k}={v['direction']}" for k, v in sorted(seen.items())))


# ---- a user's own task with a metric nobody registered ---------------------------------------------------------------
from recbench.tasks.generic.task import GenericTask  # noqa: E402

pytestmark = pytest.mark.full

USER_METRIC = "issue20_answer_length"


class UserMetricTask(GenericTask):
    """A user's task (config `_target_`) that adds a metric of its own without registering it."""

    def score(self, example, outcome):
        out = super().score(example, outcome)
        out[USER_METRIC] = float(len(str(outcome.prediction or "")))
        return out


def test_an_unregistered_metric_of_a_user_task_is_direction_unknown_everywhere(tmp_path, caplog):
    """It still warns (once), metrics.json records direction 'unknown', compare says 'direction unknown' and never
    'better', and the report neither marks nor letters its column and names it in the caption."""
    from recbench.stats.verdicts import CompareError, compare_runs, letters
    from recbench.report import build_report

    caplog.set_level(logging.WARNING, logger="recbench.api.metrics")
    for method in ("zero_shot", "random"):
        cfg = compose_cfg(["task=generic_yesno", f"task._target_={__name__}.UserMetricTask", f"method={method}",
                           "run.progress=false", f"cache.path={tmp_path / 'cache.sqlite'}"])
        run_from_config(cfg, tmp_path / "runs" / method, backend=ScriptedBackend(lambda r: "yes"))
    info = json.loads((tmp_path / "runs" / "zero_shot" / "metrics.json").read_text())["metric_info"]
    assert info[USER_METRIC] == {"higher_is_better": None, "direction": "unknown", "binary": False,
                                 "aggregation": "mean"}
    assert info["accuracy"]["direction"] == "higher"
    assert any(USER_METRIC in r.getMessage() and "direction unknown" in r.getMessage() for r in caplog.records)
    comps = {c.metric: c for c in compare_runs([tmp_path / "runs"], slices=False)}
    c = comps[USER_METRIC]
    assert c.direction == "unknown" and c.higher_is_better is None and c.better is None
    assert c.verdict == "direction unknown" and c.diff != 0
    assert comps["accuracy"].verdict in ("n.s.", "random better", "zero_shot better")
    with pytest.raises(CompareError, match="no direction"):
        letters(list(comps.values()), USER_METRIC)
    rep = build_report([tmp_path / "runs"])
    t = next(t for t in rep.tables if t.id.endswith("generic_yesno"))
    j = [col[0] for col in t.columns].index(USER_METRIC)
    cells = [cells[j] for _, cells in t.rows]
    assert len(cells) == 2 and all(x.mark is None and x.letters == "" for x in cells)
    assert f"no direction (a count or an unregistered metric: never marked best nor lettered): {USER_METRIC}" \
        in t.caption
    assert not any(x["metric"] == USER_METRIC for x in rep.significance.letters)
