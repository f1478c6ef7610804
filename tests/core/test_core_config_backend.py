"""The typed backend base (recbench/api/config.py): shared model.backend keys are typed at compose time, every
conf/model entry composes onto its schema, and the CLI names the key of a wrong type in one line."""
from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import yaml
from hydra.errors import ConfigCompositionException
from hydra.utils import get_class
from omegaconf import OmegaConf

from recbench.api.config import BACKEND_SCHEMAS
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
    assert schema in BACKEND_SCHEMAS.values(), f"{name}: backend node is not typed ({schema})"
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
