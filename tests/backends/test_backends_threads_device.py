"""The embedded engine picks its threads from the free cores (issue 30, item 2), and an answer decoded on a GPU is not
served to a CPU run from the cache (issue 30, bad-input list): the device class is part of the hf identity, except
cpu, whose keys stay what they always were. Hand-computed values; no model is loaded."""
from __future__ import annotations

import os

import pytest

from recbench.backends.hf import HFBackend, device_class, resolve_device
from recbench.backends.hf_weights import remember_fingerprint
from recbench.backends.threads import auto_threads, pick_threads
from recbench.store.response_cache import KeyMaker
from recbench.api.types import Request
from tests.helpers import compose_cfg

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("cpus, load, threads", [
    (2, 0.0, 2), (2, 0.4, 2), (2, 0.6, 1), (2, 1.0, 1), (2, 6.8, 1),  # 2 - 0.4 = 1.6 rounds to 2; 1.4 to 1
    (16, 3.2, 13), (16, 0.0, 16), (16, 40.0, 1), (1, 0.0, 1),
])
def test_auto_takes_the_free_cores_rounded_at_least_one(cpus, load, threads):
    assert auto_threads(cpus, load) == threads


def test_pick_threads_takes_an_integer_or_auto_and_refuses_the_rest():
    assert pick_threads(3) == (3, "set") and pick_threads("2") == (2, "set")
    assert pick_threads("auto", cpus=2, load=5.24) == (1, "auto: 2 cores, load 5.2 from other processes")
    assert pick_threads(None, cpus=4, load=0.3)[0] == 4  # null means auto
    for bad in (0, -1, "two", 1.5, "1.0"):
        with pytest.raises(ValueError, match=r"model.backend.threads: .* is not a positive integer or 'auto'"):
            pick_threads(bad)


def test_the_default_model_picks_its_threads():
    assert compose_cfg(["model=smollm2"]).model.backend.threads == "auto"
    assert compose_cfg(["model=smollm2", "model.backend.threads=1"]).model.backend.threads == 1


def test_device_class_and_auto_device():
    assert [device_class(d) for d in ("cpu", "cuda", "cuda:1", "MPS")] == ["cpu", "cuda", "cuda", "mps"]
    assert resolve_device("cuda:0") == "cuda:0" and resolve_device("cpu") == "cpu"
    if not (os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidia0")):
        assert resolve_device("auto") == "cpu"  # no NVIDIA driver: cpu, without importing torch


def test_the_device_class_keeps_gpu_answers_apart_and_cpu_keys_unchanged(tmp_path, monkeypatch):
    monkeypatch.setenv("RECBENCH_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "w.gguf").write_bytes(b"weights")
    entry = {"weights": "sha256:abc", "revision": None, "chat_template": "0123456789abcdef"}
    remember_fingerprint(str(tmp_path / "m"), "w.gguf", None, entry)  # what a first load leaves behind

    def ident(device: str) -> dict:
        got = HFBackend.static_identity(model=str(tmp_path / "m"), gguf_file="w.gguf", name="m", device=device)
        assert got is not None
        return got

    cpu, cuda, cuda1, mps = ident("cpu"), ident("cuda"), ident("cuda:1"), ident("mps")
    assert cpu == {"kind": "hf", "name": "m", "weights": "sha256:abc", "revision": None, "adapter": None,
                   "chat_template": "0123456789abcdef", "dtype": "float32"}  # the identity before the device key
    assert cuda == {**cpu, "device": "cuda"} and cuda1 == cuda and mps == {**cpu, "device": "mps"}
    req = Request(messages=(("user", "Rank the users."),))
    keys = {d: KeyMaker(i).key(req) for d, i in (("cpu", cpu), ("cuda", cuda), ("mps", mps))}
    assert len(set(keys.values())) == 3  # a cpu run after a cuda run asks the model again
    assert KeyMaker(ident("cuda:1")).key(req) == keys["cuda"]  # another GPU of the same class shares the answers
