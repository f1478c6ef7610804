"""docs/new_backend.md is a test: its example backend (the schema block, the module block, the model YAML), taken from
the page as written and added as the page says (its own three files, no other file edited), evaluates PerRecBench
listwise on the bundled data against the stub server, as a model config (model=tiny) and as an object handed to
run_from_config; the page's rules hold for it (answers recorded with their
parse status, identity in versions.json and the cache key, the empty-answer rule, a dead server is exit 2)."""
from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path

import pytest

from recbench.backends.base import BackendUnavailable
from recbench.run.evaluate import run_from_config
from recbench.store.schema import read_run
from recbench.testing.openai_stub import StubServer, default_answer, refused_url
from tests.helpers import compose_cfg, run_cli
from tests.toy import isolate

pytestmark = pytest.mark.fast

PAGE = Path(__file__).resolve().parents[2] / "docs" / "new_backend.md"
MODULE = "recbench.backends.tiny_chat"
CONF_MODULE = "recbench.backends.tiny_chat_conf"


def blocks(lang: str) -> list[str]:
    """The page's fenced code blocks in one language, in page order."""
    return re.findall(rf"^```{lang}\n(.*?)^```", PAGE.read_text(encoding="utf-8"), flags=re.DOTALL | re.MULTILINE)


@pytest.fixture
def tiny(monkeypatch, tmp_path):
    """The page's backend as the page adds it, its own three files and nothing else: the schema and the class written
    as recbench/backends/tiny_chat_conf.py and tiny_chat.py (in a folder of the backends package: the source tree is
    left alone), the model config in a config folder of the reader's own (returned: the hydra.searchpath override).
    The registry of backend schemas starts afresh, so it finds the page's file as it finds the package's own."""
    from hydra.core.config_store import ConfigStore

    import recbench.backends
    from recbench.backends import schemas

    schema_src, module_src = blocks("python")
    folder = tmp_path / "backends"
    folder.mkdir()
    (folder / f"{CONF_MODULE.rpartition('.')[2]}.py").write_text(schema_src, encoding="utf-8")
    (folder / f"{MODULE.rpartition('.')[2]}.py").write_text(module_src, encoding="utf-8")
    monkeypatch.setattr(recbench.backends, "__path__", [*recbench.backends.__path__, str(folder)])
    for name in (MODULE, CONF_MODULE):  # imported from the page's files, forgotten after the test
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setattr(schemas, "SCHEMAS", schemas.new_registry())
    (yaml_src,) = blocks("yaml")
    conf = tmp_path / "conf"
    (conf / "model").mkdir(parents=True)
    (conf / "model" / "tiny.yaml").write_text(yaml_src, encoding="utf-8")
    isolate(monkeypatch, tmp_path)
    yield f"hydra.searchpath=[file://{conf}]"
    ConfigStore.instance().repo["schema"]["backend"].pop("tiny_chat.yaml", None)


def tiny_backend(**kwargs):
    """The page's class, imported from its file."""
    return importlib.import_module(MODULE).TinyChatBackend(**kwargs)


def tiny_cfg(searchpath: str, tmp_path: Path, *overrides: str):
    """The page's evaluation: PerRecBench listwise, 3 groups of the bundled data, model=tiny, a cache under tmp."""
    return compose_cfg([searchpath, "task=perrec", "method=listwise", "limit=3", "model=tiny", "run.progress=false",
                        f"cache.path={tmp_path / 'cache.sqlite'}", *overrides])


def test_the_page_model_config_runs_perrec_listwise_through_the_stub(tiny, tmp_path, capsys):
    from omegaconf import OmegaConf

    typed = OmegaConf.get_type(tiny_cfg(tiny, tmp_path).model.backend)  # the page's schema file, found by its name
    assert (typed.__module__, typed.__name__) == (CONF_MODULE, "TinyChatBackendConf")
    with StubServer() as stub:
        m = run_from_config(tiny_cfg(tiny, tmp_path, f"model.backend.base_url={stub.base_url}"), tmp_path / "run").to_dict()
        assert stub.answered == 3
    assert m["complete"] and m["model"] == "tiny"
    assert (m["counts"]["examples"], m["counts"]["parse_ok"], m["counts"]["backend_errors"]) == (3, 3, 0)
    run = read_run(tmp_path / "run")
    samples = list(run.samples(with_prompts=True))
    assert [s.parse_status for s in samples] == ["ok"] * 3
    for s in samples:  # what the server said is what was recorded and parsed
        (call,) = s.calls
        assert call.response == default_answer(call.messages) and not call.cached
    assert m["metrics"]["ptc"]["mean"] == pytest.approx(sum(s.metrics["ptc"] for s in samples) / 3)
    versions = json.loads((tmp_path / "run" / "versions.json").read_text())
    assert versions["backend_identity"] == {"kind": "tiny_chat", "name": "served-model", "model": "served-model"}
    assert versions["backend_params"]["base_url"] == stub.base_url
    err = capsys.readouterr().err
    assert re.search(r"^recbench: model tiny \(tinychat: served-model\) ready in \d+\.\d s \(nothing loaded here: the "
                     r"server holds the model\)$", err, flags=re.MULTILINE), err

    # the URL is not part of the identity: another server of the same model is asked nothing
    with StubServer() as other:
        again = run_from_config(tiny_cfg(tiny, tmp_path, f"model.backend.base_url={other.base_url}"), tmp_path / "r2").to_dict()
        assert other.attempts == {} and again["this_invocation"]["cache_hits"] == 3
        # the model id is: a run of another model asks for every answer
        run_from_config(tiny_cfg(tiny, tmp_path, f"model.backend.base_url={other.base_url}",
                                 "model.backend.model=another-model"), tmp_path / "r3")
        assert other.answered == 3


def test_an_empty_answer_is_an_error_and_asked_again_on_the_next_run(tiny, tmp_path):
    """The backend as an object handed to run_from_config; the stub answers "" to each request's first attempt."""
    with StubServer(schedule=lambda key, attempt: "empty" if attempt == 1 else None) as stub:
        backend = tiny_backend(model="m", base_url=stub.base_url)
        cfg = tiny_cfg(tiny, tmp_path)
        first = run_from_config(cfg, tmp_path / "run", backend=backend).to_dict()
        assert not first["complete"] and first["counts"]["examples"] == 0
        assert first["this_invocation"]["backend_errors"] == 3
        errors = [json.loads(x) for x in (tmp_path / "run" / "errors.jsonl").read_text().splitlines()]
        assert len(errors) == 3 and all("empty answer (finish_reason=stop)" in e["error"] for e in errors)
        second = run_from_config(cfg, tmp_path / "run", backend=backend).to_dict()  # nothing was cached: asked again
        assert second["complete"] and second["counts"]["parse_ok"] == 3
        assert sorted(stub.attempts.values()) == [2, 2, 2]


def test_a_refused_connection_stops_the_run_with_exit_2(tiny, tmp_path, capfd):
    backend = tiny_backend(model="m", base_url=refused_url())
    with pytest.raises(BackendUnavailable, match="nothing listens at"):
        run_from_config(tiny_cfg(tiny, tmp_path), tmp_path / "run", backend=backend)
    assert not (tmp_path / "run" / "metrics.json").exists()
    url = refused_url()
    r = run_cli([tiny, "task=perrec", "method=listwise", "limit=3", "model=tiny", "run.progress=false",
                 f"model.backend.base_url={url}"], capfd)
    assert r.code == 2
    assert r.one_error_line() == f"recbench: error: nothing listens at {url}: start the server, or set model.backend.base_url"
