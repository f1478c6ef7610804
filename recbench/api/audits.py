"""The one interface of a validity audit, and its registry.

An audit declares what it needs and what it contributes to a run, as hooks of one `Audit` subclass registered with
`register` (like a metric): refusals before the run dir is written (`check`), a wrapper around the method
(`wrap`), example labels before the loop (`label`), extra requests after it (`extra_requests`, handed the run's own
loop through `AuditRun`), its metrics.json block (`aggregate`; `from_run_dir` for what the run wrote beside its
records, e.g. a judge's), a plan-mode note (`plan_note`), a terminal line (`terminal_line`) and report tables as
declared data (`tables`). The run (recbench/run/audit_calls.py), the terminal
summary and the report call every audit through these hooks only; none of them names an audit. The audits live in
one `Registry` (api/registry.py: a key taken twice is an error, a wrong type refused at registration); the
`recbench.audits` package declares each by key as 'module:attribute' and its blocks likewise, so reading a
metrics.json imports only the block modules of the keys it holds; the full list (a run) imports every module of
the package, so a new audit is one module there, one line of the package's table, and its test.
"""
from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Union

from recbench.api.registry import Registry, RegistryError

#: the package whose modules register the audits
AUDITS_PACKAGE = "recbench.audits"


@dataclass
class AuditRun:
    """What the run hands an audit after its loop: the run's parts, its records, and the means to ask more."""

    cfg: Any
    task: Any
    method: Any  # the run's method, audit wrappers included
    examples: list[Any]
    run_dir: Path
    cache: Any
    backend: Any  # the backend object given in code (tests, benchmarks), else None: built from cfg.model
    records: list[Any]  # the run's finished records of these examples
    decode: Callable[..., tuple[list[Any], Any]]  # decode(method, backend, factory, store_dir) -> (records, stats)
    lazy_backend: Callable[[Any], Any]  # a model config -> a backend built on first use (run/construct.LazyBackend)


@dataclass
class Extra:
    """What an audit's extra requests contribute: metrics.json blocks and the loop counters of those requests."""

    blocks: dict[str, Block]  # typed where they are computed
    stats: Any  # run/loop.LoopStats of the extra requests (added to this invocation's counters)


class Block:
    """A typed metrics.json audit block: a dataclass whose fields are the block's keys (each with a default, so a
    block written by an older recbench reads too); `from_dict` reads the file form, nested blocks included."""

    @classmethod
    def from_dict(cls, d: Any) -> Any:
        """The block from its metrics.json form (unknown keys ignored; a non-object gives None)."""
        if not isinstance(d, dict):
            return None
        hints = typing.get_type_hints(cls)
        return cls(**{f.name: _typed(hints[f.name], d[f.name]) for f in dataclasses.fields(cls) if f.name in d})

    def to_dict(self) -> dict[str, Any]:
        """The metrics.json form."""
        return dataclasses.asdict(self)


def _typed(tp: Any, v: Any) -> Any:
    """v (a JSON value) read as type tp: nested Blocks, lists and dicts of them, Optional ones; other values as is."""
    if v is None:
        return None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Union:
        inner = [a for a in args if a is not type(None)]
        return _typed(inner[0], v) if len(inner) == 1 else v
    if isinstance(tp, type) and issubclass(tp, Block):
        return tp.from_dict(v)
    if origin is dict and isinstance(v, dict):
        return {k: _typed(args[1], x) for k, x in v.items()}
    if origin is list and isinstance(v, list):
        return [_typed(args[0], x) for x in v]
    return v


class Audit:
    """A validity audit: every hook does nothing by default; a subclass overrides the ones it needs."""

    #: its name and its metrics.json extra key
    key: str = ""
    #: where it comes among the audits (lower first): the order of wrappers, blocks, lines and tables
    rank: int = 100
    #: its block's typed record, by extra key (one audit may write several blocks)
    blocks: dict[str, type[Block]] = {}
    #: its report tables, declared as data (recbench.report.presentation.AuditTable)
    tables: tuple[Any, ...] = ()

    def enabled(self, cfg: Any) -> bool:
        """True when the run's config asks for this audit."""
        return False

    def check(self, cfg: Any, method: Any, backend: Any) -> None:
        """Refuse (ConfigError) a config the audit cannot run, before the run dir is written."""

    def wrap(self, task: Any, method: Any, cfg: Any) -> Any:
        """The method the run drives (the method itself, or a wrapper asking more per example)."""
        return method

    def label(self, cfg: Any, task: Any, examples: list[Any], run_dir: str | Path, model: Any) -> list[Any]:
        """The examples, labelled before the loop (`model`: the backend or its config identity; None: no model)."""
        return examples

    def prepare_task(self, cfg: Any, task: Any) -> None:
        """Adjust the task before aggregation (e.g. one more breakdown key)."""

    def extra_requests(self, run: AuditRun) -> Optional[Extra]:
        """Requests asked after the run's loop, and the blocks they give (None: none)."""
        return None

    def aggregate(self, cfg: Any, task: Any, records: list[Any]) -> dict[str, Block]:
        """metrics.json extra blocks from the run's records, typed where they are computed ({} when the records carry
        nothing of this audit); called for every registered audit, since records may carry what an audit reads
        without the audit asked for (e.g. comparisons asked in both orders)."""
        return {}

    def from_run_dir(self, cfg: Any, task: Any, records: list[Any], run_dir: str | Path) -> dict[str, Block]:
        """metrics.json extra blocks from what the run wrote in its run dir besides its records (e.g. a judge's
        records under judge/), read after every pass of the run (its loop, the audits' extra requests, the judge
        pass); called for every registered audit by a run and a merge of its shards ({} when there is nothing)."""
        return {}

    def plan_note(self, cfg: Any, unique_requests: int) -> Optional[str]:
        """What plan mode says about this audit's requests (None: nothing)."""
        return None

    def variants_per_example(self, cfg: Any) -> int:
        """How many variants of each example this audit's wrapper asks (1: it wraps nothing); `variants_asked`
        multiplies them, e.g. to count the plain method's requests among the run's."""
        return 1

    def terminal_line(self, blocks: dict[str, Block]) -> Optional[str]:
        """The audit in one terminal line from a run's typed audit blocks (RunResult.audits; None when it has none);
        an audit with several findings gives one line each, joined by newlines."""
        return None


def _discover() -> None:
    """Every module of the audits package, imported once so that each registers (the full list is asked for)."""
    if _DISCOVERED:
        return
    _DISCOVERED.append(True)
    package = importlib.import_module(AUDITS_PACKAGE)
    for m in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        importlib.import_module(f"{AUDITS_PACKAGE}.{m.name}")


#: every audit by key (api/registry.py: a key taken twice is an error, a non-Audit refused at registration); the
#: audits package declares the shipped ones as 'module:attribute' (recbench/audits/__init__.py), imported on first use
AUDITS: Registry[Audit] = Registry("audit", lambda a: isinstance(a, Audit), "an Audit instance")
#: every metrics.json audit block's typed record by extra key, declared the same way: reading a metrics.json imports
#: the block modules of the keys it holds, no audit
BLOCKS: Registry[type] = Registry("audit block", lambda t: isinstance(t, type) and issubclass(t, Block),
                                  "a Block class")
_DECLARED: list[bool] = []
_DISCOVERED: list[bool] = []
#: the audit that writes each block key
_OWNER: dict[str, str] = {}
#: a declared audit's switches: the config keys that ask for it (one set: imported and asked; () = every run)
_SWITCHES: dict[str, tuple[str, ...]] = {}


def _declared() -> None:
    """The audits package's table of lazy declarations, read once (importing the package imports no audit)."""
    if not _DECLARED:
        _DECLARED.append(True)
        importlib.import_module(AUDITS_PACKAGE)


def declare(key: str, where: str, blocks: dict[str, str], switches: tuple[str, ...] = ()) -> None:
    """Declare an audit (`where`: 'module:attribute'), its blocks (extra key -> 'module:Class') and its switches (the
    config keys that ask for it, e.g. 'audit.orders'; () = asked on every run) without importing them
    (recbench/audits/__init__.py's table): a run imports only the audits its config switches on."""
    AUDITS.declare(key, where)
    _SWITCHES[key] = tuple(switches)
    for k, w in blocks.items():
        BLOCKS.declare(k, w)
        _OWNER[k] = key


def register(audit: Audit) -> Audit:
    """Register an audit under its key, and its blocks; RegistryError when another audit holds the key or a block
    key, or when the audit is no Audit or a block no Block."""
    if not audit.key:
        raise ValueError(f"{type(audit).__name__}: an audit needs a key (its metrics.json extra key)")
    AUDITS.register(audit.key, audit)
    try:
        for key, tp in audit.blocks.items():
            BLOCKS.register(key, tp)
            _OWNER[key] = audit.key
    except RegistryError:  # refused whole: the audit goes with its block
        AUDITS.unregister(audit.key)
        raise
    return audit


def unregister(key: str) -> None:
    """Remove an audit and its blocks from the registry (a test's example audit, after the test)."""
    audit = AUDITS.get(key) if key in AUDITS else None
    AUDITS.unregister(key)
    for k in (audit.blocks if audit is not None else {}):
        BLOCKS.unregister(k)


def registered() -> list[Audit]:
    """Every audit, by rank (then key), every audit module imported."""
    _declared()
    _discover()
    return sorted((a for _, a in AUDITS.items()), key=lambda a: a.rank)


def _switched_on(cfg: Any, key: str) -> bool:
    """Whether a config value at a dotted key is set: not missing, 0, false, empty or 'none'."""
    v: Any = cfg
    for part in key.split("."):
        v = v.get(part) if hasattr(v, "get") else None
        if v is None:
            return False
    return v not in (0, False, "", "none", "null")


def asked(cfg: Any) -> list[Audit]:
    """The audits a run of this config asks its hooks of, by rank: those declared without switches, those a switch
    of the config turns on, and every audit registered in code; the others are not imported."""
    _declared()
    keys = [k for k in AUDITS.names() if k not in _SWITCHES or not _SWITCHES[k]
            or any(_switched_on(cfg, s) for s in _SWITCHES[k])]
    return sorted((AUDITS.get(k) for k in keys), key=lambda a: a.rank)


def enabled(cfg: Any) -> list[Audit]:
    """The audits the config asks for (each one's `enabled`)."""
    return [a for a in asked(cfg) if a.enabled(cfg)]


def variants_asked(cfg: Any) -> int:
    """How many variants of each example the enabled audits ask together (1: the plain run only)."""
    out = 1
    for a in enabled(cfg):
        out *= max(1, int(a.variants_per_example(cfg)))
    return out


def terminal_lines(blocks: dict[str, Block]) -> list[str]:
    """The terminal lines of the audits that wrote a run's typed audit blocks (RunResult.audits), by rank; only those
    audits are imported."""
    _declared()
    owners = [AUDITS.get(o) for o in dict.fromkeys(_OWNER.get(k) for k in blocks) if o is not None]
    lines = (a.terminal_line(blocks) for a in sorted(owners, key=lambda a: a.rank))
    return [part for line in lines if line for part in line.splitlines()]


def declared_tables() -> list[Any]:
    """Every audit's declared report tables, in registration order."""
    return [t for a in registered() for t in a.tables]


def block_type(key: str) -> Optional[type[Block]]:
    """The typed record of a metrics.json extra key, importing its block module only (None: no audit's block)."""
    _declared()
    return BLOCKS.get(key) if key in BLOCKS else None


def block_types() -> dict[str, type[Block]]:
    """Every audit's typed block record, by metrics.json extra key (every audit imported)."""
    registered()
    return {key: BLOCKS.get(key) for key in BLOCKS.names()}
