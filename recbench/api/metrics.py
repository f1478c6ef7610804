"""The one metric registry: every metric's name, per-example function, aggregation, direction and binary-ness.

A metric is declared once, where it is computed: the standard per-example metrics below (`register`, selectable by
name in YAML: `resolve('hr@10')`), and each benchmark's own metrics in its Task class (`Task.metric_specs`, next to
the `score()` that computes them), which this registry collects when the class is defined (`declare`). The run loop
holds a task to its declarations (`check_scored`). A corpus metric (a statistic of the whole run: RMSE, corpus BLEU)
is a MetricSpec whose `corpus` computes it (`corpus_values`); there is no other way to add one. Reports and
`recbench.stats.verdicts` read a metric's direction and binary-ness from here (or from the `metric_info` block a run
wrote into metrics.json), never from a list of names.

Every metric has one of four directions: "higher" or "lower" is better; "none" for a descriptive value declared
without one (a count such as `n_recommended`); "unknown" for a metric nobody registered. Only "higher" and "lower"
ever give a "better", a verdict, significance letters or best marks.
"""
from __future__ import annotations

import functools
import importlib
import logging
import math
import pkgutil
import traceback
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence

from recbench.api.errors import CannotRun, ConfigError, lookup
from recbench.api.facts import MetricInfo
from recbench.api.metric_spec import (  # noqa: F401 - the registry's public names, importable from here
    _DECLARED, _REGISTRY, DIRECTION_WORDS, RANKING_DIRECTIONS, Aggregation, Direction, MetricFn, MetricSpec, declare,
    legend, register)
from recbench.api.standard_metrics import rouge_scorer, sentence_bleu  # noqa: F401 - registers the standard metrics
from recbench.api import item_lists  # noqa: F401 - registers the list metrics (arp@k, coverage@k, invalid_rate, ...)

log = logging.getLogger(__name__)
_PLUGINS_LOADED = False


def _lookup(table: Mapping[str, MetricSpec], name: str) -> Optional[MetricSpec]:
    """The spec of a metric name in one table: the name itself ('hr@10'), else its family ('hr'), else the family
    declared at any cut-off ('arp@k' for 'arp@10')."""
    return table.get(name) or table.get(family(name)) or ("@" in name and table.get(family(name) + "@k")) or None


def family(name: str) -> str:
    """A metric name without its cut-off: 'hr@10' -> 'hr'."""
    return name.split("@", 1)[0]


def task_packages() -> list[str]:
    """The names of the task packages under recbench.tasks (folders, in name order): found as plug-ins by name, so
    api/ never imports the benchmarks it serves."""
    tasks_pkg = importlib.import_module("recbench.tasks")
    return sorted(m.name for m in pkgutil.iter_modules(tasks_pkg.__path__) if m.ispkg)


def import_task_module(package: str, module: str = "task") -> Any:
    """Import recbench.tasks.<package>.<module>; a package that fails to import is an error naming the package,
    the exception and the line that raised it (never skipped: a broken task would silently lose its metrics)."""
    name = f"recbench.tasks.{package}.{module}"
    try:
        return importlib.import_module(name)
    except Exception as e:  # noqa: BLE001 - any failure of a task package's code is reported the same way
        where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
        at = f" at {where.filename}:{where.lineno}" if where else ""
        raise CannotRun(f"task package '{package}' failed to import: {name} raised {type(e).__name__}: {e}{at}. "
                        f"Fix tasks/{package} (or install what it needs)") from e


def _load_task_plugins() -> None:
    """Import every task package's `task` module once, so the metrics their classes declare are known (no names
    hard-coded); a package that fails to import stops with an error naming it."""
    global _PLUGINS_LOADED
    if _PLUGINS_LOADED:
        return
    for package in task_packages():
        import_task_module(package)
    _PLUGINS_LOADED = True


def find_spec(name: str) -> Optional[MetricSpec]:
    """The spec of a metric name, registered or declared by a task ('hr@10' finds 'hr@10', else the family 'hr'),
    or None."""
    for first in (True, False):
        if not first:
            _load_task_plugins()
        for table in (_REGISTRY, _DECLARED):
            spec = _lookup(table, name)
            if spec is not None:
                return spec
    return None


def metric_spec(name: str, recorded: Optional[MetricInfo | Mapping[str, Any]] = None) -> MetricSpec:
    """The spec of a metric: registered, else what a run recorded in metrics.json (`metric_info`), else a
    non-binary stand-in whose direction is 'unknown', with a warning (an unknown metric is never guessed better)."""
    spec = find_spec(name)
    if spec is not None:
        return spec
    if recorded:
        if not isinstance(recorded, MetricInfo):
            recorded = MetricInfo.from_dict(recorded)
        direction = recorded.direction
        if direction is None:  # metric_info written before directions were named: a bool, or None
            hib = recorded.higher_is_better
            direction = "unknown" if hib is None else ("higher" if hib else "lower")
        if direction == "unknown":
            _warn_unknown(name)
        return MetricSpec(name, higher_is_better={"higher": True, "lower": False}.get(direction),
                          declared=direction != "unknown", binary=bool(recorded.binary),
                          aggregation=recorded.aggregation)
    _warn_unknown(name)
    return MetricSpec(name, higher_is_better=None, declared=False)


@functools.lru_cache(maxsize=None)
def _warn_unknown(name: str) -> None:
    log.warning("metric '%s' is not registered: direction unknown, so it gets no better/worse verdict, letters or "
                "best marks; declare it in its task class (metric_specs = (MetricSpec('%s', higher_is_better=True/"
                "False, or None for a descriptive count), ...))", name, name)


def registered() -> dict[str, MetricSpec]:
    """All known metrics by name: registered, and declared by the task packages."""
    _load_task_plugins()
    return {**_DECLARED, **_REGISTRY}


# ---- holding a task to its declarations --------------------------------------------------------------
class UndeclaredMetric(ValueError):
    """A task's score() returned a metric its class does not declare (Task.metric_specs)."""


def check_scored(task: Any, keys: Iterable[str], memo: dict[str, bool]) -> None:
    """Refuse a per-example metric the task neither declares (task.declared_metrics()) nor finds registered by name
    (register(): the standard metrics); a task with `undeclared_metrics = "unknown"` (a user's subclass of a YAML
    task) records such a metric with direction 'unknown' instead, with a warning. `memo` caches names per task."""
    for key in keys:
        if key in memo:
            continue
        ok = _lookup(task.declared_metrics(), key) is not None or _lookup(_REGISTRY, key) is not None
        memo[key] = ok
        if not ok and task.undeclared_metrics != "unknown":
            declared = ", ".join(sorted(task.declared_metrics())) or "none"
            raise UndeclaredMetric(
                f"task '{task.name}' ({type(task).__name__}.score) returned metric '{key}', which it does not declare: "
                f"add MetricSpec('{key}', higher_is_better=True/False, or None for a count) to "
                f"{type(task).__name__}.metric_specs (declared: {declared})")


def corpus_values(task: Any, records: Sequence[Any]) -> dict[str, Any]:
    """The run-level value of every corpus metric the task declares (MetricSpec.corpus), in declaration order: a
    statistic of one per-example value (`per_example_name`; null when no example defines it), or of the records
    (left out where the function returns None: the metric does not apply to this run)."""
    out: dict[str, Any] = {}
    for name, spec in task.declared_metrics().items():
        if spec.corpus is None:
            continue
        if spec.per_example_name:
            vals = [v for r in records if not math.isnan(v := r.value(spec.per_example_name))]
            out[name] = spec.corpus(vals) if vals else None
        elif (value := spec.corpus(records, task)) is not None:
            out[name] = value
    return out


def run_info(task: Any, names: Iterable[str]) -> dict[str, MetricInfo]:
    """metrics.json's metric_info: direction, binary-ness and aggregation of each name, from the task's declarations,
    else the registry, else a stand-in whose direction is 'unknown' (with a warning)."""
    declared = task.declared_metrics()
    return {m: MetricInfo.from_dict((_lookup(declared, m) or metric_spec(m)).info()) for m in names}


# ---- metrics selected by name in YAML (config-only benchmarks) ---------------------------------------
@dataclass(frozen=True)
class BoundMetric:
    """A metric as configured: its output name (e.g. 'hr@10'), spec and parameters."""

    name: str
    spec: MetricSpec
    params: tuple[tuple[str, Any], ...]

    @property
    def record_name(self) -> str:
        """The key of this metric's per-example value (a corpus metric like rmse records squared errors)."""
        return self.spec.per_example_name or self.name

    def __call__(self, pred: Any, truth: Any) -> float:
        """The per-example value."""
        return float(self.spec.fn(pred, truth, **dict(self.params)))  # type: ignore[misc]


def selectable() -> dict[str, MetricSpec]:
    """Registered metrics that have a per-example function (what task.metrics can name)."""
    return {k: v for k, v in registered().items() if v.fn is not None}


def resolve(item: Any, where: str = "task.metrics") -> BoundMetric:
    """'accuracy', 'hr@10' or {name: hr, k: 10} -> a BoundMetric (ConfigError naming the key and valid names)."""
    if isinstance(item, str):
        name, _, k = item.partition("@")
        if k and not k.isdigit():
            raise ConfigError(f"{where}: '{item}': the cut-off after '@' must be a whole number, e.g. hr@10")
        params: dict[str, Any] = {"k": int(k)} if k else {}
    else:
        d = dict(item)
        if "name" not in d:
            raise ConfigError(f"{where}: a metric given as a mapping needs 'name' (got {d})")
        name = str(d.pop("name"))
        params = d
    core = _REGISTRY.get(name)  # a core metric wins over any task's declaration: no task package need be imported
    spec = core if core is not None and core.fn is not None else lookup(selectable(), name, what=f"metric in {where}")
    unknown = set(params) - set(spec.params)
    if unknown:
        raise ConfigError(f"{where}: metric '{name}' takes no parameter(s) {sorted(unknown)}. "
                          f"Valid parameters: {', '.join(spec.params) or '(none)'}")
    full = {**spec.defaults, **params}
    label = name + (f"@{full['k']}" if "k" in full and "k" in spec.params else "")
    return BoundMetric(label, spec, tuple(sorted(full.items())))
