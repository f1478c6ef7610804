"""The one wrapper every audit that re-asks an example uses: `VariantAudit` asks K variants of each example (one
Variant field set to 0..K-1, api/variant.py), drives them side by side (the union of their pending requests per step,
so the extra requests go through the run's cache, deduplication and batching), and returns the variant-0 outcome (so
the headline is exactly the plain run's) with every variant's answer typed in `Outcome.variants`.

Wrappers compose: a wrapper around another passes its variant on (`passes_variants`), so the answers of an order
audit inside a template audit are one list of (template, order) variants, each audit reading the ones it asked.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

from recbench.api.task import Method, ask, side_by_side
from recbench.api.types import Example, MethodGen, Outcome
from recbench.api.variant import PLAIN, Variant, VariantAnswer


class VariantAudit(Method):
    """Wraps a method: K variants of `field` per example; variant k = `value(k)` (k = 0 must be the plain value)."""

    passes_variants = True  # api/task.py ask: the wrapped method applies the variant's seed

    def __init__(self, inner: Method, field: str, k: int, value: Callable[[int], Any] = int,
                 files: Optional[list[str]] = None):  # noqa: D107 - the inner method holds the config
        self.inner, self.field, self.k, self.value, self.files = inner, field, int(k), value, files
        self.task, self.cfg, self.sampling_cfg = inner.task, inner.cfg, inner.sampling_cfg
        self.name = inner.name
        self.needs_backend = inner.needs_backend
        self.single_round = inner.single_round

    def prepare(self, examples: list[Example]) -> None:
        """The inner method's one-off work."""
        self.inner.prepare(examples)

    def asks_one_round(self) -> bool:
        """As the inner method."""
        return self.inner.asks_one_round()

    def template_files(self) -> list[str]:
        """As the inner method (a template audit around this one reads them)."""
        fn = getattr(self.inner, "template_files", None)
        return list(fn()) if callable(fn) else []

    def run(self, example: Example, variant: Variant = PLAIN) -> MethodGen:
        """Drive the K variants' generators together; return variant 0's outcome with every variant's answer."""
        asked = [dataclasses.replace(variant, **{self.field: self.value(j)}) for j in range(self.k)]
        outcomes = yield from side_by_side([ask(self.inner, example, v) for v in asked])
        answers: list[VariantAnswer] = []
        for j, (v, o) in enumerate(zip(asked, outcomes)):
            assert o is not None
            answers += ([dataclasses.replace(a, template_file=a.template_file or self.file(j)) for a in o.variants]
                        or [self.answer(example, v, o, j)])
        first = outcomes[0]
        assert first is not None
        return dataclasses.replace(first, display=None, variants=answers)

    def answer(self, example: Example, variant: Variant, o: Outcome, j: int) -> VariantAnswer:
        """What variant j answered, scored by the task."""
        shown, ranked = (o.display.shown, o.display.ranked) if o.display is not None else (None, None)
        return VariantAnswer(variant, o.prediction, o.parse_status, self.task.score(example, o), shown, ranked,
                             self.file(j))

    def file(self, j: int) -> Optional[str]:
        """The prompt file of variant j (a template audit's; None for other fields)."""
        return self.files[j] if self.files and j < len(self.files) else None


def innermost(method: Any) -> Any:
    """The method inside every audit wrapper."""
    while isinstance(method, VariantAudit):
        method = method.inner
    return method
