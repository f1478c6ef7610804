"""Malformed config, data and run-store input through the entry point (in-process) on the toy task: every case gives
one clean error line (exit 2) or a repair (exit 0), never a traceback, and never loses a finished example.
(PerRecBench's data defects through the CLI: tests/perrec/test_perrec_bad_data_cli.py.)"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers import run_cli
from tests.toy import TOY, isolate
from tests.toy.task import DATA

pytestmark = pytest.mark.fast
RUN = ["method=toy_popular", "limit=10"]


@pytest.fixture()
def cli(tmp_path, monkeypatch, capfd):
    """`python -m recbench <TOY> <args>` in this process, runs and cache under tmp_path (module: another entry point)."""
    isolate(monkeypatch, tmp_path)

    def go(*args: str, module: str = "recbench"):
        if module == "recbench":
            return run_cli([*TOY, *args], capfd)
        from recbench.report.__main__ import main as report_main

        capfd.readouterr()
        code = report_main(list(args))
        out, err = capfd.readouterr()
        return type("R", (), {"code": code, "out": out, "err": err})()

    return go


def _files(root: Path) -> dict[str, bytes]:
    """Every file under root (relative path -> bytes)."""
    return {str(f.relative_to(root)): f.read_bytes() for f in sorted(root.rglob("*")) if f.is_file()} if root.exists() else {}


def _one_clean_line(p) -> str:
    """The single error line of a failed run (asserts there is no traceback and one 'recbench' line)."""
    assert "Traceback" not in p.err + p.out, p.err
    lines = [ln for ln in p.err.splitlines() if ln.startswith("recbench") and " ready in " not in ln]
    assert len(lines) == 1, p.err
    return lines[0]


CONFIG_CASES = {
    "negative temperature": (["sampling.temperature=-1"], "sampling.temperature"),
    "top_p zero": (["sampling.top_p=0"], "sampling.top_p"),
    "top_p above one": (["sampling.top_p=1.5"], "sampling.top_p"),
    "limit zero": (["limit=0"], "limit"),
    "limit not a number": (["limit=abc"], "limit"),
    "seed not a number": (["seed=abc"], "seed"),
    "chunk size zero": (["run.chunk_size=0"], "run.chunk_size"),
    "bootstrap zero": (["run.bootstrap_resamples=0"], "run.bootstrap_resamples"),
    "ci level two": (["run.ci_level=2"], "run.ci_level"),
    "unknown limit strategy": (["run.limit_strategy=bogus"], "run.limit_strategy"),
    "method typo": (["method=toy_populr"], "Did you mean 'toy_popular'"),
    "unknown key": (["run.chunksize=4"], "Did you mean 'chunk_size'"),
    "batch size zero": (["model=smollm2", "method=toy_rank", "model.backend.batch_size=0"], "model.backend.batch_size"),
    "concurrency zero": (["model=smollm2-openai", "method=toy_rank", "model.backend.concurrency=0"],
                         "model.backend.concurrency"),
    "max tokens zero": (["model=smollm2", "method=toy_rank", "method.max_tokens=0"], "method.max_tokens"),
}


#: one case per mechanism in the fast tier (the run-config check, a compose-time type, a group typo, an unknown key, a
#: backend key); every case in the full tier
FAST_CASES = {"negative temperature", "limit not a number", "method typo", "unknown key", "batch size zero"}


@pytest.mark.parametrize("case", [c if c in FAST_CASES else pytest.param(c, marks=pytest.mark.full)
                                  for c in sorted(CONFIG_CASES)])
def test_bad_config_is_one_line(cli, case):
    args, needle = CONFIG_CASES[case]
    base = [a for a in RUN if not any(a.split("=")[0] == b.split("=")[0] for b in args)]
    p = cli(*base, *args)
    assert p.code == 2, (p.code, p.err)
    assert needle in _one_clean_line(p)


def test_missing_api_key_is_one_line_naming_the_variable(cli):
    """A backend that cannot be set up (here: no API key) gives the one-line style, no Hydra wrapper, exit 2."""
    p = cli("model=gpt4o", "method=toy_rank", "limit=2")
    assert p.code == 2, (p.code, p.err)
    line = _one_clean_line(p)
    assert "OPENAI_API_KEY" in line and "model.backend" in line and "Error executing job" not in p.err


REFUSED_SETTINGS = {
    "a filter that selects nothing": (["task.levels=[]"], "task.levels=[]: must be a list of at least 1 element(s)"),
    "a level the task does not have": (["task.levels=[extreme]"], "task.levels=[extreme]: must be a list"),
    "a run dir outside the runs dir": (["task.name=../../x"], "task.name=../../x: must be a plain name"),
}


@pytest.mark.parametrize("case", sorted(REFUSED_SETTINGS))
def test_bad_setting_is_one_line_and_writes_nothing(tmp_path, cli, case):
    args, needle = REFUSED_SETTINGS[case]
    before = {f.name for f in tmp_path.parent.iterdir()}
    p = cli(*RUN, *args)
    assert p.code == 2, p.err
    assert needle in _one_clean_line(p)
    assert _files(tmp_path / "runs") == {}  # Hydra's own files of the refused job are gone too
    assert {f.name for f in tmp_path.parent.iterdir()} == before  # nothing landed beside the test's folder


def _data_copy(tmp: Path) -> Path:
    """A copy of the toy data folder; returns its examples.jsonl."""
    (tmp / "data").mkdir()
    shutil.copy(DATA, tmp / "data" / "examples.jsonl")
    return tmp / "data" / "examples.jsonl"


def test_a_refused_rerun_leaves_a_finished_run_as_it_was(tmp_path, cli):
    """A finished run, then the same command on data with a planted defect: exit 2 and every file of the run dir
    (samples, metrics, config, versions) byte-identical: bad input never reaches the run."""
    d = _data_copy(tmp_path)
    args = [*RUN, f"task.data_dir={d.parent}"]
    assert cli(*args).code == 0
    run = next((tmp_path / "runs").rglob("metrics.json")).parent
    kept = {k: v for k, v in _files(run).items() if not k.startswith(".hydra") and not k.endswith(".log")}
    lines = d.read_text().splitlines()
    rec = json.loads(lines[1])
    rec.pop("items")
    d.write_text("\n".join([lines[0], json.dumps(rec), *lines[2:]]) + "\n")
    p = cli(*args)
    assert p.code == 2 and f"{d}:2: the example has no field 'items'" in _one_clean_line(p)
    assert {k: v for k, v in _files(run).items() if k in kept} == kept and set(kept) <= set(_files(run))


def test_missing_and_torn_data_file(tmp_path, cli):
    p = cli(*RUN, f"task.data_dir={tmp_path / 'nowhere'}")
    assert p.code == 2 and "task.data_dir: no file examples.jsonl" in (line := _one_clean_line(p)) and "nowhere" in line
    d = _data_copy(tmp_path)
    d.write_text(d.read_text()[:500])  # torn mid-line
    p = cli(*RUN, f"task.data_dir={d.parent}")
    assert p.code == 2 and f"{d.name}:2" in _one_clean_line(p)
    assert _files(tmp_path / "runs") == {}


def _finished_run(tmp: Path, cli) -> Path:
    p = cli(*RUN)
    assert p.code == 0, p.err
    return next((tmp / "runs").rglob("samples.jsonl")).parent


def test_torn_samples_and_prompts_tails_are_repaired_and_saved(tmp_path, cli):
    run = _finished_run(tmp_path, cli)
    samples = run / "samples.jsonl"
    good = samples.read_bytes()
    samples.write_bytes(good + b'{"id": "easy-0')  # a kill mid-write
    (run / "prompts.jsonl").write_text('{"key": "abc", "mess')
    p = cli(*RUN)
    assert p.code == 0 and "Traceback" not in p.err
    assert samples.read_bytes() == good  # the valid prefix is kept whole: no finished example lost
    torn = list(run.glob("samples.jsonl.torn-*"))
    assert len(torn) == 1 and torn[0].read_bytes() == b'{"id": "easy-0'
    assert (run / "prompts.jsonl").read_text() == "" and list(run.glob("prompts.jsonl.torn-*"))


def test_broken_samples_line_is_named_and_kept(tmp_path, cli):
    run = _finished_run(tmp_path, cli)
    samples = run / "samples.jsonl"
    lines = samples.read_text().splitlines()
    broken = "\n".join(lines[:4] + ["{oops"] + lines[4:]) + "\n"
    samples.write_text(broken)
    p = cli(*RUN)
    assert p.code == 2 and "samples.jsonl:5" in _one_clean_line(p)
    assert samples.read_text() == broken  # nothing dropped: the user decides


def test_duplicate_ids_are_ignored_first_wins_and_a_corrupt_metrics_json_is_rebuilt(tmp_path, cli):
    run = _finished_run(tmp_path, cli)
    before = json.loads((run / "metrics.json").read_text())
    samples = run / "samples.jsonl"
    lines = samples.read_text().splitlines()
    samples.write_text("\n".join(lines + lines) + "\n")  # two writers appended every example twice
    (run / "metrics.json").write_text("{ half a file")
    p = cli(*RUN)
    assert p.code == 0, p.err
    m = json.loads((run / "metrics.json").read_text())
    assert m["counts"]["examples"] == 10 and m["metrics"]["toy_tau"]["n"] == 10
    assert m["metrics"] == before["metrics"]


def test_corrupt_cache_names_path_and_way_out(tmp_path, cli):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "responses.sqlite").write_bytes(b"this is not a database" * 200)
    p = cli(*RUN)
    assert p.code == 2
    line = _one_clean_line(p)
    assert "responses.sqlite" in line and "cache.enabled=false" in line


def test_unreadable_schema_version_in_report_is_skipped_with_a_line(tmp_path, cli, caplog):
    run = _finished_run(tmp_path, cli)
    m = json.loads((run / "metrics.json").read_text())
    m["schema_version"] = 99
    (run / "metrics.json").write_text(json.dumps(m))
    p = cli(str(tmp_path / "runs"), "-o", str(tmp_path / "rep"), module="recbench.report")
    assert p.code == 0 and "Traceback" not in p.err
    skipped = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "skipping" in r.getMessage()]
    assert len(skipped) == 1 and str(run) in skipped[0] and "schema_version 99 is not readable" in skipped[0]


def test_second_process_on_the_same_run_dir_fails_at_once(tmp_path, cli):
    from filelock import FileLock

    run = _finished_run(tmp_path, cli)
    with FileLock(str(run / ".recbench.lock"), timeout=0):
        (run / ".recbench.lock.owner").write_text(json.dumps({"pid": 4242, "host": "node7"}))
        p = cli(*RUN)
    assert p.code == 2
    assert "run dir in use by pid 4242 (host node7)" in _one_clean_line(p)
