"""The noise-floor audit's metrics.json block as a typed record (`NoiseBlock`) and its report table, declared as data
(recbench/audits/noise.py registers them with the audit)."""
from __future__ import annotations

from dataclasses import dataclass, field
import math
from typing import Any, Optional

from recbench.api.audits import Block
from recbench.api.audit_tables import AuditColumn, AuditTable

#: the metrics.json extra key of the audit
KEY = "noise_floor"


@dataclass
class Share(Block):
    """A share of examples with its exact (Clopper-Pearson) CI."""

    count: int = 0
    n: int = 0
    share: Optional[float] = None
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None


@dataclass
class Shift(Block):
    """A metric's mean difference re-decode minus run, its paired bootstrap CI, sign-flip p and noise floor."""

    n: int = 0
    diff: Optional[float] = None
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    p_value: Optional[float] = None
    floor: Optional[float] = None


@dataclass
class NoiseBlock(Block):
    """metrics.json extra.noise_floor."""

    settings: dict[str, Any] = field(default_factory=dict)
    tag: str = ""
    reference: dict[str, Any] = field(default_factory=dict)
    examples: int = 0
    examples_not_redecoded: int = 0
    requests: int = 0
    metric: str = ""
    answers_changed: Share = field(default_factory=Share)
    predictions_changed: Share = field(default_factory=Share)
    parse_status_changed: int = 0
    metrics: dict[str, Shift] = field(default_factory=dict)
    by_slice: dict[str, dict[str, Shift]] = field(default_factory=dict)
    floor: Optional[float] = None
    flips_detected: bool = False
    metric_moved: bool = False
    note: str = ""
    this_invocation: dict[str, Any] = field(default_factory=dict)
    records: str = ""
    backend_params: Optional[dict[str, Any]] = None

    @property
    def head(self) -> Shift:
        """The headline metric's shift."""
        return self.metrics.get(self.metric) or Shift()


NOISE_TABLE = AuditTable(
    id="noise-floor", title="Noise floor: answers and headline under another batch size", key=KEY,
    columns=(AuditColumn("re-decoded with", "settings", lambda b: b.tag, "text", "settings"),
             AuditColumn("re-decoded with", "run had",
                         lambda b: ",".join(f"{k}={v}" for k, v in b.reference.items()) or None, "text", "reference"),
             AuditColumn("", "examples", lambda b: b.examples, "int", "examples"),
             AuditColumn("changed by the re-decode", "answer text", lambda b: b.answers_changed, "ci",
                         "answers_changed"),
             AuditColumn("changed by the re-decode", "prediction", lambda b: b.predictions_changed, "ci",
                         "predictions_changed"),
             AuditColumn("headline shift (re-decode − run)", "diff", lambda b: b.head, "ci"),
             AuditColumn("headline shift (re-decode − run)", "p", lambda b: b.head.p_value, "p", "p_value"),
             AuditColumn("", "noise floor", lambda b: b.floor)),
    caption=("Noise-floor audit (audit.noise.batch_size=B or audit.noise.dtype=D; metrics.json extra.noise_floor): "
             "the run's examples decoded again with another batch size (or dtype), under their own cache namespace "
             "so no answer comes from the run's cache entries. Answer text: share of examples whose raw answer to "
             "the same prompt changed; prediction: share whose scored answer changed (exact 95% CIs). Headline "
             "shift: mean per-example difference re-decode minus run, 95% paired bootstrap CI and sign-flip p. "
             "Noise floor = the larger end of that CI in absolute value: a difference between two runs smaller "
             "than the floor of either is marked ≈ in recbench.compare and in the paired comparisons below."))


def floor_of(b: Optional[NoiseBlock], metric: str, slice_: str = "all") -> Optional[float]:
    """A run's noise floor of one metric on one slice from its typed block (None when not audited or unknown)."""
    if b is None:
        return None
    shift = (b.metrics if slice_ == "all" else b.by_slice.get(slice_) or {}).get(metric)
    v = shift.floor if shift is not None else None
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


def summary_line(blocks: dict[str, Any]) -> Optional[str]:
    """The noise-floor audit in one terminal line, from the run's typed audit blocks (None when the run has none)."""
    b = blocks.get(KEY)
    if b is None:
        return None
    head = b.head
    ref = ",".join(f"{k}={v}" for k, v in b.reference.items()) or "the run's settings"

    def share(s: Share) -> str:
        return "—" if not s.n else f"{s.share:.0%} [{s.ci_low:.0%}, {s.ci_high:.0%}]"

    shift = ("—" if not head.n else f"{head.diff:+.3f} [{head.ci_low:+.3f}, {head.ci_high:+.3f}], "
             f"sign-flip p = {head.p_value:.3g}")
    return (f"noise floor (re-decoded with {b.tag}, the run had {ref}; {b.examples} examples): answer text "
            f"changed {share(b.answers_changed)}, prediction {share(b.predictions_changed)}; {b.metric} "
            f"shift {shift}; floor {b.floor:.3f}")
