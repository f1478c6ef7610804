"""Issue 24, item 4: config defaults live in conf/ (or the typed dataclasses of recbench/api/config.py), never in a
`cfg.get(key, default)`; a key a config lacks is an error naming it; each backend's defaults are written once (its
constructor takes the schema's value for every key the schema declares)."""
from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from recbench.api.config import YamlParserConf, YamlTaskConf, with_defaults
from recbench.backends.schemas import SCHEMAS, schema_of
from recbench.backends.base import constructor_args
from tests.helpers import compose_cfg

pytestmark = pytest.mark.fast
PKG = Path(__file__).resolve().parents[2] / "recbench"
#: a default given in code to a config node read by key: cfg.get("key", default), also cc.get / sp.get / config.cache
CODE_DEFAULT = re.compile(r"\b(?:cfg|cc|sp|tcfg|cache)\.get\(\s*[\"'][A-Za-z_]+[\"']\s*,")


#: where configs are read at run time (cli/ and report/ also read the config.yaml of old run dirs, which may lack keys);
#: tasks/ is the top-level folder of the benchmarks, the others folders of recbench/
RUNTIME = ("api", "backends", "run", "store", "tasks")


def test_no_config_default_is_written_in_code():
    hits = [f"{p.relative_to(PKG.parent)}:{i}: {line.strip()}" for part in RUNTIME
            for p in sorted((PKG / part if (PKG / part).is_dir() else PKG.parent / part).rglob("*.py"))
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if CODE_DEFAULT.search(line)]
    assert hits == []


def test_the_default_finder_sees_one():
    assert CODE_DEFAULT.search('        return bool(self.cfg.get("cot", False))')
    assert CODE_DEFAULT.search('seed=int(cc.get("seed", 2023))') and not CODE_DEFAULT.search('cc.get("sha256")')


def test_the_moved_defaults_are_in_the_yaml():
    c = compose_cfg(["task=llmrec_sequential"]).task.candidates
    assert (c.seed, c.negatives, c.progress) == (2023, 99, True)
    assert compose_cfg(["task=llmrec_direct_p5"]).task.candidates.negatives == 99  # through its defaults list
    for name in ("listwise", "pairwise_cot", "pointwise_sc", "listwise_fewshot"):
        m = compose_cfg([f"method={name}"]).method
        assert {"cot", "shots", "samples", "temperature", "template", "adapter", "constrained"} <= set(m), name
    assert compose_cfg(["method=listwise_cot"]).method.cot is True
    assert compose_cfg(["method=pairwise_sc"]).method.samples == 5


def test_a_key_a_method_config_lacks_is_an_error_naming_it():
    from recbench.tasks.perrec.task import PerRecTask

    task = PerRecTask(compose_cfg(["task=perrec"]).task)
    # a variant with no YAML of its own gets no defaults: the first key it lacks is named
    m = task.make_method(OmegaConf.create({"name": "listwise_mine", "kind": "listwise", "max_tokens": 64,
                                           "constrained": False}))
    with pytest.raises(AttributeError, match=r"config has no key 'cot' \(keys: name, kind, max_tokens, constrained\)"):
        m.cot  # noqa: B018 - the property reads method.cot
    # a hand-built config naming a shipped method gets the rest from its YAML (conf/method/perrec/listwise.yaml)
    m = task.make_method(OmegaConf.create({"name": "listwise"}))
    assert (m.cot, m.n_samples, m.n_shots, m.template()) == (False, 1, 0, "listwise.j2")


def test_a_yaml_task_leaves_out_optional_keys_and_gets_the_typed_defaults():
    got = with_defaults({"name": "t", "data": {"path": "x.jsonl", "id_field": None}, "parser": {"kind": "regex"}},
                        YamlTaskConf)
    assert got["data"] == {"path": "x.jsonl", "id_field": None, "format": None}  # an explicit null is kept
    assert got["parser"]["ignore_case"] is True and got["parser"]["group"] is None
    assert (got["constrained"], got["max_tokens"], got["name"]) == (False, 16, "t")
    assert with_defaults({"data": {"path": "y"}}, YamlTaskConf)["data"]["id_field"] == "id"


def test_regex_parser_defaults_come_from_the_typed_schema():
    from recbench.tasks.generic.parsers import build

    first_group = build({"kind": "regex", "pattern": r"answer: (\w+)"})
    assert first_group("ANSWER: Yes").value == "Yes"  # ignore_case defaults to true; the first group is read
    whole = build({"kind": "regex", "pattern": r"yes|no"})
    assert whole("I think no.").value == "no"  # no group: the whole match
    strict = build({"kind": "regex", "pattern": r"answer: (\w+)", "ignore_case": False})
    assert not strict("ANSWER: Yes").ok and YamlParserConf().ignore_case is True


def _init_defaults(module: str, cls_name: str) -> dict[str, ast.expr]:
    tree = ast.parse((PKG / "backends" / f"{module}.py").read_text(encoding="utf-8"))
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls_name)
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    args = init.args.args[len(init.args.args) - len(init.args.defaults):] + init.args.kwonlyargs
    defaults = list(init.args.defaults) + [d for d in init.args.kw_defaults if d is not None]
    return {a.arg: d for a, d in zip(args, defaults)}


@pytest.mark.parametrize("kind", SCHEMAS.names())
def test_each_backend_default_is_written_once(kind):
    """Every schema key the constructor takes defaults to the schema's attribute (`Conf.key`), never a literal; the
    values agree at run time too."""
    import importlib

    mod = importlib.import_module(f"recbench.backends.{kind}")
    cls = next(c for c in vars(mod).values() if inspect.isclass(c) and getattr(c, "kind", None) == kind
               and c.__module__ == mod.__name__)
    schema = schema_of(kind)
    keys = {f.name for f in dataclasses.fields(schema) if f.name != "_target_"}
    defaults = _init_defaults(kind, cls.__name__)
    shared = sorted(keys & set(defaults))
    assert {"name", "batch_size"} <= set(shared)
    for key in shared:
        node = defaults[key]
        assert isinstance(node, ast.Attribute) and node.attr == key, \
            f"{cls.__name__}({key}=...) restates a default the schema declares: use {schema.__name__}.{key}"
        assert inspect.signature(cls.__init__).parameters[key].default == getattr(schema, key)


def test_static_identity_reads_the_constructor_defaults():
    from recbench.backends.hf import HFBackend

    args = constructor_args(HFBackend, {"model": "m", "unknown_key": 1})
    assert args["model"] == "m" and args["dtype"] == "float32" and args["batch_size"] == 16
    assert "unknown_key" not in args
