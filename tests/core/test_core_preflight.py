"""A model that cannot start here is refused before any data is loaded, any progress bar drawn or any run dir
written: a missing package names what the preset needs, how to install it and how to serve the model instead; a
missing API key names the variable. On the toy task, through the entry point in-process."""
from __future__ import annotations

import importlib.util
import sys

import pytest

from recbench.run.construct import LazyBackend, build_backend
from recbench.api.errors import ConfigError
from tests.helpers import compose_cfg, run_cli
from tests.toy import TOY, isolate

pytestmark = pytest.mark.fast


@pytest.fixture()
def cli(tmp_path, monkeypatch, capfd):
    """`python -m recbench <TOY> <args>` in this process, runs and cache under tmp_path, no OPENAI_API_KEY."""
    isolate(monkeypatch, tmp_path)
    return lambda *args: run_cli([*TOY, *args, "run.progress=true"], capfd)


def _no_bar_no_run_dir(p, tmp_path) -> list[str]:
    assert p.code == 2, p.err
    assert "Traceback" not in p.err and "requests" not in p.err and "0/2" not in p.err, p.err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("*.jsonl"))
    lines = [ln for ln in p.err.splitlines() if ln.strip()]
    assert sum(ln.startswith("recbench") for ln in lines) == 1, p.err
    return lines


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed: the preset can start")
def test_vllm_preset_without_vllm_says_needs_install_and_serve(tmp_path, cli):
    p = cli("model=llama70b", "limit=2")
    lines = _no_bar_no_run_dir(p, tmp_path)
    assert lines[0].startswith("recbench: config error: model 'llama70b' needs the Python package(s) vllm")
    python, needs, install = lines[1:4]
    serve = " ".join(ln.strip() for ln in lines[4:7])  # 'or serve:' and its two continuation lines
    assert python.split() == ["python:", sys.executable]
    assert max(len(ln) for ln in lines if ln is not python) <= 120, lines  # a path is never cut, so its line may be long
    assert needs.split()[0] == "needs:" and "vllm" in needs and "4 x 80 GB GPUs" in needs
    assert install.split()[0] == "install:" and "pip install vllm" in install
    assert serve.split()[:2] == ["or", "serve:"] and "vllm serve meta-llama/Llama-3.1-70B-Instruct" in serve
    assert "--tensor-parallel-size 4" in serve and "model=openai-server" in serve


def test_missing_api_key_comes_before_any_bar_and_any_file(tmp_path, cli):
    p = cli("model=gpt4o", "limit=2")
    (line,) = _no_bar_no_run_dir(p, tmp_path)
    assert "OPENAI_API_KEY" in line and "model.backend.api_key_env" in line


def test_preflight_unit_checks_packages_and_keys(monkeypatch):
    cfg = compose_cfg(["model=llama70b", "model.requires.packages=[no_such_package_xyz]"]).model
    with pytest.raises(ConfigError) as e:
        LazyBackend(cfg).preflight()
    msg = str(e.value).splitlines()
    labels = [ln.split(":")[0].strip() for ln in msg[1:] if not ln.startswith(" " * 12)]  # continuation lines out
    assert "no_such_package_xyz" in msg[0] and labels == ["python", "needs", "install", "or serve"]
    LazyBackend(compose_cfg(["model=smollm2"]).model).preflight()  # no requirements: nothing to refuse
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    LazyBackend(compose_cfg(["model=gpt4o"]).model).preflight()


def test_the_suggested_server_command_builds_a_backend_for_the_same_model():
    cfg = compose_cfg(["model=openai-server", "model.name=llama70b-server",
                       "model.backend.model=meta-llama/Llama-3.1-70B-Instruct",
                       "model.backend.base_url=http://gpu-host:8000/v1"]).model
    b = build_backend(cfg)
    ident = b.identity()
    # the served model, not the server's URL (several servers of one model share answers: docs/backends.md)
    assert ident["name"] == ident["model"] == "meta-llama/Llama-3.1-70B-Instruct" and "gpu-host" not in str(ident)
    b.close()
