"""Malformed config, data and run-store input through the real CLI: every case gives one clean error line (exit 2)
or a repair (exit 0), never a traceback, and never loses a finished example."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from recbench.run.construct import bundled_data

REPO = Path(__file__).resolve().parents[2]
RUN = ["method=bm25_history", "limit=10", "run.progress=false"]


def _cli(tmp: Path, *args: str, module: str = "recbench") -> subprocess.CompletedProcess:
    env = {**os.environ, "RECBENCH_RUNS_DIR": str(tmp / "runs"), "RECBENCH_CACHE_DIR": str(tmp / "cache"),
           "HYDRA_FULL_ERROR": "0"}
    return subprocess.run([sys.executable, "-m", module, *args], cwd=tmp, env=env, capture_output=True, text=True,
                          timeout=300)


def _files(root: Path) -> dict[str, bytes]:
    """Every file under root (relative path -> bytes)."""
    return {str(f.relative_to(root)): f.read_bytes() for f in sorted(root.rglob("*")) if f.is_file()} if root.exists() else {}


def _one_clean_line(p: subprocess.CompletedProcess) -> str:
    """The single error line of a failed run (asserts there is no traceback and one 'recbench' line)."""
    err = p.stderr + p.stdout
    assert "Traceback" not in err, err
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("recbench")]
    assert len(lines) == 1, p.stderr
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
    "method typo": (["method=bm25_histroy"], "Did you mean 'bm25_history'"),
    "task typo": (["task=perec"], "Did you mean 'perrec'"),
    "unknown key": (["run.chunksize=4"], "Did you mean 'chunk_size'"),
    "batch size zero": (["model=smollm2", "method=listwise", "model.backend.batch_size=0"], "model.backend.batch_size"),
    "concurrency zero": (["model=smollm2-openai", "method=listwise", "model.backend.concurrency=0"],
                         "model.backend.concurrency"),
    "max tokens zero": (["model=smollm2", "method=listwise", "method.max_tokens=0"], "method.max_tokens"),
}


@pytest.mark.parametrize("case", sorted(CONFIG_CASES))
def test_bad_config_is_one_line(tmp_path, case):
    args, needle = CONFIG_CASES[case]
    base = [a for a in RUN if not any(a.split("=")[0] == b.split("=")[0] for b in args)]
    p = _cli(tmp_path, *base, *args)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert needle in _one_clean_line(p)


def test_missing_api_key_is_one_line_naming_the_variable(tmp_path, monkeypatch):
    """A backend that cannot be set up (here: no API key) gives the one-line style, no Hydra wrapper, exit 2."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    p = _cli(tmp_path, "model=gpt4o", "method=listwise", "limit=2", "run.progress=false")
    assert p.returncode == 2, (p.returncode, p.stderr)
    line = _one_clean_line(p)
    assert "OPENAI_API_KEY" in line and "model.backend" in line and "Error executing job" not in p.stderr


def _data_copy(tmp: Path) -> Path:
    d = tmp / "data"
    shutil.copytree(bundled_data("perrec_sample"), d)
    return d


def _mutate_groups(d: Path, how: str) -> None:
    p = d / "groups.jsonl"
    lines = p.read_text().splitlines()
    if how == "torn":
        p.write_text("\n".join(lines[:5]) + "\n" + lines[5][: len(lines[5]) // 2])
    elif how == "garbage":
        p.write_text("\n".join(lines[:3] + ["{not json"] + lines[3:]) + "\n")
    elif how == "no users":
        rec = json.loads(lines[2])
        rec.pop("users")
        lines[2] = json.dumps(rec)
        p.write_text("\n".join(lines) + "\n")
    elif how == "unknown item":
        rec = json.loads(lines[1])
        rec["query_item"] = "no-such-item"
        lines[1] = json.dumps(rec)
        p.write_text("\n".join(lines) + "\n")
    elif how == "NaN rating":  # JSON NaN parses as a float: it must not reach the ranking
        p.write_text(p.read_text().replace('"rating": 1.0', '"rating": NaN', 1))
    elif how == "user twice":
        rec = json.loads(lines[1])
        rec["users"].append(dict(rec["users"][0]))
        lines[1] = json.dumps(rec)
        p.write_text("\n".join(lines) + "\n")
    elif how == "group_id twice":
        rec = json.loads(lines[1])
        rec["group_id"] = json.loads(lines[0])["group_id"]
        lines[1] = json.dumps(rec)
        p.write_text("\n".join(lines) + "\n")
    elif how == "empty":
        p.write_text("")
    elif how == "not UTF-8":
        p.write_bytes(p.read_bytes().replace(b"easy-0002", b"easy-\xff002", 1))
    elif how == "ratings not gzip":
        r = p.parent / "ratings.csv.gz"
        r.write_bytes(gzip.decompress(r.read_bytes()))
    elif how == "ratings text":
        r = p.parent / "ratings.csv.gz"
        rows = gzip.decompress(r.read_bytes()).decode().splitlines()
        rows[4] = rows[4].rsplit(",", 2)[0] + ",five," + rows[4].rsplit(",", 1)[1]
        r.write_bytes(gzip.compress(("\n".join(rows) + "\n").encode()))


DATA_CASES = {
    "groups torn mid-line": ("torn", "groups.jsonl:6"),
    "groups garbage line": ("garbage", "groups.jsonl:4"),
    "group without users": ("no users", "groups.jsonl:3: the group has no field 'users'"),
    "unknown query item": ("unknown item", "query_item no-such-item"),
    "NaN rating of a member": ("NaN rating", "groups.jsonl:1: member u0192: field 'rating' = NaN is not a finite number"),
    "a user twice in a group": ("user twice", "groups.jsonl:2: member 3: user 'u0215' was already given at"),
    "a group_id twice": ("group_id twice", "groups.jsonl:2: group_id 'easy-0000' was already given at"),
    "empty groups file": ("empty", "groups.jsonl: the file is empty (0 bytes)"),
    "groups line not UTF-8": ("not UTF-8", "groups.jsonl:3: not UTF-8 text (byte 0xff"),
    "ratings file not gzip": ("ratings not gzip", "ratings.csv.gz: cannot be read as gzip"),
    "non-numeric rating": ("ratings text", "ratings.csv.gz:5: column 'rating' is 'five', not a finite number"),
}


@pytest.mark.parametrize("case", sorted(DATA_CASES))
def test_bad_data_names_file_and_line(tmp_path, case):
    """Refused before the run dir is touched: exit 2, one line naming the file and line, no run dir left behind."""
    how, needle = DATA_CASES[case]
    d = _data_copy(tmp_path)
    _mutate_groups(d, how)
    p = _cli(tmp_path, *RUN, "limit=50", f"task.data_dir={d}")
    assert p.returncode == 2, p.stderr
    assert needle in _one_clean_line(p)
    assert _files(tmp_path / "runs") == {}  # Hydra's own files of the refused job are gone too


REFUSED_SETTINGS = {
    "history_max 0 (used to keep the whole history)": (["task.history_max=0"], "task.history_max=0: must be a whole "
                                                                               "number >= 1"),
    "unknown format (used to load the default)": (["task.format=relased"], "task.format=relased: must be one of "
                                                                           "recbench, released. Did you mean 'released'?"),
    "a filter that selects nothing": (["task.difficulties=[extreme]"], "task.difficulties: 'extreme' is not a difficulty"),
    "a run dir outside the runs dir": (["task.name=../../x"], "task.name=../../x: must be a plain name"),
}


@pytest.mark.parametrize("case", sorted(REFUSED_SETTINGS))
def test_bad_setting_is_one_line_and_writes_nothing(tmp_path, case):
    args, needle = REFUSED_SETTINGS[case]
    before = {f.name for f in tmp_path.parent.iterdir()}
    p = _cli(tmp_path, *RUN, *args)
    assert p.returncode == 2, p.stderr
    assert needle in _one_clean_line(p)
    assert _files(tmp_path / "runs") == {}
    assert {f.name for f in tmp_path.parent.iterdir()} == before  # nothing landed beside the test's folder


def test_a_refused_rerun_leaves_a_finished_run_as_it_was(tmp_path):
    """A finished run, then the same command on data with a planted defect: exit 2 and every file of the run dir
    (samples, metrics, config, versions) byte-identical: bad ground truth never reaches the run."""
    d = _data_copy(tmp_path)
    args = [*RUN, f"task.data_dir={d}"]
    assert _cli(tmp_path, *args).returncode == 0
    run = next((tmp_path / "runs").rglob("metrics.json")).parent
    kept = {k: v for k, v in _files(run).items() if not k.startswith(".hydra") and not k.endswith(".log")}
    _mutate_groups(d, "NaN rating")
    p = _cli(tmp_path, *args)
    assert p.returncode == 2 and "field 'rating' = NaN" in _one_clean_line(p)
    assert {k: v for k, v in _files(run).items() if k in kept} == kept and set(kept) <= set(_files(run))


def test_missing_data_folder_and_file(tmp_path):
    p = _cli(tmp_path, *RUN, f"task.data_dir={tmp_path / 'nowhere'}")
    assert p.returncode == 2 and "nowhere" in _one_clean_line(p)
    d = _data_copy(tmp_path)
    (d / "items.jsonl").unlink()
    p = _cli(tmp_path, *RUN, f"task.data_dir={d}")
    assert p.returncode == 2 and "items.jsonl" in _one_clean_line(p)


def _finished_run(tmp: Path) -> Path:
    p = _cli(tmp, *RUN)
    assert p.returncode == 0, p.stderr
    return next((tmp / "runs").rglob("samples.jsonl")).parent


def test_torn_samples_tail_is_repaired_and_saved(tmp_path):
    run = _finished_run(tmp_path)
    samples = run / "samples.jsonl"
    good = samples.read_bytes()
    samples.write_bytes(good + b'{"id": "easy-00')  # a kill mid-write
    p = _cli(tmp_path, *RUN)
    assert p.returncode == 0 and "Traceback" not in p.stderr
    assert samples.read_bytes() == good  # the valid prefix is kept whole: no finished example lost
    torn = list(run.glob("samples.jsonl.torn-*"))
    assert len(torn) == 1 and torn[0].read_bytes() == b'{"id": "easy-00'


def test_torn_prompts_tail_is_repaired(tmp_path):
    run = _finished_run(tmp_path)
    (run / "prompts.jsonl").write_text('{"key": "abc", "mess')
    p = _cli(tmp_path, *RUN)
    assert p.returncode == 0 and (run / "prompts.jsonl").read_text() == ""
    assert list(run.glob("prompts.jsonl.torn-*"))


def test_broken_samples_line_is_named_and_kept(tmp_path):
    run = _finished_run(tmp_path)
    samples = run / "samples.jsonl"
    lines = samples.read_text().splitlines()
    broken = "\n".join(lines[:4] + ["{oops"] + lines[4:]) + "\n"
    samples.write_text(broken)
    p = _cli(tmp_path, *RUN)
    assert p.returncode == 2 and "samples.jsonl:5" in _one_clean_line(p)
    assert samples.read_text() == broken  # nothing dropped: the user decides


def test_duplicate_ids_are_ignored_first_wins(tmp_path):
    run = _finished_run(tmp_path)
    samples = run / "samples.jsonl"
    lines = samples.read_text().splitlines()
    samples.write_text("\n".join(lines + lines) + "\n")  # two writers appended every example twice
    p = _cli(tmp_path, *RUN)
    assert p.returncode == 0, p.stderr
    m = json.loads((run / "metrics.json").read_text())
    assert m["counts"]["examples"] == 10 and m["metrics"]["ptc"]["n"] == 10


def test_corrupt_metrics_json_is_rebuilt(tmp_path):
    run = _finished_run(tmp_path)
    before = json.loads((run / "metrics.json").read_text())
    (run / "metrics.json").write_text("{ half a file")
    p = _cli(tmp_path, *RUN)
    assert p.returncode == 0
    after = json.loads((run / "metrics.json").read_text())
    assert after["metrics"] == before["metrics"]


def test_corrupt_cache_names_path_and_way_out(tmp_path):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "responses.sqlite").write_bytes(b"this is not a database" * 200)
    p = _cli(tmp_path, *RUN)
    assert p.returncode == 2
    line = _one_clean_line(p)
    assert "responses.sqlite" in line and "cache.enabled=false" in line


def test_unreadable_schema_version_in_report_is_skipped_with_a_line(tmp_path):
    run = _finished_run(tmp_path)
    m = json.loads((run / "metrics.json").read_text())
    m["schema_version"] = 99
    (run / "metrics.json").write_text(json.dumps(m))
    p = _cli(tmp_path, str(tmp_path / "runs"), "-o", str(tmp_path / "rep"), module="recbench.report")
    assert "Traceback" not in p.stderr and "schema_version 99" in p.stderr


def test_second_process_on_the_same_run_dir_fails_at_once(tmp_path):
    from filelock import FileLock

    run = _finished_run(tmp_path)
    with FileLock(str(run / ".recbench.lock"), timeout=0):
        (run / ".recbench.lock.owner").write_text(json.dumps({"pid": 4242, "host": "node7"}))
        p = _cli(tmp_path, *RUN)
    assert p.returncode == 2
    assert "run dir in use by pid 4242 (host node7)" in _one_clean_line(p)
