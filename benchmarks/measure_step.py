"""Run one command as its own process under `/usr/bin/time -v` with a memory limit; return wall, peak RSS, exit.

The limit is a resident-set watchdog: the process tree's summed RSS is polled every 0.1 s and the tree is killed
(SIGKILL) when it passes the limit, or when the shared machine's available memory falls under `min_avail_gb`
(the row then says so: the step did not fit beside the machine's other work). A virtual-address limit (`prlimit --as`) would also count what is only reserved
(thread arenas, memory maps of multi-threaded engines) and kill processes that never touch that much memory; the
watchdog limits what the machine actually gives. `--as-gb` adds the address-space limit on top where wanted.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional

import psutil

TIME = "/usr/bin/time"


def tree_rss(proc: psutil.Process) -> int:
    """Resident bytes of a process and all its descendants."""
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def kill_command(time_pid: int) -> None:
    """SIGKILL what /usr/bin/time runs (all its descendants), not time itself, so that time still reports."""
    try:
        procs = psutil.Process(time_pid).children(recursive=True)
    except psutil.Error:
        return
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass


def _watch(pid: int, limit: int, stop: threading.Event, hit: dict, min_avail: int = 0) -> None:
    try:
        proc = psutil.Process(pid)
    except psutil.Error:
        return
    while not stop.wait(0.1):
        try:
            rss = tree_rss(proc)
        except psutil.Error:
            return
        hit["max_tree_rss"] = max(hit.get("max_tree_rss", 0), rss)
        low = psutil.virtual_memory().available < min_avail  # the shared machine is running out: protect the rest
        if rss > limit or low:
            hit["killed_at" if rss > limit else "low_at"] = rss
            kill_command(pid)
            return


def _time_fields(text: str) -> dict:
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    sig = re.search(r"Command terminated by signal (\d+)", text)
    code = re.search(r"Exit status: (\d+)", text)
    cpu = [float(m) for m in re.findall(r"(?:User|System) time \(seconds\): ([0-9.]+)", text)]
    return {"peak_rss_kb": int(rss.group(1)) if rss else None, "signal": int(sig.group(1)) if sig else None,
            "exit_status": int(code.group(1)) if code else None, "cpu_s": round(sum(cpu), 2) if cpu else None}


def verdict(rc: int, fields: dict, hit: dict, timed_out: bool, tail: str, limit_gb: float) -> str:
    """ok | killed: RSS over the limit | killed by signal N (OOM killer?) | oom: MemoryError | timeout | error rc=N: ..."""
    if timed_out:
        return "timeout"
    if "killed_at" in hit:
        return f"killed: RSS over the {limit_gb:g} GB limit"
    if "low_at" in hit:
        return f"killed: the machine ran low on memory (step RSS {hit['low_at'] / 1e9:.1f} GB)"
    if re.search(r"MemoryError|std::bad_alloc|Out of Memory|OutOfMemory|Cannot allocate memory", tail):
        return "oom: " + next((ln for ln in tail.splitlines()[::-1] if re.search(
            r"MemoryError|bad_alloc|Out of Memory|OutOfMemory|Cannot allocate", ln)), "MemoryError").strip()[:160]
    if fields.get("signal"):
        return f"killed by signal {fields['signal']}" + (" (SIGKILL: OOM killer?)" if fields["signal"] == 9 else "")
    if rc == 0:
        return "ok"
    last = next((ln for ln in tail.splitlines()[::-1] if ln.strip()), "")
    return f"error rc={rc}: {last.strip()[:200]}"


def run_measured(cmd: list[str], *, env: Optional[dict] = None, cwd: Optional[str] = None, mem_gb: float = 10.0,
                 as_gb: Optional[float] = None, timeout_s: float = 3600.0, log: Optional[Path] = None,
                 min_avail_gb: float = 1.0) -> dict:
    """Run cmd under /usr/bin/time -v with the RSS watchdog; returns wall and CPU (user + system) seconds, peak RSS,
    exit, rc and the load averages at start and end."""
    timefile = tempfile.NamedTemporaryFile(prefix="bench_time_", suffix=".txt", delete=False).name
    full = [TIME, "-v", "-o", timefile]
    full += ["prlimit", f"--as={int(as_gb * 1e9)}", "--"] if as_gb else []
    full += cmd
    load_start = os.getloadavg()
    out = open(log, "w") if log else tempfile.TemporaryFile("w+")
    t0 = time.perf_counter()
    proc = subprocess.Popen(full, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True)
    stop, hit = threading.Event(), {}
    watcher = threading.Thread(target=_watch, args=(proc.pid, int(mem_gb * 1e9), stop, hit, int(min_avail_gb * 1e9)), daemon=True)
    watcher.start()
    timed_out = False
    try:
        rc = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_command(proc.pid)
        try:
            rc = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rc = proc.wait()
    wall = time.perf_counter() - t0
    stop.set()
    watcher.join()
    out.flush()
    out.seek(0) if not log else None
    tail = (open(log).read() if log else out.read())[-20000:]
    out.close()
    fields = _time_fields(Path(timefile).read_text(errors="replace"))
    os.unlink(timefile)
    rss_kb = fields["peak_rss_kb"]
    return {"wall_s": round(wall, 2), "cpu_s": fields["cpu_s"], "peak_rss_gb": round(rss_kb / 1e6, 3) if rss_kb else None,
            "max_tree_rss_gb": round(hit.get("max_tree_rss", 0) / 1e9, 3),
            "exit": verdict(rc, fields, hit, timed_out, tail, mem_gb), "rc": rc,
            "load_start": [round(x, 2) for x in load_start], "load_end": [round(x, 2) for x in os.getloadavg()],
            "tail": tail[-600:]}
