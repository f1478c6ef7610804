"""Task and Method base classes: a Task = examples + methods (request generators) + a scorer.

The contract a benchmark implements, read in one place: Settings, the Method and ReferenceMethod bases, the typed task
view a method asks for, the Task hooks, and side_by_side / ask (how audits drive several variants of a method at
once: api/variant.py)."""
from __future__ import annotations

import abc
import copy
import dataclasses
import inspect
from typing import (
    Any,
    ClassVar,
    Generic,
    Iterable,
    Literal,
    Optional,
    Protocol,
    Sequence,
    TypeVar,
    get_args,
    get_origin,
)

from omegaconf import DictConfig, OmegaConf
from typing_extensions import get_protocol_members, is_protocol

from recbench.api.errors import lookup
from recbench.api.item_lists import ItemCatalogue, ItemList
from recbench.api.judge_metrics import judge_metric_specs
from recbench.api.metrics import MetricSpec, declare
from recbench.api.variant import PLAIN, Variant, reseeded_sampling
from recbench.api.types import Ahead, Example, MethodGen, Outcome, Request, Response, SamplingParams


def with_conf_defaults(cfg: Any, group: str, owner: Optional[type] = None) -> Any:
    """A task/method config with the top-level keys it leaves out taken from conf/<group>/<cfg.name>.yaml, or with
    `owner` (a method class) from conf/<group>/<benchmark>/<cfg.name>.yaml, the folder of the benchmark the class
    belongs to: a config built by hand in code (only a name, say) gets the same defaults as the composed one, from
    YAML only."""
    from recbench.api.conf_files import benchmark_of, conf_dir, merged

    if owner is not None:
        group = f"{group}/{benchmark_of(f'{owner.__module__}.{owner.__name__}')}"
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


class TaskView(Protocol):
    """What every method may use of its task: the name and the task's config. A benchmark's methods declare what else
    they need as a Protocol extending this one, and name it as their type parameter (`Method[MyTaskView]`):
    `self.task` is then typed, and Task.make_method checks the task provides it."""

    name: str
    cfg: Any


TaskT = TypeVar("TaskT", bound=TaskView)


class Method(abc.ABC, Generic[TaskT]):
    """How a model is asked about one example (`run`: a generator of requests); model-free reference rows subclass
    ReferenceMethod. The type parameter is what the method needs of its task (a Protocol, or a Task class)."""

    name: ClassVar[str] = "method"
    needs_backend: ClassVar[bool] = True
    #: one round of requests per example whatever the answers (plan mode counts such methods exactly)
    single_round: ClassVar[bool] = False
    #: keys a hand-built config leaves out come from conf/method/<benchmark>/<name>.yaml (classes whose code has no
    #: defaults)
    conf_defaults: ClassVar[bool] = False
    #: the valid values of the method's own keys, checked before the run starts (api/config.py check_settings)
    settings_rules: ClassVar[dict[str, Any]] = {}
    #: the Variant fields (api/variant.py) `run` honours itself: "order" (shows its items in display order k and
    #: returns Outcome.display), "template" (asks with the k-th paraphrase of `template_files()`); a property where
    #: it depends on the task. The seed field needs no declaration (`ask` applies it to every request).
    variants: ClassVar[frozenset[str]] = frozenset()

    task: TaskT

    def __init__(self, task: TaskT, cfg: DictConfig, sampling_cfg: Optional[DictConfig] = None):
        self.task = task
        self.cfg = Settings.of(with_conf_defaults(cfg, "method", type(self)) if self.conf_defaults else cfg)
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
    def run(self, example: Example, variant: Variant = PLAIN) -> MethodGen:
        """Generator: yield lists of Requests, receive Responses, return an Outcome (`variant`: what an audit asks
        of this call, among the fields the method declares in `variants`; PLAIN = the plain run)."""

    def prepare(self, examples: list[Example]) -> None:
        """Optional one-off work over all examples before the loop (e.g. fit a baseline)."""

    def prefetch(self, examples: Sequence[Example]) -> Optional[Ahead]:
        """Optional work started ahead of the loop over the examples it runs, in order; the loop closes it."""
        return None

    def asks_one_round(self) -> bool:
        """True when this configured method asks one round per example whatever the answers (exact request counts
        for plan mode and the progress bar); a method whose rounds depend on its config overrides it."""
        return bool(self.single_round)

    @classmethod
    def task_interface(cls) -> Optional[type]:
        """The Protocol or Task class this method names as its type parameter (what it needs of its task), or None."""
        for klass in cls.__mro__:
            for base in klass.__dict__.get("__orig_bases__", ()):
                origin = get_origin(base)
                if isinstance(origin, type) and issubclass(origin, Method):
                    args = [a for a in get_args(base) if isinstance(a, type)]
                    if args:
                        return args[0]
        return None


class ReferenceMethod(Method[TaskT]):
    """A model-free method (a reference row: a classic baseline, a random order): `predict` gives each example's
    Outcome without asking anything; `prepare` may fit it on all examples first."""

    needs_backend: ClassVar[bool] = False

    @abc.abstractmethod
    def predict(self, example: Example) -> Outcome:
        """The Outcome of one example, without a model."""

    def run(self, example: Example, variant: Variant = PLAIN) -> MethodGen:
        """A request generator that asks nothing: the loop gets `predict`'s Outcome at its first step."""
        yield from ()
        return self.predict(example)


def missing_members(obj: Any, interface: type) -> list[str]:
    """The members of `interface` (a Protocol: its attributes and methods; a class: itself) that `obj` lacks,
    looked up without running properties (a task's cached data is not loaded by the check)."""
    if not is_protocol(interface):
        return [] if isinstance(obj, interface) else [f"(an instance of {interface.__name__})"]
    missing = []
    for member in sorted(get_protocol_members(interface)):
        try:
            inspect.getattr_static(obj, member)
        except AttributeError:
            missing.append(member)
    return missing


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
    #: the metrics this task computes, each declared once, here: what score() returns per example (besides the
    #: standard metrics registered by name, e.g. 'mae', 'hr@10'), and the corpus metrics whose MetricSpec.corpus
    #: computes them over the run (metrics.json `extra`); the loop refuses a score() key declared nowhere
    metric_specs: ClassVar[tuple[MetricSpec, ...]] = ()
    #: "error": a score() key declared nowhere stops the run; "unknown": it is recorded with direction 'unknown' and
    #: a warning (a task class users subclass to add a metric in score(), e.g. the YAML-only GenericTask)
    undeclared_metrics: ClassVar[Literal["error", "unknown"]] = "error"
    #: what an LLM judge scores this task's answers on (docs/judges.md): aspect -> definition; {} = not judgeable.
    #: A task that declares one also gives judge_context(example); judge_<aspect> metrics are declared from it
    judge_rubric: ClassVar[dict[str, str]] = {}
    #: example-meta keys that split users into groups (activity level, gender, age, occupation): the aggregate states
    #: the largest gap between their groups per metric, with a CI and a test (recbench/stats/group_gaps.py)
    fairness_by: ClassVar[tuple[str, ...]] = ()
    #: example-meta key naming the user an example is about when a user has several examples: the fairness gaps
    #: average a user's examples into one unit (None: each example is its own unit, or the task's cluster_by)
    user_by: ClassVar[Optional[str]] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "extra_aggregates" in cls.__dict__:  # the old second way to add corpus metrics: refused loudly
            raise TypeError(f"{cls.__qualname__}.extra_aggregates is no longer called: declare each corpus metric as "
                            "MetricSpec(..., corpus=fn) in metric_specs, and return other run facts from run_facts")
        if "metric_specs" in cls.__dict__:
            declare(f"{cls.__module__}.{cls.__qualname__}", cls.metric_specs)
        if cls.__dict__.get("judge_rubric"):
            declare(f"{cls.__module__}.{cls.__qualname__}", judge_metric_specs(cls.judge_rubric))

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

    def contamination_items(self, example: Example) -> dict[str, Optional[str]]:
        """The catalogue items an example is about, id -> title as the task shows it (None: no title), whose recall
        by a memorization probe splits the run (contamination.probe_run; recbench.audits.contamination); {}: none."""
        return {}

    def item_catalogue(self) -> Optional[ItemCatalogue]:
        """The catalogue, the popularity data the models are shown and the cut-off k of the list metrics
        (api/item_lists.py), for a task whose answer is a list of items; None (the default): no list metrics.
        Called once per run and per aggregate: cache it."""
        return None

    def item_list(self, example: Example, outcome: Outcome) -> Optional[ItemList]:
        """What one sample recommended (every named item as a catalogue id or None, the user's history, the
        candidates), scored by the list metrics; None: this sample has no list (a task without a catalogue)."""
        return None

    def rubric(self) -> dict[str, str]:
        """The aspects an LLM judge scores this task's answers on, aspect -> definition ({}: not judgeable)."""
        return dict(self.judge_rubric)

    def judge_context(self, example: Example) -> str:
        """What a judge reads besides the answer: what the answer responds to (the user's history, the item, the
        review), as text. A task that declares a rubric gives it."""
        raise NotImplementedError(f"{type(self).__name__} declares a judge rubric but no judge_context(example)")

    def judge_answer(self, record: Any) -> str:
        """The judged text of a finished record (a SampleRecord): its prediction as text."""
        return "" if record.prediction is None else str(record.prediction)

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
        interface = cls.task_interface()
        lacking = missing_members(self, interface) if interface is not None else []
        if lacking:
            raise TypeError(f"method '{method_cfg.name}' ({cls.__name__}) needs {interface.__name__} of its task; task "
                            f"'{self.name}' ({type(self).__name__}) lacks: {', '.join(lacking)}")
        m = cls(self, method_cfg, sampling_cfg)
        m.name = str(method_cfg.name)
        return m

    def identity(self) -> dict[str, Any]:
        """What identifies this task's data and settings in run records."""
        return {"name": self.name}

    def declared_metrics(self) -> dict[str, MetricSpec]:
        """The metrics this task declares, by output name (metric_specs; a YAML task: the metrics its config names),
        and the judged metrics of its rubric (judge_<aspect>, judge_win_rate) when it has one."""
        judged = judge_metric_specs(self.rubric()) if self.rubric() else ()
        return {s.name: s for s in (*self.metric_specs, *judged)}

    def run_facts(self, records: Iterable[Any]) -> dict[str, Any]:
        """What metrics.json `extra` records about the run besides metrics: mappings, lists or text, never a bare
        number (that is a corpus metric, in metric_specs). The core reads only the keys api/facts.py declares
        (verdict lines `summary`, chance levels `random_expectation`, a probe's verdict): RunResult.facts. Optional."""
        return {}

    def plan_power(self, examples: Sequence[Example], alpha: float, power: float, effect: float) -> Optional[dict]:
        """The power row of `mode=plan` when the task's headline test is not the paired comparison of two runs over
        its units (e.g. two independent samples within one run); None: the paired plan applies."""
        return None


def side_by_side(gens: Sequence[MethodGen]) -> MethodGen:
    """Drive several method generators together: each step yields the union of their pending requests; returns their
    outcomes in order."""
    outcomes: list[Optional[Outcome]] = [None] * len(gens)
    pending: dict[int, list[Request]] = {}

    def step(k: int, resps: Optional[list[Response]]) -> None:
        try:
            reqs = next(gens[k]) if resps is None else gens[k].send(resps)
        except StopIteration as stop:
            outcomes[k] = stop.value
            return
        pending[k] = list(reqs)

    for k in range(len(gens)):
        step(k, None)
    while pending:
        ks = sorted(pending)
        reqs = [r for k in ks for r in pending[k]]
        resps: list[Response] = yield reqs
        at = 0
        for k in ks:
            n = len(pending.pop(k))
            step(k, resps[at:at + n])
            at += n
    return outcomes


def honours(method: Any, field: str, task: Any = None) -> bool:
    """True when a method (instance or class; `task` for a class whose declaration is a property) honours a Variant
    field: "seed" every method that asks a model, "order" / "template" those that declare them in `variants`."""
    cls = method if isinstance(method, type) else type(method)
    if field == "seed":
        return bool(cls.needs_backend)
    value = getattr(cls, "variants", frozenset())
    if isinstance(value, property):  # decided per task (e.g. only where the prompt lists candidates)
        from types import SimpleNamespace

        value = value.fget(method if not isinstance(method, type) else SimpleNamespace(task=task))
    return field in value


def ask(method: Any, example: Example, variant: Variant) -> MethodGen:
    """`method.run(example, variant)`, with the variant's sampling seed applied to every request it yields (a wrapper
    that passes variants on, `passes_variants`, is run as is: the method it wraps applies the seed)."""
    gen = method.run(example, variant)
    if not variant.seed or getattr(method, "passes_variants", False):
        return gen
    return _reseeded(gen, variant.seed)


def _reseeded(gen: MethodGen, seed: int) -> MethodGen:
    resps = None
    while True:
        try:
            reqs = next(gen) if resps is None else gen.send(resps)
        except StopIteration as stop:
            return stop.value
        resps = yield [dataclasses.replace(r, sampling=reseeded_sampling(r.sampling, seed)) for r in reqs]
