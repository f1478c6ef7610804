"""`python -m recbench list models|tasks|methods`: one line per entry with its description, fast (no torch)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from recbench.cli.catalogue import first_sentence, list_methods, list_models, list_tasks, main, names

pytestmark = pytest.mark.fast

REPO = Path(__file__).resolve().parents[2]


def test_list_models_for_a_paper_is_its_roster():
    lines = list_models("perrec")
    assert len(lines) == 19 and all("perrec" in ln.split()[2] for ln in lines)
    by = {ln.split()[0]: ln for ln in lines}
    assert "Gemma-2-9B-it (PerRecBench Table 1)" in by["gemma9b"] and by["gemma9b"].split()[1] == "vllm"
    assert by["gpt4o"].split()[1] == "openai"
    assert {ln.split()[0] for ln in list_models("recbench_plus")} == {
        "gpt4o", "gpt4o-mini", "gemini15-pro", "claude35-sonnet", "llama70b", "deepseek-v3", "deepseek-r1"}
    everything = list_models()
    assert len(everything) == len(names("model")) and any(ln.startswith("smollm2 ") for ln in everything)


def test_list_methods_for_a_task_is_what_its_class_accepts():
    p5 = {ln.split()[0]: ln for ln in list_methods("llmrec_sequential_p5")}
    assert set(p5) == {"item_knn", "mf", "popularity", "random", "zero_shot"}
    assert p5["item_knn"].split()[1:3] == ["no", "model"] and p5["zero_shot"].split()[1] == "model"
    perrec = {ln.split()[0] for ln in list_methods("perrec")}
    assert {"pointwise", "pairwise_cot", "listwise_sc", "bm25_history", "random"} <= perrec
    assert "item_knn" not in perrec and "zero_shot" not in perrec
    with pytest.raises(ValueError, match="Unknown task 'perec'. Valid choices for --task: explanation_judging, generic_rating_csv"):
        list_methods("perec")


def test_list_tasks_names_the_benchmark_family_and_a_sentence():
    by = {ln.split()[0]: ln for ln in list_tasks()}
    assert set(by) == set(names("task"))
    assert by["llmrec_sequential_p5"].split()[1] == "llmrec" and by["perrec_released"].split()[1] == "perrec"
    assert by["perrec"].endswith("on the bundled SYNTHETIC sample (data/perrec_sample).")  # "et al." kept whole


def test_first_sentence_joins_comment_lines_and_stops_at_examples():
    text = "# Sweep jobs as processes (e.g. on a laptop). More text.\n# ignored\nname: x\n"
    assert first_sentence(text) == "Sweep jobs as processes (e.g. on a laptop)."
    assert first_sentence("# A long line\n# continued here\n#   python -m recbench ...\n") == "A long line continued here"


def test_cli_is_fast_and_imports_no_torch():
    code = ("import sys, time; t = time.time(); from recbench.cli.catalogue import main; "
            "main(['methods', '--task', 'perrec']); main(['models']); main(['tasks']); "
            "print('TORCH', 'torch' in sys.modules, round(time.time() - t, 2))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120).stdout
    assert "TORCH False" in out
    r = subprocess.run([sys.executable, "-m", "recbench", "list", "models", "--paper", "perrec"], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    entries = [ln for ln in r.stdout.splitlines() if not ln.startswith(" ")]  # wrapped lines continue indented
    assert r.returncode == 0 and len(entries) == 19 and max(len(ln) for ln in r.stdout.splitlines()) <= 120


def test_cli_errors(capsys):
    assert main(["methods", "--task", "nope"]) == 2 and "Unknown task 'nope'" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["models", "--task", "perrec"])


@pytest.mark.fast
def test_method_configs_live_in_one_folder_per_benchmark_and_each_is_its_benchmarks():
    from recbench.cli.catalogue import conf_dir, method_folders, method_group, methods_for_task, task_benchmark

    assert not list((conf_dir() / "method").glob("*.yaml"))  # no flat method config left
    assert {"generic", "llmrec", "perrec", "recbench_plus"} <= set(method_folders())
    by_bench: dict[str, set[str]] = {}
    for t in names("task"):
        by_bench.setdefault(task_benchmark(t), set()).update(methods_for_task(t))
    # every config in a folder is a method some task of that benchmark accepts (none documents another's meaning)
    for b in method_folders():
        assert set(names(method_group(b))) == by_bench[b], b
    assert task_benchmark("llmrec_summary_az23") == "llmrec" and task_benchmark("perrec_released") == "perrec"


@pytest.mark.full
def test_list_methods_without_a_task_names_each_benchmarks_folder():
    from recbench.cli.catalogue import conf_dir, method_folders

    lines = list_methods()
    by = {ln.split()[0]: ln for ln in lines}
    total = sum(len(list((conf_dir() / "method" / b).glob("*.yaml"))) for b in method_folders())
    assert len(lines) == total and "perrec/listwise" in by and "recbench_plus/assistant_history" in by
    # the shared names are one config per benchmark, each describing its own meaning
    randoms = [by[f"{b}/random"] for b in ("perrec", "llmrec", "generic")]
    assert all(r.split()[1:3] == ["no", "model"] for r in randoms)
    assert "ranking of the group's users" in randoms[0] and "rating 1-5" in randoms[1]
    assert "task.parser.choices" in randoms[2]
    assert by["llmrec/zero_shot"].split()[1] == "model" and "off-the-shelf" in by["llmrec/zero_shot"]
    out = subprocess.run([sys.executable, "-m", "recbench", "list", "methods", "--task", "generic_yesno"], cwd=REPO,
                         capture_output=True, text=True, timeout=120).stdout.splitlines()
    # popularity and random_items rank the items of a YAML task with task.items (issue 41); they refuse one without
    assert [ln.split()[0] for ln in out if not ln.startswith(" ")] == ["popularity", "random", "random_items", "zero_shot"]


def test_task_index_matches_the_task_classes():
    from recbench.cli.task_index import REGENERATE, build_index, read_index

    assert read_index() == build_index(), f"recbench/cli/task_index.json is stale: run {REGENERATE}"


def test_list_metrics_for_a_task_states_meaning_direction_and_why_n():
    from recbench.cli.catalogue import list_metrics

    by = {ln.split()[0]: ln for ln in list_metrics("recbench_plus")}
    assert {"recall", "ftr", "cmr", "kg_existence", "strict_recall", "n_recommended"} <= set(by)
    assert by["ftr"].split()[1:3] == ["recbench_plus", "lower"] and "format-error rate" in by["ftr"]
    assert by["cmr"].split()[2] == "higher" and "[defined on condition queries only (explicit, implicit" in by["cmr"]
    assert by["n_recommended"].split()[2] == "none"
    assert by["ndcg"].split()[1:3] == ["recbench_plus", "higher"] and "official RecBench+" in by["ndcg"]  # scored, so listed
    assert [ln.split()[:3] for ln in list_metrics("generic_yesno")] == [["accuracy", "standard", "higher"]]
    everything = {ln.split()[0]: ln.split()[1] for ln in list_metrics()}
    assert everything["ptc"] == "perrec" and everything["hr"] == "standard" and everything["coverage"] == "memorization"


def test_list_metrics_and_methods_import_no_task_package():
    code = ("import sys; from recbench.cli.catalogue import main; main(['methods', '--task', 'recbench_plus']); "
            "main(['metrics']); print('HEAVY', sorted(m for m in ('pandas', 'networkx', 'torch', 'hydra', "
            "'recbench.tasks.recbench_plus.task') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120).stdout
    assert "HEAVY []" in out, out[-500:]


def test_list_tasks_columns_fit_the_longest_name():
    lines = list_tasks()
    starts = {ln.index(ln.split()[1], len(ln.split()[0])) for ln in lines}
    assert len(starts) == 1  # the family column starts at one position, past the longest task name


@pytest.mark.full
def test_every_list_fits_120_columns_when_piped():
    """Issue 44 item 5: `list tasks` / `list metrics` reached 313-320 characters in a pipe; now every line wraps at
    120 (a terminal's own width when narrower), each continuation indented under the last column."""
    for what in ("tasks", "metrics", "methods", "models"):
        out = subprocess.run([sys.executable, "-m", "recbench", "list", what], cwd=REPO, capture_output=True,
                             text=True, timeout=120).stdout.splitlines()
        assert out and max(len(ln) for ln in out) <= 120, (what, max(out, key=len))
        assert not out[0].startswith(" ")
