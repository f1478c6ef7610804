"""Lazy start: the backend is built on the first cache miss only; cache hits and finished reruns load no model."""
from __future__ import annotations

import json

import pytest

from recbench.run.evaluate import run_from_config
from tests.toy import toy_cfg
from tests.toy.scripted import ToyBackend as CountingBackend

pytestmark = pytest.mark.fast


def _cfg(tmp_path):
    return toy_cfg(["limit=6"], tmp_path)


def test_backend_built_on_first_miss_only(tmp_path):
    CountingBackend.built = 0
    cfg = _cfg(tmp_path)
    m1 = run_from_config(cfg, tmp_path / "a").to_dict()
    assert CountingBackend.built == 1 and m1["this_invocation"]["model_loaded"] and m1["complete"]
    m2 = run_from_config(cfg, tmp_path / "a").to_dict()  # finished rerun: nothing to do
    assert CountingBackend.built == 1 and not m2["this_invocation"]["model_loaded"]
    assert m2["metrics"] == m1["metrics"]
    m3 = run_from_config(cfg, tmp_path / "b").to_dict()  # new run dir, every answer cached: keys without a model
    assert CountingBackend.built == 1 and m3["this_invocation"]["cache_hits"] == 6
    assert m3["metrics"] == m1["metrics"]
    # versions.json keeps the identity of the run that loaded the model
    assert json.loads((tmp_path / "a" / "versions.json").read_text())["backend_identity"]["kind"] == "toy"
