"""A backend a run builds from its config is closed when the run ends, finished or interrupted (its HTTP clients and
event loop); a backend handed to run_from_config belongs to the caller and stays open."""
from __future__ import annotations

import pytest

from backends_stub import StubServer, compose_cfg  # noqa: E402

import recbench.run.construct as construct
from recbench.run.evaluate import run_from_config

pytestmark = pytest.mark.fast


def _cfg(tmp_path, url: str, *more: str):
    return compose_cfg("task=perrec", "model=smollm2-openai", f"model.backend.base_url={url}", "method=listwise",
                       "limit=2", f"cache.path={tmp_path / 'cache.sqlite'}", *more)


@pytest.fixture
def built(monkeypatch):
    """The backends LazyBackend builds during the test."""
    seen: list = []
    real = construct.build_backend
    monkeypatch.setattr(construct, "build_backend", lambda node: seen.append(real(node)) or seen[-1])
    return seen


def test_a_config_built_backend_is_closed_when_the_run_ends(tmp_path, built):
    with StubServer() as stub:
        m = run_from_config(_cfg(tmp_path, stub.base_url), tmp_path / "run").to_dict()
    assert m["complete"] and stub.answered == 2
    (backend,) = built
    assert backend._loop.is_closed()


def test_it_is_closed_when_the_run_is_interrupted_too(tmp_path, built, monkeypatch):
    from recbench.run.loop import EvalLoop

    def interrupted(self, examples):
        self._backend_factory()  # the model is started, then Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(EvalLoop, "run", interrupted)
    with StubServer() as stub, pytest.raises(KeyboardInterrupt):
        run_from_config(_cfg(tmp_path, stub.base_url), tmp_path / "run")
    (backend,) = built
    assert backend._loop.is_closed()


def test_a_backend_handed_in_stays_open(tmp_path):
    from recbench.backends.openai import OpenAIBackend

    with StubServer() as stub:
        backend = OpenAIBackend(model="served-model", base_url=stub.base_url)
        run_from_config(_cfg(tmp_path, stub.base_url), tmp_path / "run", backend=backend)
        assert not backend._loop.is_closed()
        backend.close()
