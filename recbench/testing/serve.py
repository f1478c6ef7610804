"""Start and stop a real vLLM OpenAI-compatible server on a free loopback port (tests and benchmarks share this)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from recbench.testing.openai_stub import free_port


@dataclass
class ServerProcess:
    """A server process in its own session, its base URL, start-up time and log file."""

    proc: subprocess.Popen
    base_url: str
    startup_s: float
    log: Path

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL after 30 s."""
        stop_process(self.proc)


def stop_process(proc: subprocess.Popen, grace_s: float = 30.0) -> None:
    """SIGTERM a process started with start_new_session=True (its whole group), SIGKILL after grace_s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def start_vllm_server(model_dir: str, *, served_name: str = "smollm2", max_model_len: int = 4096,
                      kv_cache_bytes: int = 1 << 30, seed: Optional[int] = 0, timeout_s: float = 300.0,
                      log_path: Optional[Path] = None, extra_args: Sequence[str] = (),
                      env: Optional[dict[str, str]] = None) -> ServerProcess:
    """`python -m vllm.entrypoints.openai.api_server` on 127.0.0.1:<free port>, float32, eager; waits for /health.
    `extra_args` go on its command line (e.g. --data-parallel-size 2), `env` into its environment (e.g.
    CUDA_VISIBLE_DEVICES)."""
    port = free_port()
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_dir, "--served-model-name",
           served_name, "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--max-model-len",
           str(max_model_len), "--enforce-eager", "--generation-config", "vllm", "--kv-cache-memory-bytes",
           str(kv_cache_bytes), "--disable-log-stats"]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    cmd += [str(a) for a in extra_args]
    log_path = Path(log_path or Path(tempfile.mkdtemp(prefix="rb_vllm_srv_")) / "server.log")
    log = open(log_path, "w")
    t0 = time.time()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "1", **(env or {})})
    log.close()  # the child keeps its own handle
    base = f"http://127.0.0.1:{port}"
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"vLLM server exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
        if time.time() - t0 > timeout_s:
            stop_process(proc)
            raise RuntimeError(f"vLLM server not healthy after {timeout_s:.0f}s:\n{log_path.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(base + "/health", timeout=2) as r:
                if r.status == 200:
                    return ServerProcess(proc, base + "/v1", time.time() - t0, log_path)
        except OSError:
            pass
        time.sleep(1.0)
