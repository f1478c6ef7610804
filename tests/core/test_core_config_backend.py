"""The typed backend base (recbench/api/backend_conf.py) and each backend's schema on the one registry
(recbench/backends/schemas.py): shared model.backend keys are typed at compose time, every conf/model entry composes
onto its schema, the CLI names the key of a wrong type in one line, and the registry refuses a kind registered twice
or a schema of the wrong type and imports a backend's schema module only when its kind is asked for."""
from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import yaml
from hydra.errors import ConfigCompositionException
from hydra.utils import get_class
from omegaconf import OmegaConf

from recbench.api.backend_conf import BackendConf, ModelBackendConf
from recbench.api.registry import RegistryError
from recbench.backends.schemas import all_schemas, new_registry
from tests.helpers import compose_cfg

pytestmark = pytest.mark.fast

REPO = Path(__file__).resolve().parents[2]
MODELS = sorted(p.stem for p in (REPO / "conf" / "model").glob("*.yaml"))


@pytest.mark.parametrize("name", MODELS)
def test_every_model_config_composes_onto_its_backend_schema(name):
    raw = yaml.safe_load((REPO / "conf" / "model" / f"{name}.yaml").read_text())
    b = compose_cfg([f"model={name}"]).model.backend
    if raw["backend"] is None:
        assert b is None
        return
    schema = OmegaConf.get_type(b)
    assert schema in all_schemas().values(), f"{name}: backend node is not typed ({schema})"
    # every key the YAML sets survives with its value (ints written for float keys read as the same number)
    for k, v in raw["backend"].items():
        if not (isinstance(v, str) and v.startswith("${")):
            assert b[k] == v, (name, k)
    # the schema adds only keys the backend class takes, each with the class's own default
    params = inspect.signature(get_class(b._target_).__init__).parameters
    for k in b:
        if k != "_target_" and k not in raw["backend"]:
            assert k in params and params[k].default == b[k], (name, k, b[k])


@pytest.mark.parametrize("model,key,value,kind", [
    ("gpt4o", "timeout_s", "soon", "Float"), ("gpt4o", "concurrency", "many", "Integer"),
    ("smollm2-openai", "max_retries", "1.5", "Integer"), ("claude35-haiku", "max_consecutive_failures", "x", "Integer"),
    ("smollm2", "batch_size", "big", "Integer"), ("llama8b", "batch_size", "x", "Integer"),
    ("predictions", "batch_size", "x", "Integer"), ("gpt4o", "seed_param", "perhaps", "valid bool"),
])
def test_wrong_type_on_a_backend_base_key_fails_at_compose_time(model, key, value, kind):
    with pytest.raises(ConfigCompositionException) as e:
        compose_cfg([f"model={model}", f"model.backend.{key}={value}"])
    cause = str(e.value.__cause__)
    assert f"full_key: model.backend.{key}" in cause and kind in cause


def test_typed_values_are_converted_and_specific_keys_stay_free_form():
    b = compose_cfg(["model=gpt4o", "model.backend.timeout_s=30", "model.backend.extra_body.top_k=5"]).model.backend
    assert b.timeout_s == 30.0 and isinstance(b.timeout_s, float) and b.extra_body.top_k == 5
    # backend-specific keys may be added (documented: +model.backend.adapter=... for a LoRA adapter)
    assert compose_cfg(["model=smollm2", "+model.backend.adapter=some/dir"]).model.backend.adapter == "some/dir"


def test_cli_names_the_key_in_one_line(tmp_path, monkeypatch, capfd):
    from tests.helpers import run_cli
    from tests.toy import TOY, isolate

    isolate(monkeypatch, tmp_path)
    r = run_cli([*TOY, "model=gpt4o", "model.backend.timeout_s=soon"], capfd)
    assert r.code == 2 and r.out == ""
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and "model.backend.timeout_s" in lines[0] and "Float" in lines[0], r.err


def test_each_backend_kind_has_its_schema_beside_it():
    schemas = all_schemas()
    assert set(schemas) >= {"hf", "vllm", "openai", "predictions"}
    for kind, schema in schemas.items():
        assert schema.__module__ == f"recbench.backends.{kind}_conf" and issubclass(schema, BackendConf)


def test_the_registry_imports_a_schema_module_only_when_its_kind_is_asked_for(monkeypatch):
    import sys

    for kind in ("hf", "vllm"):
        monkeypatch.delitem(sys.modules, f"recbench.backends.{kind}_conf", raising=False)
    reg = new_registry()
    assert {"hf", "vllm"} <= set(reg.names())
    assert "recbench.backends.hf_conf" not in sys.modules and "recbench.backends.vllm_conf" not in sys.modules
    assert reg.get("hf").__name__ == "HFBackendConf"
    assert "recbench.backends.hf_conf" in sys.modules and "recbench.backends.vllm_conf" not in sys.modules


def test_the_registry_refuses_a_kind_twice_and_a_schema_of_the_wrong_type():
    from dataclasses import dataclass

    reg = new_registry()

    @dataclass
    class Other(ModelBackendConf):
        pass

    @dataclass
    class NotABackend:
        batch_size: int = 1

    class NotADataclass(BackendConf):
        pass

    @dataclass
    class AnotherSchema(BackendConf):  # another schema under a taken kind
        pass

    reg.names()  # discovery first: the kinds of recbench/backends are declared by their files
    with pytest.raises(RegistryError, match="'hf' is declared at recbench.backends.hf_conf:SCHEMA and registered"):
        reg.register("hf", Other)
    reg.register("mine", Other)
    reg.register("mine", Other)  # the same schema again (a module imported twice) is no collision
    with pytest.raises(RegistryError, match="'mine' is registered twice"):
        reg.register("mine", AnotherSchema)
    for wrong in (NotABackend, NotADataclass, NotABackend()):
        with pytest.raises(RegistryError, match="is not a dataclass subclass of recbench.api.backend_conf.BackendConf"):
            reg.register("wrong", wrong)
    with pytest.raises(RegistryError, match="unknown backend schema 'nope'. Valid: hf, mine, openai"):
        reg.get("nope")
