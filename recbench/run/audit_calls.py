"""Where the run calls the audits: every enabled audit through its hooks (recbench.api.audits), in one place.

The run names no audit: it reads which audits its config asks once (`RunAudits.of`), then checks, wraps, labels,
asks the audits' extra requests (handing them its own loop), and collects their metrics.json blocks and plan notes,
in registration order.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from recbench.api import audits
from recbench.api.audits import Audit, AuditRun, Extra
from recbench.run.construct import LazyBackend
from recbench.run.loop import LoopSettings
from recbench.store.records import PASS_COUNTERS


@dataclass
class RunAudits:
    """The audits a run of this config asks, read once: `asked` (api/audits.py `asked`: their blocks are collected)
    and `enabled` (each one's `enabled`: their hooks are called), with the config their hooks read."""

    cfg: Any
    asked: list[Audit]
    enabled: list[Audit]

    @classmethod
    def of(cls, cfg: Any) -> RunAudits:
        """The audits the config asks for and switches on."""
        return cls(cfg, audits.asked(cfg), audits.enabled(cfg))

    def check(self, method: Any, backend: Any) -> None:
        """Every enabled audit's refusals, before the run dir is written."""
        for a in self.enabled:
            a.check(self.cfg, method, backend)

    def wrap(self, task: Any, method: Any) -> Any:
        """The method with every enabled audit's wrapper around it."""
        for a in self.enabled:
            method = a.wrap(task, method, self.cfg)
        return method

    def label(self, task: Any, examples: list[Any], run_dir: str | Path, model: Any) -> list[Any]:
        """The examples labelled by every enabled audit, before the loop."""
        for a in self.enabled:
            examples = a.label(self.cfg, task, examples, run_dir, model)
        return examples

    def prepare_task(self, task: Any) -> None:
        """Every enabled audit's change to the task before aggregation (a merge of shards builds its task afresh)."""
        for a in self.enabled:
            a.prepare_task(self.cfg, task)

    def blocks(self, task: Any, records: list[Any], run_dir: Optional[str | Path] = None) -> dict[str, Any]:
        """The metrics.json blocks of every audit the run asks (switched on by the config, or declared for every run)
        from the run's records and (`run_dir`) what the run wrote beside them, e.g. the judge's records (a run and a
        merge of its shards)."""
        out: dict[str, Any] = {}
        for a in self.asked:
            out.update(a.aggregate(self.cfg, task, records))
            if run_dir is not None:
                out.update(a.from_run_dir(self.cfg, task, records, run_dir))
        return out

    def plan_notes(self, unique_requests: int) -> list[str]:
        """What plan mode says about the enabled audits' requests."""
        return [n for n in (a.plan_note(self.cfg, unique_requests) for a in self.enabled) if n]

    def extra_requests(self, task: Any, method: Any, examples: list[Any], run_dir: Path, cache: Any, backend: Any,
                       records: list[Any], loop: LoopSettings) -> list[Extra]:
        """Every enabled audit's requests after the run's loop, and what they give. An audit's `decode(method,
        backend, factory, store_dir)` drives the examples through a loop of the run's settings into a record file of
        their own (resumable, prompts stored), returning (records of these examples, the loop's counters)."""
        def decode(method: Any, backend: Any, factory: Any, store_dir: Path) -> Any:
            return loop.run_into(store_dir, task, method, examples, cache, backend, factory)

        run = AuditRun(cfg=self.cfg, task=task, method=method, examples=examples, run_dir=Path(run_dir), cache=cache,
                       backend=backend, records=records, decode=decode, lazy_backend=LazyBackend)
        out: list[Optional[Extra]] = [a.extra_requests(run) for a in self.enabled]
        return [x for x in out if x is not None]


def with_extra(stats: dict[str, Any], extras: list[Extra]) -> dict[str, Any]:
    """This invocation's loop counters with the audits' extra requests' calls, hits, errors and tokens added."""
    out = dict(stats)
    for x in extras:
        more = vars(x.stats)
        out = {k: (v + more[k] if k in PASS_COUNTERS else v) for k, v in out.items()}
    return out
