"""A stub server in its own Python process (`python -m recbench.testing.openai_stub`), for benchmarks that kill and
restart recbench: its counters stay readable over HTTP."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from typing import Any, Optional

from recbench.testing.stub_http import get_stats, reset_stats


class StubProcess:
    """A stub server in its own Python process; `stats()` reads its counters over HTTP."""

    def __init__(self, proc: subprocess.Popen, base_url: str):
        self.proc, self.base_url = proc, base_url

    def stats(self) -> dict[str, Any]:
        """The server's counters (paid, received, faults, ...)."""
        return get_stats(self.base_url)

    def reset(self) -> None:
        """Zero the server's counters."""
        reset_stats(self.base_url)

    def stop(self) -> None:
        """Terminate the server process (kill after 10 s)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> "StubProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_stub_process(*, latency_s: float = 0.0, straggler_share: float = 0.0, straggler_s: float = 3.0,
                       fault_rate: float = 0.0, faults: Optional[tuple[str, ...]] = None, retry_after_s: float = 0.2,
                       capacity: Optional[int] = None, served_model: Optional[str] = None, port: int = 0,
                       timeout_s: float = 60.0, engine: str = "threads") -> StubProcess:
    """Start `python -m recbench.testing.openai_stub` on a free loopback port; returns once it answers /stats.
    `faults` None: the stub's default faults (openai_stub.FAULTS); `engine`: one of openai_stub.ENGINES."""
    cmd = [sys.executable, "-m", "recbench.testing.openai_stub", "--port", str(port), "--latency", str(latency_s),
           "--straggler-share", str(straggler_share), "--straggler-s", str(straggler_s), "--fault-rate",
           str(fault_rate), "--retry-after", str(retry_after_s), "--engine", engine]
    cmd += ["--faults", ",".join(faults)] if faults is not None else []
    cmd += ["--capacity", str(capacity)] if capacity else []
    cmd += ["--served-model", served_model] if served_model else []
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    t0 = time.monotonic()
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.search(r"(http://127\.0\.0\.1:\d+/v1)", line)
    if not m:
        proc.kill()
        raise RuntimeError(f"stub server did not start: {line.strip() or proc.stdout.read()[-2000:]}")
    stub = StubProcess(proc, m.group(1))
    while time.monotonic() - t0 < timeout_s:
        try:
            stub.stats()
            return stub
        except OSError:
            time.sleep(0.05)
    stub.stop()
    raise RuntimeError(f"stub server at {stub.base_url} did not answer /stats within {timeout_s:g}s")
