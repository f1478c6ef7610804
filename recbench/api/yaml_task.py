"""The keys a YAML-only task (recbench.tasks.generic, docs/new_benchmark.md) may leave out, typed with their
defaults, and `with_defaults`, which fills them in."""
from __future__ import annotations

from dataclasses import MISSING as NO_DEFAULT, dataclass, field, fields, is_dataclass
from typing import Any, Dict, List, Optional

from omegaconf import DictConfig, OmegaConf


@dataclass
class YamlDataConf:
    """task.data of a YAML-only task."""

    path: Optional[str] = None  # required: the task says so, naming the key
    format: Optional[str] = None  # jsonl | json | csv | parquet; null = from the file's suffix
    id_field: Optional[str] = "id"  # the field holding each example's id; null = the row number


@dataclass
class YamlPromptConf:
    """task.prompt of a YAML-only task: `template` (inline Jinja2) or `template_file` is required."""

    system: Optional[str] = None  # null = no system message
    template: Optional[str] = None
    template_file: Optional[str] = None


@dataclass
class YamlParserConf:
    """task.parser of a YAML-only task: `kind` is required, the other keys belong to some kinds."""

    kind: Optional[str] = None
    choices: Optional[List[Any]] = None  # choice
    lo: Optional[float] = None  # number: clamp below (null = none)
    hi: Optional[float] = None  # number: clamp above (null = none)
    field: Optional[str] = None  # json_field
    sep: Optional[str] = None  # list: null = JSON list or numbered / bulleted lines
    pattern: Optional[str] = None  # regex
    group: Optional[int] = None  # regex: null = the pattern's first group if it has one, else the whole match
    ignore_case: bool = True  # regex


@dataclass
class YamlItemsConf:
    """task.items of a YAML-only task whose answer is a list of items (the list metrics, api/item_lists.py)."""

    catalogue: Optional[str] = None  # a CSV/JSONL file: id, title, optional '|'-separated categories; null = no lists
    history: Optional[str] = None  # the row field holding the user's items (popularity, history copies, activity)
    candidates: Optional[str] = None  # the row field holding the candidates; null = none given
    user: Optional[str] = None  # the row field naming the user; null = each row is a user
    k: int = 10  # the list metrics' cut-off


@dataclass
class YamlTaskConf:
    """The optional top-level keys of a YAML-only task and their defaults."""

    data: YamlDataConf = field(default_factory=YamlDataConf)
    prompt: YamlPromptConf = field(default_factory=YamlPromptConf)
    parser: YamlParserConf = field(default_factory=YamlParserConf)
    constrained: bool = False  # true: the backend chooses among parser.choices / matches parser.pattern
    max_tokens: Optional[int] = 16  # the answer budget of method=zero_shot (null = this default)
    headline_metric: Optional[str] = None  # null = the first metric
    breakdown_by: Optional[List[str]] = None  # null = no breakdown
    # judge=<model> (docs/judges.md): aspect -> definition the judge scores the answers on; null = not judgeable
    judge_rubric: Optional[Dict[str, str]] = None
    judge_context: Optional[str] = None  # what the judge reads besides the answer (Jinja over the row); null = the prompt
    items: YamlItemsConf = field(default_factory=YamlItemsConf)  # item lists: the list metrics and fairness by activity


def with_defaults(given: Any, schema: type) -> dict[str, Any]:
    """A mapping with every key it leaves out (or sets to null, for a nested block) taken from a dataclass schema's
    defaults, nested blocks merged key by key: the one place those defaults are written. Values are not
    type-checked here (the task's settings rules check them, naming the key)."""
    plain = OmegaConf.to_container(given, resolve=True) if isinstance(given, DictConfig) else dict(given or {})
    out = dict(plain)
    for f in fields(schema):
        if is_dataclass(f.default_factory) and isinstance(plain.get(f.name), (dict, DictConfig, type(None))):
            out[f.name] = with_defaults(plain.get(f.name), f.default_factory)  # type: ignore[arg-type]
        elif f.name not in plain:
            out[f.name] = f.default_factory() if f.default_factory is not NO_DEFAULT else f.default
    return out
