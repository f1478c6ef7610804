"""How a benchmark shows in reports, declared as data: its key, title and place, its tables (which rows, which
columns, which metrics, which breakdown values in which order, which published rows) and its own figures.

A benchmark package declares one `PRESENTATION = Presentation(...)` in its `presentation` module (e.g.
tasks/<benchmark>/presentation.py); the report finds it from a run's task class (`task._target_`): the
`presentation` module beside the class, else beside a base class's. One builder (recbench.report.builder) draws
every declared table; a benchmark that declares none gets one generic table per task.
"""
from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Mapping, Optional

from recbench.api.audit_tables import AuditColumn, AuditTable  # noqa: F401 - declared below the audits and the report
from recbench.api.task import Task

#: which runs a table's rows are: model-backed, model-free (model "none"), or both
ROWS = ("models", "references", "all")
#: what a table's column levels may be: the method, a breakdown value (or 'all'), the metric
LEVELS = ("method", "value", "metric")


@dataclass(frozen=True)
class Breakdown:
    """A breakdown shown as columns: its example-meta key, its values in display order (values not named follow,
    sorted) and the task config key that runs a subset of them (runs differing only there are one configuration)."""

    key: str
    order: tuple[str, ...] = ()
    subset_key: Optional[str] = None


@dataclass(frozen=True)
class PublishedRows:
    """A '<model> (published)' row under each measured row that data/published/<benchmark>.yaml has numbers for.

    `name_runs(configs, task)`: the task name the file's `applies_to` knows the runs of a row by, from their
    config.yaml files (e.g. a released-data variant of the task). `caption` is added to the table's caption when a
    row applies ({mark}: the outside-the-CI mark, {flagged}: cells marked, {benchmark}); `number_format` writes the
    published value into a marked cell's note."""

    name_runs: Callable[[list[dict[str, Any]], str], str]
    caption: str
    number_format: str = ".4g"


@dataclass(frozen=True)
class TableSpec:
    """One table (or one per task): rows are (task, model, method, variant) of the chosen runs, sorted, minus the
    levels that are columns; columns are the `columns` levels crossed, outer first, each kept only where some run of
    the benchmark has a value for it."""

    id: str = "{benchmark}-{task}"  # may use {benchmark} and {task}
    title: str = "{title}: {task}"  # may use {title} (the benchmark's) and {task}
    caption: Optional[str] = None  # None: which columns are lower-is-better or have no direction
    rows: str = "all"  # one of ROWS
    columns: tuple[str, ...] = ("metric",)  # levels from LEVELS, outer first
    metrics: tuple[str, ...] = ()  # () = every metric the runs have (bookkeeping values left out)
    task_metrics: Mapping[type, tuple[str, ...]] = field(default_factory=dict)  # per task class (and subclasses)
    breakdown: Optional[Breakdown] = None  # None: overall values only
    overall: bool = True  # an 'all' column after the breakdown values
    average: bool = False  # a last column: the row's average, missing when any of its cells is
    per_task: bool = False  # one table per task of the benchmark
    marks: bool = True  # best and second best per column
    method_order: tuple[str, ...] = ()  # these first, each followed by its variants (listwise, listwise_cot, ...)
    method_labels: Mapping[str, str] = field(default_factory=dict)  # method -> its row label
    method_header: str = "method"  # the header of the method's row-label column
    say_not_run: bool = False  # name the declared breakdown values no run covers, and why
    published: Optional[PublishedRows] = None

    def __post_init__(self) -> None:
        bad = [f"rows={self.rows!r}: must be one of {', '.join(ROWS)}"] if self.rows not in ROWS else []
        if not self.columns or len(set(self.columns)) != len(self.columns) or set(self.columns) - set(LEVELS):
            bad.append(f"columns={self.columns!r}: distinct levels from {', '.join(LEVELS)}")
        if "value" in self.columns and self.breakdown is None:
            bad.append("columns has 'value' but no breakdown is declared")
        if "metric" not in self.columns and len(self.metrics) != 1:
            bad.append("without a 'metric' column level the table shows one metric: declare metrics=(name,)")
        if self.rows == "references" and "method" in self.columns:
            bad.append("reference rows are labelled by their method: 'method' cannot be a column level")
        if bad:
            raise ValueError(f"TableSpec {self.id!r}: " + "; ".join(bad))

    def metrics_of(self, task_class: type) -> tuple[str, ...]:
        """The metrics this table declares for a task of the given class ((): every metric)."""
        for cls in getattr(task_class, "__mro__", ()):
            if cls in self.task_metrics:
                return self.task_metrics[cls]
        return self.metrics


@dataclass(frozen=True)
class Presentation:
    """A benchmark in reports: `benchmark` is its key (the report section, the `benchmark:` of its published-number
    file), `title` and `order` (lower first) place it; `tables` are drawn by the one builder, `plots` are the
    benchmark's own figures: functions (seed-aggregated cells, ReportView, benchmark) -> list of Plot."""

    benchmark: str
    title: str
    order: int = 99
    tables: tuple[TableSpec, ...] = (TableSpec(per_task=True),)
    plots: tuple[Callable[[Any, Any, str], list[Any]], ...] = ()  # (cells DataFrame, ReportView, benchmark) -> Plots
    # tables of what the benchmark's runs record besides metrics (metrics.json extra): (its runs) -> Table or None
    run_tables: tuple[Callable[[list[Any]], Any], ...] = ()

    @property
    def subset_keys(self) -> tuple[str, ...]:
        """Config keys that run a subset of a breakdown's values (declared in the tables' breakdowns)."""
        keys = (t.breakdown.subset_key for t in self.tables if t.breakdown is not None)
        return tuple(dict.fromkeys(k for k in keys if k))


#: runs whose task class declares no presentation: generic tables under 'other'
GENERIC = Presentation(benchmark="other", title="other")


@lru_cache(maxsize=None)
def presentation_of(task_class: type) -> Presentation:
    """The Presentation declared beside a task class: PRESENTATION in the `presentation` module of its package, else
    of the nearest base class's package; GENERIC when none declares one."""
    for cls in getattr(task_class, "__mro__", ()):
        if not (isinstance(cls, type) and issubclass(cls, Task)) or cls is Task:
            continue
        package = cls.__module__.rpartition(".")[0]
        if not package or importlib.util.find_spec(f"{package}.presentation") is None:
            continue
        module = importlib.import_module(f"{package}.presentation")
        declared = getattr(module, "PRESENTATION", None)
        if not isinstance(declared, Presentation):
            raise TypeError(f"{module.__file__}: PRESENTATION must be a recbench.report.presentation.Presentation "
                            f"(found {type(declared).__name__}). Fix: declare PRESENTATION = Presentation(...)")
        return declared
    return GENERIC
