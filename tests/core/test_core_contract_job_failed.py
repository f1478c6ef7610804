"""Issue 24, item 4: job_failed.json is a versioned schema record (recbench.store.schema.JobFailed), written by the
sweep and read by the exit code, the report's results.json and the terminal summary only through it."""
from __future__ import annotations

import json

import pytest

from recbench.cli.exits import EXIT_CANNOT_RUN
from recbench.cli.sweep import failed_job_codes, write_job_failed
from recbench.report.results import failed_jobs
from recbench.store.schema import JOB_FAILED, JOB_FAILED_VERSION, JobFailed, SchemaError, read_job_failed

pytestmark = pytest.mark.fast


def _raise(msg: str) -> BaseException:
    try:
        raise RuntimeError(msg)
    except RuntimeError as e:
        return e


def test_written_and_read_back_through_the_record(tmp_path):
    f = write_job_failed(tmp_path / "sweep" / "0", _raise("server down"), 2, ["model=gpt4o", "seed=1"])
    d = json.loads(f.read_text())
    assert f.name == JOB_FAILED and list(d)[0] == "schema_version" and d["schema_version"] == JOB_FAILED_VERSION == 1
    assert d["error"] == "RuntimeError: server down" and d["exit_code"] == 2
    assert d["overrides"] == ["model=gpt4o", "seed=1"] and 'raise RuntimeError(msg)' in d["traceback_tail"]
    rec = read_job_failed(f.parent)
    assert rec == JobFailed("RuntimeError: server down", 2, ["model=gpt4o", "seed=1"], d["traceback_tail"])
    assert read_job_failed(tmp_path) is None  # no file: no record


def test_a_secret_in_the_error_is_masked_in_the_file(tmp_path):
    f = write_job_failed(tmp_path, _raise("GET https://user:hunter2pass@host/v1 failed"), 2, [])
    assert "hunter2pass" not in f.read_text() and read_job_failed(tmp_path).exit_code == 2


def test_files_written_before_versioning_still_read(tmp_path):
    (tmp_path / JOB_FAILED).write_text(json.dumps({"error": "BackendUnavailable: server down", "exit_code": 2}))
    assert read_job_failed(tmp_path) == JobFailed("BackendUnavailable: server down", 2)


@pytest.mark.parametrize("content, why", [
    ('{"schema_version": 2, "error": "x", "exit_code": 2}', "schema_version 2 is not readable"),
    ('{"error": "x"}', "malformed"),
    ('{"error": "x", "exit_code": 2, "overrides": "model=a"}', "'overrides' is not a list"),
    ("[1, 2]", "a JSON list, not an object"),
    ("{not json", "not valid JSON"),
])
def test_what_the_record_refuses_names_the_file(tmp_path, content, why):
    (tmp_path / JOB_FAILED).write_text(content)
    with pytest.raises(SchemaError, match=rf"{tmp_path / JOB_FAILED}.*{why}"):
        read_job_failed(tmp_path)


def test_every_reader_goes_through_the_record(tmp_path):
    sweep = tmp_path / "sweep"
    write_job_failed(sweep / "0", _raise("bad data"), 3, ["task=x"])
    (sweep / "1").mkdir(parents=True)
    (sweep / "1" / JOB_FAILED).write_text('{"schema_version": 9}')  # unreadable: still a failed job
    assert sorted(failed_job_codes(sweep)) == [EXIT_CANNOT_RUN, 3]
    jobs = {j.run_dir.rsplit("/", 1)[-1]: j for j in failed_jobs([sweep])}
    assert (jobs["0"].error, jobs["0"].exit_code, jobs["0"].overrides) == ("RuntimeError: bad data", 3, ["task=x"])
    assert jobs["1"].exit_code == 2 and jobs["1"].error.startswith("unreadable: ") and "schema_version 9" in jobs["1"].error
