"""The small first-hour points of issue 23: list descriptions end at the first sentence, a mistyped method lists the
chosen task's methods, plan mode does not print 'note: warning:', the data README a data error points to exists,
setup.sh ends with the next step, `list ... | head` ends quietly, and the README's reference-row figures are what a
run prints."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from recbench.cli.overrides import check_overrides

from recbench.run.evaluate import run_from_config
from recbench.cli.catalogue import default_choice, description, first_sentence, list_methods, methods_for_task
from recbench.api.errors import ConfigError
from tests.helpers import compose_cfg

pytestmark = pytest.mark.full

REPO = Path(__file__).resolve().parents[2]


def test_a_comment_line_ending_a_sentence_ends_the_description():
    assert first_sentence("# One sentence.\n# another comment line\nkey: 1\n") == "One sentence."
    text = "# Starts here and\n# goes on (e.g.\n# an example).\n"
    assert first_sentence(text) == "Starts here and goes on (e.g. an example)."
    d = description("task", "recbench_plus_ml100k")
    assert d.endswith("not redistributable).") and "method used" not in d


@pytest.mark.parametrize("task,typo", [("perrec", "listwse"), ("recbench_plus", "assitant"),
                                       ("llmrec_rating", "zero_sht")])
def test_a_mistyped_method_lists_the_methods_of_the_chosen_task(task, typo):
    with pytest.raises(ConfigError) as e:
        check_overrides([f"task={task}", f"method={typo}"])
    msg = str(e.value)
    listed = msg.split(f"with task={task}: ")[1].split(" (every task")[0].split(", ")
    names = [ln.split()[0] for ln in list_methods(task)]
    assert listed == sorted(names) == methods_for_task(task) and "Did you mean" in msg and f"task={task}" in msg


def test_without_task_the_default_task_is_used():
    assert default_choice("task") == compose_cfg([]).task.name
    with pytest.raises(ConfigError) as e:
        check_overrides(["method=listwse"])
    assert f"with task={default_choice('task')}" in str(e.value)
    listed = str(e.value).split(f"with task={default_choice('task')}: ")[1].split(" (every task")[0].split(", ")
    assert listed == methods_for_task(default_choice("task"))


def test_plan_mode_prints_warnings_without_the_note_prefix(tmp_path):
    env = {**os.environ, "RECBENCH_RUNS_DIR": str(tmp_path / "runs")}
    p = subprocess.run([sys.executable, "-m", "recbench", "mode=plan", "method=listwise", "limit=3",
                        f"cache.path={tmp_path / 'c.sqlite'}"], cwd=REPO, capture_output=True, text=True, env=env,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert "note: warning" not in p.stdout and re.search(r"^warning: with n=3", p.stdout, re.M), p.stdout


def test_the_data_readme_a_data_error_names_exists_and_describes_every_folder(tmp_path):
    cfg = compose_cfg(["method=bm25_history", f"task.data_dir={tmp_path / 'nope'}", "run.progress=false",
                       f"cache.path={tmp_path / 'c.sqlite'}"])
    with pytest.raises(FileNotFoundError) as e:
        run_from_config(cfg, tmp_path / "run")
    named = re.search(r"see (data/\S+\.md)", str(e.value)).group(1)
    text = (REPO / named).read_text()
    for folder in (p.name for p in (REPO / "data").iterdir() if p.is_dir() and not p.name.startswith("__")):
        assert f"`{folder}/`" in text, folder
    # a benchmark's generator: its synth module, or its builder's (perrec: tasks/perrec/build/synth.py)
    generators = re.findall(r"`python -m recbench\.tasks\.(\w+)\.((?:build\.)?)synth --out data/(\w+)`", text)
    assert len(generators) == 4  # perrec, recbench_plus, llmrec, explanation_judging
    for pkg, build, folder in generators:
        module = REPO / "tasks" / pkg / build.replace(".", "/") / "synth.py"
        assert module.is_file() and (REPO / "data" / folder).is_dir(), (pkg, folder)


def test_setup_ends_with_the_next_step():
    last = [ln for ln in (REPO / "scripts" / "setup.sh").read_text().splitlines() if ln.strip()][-1]
    assert last.startswith("echo ") and "python -m recbench doctor" in last and ".venv/bin/activate" in last


def test_readme_reference_rows_are_what_a_run_prints(tmp_path):
    readme = (REPO / "README.md").read_text()
    for method in ("random", "bm25_history"):
        cfg = compose_cfg([f"method={method}", "run.progress=false", f"cache.path={tmp_path / 'c.sqlite'}"])
        m = run_from_config(cfg, tmp_path / method).to_dict()["metrics"]["ptc"]
        row = f"| `{method}` | {m['mean']:.3f} | [{m['ci_low']:.3f}, {m['ci_high']:.3f}] |"
        assert row in readme, row


def test_a_reader_that_closes_the_pipe_early_gets_no_traceback():
    r = subprocess.run(f"'{sys.executable}' -m recbench list methods | head -1", shell=True, cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert r.stdout.count("\n") == 1 and r.stdout.startswith("explanation_judging/"), r.stdout
    assert r.stderr == "", r.stderr  # was: BrokenPipeError's traceback from print()
