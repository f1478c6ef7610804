"""The one evaluation loop: drive every example's method generator, batching pending requests through cache + backend."""
from __future__ import annotations

import logging
import math
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Optional

from tqdm.auto import tqdm

from recbench.backends.base import Backend
from recbench.cache import ResponseCache, cache_key
from recbench.metrics import summarize
from recbench.runstore import RunStore
from recbench.task import Method, Task
from recbench.types import Example, MethodGen, Outcome, Request, Response, sha256_json

log = logging.getLogger(__name__)


@dataclass
class _Active:
    example: Example
    gen: MethodGen
    pending: list[Request]
    answers: list[Optional[Response]]
    calls: list[dict[str, Any]] = field(default_factory=list)
    filled: int = 0


@dataclass
class LoopStats:
    """Counters of one invocation of the loop."""

    examples_total: int = 0
    examples_skipped: int = 0
    examples_finished: int = 0
    backend_errors: int = 0
    backend_calls: int = 0  # requests actually sent to the backend
    backend_batches: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    prompt_tokens: int = 0  # of requests sent to the backend in this invocation
    completion_tokens: int = 0
    wall_time_s: float = 0.0
    backend_time_s: float = 0.0


class EvalLoop:
    """Runs one (task, method, backend) over examples; resumable through the run store and the cache."""

    def __init__(self, task: Task, method: Method, backend: Optional[Backend], cache: ResponseCache,
                 store: RunStore, *, chunk_size: Optional[int] = None, store_prompts: bool = True,
                 progress: bool = True):
        self.task, self.method, self.backend, self.cache, self.store = task, method, backend, cache, store
        self.chunk_size = chunk_size or (backend.batch_size if backend else 64)
        self.store_prompts = store_prompts
        self.progress = progress
        self.stats = LoopStats()
        self._identity = backend.identity() if backend else {"kind": "none"}
        self._model_name = str(self._identity.get("name", self._identity.get("kind")))

    # ---- driving generators ------------------------------------------------------------------
    def run(self, examples: list[Example]) -> LoopStats:
        """Evaluate the examples not yet finished in the run dir; append one record per finished example."""
        t0 = time.time()
        done = self.store.finished_ids()
        todo = [e for e in examples if e.id not in done]
        self.stats.examples_total = len(examples)
        self.stats.examples_skipped = len(examples) - len(todo)
        self.method.prepare(examples)
        queue: deque[tuple[_Active, int]] = deque()
        bar = tqdm(total=len(todo), desc=f"{self.task.name}/{self.method.name}", unit="ex", disable=not self.progress)
        try:
            for ex in todo:
                self._advance(_Active(ex, self.method.run(ex), [], []), None, queue, bar)
            while queue:
                chunk = [queue.popleft() for _ in range(min(self.chunk_size, len(queue)))]
                self._serve(chunk, queue, bar)
        finally:
            bar.close()
            self.stats.wall_time_s += time.time() - t0
        return self.stats

    def _advance(self, act: _Active, responses: Optional[list[Response]], queue: deque, bar) -> None:
        """Resume a generator with its responses; queue its next round or finish it."""
        try:
            reqs = next(act.gen) if responses is None else act.gen.send(responses)
        except StopIteration as stop:
            self._finish(act, stop.value)
            bar.update(1)
            return
        if not reqs:
            raise RuntimeError(f"method {self.method.name} yielded an empty request list for {act.example.id}")
        if self.backend is None:
            raise RuntimeError(f"method '{self.method.name}' asked a model but no backend is configured")
        act.pending, act.answers, act.filled = list(reqs), [None] * len(reqs), 0
        queue.extend((act, i) for i in range(len(reqs)))

    def _serve(self, chunk: list[tuple[_Active, int]], queue: deque, bar) -> None:
        """Answer one chunk of request slots from the cache, then the backend; resume completed examples."""
        assert self.backend is not None
        keys = [cache_key(self._identity, act.pending[i]) for act, i in chunk]
        cached = self.cache.get_many(keys)
        self.stats.cache_hits += sum(1 for k in keys if k in cached)
        misses: dict[str, Request] = {}
        for (act, i), k in zip(chunk, keys):
            if k not in cached and k not in misses:
                misses[k] = act.pending[i]
        self.stats.cache_misses += len(misses)
        fresh: dict[str, Response] = {}
        if misses:
            t = time.time()
            resps = self.backend.generate(list(misses.values()))
            self.stats.backend_time_s += time.time() - t
            self.stats.backend_calls += len(misses)
            self.stats.backend_batches += 1
            for (k, req), resp in zip(misses.items(), resps):
                fresh[k] = resp
                self.stats.prompt_tokens += resp.prompt_tokens
                self.stats.completion_tokens += resp.completion_tokens
            self.cache.put_many([(k, self._model_name, misses[k], fresh[k]) for k in misses])
        ready: list[_Active] = []
        for (act, i), k in zip(chunk, keys):
            resp = cached.get(k) or fresh[k]
            act.answers[i] = resp
            act.filled += 1
            act.calls.append(self._call_record(act.pending[i], k, resp))
            if act.filled == len(act.pending):
                ready.append(act)
        for act in ready:
            failed = [r for r in act.answers if r is not None and not r.ok]
            if failed:
                self._abandon(act, failed[0].error or "backend error")
                bar.update(1)
                continue
            self._advance(act, list(act.answers), queue, bar)  # type: ignore[arg-type]

    def _call_record(self, req: Request, key: str, resp: Response) -> dict[str, Any]:
        rec: dict[str, Any] = {
            "key": key[:20],
            "purpose": req.purpose,
            "response": resp.text,
            "finish_reason": resp.finish_reason,
            "cached": resp.cached,
            "prompt_tokens": resp.prompt_tokens,
            "completion_tokens": resp.completion_tokens,
        }
        if self.store_prompts:  # each distinct prompt once per run dir, in prompts.jsonl, referenced by its hash
            rec["prompt"] = sha256_json(rec_messages := req.message_dicts())[:20]
            self.store.add_prompt(rec["prompt"], rec_messages)
        if resp.error:
            rec["error"] = resp.error
        return rec

    def _finish(self, act: _Active, outcome: Any) -> None:
        if not isinstance(outcome, Outcome):
            raise TypeError(f"method {self.method.name} returned {type(outcome).__name__}, expected Outcome")
        metrics = self.task.score(act.example, outcome)
        self.store.append({
            "id": act.example.id,
            "meta": act.example.meta,
            "prediction": outcome.prediction,
            "parse_status": outcome.parse_status,
            "details": outcome.details,
            "metrics": metrics,
            "calls": act.calls,
        })
        self.stats.examples_finished += 1

    def _abandon(self, act: _Active, error: str) -> None:
        act.gen.close()
        self.stats.backend_errors += 1
        self.store.append_error({"id": act.example.id, "error": error, "calls": act.calls})
        log.warning("example %s abandoned after backend error (retried on rerun): %s", act.example.id, error)


# ---- aggregation ------------------------------------------------------------------------------
def aggregate(task: Task, records: list[dict[str, Any]], *, n_boot: int = 1000, level: float = 0.95,
              seed: int = 0) -> dict[str, Any]:
    """Per-metric mean + bootstrap CI overall and per breakdown value, plus parse counts and token totals."""

    def block(recs: list[dict[str, Any]]) -> dict[str, Any]:
        names = list(dict.fromkeys(k for r in recs for k in r["metrics"]))
        out = {m: summarize([_num(r["metrics"].get(m)) for r in recs], n_boot, level, seed) for m in names}
        return out

    status = Counter(r["parse_status"] for r in records)
    breakdown: dict[str, dict[str, Any]] = {}
    for key in task.breakdown_by:
        values = sorted({str(r["meta"].get(key)) for r in records if key in r["meta"]})
        breakdown[key] = {v: {"n": len(sub), "metrics": block(sub)} for v in values
                          for sub in [[r for r in records if str(r["meta"].get(key)) == v]]}
    calls = [c for r in records for c in r.get("calls", [])]
    return {
        "headline_metric": task.headline_metric,
        "metrics": block(records),
        "breakdown": breakdown,
        "counts": {
            "examples": len(records),
            "parsed": len(records) - status.get("failed", 0),
            "parse_ok": status.get("ok", 0),
            "parse_repaired": status.get("repaired", 0),
            "parse_failed": status.get("failed", 0),
            "parse_failure_rate": status.get("failed", 0) / len(records) if records else math.nan,
            "model_calls": len(calls),
            "prompt_tokens": sum(c.get("prompt_tokens", 0) for c in calls),
            "completion_tokens": sum(c.get("completion_tokens", 0) for c in calls),
        },
        "extra": task.extra_aggregates(records),
    }


def _num(v: Any) -> float:
    return math.nan if v is None else float(v)
