"""Task and Method base classes: a Task = examples + methods (request generators) + a scorer."""
from __future__ import annotations

import abc
import copy
from typing import Any, ClassVar, Iterable, Optional

from omegaconf import DictConfig, OmegaConf

from recbench.api.errors import lookup
from recbench.store.schema import SampleRecord
from recbench.api.types import Example, MethodGen, Outcome, SamplingParams


def with_conf_defaults(cfg: Any, group: str) -> Any:
    """A task/method config with the top-level keys it leaves out taken from conf/<group>/<cfg.name>.yaml: a config
    built by hand in code (only a name, say) gets the same defaults as the composed one, from YAML only."""
    from recbench.cli.catalogue import conf_dir, merged

    name = cfg.get("name") if cfg is not None else None
    if not name or not (conf_dir() / group / f"{name}.yaml").is_file():
        return cfg
    given = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
    base = {k: copy.deepcopy(v) for k, v in merged(group, str(name)).items()
            if k not in given and not (isinstance(v, str) and "${" in v)}  # interpolations need the whole config
    return {**base, **given}


def to_plain(node: Any) -> Any:
    """A config node (DictConfig, Settings, or None) as built-in dicts and lists, interpolations resolved."""
    if isinstance(node, DictConfig):
        return OmegaConf.to_container(node, resolve=True)
    if isinstance(node, dict):
        return {k: to_plain(v) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return [to_plain(v) for v in node]
    return node


def _natural(value: str) -> tuple[int, float, str]:
    """Sort key: finite numbers by value first, then text."""
    try:
        x = float(value)
    except ValueError:
        return (1, 0.0, value)
    return (0, x, value) if abs(x) < float("inf") else (1, 0.0, value)


class Settings(dict):
    """A resolved plain-dict copy of a config node with attribute access (the one config wrapper of tasks and
    methods): they read it per request, so it must be cheap; a missing key is an error naming the keys, never a
    silent default (defaults live in conf/task and conf/method)."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(f"config has no key '{key}' (keys: {', '.join(self)})") from None

    @staticmethod
    def of(cfg: Any) -> Any:
        """Settings from a DictConfig/dict (recursively, interpolations resolved); None stays None."""
        if isinstance(cfg, DictConfig):
            cfg = OmegaConf.to_container(cfg, resolve=True)
        if isinstance(cfg, dict):
            return Settings({k: Settings.of(v) for k, v in cfg.items()})
        return cfg


class Method(abc.ABC):
    """How a model is asked about one example; `needs_backend=False` for classic reference baselines."""

    name: ClassVar[str] = "method"
    needs_backend: ClassVar[bool] = True
    #: one round of requests per example whatever the answers (plan mode counts such methods exactly)
    single_round: ClassVar[bool] = False
    #: keys a hand-built config leaves out come from conf/method/<name>.yaml (classes whose code has no defaults)
    conf_defaults: ClassVar[bool] = False

    def __init__(self, task: "Task", cfg: DictConfig, sampling_cfg: Optional[DictConfig] = None):
        self.task = task
        self.cfg = Settings.of(with_conf_defaults(cfg, "method") if self.conf_defaults else cfg)
        self.sampling_cfg = Settings.of(sampling_cfg)  # the run's `sampling` block: temperature, top_p, seed
        self._sampling_memo: dict[tuple[int, int], SamplingParams] = {}

    @property
    def seed(self) -> int:
        """The run seed (sampling.seed)."""
        return int(self.sampling_cfg.seed) if self.sampling_cfg is not None else 0

    def sampling(self, max_tokens: int, seed_offset: int = 0) -> SamplingParams:
        """Explicit SamplingParams from the run's sampling block, with this request's token budget."""
        key = (int(max_tokens), int(seed_offset))
        if key not in self._sampling_memo:
            s = self.sampling_cfg
            self._sampling_memo[key] = (
                SamplingParams(max_tokens=key[0], seed=key[1]) if s is None else
                SamplingParams(temperature=float(s.temperature), top_p=float(s.top_p), max_tokens=key[0],
                               seed=int(s.seed) + key[1], stop=tuple(s.get("stop") or ())))
        return self._sampling_memo[key]

    @abc.abstractmethod
    def run(self, example: Example) -> MethodGen:
        """Generator: yield lists of Requests, receive Responses, return an Outcome."""

    def prepare(self, examples: list[Example]) -> None:
        """Optional one-off work over all examples before the loop (e.g. fit a baseline)."""

    def asks_one_round(self) -> bool:
        """True when this configured method asks one round per example whatever the answers (exact request counts
        for plan mode and the progress bar); self-consistency voting makes it several."""
        return bool(self.single_round) and not (getattr(self, "cfg", None) or {}).get("self_consistency", 0)


class Task(abc.ABC):
    """A benchmark: loads Examples, names its Methods, scores Outcomes, says how to break results down."""

    name: ClassVar[str] = "task"
    #: method name -> Method class
    methods: ClassVar[dict[str, type[Method]]] = {}
    #: example.meta keys whose values get their own aggregate rows (e.g. difficulty)
    breakdown_by: ClassVar[tuple[str, ...]] = ()
    #: the metric named first in reports
    headline_metric: ClassVar[str] = "score"
    #: breakdown values in the task's own order per key (difficulty: easy, medium, hard); the rest follow naturally
    breakdown_order: ClassVar[dict[str, tuple[str, ...]]] = {}
    #: example-meta key of the unit that paired statistics resample (None = the example itself)
    cluster_by: ClassVar[Optional[str]] = None
    #: keys a hand-built config leaves out come from conf/task/<name>.yaml (classes whose code has no defaults)
    conf_defaults: ClassVar[bool] = False

    def __init__(self, cfg: DictConfig):
        self.cfg = Settings.of(with_conf_defaults(cfg, "task") if self.conf_defaults else cfg)

    @abc.abstractmethod
    def load(self) -> list[Example]:
        """All examples of this task, in a stable order (limit applies to this order)."""

    @abc.abstractmethod
    def score(self, example: Example, outcome: Outcome) -> dict[str, float]:
        """Per-example metrics (numbers; NaN means undefined and is excluded from means)."""

    def truth(self, example: Example) -> Any:
        """What an answer to the example is scored against, JSON-ready, stored as the sample's `truth` (None: none)."""
        return None

    def slice_values(self, key: str, values: Iterable[str]) -> list[str]:
        """Breakdown values of `key` in display order: breakdown_order first, then numbers by value, then text."""
        declared = list(self.breakdown_order.get(key, ()))
        present = set(values)
        return [v for v in declared if v in present] + sorted(present - set(declared), key=_natural)

    def make_method(self, method_cfg: DictConfig, sampling_cfg: Optional[DictConfig] = None) -> Method:
        """Instantiate the method class named by method.kind (variants such as a CoT or few-shot version of a
        method) or method.name, with a did-you-mean error; the instance carries method.name, so each variant gets
        its own run directory and report row."""
        cls = lookup(self.methods, method_cfg.get("kind") or method_cfg.name, what=f"method for task '{self.name}'",
                     hint="method=")
        m = cls(self, method_cfg, sampling_cfg)
        m.name = str(method_cfg.name)
        return m

    def identity(self) -> dict[str, Any]:
        """What identifies this task's data and settings in run records."""
        return {"name": self.name}

    def extra_aggregates(self, records: Iterable[SampleRecord]) -> dict[str, Any]:
        """Task-specific aggregates beyond per-metric means (optional)."""
        return {}

    # ---- presentation: recbench.report draws generic tables and asks each benchmark's Task class for its own ----
    #: display title of the benchmark this task belongs to (None: the benchmark id)
    benchmark_title: ClassVar[Optional[str]] = None
    #: position of the benchmark in reports (lower first)
    report_order: ClassVar[int] = 99
    #: metrics shown in this task's generic report table, in order (None: every metric)
    report_metrics: ClassVar[Optional[tuple[str, ...]]] = None

    @classmethod
    def benchmark_id(cls) -> str:
        """The benchmark a task class belongs to: its package under recbench.tasks ('other' elsewhere)."""
        parts = cls.__module__.split(".")
        return parts[2] if len(parts) > 2 and parts[:2] == ["recbench", "tasks"] else "other"

    @classmethod
    def report_tables(cls, idx: Any, view: Any, benchmark: str) -> list[Any]:
        """This benchmark's report tables (default: one generic table per task)."""
        from recbench.report.tables import per_task_tables

        return per_task_tables(idx, view, benchmark)

    @classmethod
    def report_plots(cls, agg: Any, view: Any, benchmark: str) -> list[Any]:
        """This benchmark's extra report figures (default: none)."""
        return []
