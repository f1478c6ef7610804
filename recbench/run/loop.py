"""The one evaluation loop: a streaming scheduler over every example's method generator.

Each example's method is a generator that yields lists of Requests. A request is answered from the response
cache when it can be (cache hits resume their example at once, cascading), otherwise it joins one queue that
the backend pulls from (`Backend.stream`): API backends keep `concurrency` requests in flight, batch engines
take batches of whatever is ready. As soon as an answer arrives it is held for the cache (written below), and its
example resumes the moment its last pending answer is in: examples advance independently, with no round or chunk
barrier. Identical requests in flight are sent once.

Writes are grouped per step of the backend: the answers that arrived since the backend last pulled requests are
committed to the cache in one transaction, then the examples they finished are appended to samples.jsonl, each time
the backend pulls (before any new request is sent) and when the loop ends or is interrupted. So a SIGKILL loses at
most the requests sent and not yet written, never more than the backend's window in flight, and Ctrl-C loses
nothing.
"""
from __future__ import annotations

import gc
import logging
import math
import time
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from recbench.api.item_lists import list_scores
from recbench.api.metrics import check_scored
from recbench.backends.base import Backend
from recbench.store.response_cache import KeyMaker, ResponseCache
from recbench.store.runstore import RunStore
from recbench.store.records import LoopStats
from recbench.store.schema import Aggregate, CallRecord, Counts, ErrorRecord, MetricSummary, SampleRecord, SliceResult
from recbench.api.task import Method, Task
from recbench.api.types import Example, MethodGen, Outcome, Request, Response

if TYPE_CHECKING:
    from recbench.run.construct import LazyBackend

log = logging.getLogger(__name__)

#: examples admitted or finished between two gc.freeze() calls (EvalLoop._grown): each full collection then walks at
#: most this many examples' objects, not every example in progress and every record of the run so far; objects alive
#: at a freeze that die later in a reference cycle wait for the run's end to be collected
FREEZE_EVERY = 4096
#: allocations between two young collections while the loop runs (Python's default is 700): the loop makes a few
#: hundred short-lived containers per answer, nearly all freed by reference counting, so the default collected the
#: young generation several times per answer for nothing (the 60,000-group stub run: 0.5-3 s less, docs/scaling.md)
YOUNG_GC_THRESHOLD = 50_000


@dataclass(eq=False)
class _Active:
    example: Example
    gen: MethodGen
    pending: list[Request] = field(default_factory=list)
    answers: list[Optional[Response]] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    missing: int = 0


@dataclass(frozen=True)
class LoopSettings:
    """How a run's loops drive their examples (the config's `run` node, read once): examples in progress at once
    (None = all), whether the run's own loop keeps its prompts, progress bars."""

    chunk_size: Optional[int] = None
    store_prompts: bool = True
    progress: bool = True

    def run_into(self, store_dir: Any, task: Task, method: Method, examples: list[Example], cache: ResponseCache,
                 backend: Optional[Backend] = None, factory: Optional["LazyBackend"] = None
                 ) -> tuple[list[SampleRecord], LoopStats]:
        """The examples through a loop of their own into a record file of their own at store_dir (an audit's extra
        requests, a judge dir; resumable, prompts stored): the records of these examples and the loop's counters."""
        store = RunStore(store_dir)
        try:
            loop = EvalLoop(task, method, backend, cache, store, chunk_size=self.chunk_size, store_prompts=True,
                            progress=self.progress, backend_factory=factory)
            loop.run(examples)
            wanted = {e.id for e in examples}
            return [r for r in store.records() if r.id in wanted], loop.stats
        finally:
            store.close()


class EvalLoop:
    """Runs one (task, method, backend) over examples; resumable through the run store and the cache."""

    def __init__(self, task: Task, method: Method, backend: Optional[Backend], cache: ResponseCache,
                 store: RunStore, *, chunk_size: Optional[int] = None, store_prompts: bool = True,
                 progress: bool = True, backend_factory: Optional["LazyBackend"] = None):
        self.task, self.method, self.cache, self.store = task, method, cache, store
        self._backend = backend
        self._backend_factory = backend_factory
        self.max_active = chunk_size  # examples in progress at once (None = all)
        self.store_prompts = store_prompts
        self.progress = progress
        self.stats = LoopStats()
        self._keys: Optional[KeyMaker] = KeyMaker(backend.identity()) if backend is not None else None
        self._scored: dict[str, bool] = {}  # metric names score() returned, checked against the task's declarations
        self._streaming = False  # True while backend.stream runs: writes wait for its next pull
        self._unfrozen = 0  # examples admitted or finished since the last gc.freeze()

    @property
    def backend(self) -> Optional[Backend]:
        """The backend, built on first need (the first cache miss) when only a factory was given."""
        if self._backend is None and self._backend_factory is not None:
            self._backend = self._backend_factory()
        return self._backend

    def _key_maker(self) -> KeyMaker:
        if self._keys is None:
            src = self._backend if self._backend is not None else self._backend_factory
            if src is None:
                raise RuntimeError(f"method '{self.method.name}' asked a model but no backend is configured")
            self._keys = KeyMaker(src.identity())  # a lazy factory fingerprints the model without loading it
        return self._keys

    # ---- driving generators ------------------------------------------------------------------
    def run(self, examples: list[Example]) -> LoopStats:
        """Evaluate the examples not yet finished in the run dir; append one record per finished example."""
        t0 = time.time()
        done = self.store.finished_ids()
        todo = deque(e for e in examples if e.id not in done)
        self.stats.examples_total = len(examples)
        self.stats.examples_skipped = len(examples) - len(todo)
        self.method.prepare(examples)
        self._todo = todo
        self._active = 0
        self._to_resolve: list[tuple[_Active, int, str]] = []  # request slots waiting for a cache lookup
        self._ready: deque[tuple[str, Request]] = deque()  # cache misses waiting for the backend
        self._waiting: dict[str, list[tuple[_Active, int]]] = {}  # key -> slots waiting for its answer
        self._finished: list[SampleRecord] = []
        self._sent: dict[int, str] = {}  # id(request) -> cache key, for requests handed to the backend
        from recbench.run.progress import RequestProgress  # tqdm: only when something runs

        self._progress = RequestProgress(f"{self.task.name}/{self.method.name}", len(todo),
                                         exact=self.method.asks_one_round(), enabled=self.progress)
        gc.freeze()  # the examples live through the run: full collections need not walk them again and again
        thresholds = gc.get_threshold()
        gc.set_threshold(max(thresholds[0], YOUNG_GC_THRESHOLD), *thresholds[1:])
        ahead = self.method.prefetch(list(todo))  # work the method starts ahead, closed below however the loop ends
        try:
            self._settle()
            gc.freeze()  # nor the examples in progress, their prompts and requests, while the backend answers
            if self._ready:
                backend = self.backend  # built here on the first cache miss (it says so, with its load time)
                if backend is None:
                    raise RuntimeError(f"method '{self.method.name}' asked a model but no backend is configured")
                # every request is known now when the method has one round and every example is in progress
                self._progress.start(self.stats.backend_calls + len(self._ready), all_known=not self._todo)
                self._streaming = True
                backend.stream(self._next_requests, self._on_response)
            if self._waiting or self._ready or self._todo or self._active:
                raise RuntimeError(f"loop ended with {self._active} examples unfinished (a backend returned early)")
        finally:
            gc.unfreeze()
            gc.set_threshold(*thresholds)
            self._streaming = False
            if ahead is not None:
                ahead.close()
            self._flush()
            self._progress.close()
            self.stats.wall_time_s += time.time() - t0
        return self.stats

    def _admit(self) -> None:
        """Start examples while fewer than max_active are in progress."""
        while self._todo and (self.max_active is None or self._active < self.max_active):
            ex = self._todo.popleft()
            self._active += 1
            self._grown(1)
            self._advance(_Active(ex, self.method.run(ex)), None)

    def _advance(self, act: _Active, responses: Optional[list[Response]]) -> None:
        """Resume a generator with its responses; queue its next requests for a cache lookup, or finish it."""
        try:
            reqs = next(act.gen) if responses is None else act.gen.send(responses)
        except StopIteration as stop:
            self._finish(act, stop.value)
            return
        if not reqs:
            raise RuntimeError(f"method {self.method.name} yielded an empty request list for {act.example.id}")
        keys = self._key_maker()
        act.pending, act.answers, act.missing = list(reqs), [None] * len(reqs), len(reqs)
        self._to_resolve.extend((act, i, keys.key(r)) for i, r in enumerate(act.pending))

    def _settle(self) -> None:
        """Answer queued slots from the cache (hits resume examples, which may queue more), until only misses
        are left; each miss key joins the backend queue once. Finished examples are written per step."""
        self._admit()
        while self._to_resolve:
            batch, self._to_resolve = self._to_resolve, []
            lookup = [k for _, _, k in batch if k not in self._waiting]
            cached = self.cache.get_many(lookup) if lookup else {}
            for act, i, k in batch:
                if k in self._waiting:  # the same request is already on its way: share its answer
                    self._waiting[k].append((act, i))
                elif k in cached:
                    self.stats.cache_hits += 1
                    self._fill(act, i, k, cached[k])
                else:
                    self.stats.cache_misses += 1
                    self._waiting[k] = [(act, i)]
                    self._ready.append((k, act.pending[i]))
            self._admit()
        if not self._streaming:  # while the backend streams, the next pull writes (see _next_requests)
            self._flush()
        self._progress.grow(self.stats.backend_calls + len(self._ready))  # later rounds add requests

    def _fill(self, act: _Active, i: int, key: str, resp: Response) -> None:
        act.answers[i] = resp
        act.calls.append(self._call_record(act.pending[i], key, resp))
        act.missing -= 1
        if act.missing == 0:
            failed = [r for r in act.answers if r is not None and not r.ok]
            if failed:
                self._abandon(act, failed[0].error or "backend error")
            else:
                self._advance(act, list(act.answers))  # type: ignore[arg-type]

    # ---- the backend side ----------------------------------------------------------------------
    def _next_requests(self, k: int) -> list[Request]:
        """Up to k cache misses for the backend (the in-flight key travels as the request's identity), after the
        answers that arrived since the last pull and the examples they finished are written."""
        self._flush()
        out = []
        while self._ready and len(out) < k:
            key, req = self._ready.popleft()
            self._sent[id(req)] = key
            out.append(req)
        self.stats.backend_calls += len(out)
        return out

    def _on_response(self, req: Request, resp: Response) -> None:
        """One answer arrived: persist it, fill every slot waiting for it, resume their examples."""
        key = self._sent.pop(id(req))
        self.stats.prompt_tokens += resp.prompt_tokens
        self.stats.completion_tokens += resp.completion_tokens
        if resp.ok:
            keys = self._key_maker()  # the messages' JSON its key was made from serves the cache row too
            self.cache.put_later(key, keys.model_name, req, resp, keys.request_messages_json(req))  # written at next pull
        for act, i in self._waiting.pop(key, []):
            self._fill(act, i, key, resp)
        self._settle()
        self._progress.request_answered()

    # ---- records ---------------------------------------------------------------------------------
    def _call_record(self, req: Request, key: str, resp: Response) -> CallRecord:
        rec = CallRecord(key=key[:20], purpose=req.purpose, response=resp.text, finish_reason=resp.finish_reason,
                         cached=resp.cached, prompt_tokens=resp.prompt_tokens, completion_tokens=resp.completion_tokens,
                         latency_s=None if resp.cached else resp.latency_s, error=resp.error,
                         endpoint=resp.endpoint)
        if self.store_prompts:  # each distinct prompt once per run dir, in prompts.jsonl, referenced by its hash
            keys = self._key_maker()
            rec.prompt = h = keys.prompt_key(req)
            self.store.add_prompt(h, None, lambda: keys.prompt_line(req, h))
        return rec

    def _finish(self, act: _Active, outcome: Any) -> None:
        if not isinstance(outcome, Outcome):
            raise TypeError(f"method {self.method.name} returned {type(outcome).__name__}, expected Outcome")
        metrics = self.task.score(act.example, outcome)
        check_scored(self.task, metrics, self._scored)  # a metric declared nowhere stops the run here
        items = list_scores(self.task, act.example, outcome, metrics)  # the list metrics (api/item_lists.py)
        self._finished.append(SampleRecord(id=act.example.id, meta=act.example.meta, prediction=outcome.prediction,
                                           parse_status=outcome.parse_status, details=outcome.record_details(),
                                           metrics=metrics, calls=act.calls, truth=self.task.truth(act.example),
                                           items=items, variants=outcome.variants))
        self.stats.examples_finished += 1
        self._active -= 1
        self._progress.example_done()

    def _flush(self) -> None:
        """Commit the answers held since the last write, then append the examples they finished (one write each,
        crash-safe: whole rows and lines only)."""
        self.cache.flush()
        if self._finished:
            self.store.append_many(self._finished)
            if self._streaming:  # the records live through the run (the store keeps them for the aggregate)
                self._grown(len(self._finished))
            self._finished = []

    def _grown(self, n: int) -> None:
        """n more objects that live through the run (examples in progress, finished records): every FREEZE_EVERY,
        collect the young generations and freeze what is left, so full collections need not walk them again and
        again (gc.unfreeze() when the run ends)."""
        self._unfrozen += n
        if self._unfrozen >= FREEZE_EVERY:
            gc.collect(1)
            gc.freeze()
            self._unfrozen = 0

    def _abandon(self, act: _Active, error: str) -> None:
        act.gen.close()
        self.stats.backend_errors += 1
        self._active -= 1
        self._progress.example_done()
        self.store.append_error(ErrorRecord(id=act.example.id, error=error, calls=act.calls))
        log.warning("example %s abandoned after backend error (retried on rerun): %s", act.example.id, error)


# ---- aggregation ------------------------------------------------------------------------------
def aggregate(task: Task, records: list[SampleRecord], *, n_boot: int = 1000, level: float = 0.95,
              seed: int = 0) -> Aggregate:
    """Per-metric mean + bootstrap CI overall and per breakdown value, parse counts and token totals, and `extra`:
    the task's run facts, then the value of every corpus metric it declares (MetricSpec.corpus); the audits' blocks
    are added by the run (recbench/run/audit_calls.py).

    Records are sorted by example id first, so the result does not depend on the order they finished in."""
    from recbench.api.metrics import corpus_values, find_spec, run_info
    import numpy as np

    from recbench.stats.bootstrap import summarize_arrays

    records = sorted(records, key=lambda r: r.id)
    keys_of = [tuple(r.metrics) for r in records]
    columns = {m: np.array([r.value(m) for r in records], dtype=float)  # one pass over the records per metric
               for m in dict.fromkeys(k for ks in dict.fromkeys(keys_of) for k in ks)}

    def block(rows: Any) -> dict[str, MetricSummary]:
        """The summaries of the records at `rows` (None: all), of the metrics they name, in first-named order."""
        named = keys_of if rows is None else [keys_of[i] for i in rows.tolist()]
        names = dict.fromkeys(k for ks in dict.fromkeys(named) for k in ks)
        cols = summarize_arrays({m: columns[m] if rows is None else columns[m][rows] for m in names},
                                n_boot, level, seed)  # draws shared
        return {m: MetricSummary(**s) for m, s in cols.items()}

    status = Counter(r.parse_status for r in records)
    slices: list[tuple[str, str, Any]] = []
    for key in task.breakdown_by:
        values = task.slice_values(key, {str(r.meta.get(key)) for r in records if key in r.meta})
        groups: dict[str, list[int]] = {}  # one pass over the records per key, not one per value
        for i, r in enumerate(records):
            groups.setdefault(str(r.meta.get(key)), []).append(i)
        slices += [(key, v, np.array(groups.get(v, []), dtype=np.intp)) for v in values]
    # each block draws from its own seeded generator, so the blocks do not depend on the order: two at a time (numpy
    # frees the GIL while it draws and averages)
    with ThreadPoolExecutor(2) as pool:
        metrics, *summaries = pool.map(block, [None] + [rows for _, _, rows in slices])
    breakdown: dict[str, dict[str, SliceResult]] = {key: {} for key in task.breakdown_by}
    for (key, v, rows), summary in zip(slices, summaries):
        breakdown[key][v] = SliceResult(n=len(rows), metrics=summary)
    calls = [c for r in records for c in r.calls]
    extra = _facts(task, records)
    extra.update(corpus_values(task, records))
    _lists_and_groups(task, records, metrics, extra, n_boot, level, seed)
    declared = task.declared_metrics()
    names = list(metrics) + [k for k, v in extra.items() if _number(v) and k not in metrics
                             and (k in declared or find_spec(k) is not None)]
    return Aggregate(
        headline_metric=task.headline_metric, metrics=metrics, breakdown=breakdown,
        counts=Counts(
            examples=len(records), parsed=len(records) - status.get("failed", 0), parse_ok=status.get("ok", 0),
            parse_repaired=status.get("repaired", 0), parse_failed=status.get("failed", 0),
            parse_failure_rate=status.get("failed", 0) / len(records) if records else math.nan,
            model_calls=len(calls), prompt_tokens=sum(c.prompt_tokens for c in calls),
            completion_tokens=sum(c.completion_tokens for c in calls),
            finish_length=sum(1 for c in calls if c.finish_reason == "length")),
        extra=extra, metric_info=run_info(task, names), cluster_by=task.cluster_by)


def _lists_and_groups(task: Task, records: list[SampleRecord], metrics: dict[str, MetricSummary],
                      extra: dict[str, Any], n_boot: int, level: float, seed: int) -> None:
    """Add the corpus list metrics (coverage@k, gini@k, entropy@k, with CIs: api/item_lists.py) to `metrics`, and
    the fairness gaps of the task's user groups (stats/group_gaps.py) to `extra`."""
    from recbench.api.item_lists import list_corpus

    metrics.update({m: MetricSummary(**s) for m, s in list_corpus(task, records, n_boot, level, seed).items()})
    if task.fairness_by:
        from recbench.stats.group_gaps import group_gaps

        extra["fairness"] = group_gaps(task, records)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _facts(task: Task, records: list[SampleRecord]) -> dict[str, Any]:
    """The task's run facts, refusing a bare number (a number over the run is a corpus metric to declare)."""
    facts = dict(task.run_facts(records))
    for key, value in facts.items():
        if _number(value):
            raise TypeError(f"{type(task).__name__}.run_facts returned the number '{key}' = {value}: a number over the "
                            f"run is a corpus metric; declare MetricSpec('{key}', ..., corpus=fn) in metric_specs")
    return facts
