"""Run-store and file failures end with one `recbench:` line and an honest exit code (2, or 143/130 for signals),
no traceback, no `*.tmp` left behind and no metrics.json written for the failed invocation: a damaged samples.jsonl
line, a damaged response cache met mid-run, a full disk (run dir or cache), a URL with credentials, a deleted
prompts.jsonl, SIGTERM and Ctrl-C. On the toy task; in-process through the entry point where the test is about
logic, in a second interpreter where it is about the process (signals, a sweep)."""
from __future__ import annotations

import errno
import json
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from recbench.run.evaluate import run_from_config
from recbench.store.response_cache import CACHE_FIX, ResponseCache, messages_hash
from recbench.store.diskspace import DiskFull
from recbench.testing.openai_stub import StubServer, default_answer
from tests.doubles import ScriptedBackend
from tests.helpers import run_cli
from tests.toy import TOY, isolate, toy_cfg
from tests.toy import toy_cli as _cli
from tests.toy.scripted import reverse

pytestmark = pytest.mark.fast
RUN_FILES = ("samples.jsonl", "prompts.jsonl", "metrics.json", "config.yaml", "versions.json")


class _Run:
    """A finished in-process run seen as a CompletedProcess (returncode, stdout, stderr)."""

    def __init__(self, r):
        self.returncode, self.stdout, self.stderr = r.code, r.out, r.err


@pytest.fixture()
def cli(tmp_path, monkeypatch, capfd):
    """`python -m recbench <TOY> <args>` in this process, runs and cache under tmp_path."""
    isolate(monkeypatch, tmp_path)
    return lambda *args: _Run(run_cli([*[a for a in args if a.startswith("-")], *TOY,
                                       *[a for a in args if not a.startswith("-")]], capfd))


def _one_error_line(stderr: str) -> str:
    """The one `recbench:` line of a failed run (informational `recbench: model ... ready` lines aside)."""
    assert "Traceback" not in stderr, stderr
    lines = [ln for ln in stderr.splitlines() if ln.startswith("recbench:") and " ready in " not in ln]
    assert len(lines) == 1, stderr
    return lines[0]


def _tmp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".tmp")]


def _snapshot(run_dir: Path) -> dict[str, bytes]:
    return {n: (run_dir / n).read_bytes() for n in RUN_FILES if (run_dir / n).exists()}


# ---- damaged run-store lines --------------------------------------------------------------------------------
DAMAGED_LINES = [
    (b'{"id": "x\xff\xfe"}\n', "not UTF-8 text"),
    (b"[1, 2, 3]\n", "a JSON list, not a record"),
    (b'{"id": "x", "calls": 5}\n', "'calls' is a int, not a list"),
    (b'{"id": "x", "calls": [7]}\n', "not a valid record"),
]


def test_a_damaged_samples_line_is_one_line_naming_file_and_line(tmp_path, cli):
    from recbench.cli import view

    first = cli("method=toy_popular", "limit=3")
    assert first.returncode == 0, first.stderr
    run_dir = next((tmp_path / "runs").rglob("samples.jsonl")).parent
    good = (run_dir / "samples.jsonl").read_bytes()
    for line, what in DAMAGED_LINES:  # each on the finished run's own samples
        (run_dir / "samples.jsonl").write_bytes(good + line)
        before = _snapshot(run_dir)
        p = cli("method=toy_popular", "limit=3")
        assert p.returncode == 2, p.stderr
        err = _one_error_line(p.stderr)
        assert f"{run_dir / 'samples.jsonl'}:4:" in err and what in err and "fix or delete this line" in err, err
        assert _snapshot(run_dir) == before and not _tmp_files(tmp_path)  # nothing written, metrics.json as it was
        assert view.main([str(run_dir)]) == 2  # the viewer says the same in one line (exit 2, as every command)


# ---- the response cache damaged or full --------------------------------------------------------------------
def _corrupt_table_leaves(path: Path) -> int:
    """Overwrite every table-leaf page of an SQLite file (rows live there; the key index stays readable, so the
    cache opens and the damage is found when the run reads its first answer). Returns the pages damaged."""
    data = bytearray(path.read_bytes())
    size = int.from_bytes(data[16:18], "big")
    size = 65536 if size == 1 else size
    hit = 0
    for off in range(size, len(data), size):  # page 1 (the schema) is kept
        if data[off] == 0x0D:
            data[off:off + size] = b"\xa5" * size
            hit += 1
    path.write_bytes(bytes(data))
    return hit


def test_a_cache_damaged_mid_run_is_one_line_and_no_metrics(tmp_path, cli):
    cache = tmp_path / "cache" / "responses.sqlite"
    with StubServer() as stub:
        url = f"model.backend.base_url={stub.base_url}"
        ok = cli("model=smollm2-openai", url, "limit=12")
        assert ok.returncode == 0, ok.stderr
        assert _corrupt_table_leaves(cache) >= 1
        sqlite3.connect(cache).execute("SELECT key FROM responses LIMIT 1").fetchall()  # still opens
        p = cli("model=smollm2-openai", url, "limit=10")
    assert p.returncode == 2, p.stderr
    err = _one_error_line(p.stderr)
    assert str(cache) in err and "move it aside" in err and "cache.enabled=false" in err, err
    (run_dir,) = [d for d in (tmp_path / "runs").rglob("limit=10*") if d.is_dir()]
    assert (run_dir / "config.yaml").exists() and not (run_dir / "metrics.json").exists()
    assert not _tmp_files(tmp_path)


def _limit_pages(monkeypatch, pages: int) -> None:
    """Every SQLite connection the cache opens may hold at most `pages` pages: SQLite's own SQLITE_FULL."""
    real = sqlite3.connect

    def connect(*a, **kw):
        con = real(*a, **kw)
        con.execute(f"PRAGMA max_page_count={pages}")
        return con

    monkeypatch.setattr("recbench.store.response_cache.sqlite3.connect", connect)


def test_a_full_cache_disk_says_disk_full_not_move_aside(tmp_path, monkeypatch):
    _limit_pages(monkeypatch, 1)
    with pytest.raises(DiskFull) as ei:
        ResponseCache(tmp_path / "c.sqlite")
    msg = str(ei.value)
    assert msg.startswith("disk full") and str(tmp_path / "c.sqlite") in msg and CACHE_FIX in msg
    assert "move it aside" not in msg


def test_an_sqlite_io_error_on_a_full_disk_is_a_full_disk(tmp_path, monkeypatch):
    """SQLite reports a full tmpfs as SQLITE_IOERR_SHMSIZE (measured), not SQLITE_FULL: an I/O error on a disk with
    under 1 MiB free is a full disk; with room it is a damaged cache."""
    import recbench.store.diskspace as ds

    e = sqlite3.OperationalError("disk I/O error")
    e.sqlite_errorname = "SQLITE_IOERR_SHMSIZE"
    monkeypatch.setattr(ds, "free_bytes", lambda p: 0)
    assert ds.is_full(e, tmp_path) and not ds.is_full(e)  # the free space decides, so it needs the path
    monkeypatch.setattr(ds, "free_bytes", lambda p: 10 << 30)
    assert not ds.is_full(e, tmp_path)
    assert ds.is_full(OSError(errno.ENOSPC, "No space left on device")) and ds.is_full(OSError(errno.EDQUOT, "quota"))
    assert not ds.is_full(OSError(errno.EACCES, "denied"))


def test_a_cache_filling_up_mid_run_is_disk_full_and_no_metrics(tmp_path, monkeypatch):
    _limit_pages(monkeypatch, 4)
    cfg = toy_cfg(["limit=24"], tmp_path)
    with pytest.raises(DiskFull, match="disk full: cannot write the response cache"):
        run_from_config(cfg, tmp_path / "run", backend=ScriptedBackend(reverse))
    assert not (tmp_path / "run" / "metrics.json").exists() and not _tmp_files(tmp_path)


# ---- a full disk under the run dir --------------------------------------------------------------------------
class _FullFile:
    """A file whose writes fail as on a full disk (ENOSPC) once `room` bytes are used."""

    def __init__(self, f, room: int):
        self._f, self.room, self.name = f, room, f.name

    def write(self, s: str) -> int:
        if len(s) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(s)
        return self._f.write(s)

    def flush(self) -> None:
        self._f.flush()

    def close(self) -> None:
        self._f.close()

    @property
    def closed(self) -> bool:
        return self._f.closed


def test_full_disk_mid_run_keeps_what_finished_and_the_rerun_goes_on(tmp_path, monkeypatch):
    import recbench.store.runstore as runstore

    real_open = open

    def full_open(path, mode="r", *a, **kw):  # samples.jsonl has room for about 3 records
        f = real_open(path, mode, *a, **kw)
        return _FullFile(f, 3000) if "a" in mode and str(path).endswith("samples.jsonl") else f

    monkeypatch.setattr(runstore, "open", full_open, raising=False)
    cfg = toy_cfg(["limit=12", "run.chunk_size=1"], tmp_path)
    backend = ScriptedBackend(reverse)
    with pytest.raises(DiskFull) as ei:
        run_from_config(cfg, tmp_path / "run", backend=backend)
    msg = str(ei.value)
    assert msg.startswith("disk full: cannot write") and "samples.jsonl" in msg and "RECBENCH_RUNS_DIR" in msg
    kept = len((tmp_path / "run" / "samples.jsonl").read_text().splitlines())
    assert 1 <= kept < 12 and ei.value.recbench_kept[:2] == (kept, 12)
    assert not (tmp_path / "run" / "metrics.json").exists() and not _tmp_files(tmp_path)
    monkeypatch.undo()  # room again: the same run goes on, nothing asked twice
    m = run_from_config(cfg, tmp_path / "run", backend=ScriptedBackend(reverse)).to_dict()
    assert m["complete"] and m["counts"]["examples"] == 12 and m["this_invocation"]["examples_skipped"] == kept


def test_full_disk_at_metrics_json_is_one_line_and_leaves_no_tmp(tmp_path, cli):
    """A real ENOSPC from the kernel: metrics.json's temp file is /dev/full."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    run_dir = tmp_path / "runs" / "toy" / "none" / "toy_popular" / "limit=3"
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.json.tmp").symlink_to("/dev/full")
    p = cli("method=toy_popular", "limit=3")
    assert p.returncode == 2, p.stderr
    err = _one_error_line(p.stderr)
    assert err.startswith("recbench: error: disk full: cannot write") and "metrics.json" in err, err
    assert "free space on that disk" in err and "RECBENCH_RUNS_DIR" in err
    assert not (run_dir / "metrics.json").exists() and not (run_dir / "metrics.json.tmp").is_symlink()
    assert not _tmp_files(tmp_path)
    assert len((run_dir / "samples.jsonl").read_text().splitlines()) == 3  # the finished examples are kept


# ---- secrets in a base URL ------------------------------------------------------------------------------------
@pytest.mark.full  # end to end: a run and a sweep, each in its own interpreter
def test_url_credentials_are_used_but_never_reach_a_file_or_a_folder_name(tmp_path):
    user, password, key = "uwalker7", "pw-4f9c2e1b", "qk-83d1c0aa"
    with StubServer() as stub:
        host = stub.base_url.split("://", 1)[1]
        url = f'"http://{user}:{password}@{host}?key={key}"'
        p = _cli(tmp_path, "model=smollm2-openai", f"model.backend.base_url={url}", "limit=3")
        sweep = _cli(tmp_path, "-m", "model=smollm2-openai", f"model.backend.base_url={url}",
                     "method=toy_rank,toy_popular", "limit=3")
        auth, paths = set(stub.auth_seen), set(stub.paths)
    assert p.returncode == 0, p.stderr
    assert sweep.returncode == 0, sweep.stderr
    import base64

    assert auth == {"Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}  # basic auth, no Bearer
    assert paths == {f"/v1/chat/completions?key={key}"}  # the query reaches the server
    leaks = [str(f) for f in tmp_path.rglob("*") if any(s in f.name for s in (user, password, key))
             or (f.is_file() and any(s.encode() in f.read_bytes() for s in (user, password, key)))]
    assert not leaks, leaks
    assert not any(s in p.stderr + p.stdout for s in (password, key))  # (a sweep's launcher echoes its overrides)
    versions = json.loads(next((tmp_path / "runs").rglob("versions.json")).read_text())
    assert versions["backend_params"]["base_url"] == f"http://***@{host}?key=***"


def test_user_info_and_an_api_key_env_together_are_one_config_line(tmp_path, cli):
    p = cli("model=smollm2-openai", 'model.backend.base_url="http://u:pw-secret1@127.0.0.1:9/v1"',
            "model.backend.api_key_env=HOME", "limit=2")
    assert p.returncode == 2, p.stderr
    err = _one_error_line(p.stderr)
    assert "user info" in err and "api_key_env" in err and "pw-secret1" not in err, err


# ---- a deleted prompts.jsonl ------------------------------------------------------------------------------------
def test_a_deleted_prompts_file_is_restored_from_the_cache(tmp_path):
    from recbench.cli import view

    cfg = toy_cfg(["limit=6"], tmp_path)
    run_from_config(cfg, tmp_path / "run", backend=ScriptedBackend(reverse))
    original = (tmp_path / "run" / "prompts.jsonl").read_bytes()
    assert view.load_run(tmp_path / "run")["prompts_missing"] == 0
    (tmp_path / "run" / "prompts.jsonl").unlink()
    assert view.load_run(tmp_path / "run")["prompts_missing"] == 6  # the viewer says they are missing
    backend = ScriptedBackend(reverse)
    run_from_config(cfg, tmp_path / "run", backend=backend)
    assert backend.calls == 0 and (tmp_path / "run" / "prompts.jsonl").read_bytes() == original
    data = view.load_run(tmp_path / "run")
    assert data["prompts_missing"] == 0 and len(data["prompts"]) == 6
    for h, messages in data["prompts"].items():
        assert messages_hash(messages) == h
    # no cache to restore from: the viewer says so honestly (prompt missing, not "not stored")
    (tmp_path / "run" / "prompts.jsonl").unlink()
    cfg2 = toy_cfg(["limit=6", "cache.enabled=false"])
    run_from_config(cfg2, tmp_path / "run", backend=ScriptedBackend(reverse))
    assert view.load_run(tmp_path / "run")["prompts_missing"] == 6
    html = view.render(view.load_run(tmp_path / "run"))
    assert "prompt missing: prompts.jsonl does not hold it" in html


# ---- signals --------------------------------------------------------------------------------------------------------
@pytest.mark.full  # signals to a second interpreter
@pytest.mark.parametrize("sig, code, name", [(signal.SIGTERM, 143, "terminated (SIGTERM)"),
                                             (signal.SIGINT, 130, "interrupted (Ctrl-C)")])
def test_a_signal_keeps_what_finished_says_so_in_one_line_and_the_rerun_goes_on(tmp_path, sig, code, name):
    args = ["model=smollm2-openai", "limit=36", "model.backend.concurrency=2"]
    # the stub answers 4 requests, then holds every answer until the signal has been sent (30 s at most): the run
    # cannot finish first however slow this process is to see its samples; a run that ignores the signal exits 0
    # after the 30 s, within communicate's 60
    released, lock, answered = threading.Event(), threading.Lock(), [0]

    def gated(messages):
        with lock:
            answered[0] += 1
            hold = answered[0] > 4
        if hold and not released.wait(30):
            released.set()  # no signal came: the rest go through
        return default_answer(messages)

    with StubServer(gated, latency_s=0.05) as stub:
        url = f"model.backend.base_url={stub.base_url}"
        proc = _cli(tmp_path, *args, url, popen=True)
        samples = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            samples = next((tmp_path / "runs").rglob("samples.jsonl"), None) if (tmp_path / "runs").exists() else None
            if samples is not None and len(samples.read_text().splitlines()) >= 2:
                break
            time.sleep(0.1)
        proc.send_signal(sig)
        sent = time.monotonic()
        try:
            _, stderr = proc.communicate(timeout=60)
        finally:
            released.set()
        took = time.monotonic() - sent
        assert proc.returncode == code, f"exit {proc.returncode} after {answered[0]} requests: {stderr}"
        assert took < 5, f"exit {took:.1f} s after the signal (issue 44: within 5 s)"
        err = _one_error_line(stderr)
        kept = len(samples.read_text().splitlines())
        assert err.startswith(f"recbench: {name}: {kept} of 36 examples finished and kept in "), err
        assert "rerun the same command" in err and 2 <= kept <= 4
        run_dir = samples.parent
        assert not (run_dir / "metrics.json").exists() and not _tmp_files(tmp_path)
        rerun = _cli(tmp_path, *args, url)
    assert rerun.returncode == 0, rerun.stderr
    m = json.loads((run_dir / "metrics.json").read_text())
    assert m["complete"] and m["counts"]["examples"] == 36 and m["this_invocation"]["examples_skipped"] == kept
