"""The contamination split's metrics.json block as a typed record (`ContaminationBlock`) and its report table,
declared as data (recbench/audits/contamination.py registers them with the audit)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from recbench.api.audits import Block
from recbench.api.numbers import cell_text
from recbench.api.audit_tables import AuditColumn, AuditTable

#: the metrics.json extra key of the audit
BLOCK = "contamination"


@dataclass
class Score(Block):
    """The headline on a subset: mean, bootstrap CI and counts."""

    mean: Optional[float] = None
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    n: int = 0
    n_undefined: int = 0


@dataclass
class Gap(Block):
    """Recalled minus clean: the difference, its CI, the permutation test (p None: not run, `note` says why)."""

    diff: Optional[float] = None
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    p_value: Optional[float] = None
    significant: Optional[bool] = None
    alpha: Optional[float] = None
    ci_level: Optional[float] = None
    n_recalled: int = 0
    n_clean: int = 0
    test: str = ""
    exact: Optional[bool] = None
    n_resamples: Optional[int] = None
    note: str = ""


@dataclass
class ContaminationBlock(Block):
    """metrics.json extra.contamination (`probe`: items asked and recalled, coverage, the control set)."""

    probe_run: str = ""
    probe_task: str = ""
    probe_method: str = ""
    probe_model: str = ""
    probe: dict[str, Any] = field(default_factory=dict)
    metric: str = ""
    direction: str = ""
    unit: str = "example"
    examples: dict[str, int] = field(default_factory=dict)
    recalled: Score = field(default_factory=Score)
    clean: Score = field(default_factory=Score)
    gap: Gap = field(default_factory=Gap)


def _significant(b: ContaminationBlock) -> Optional[str]:
    return None if b.gap.p_value is None else "yes" if b.gap.significant else "no"


CONTAMINATION_TABLE = AuditTable(
    id="contamination", title="Contamination split: the headline on recalled and not-recalled items", key=BLOCK,
    section="contamination",
    columns=(AuditColumn("probe", "method", lambda b: f"{b.probe_method} ({b.probe_task})", "text", "probe"),
             AuditColumn("probe", "coverage", lambda b: b.probe.get("coverage"), metric="coverage"),
             AuditColumn("examples", "recalled", lambda b: b.examples.get("yes"), "int", "examples"),
             AuditColumn("examples", "not recalled", lambda b: b.examples.get("no"), "int", "examples"),
             AuditColumn("examples", "unprobed", lambda b: b.examples.get("unprobed"), "int", "examples"),
             AuditColumn("headline", "recalled", lambda b: b.recalled, "ci"),
             AuditColumn("headline", "clean subset", lambda b: b.clean, "ci"),
             AuditColumn("gap (recalled − clean)", "diff", lambda b: b.gap, "ci"),
             AuditColumn("gap (recalled − clean)", "p", lambda b: b.gap.p_value, "p", "p_value"),
             AuditColumn("gap (recalled − clean)", "significant", _significant, "text", "significant")),
    caption=("Contamination split (contamination.probe_run=DIR; metrics.json extra.contamination): examples whose "
             "item (Task.contamination_items) a memorization probe run of the same model recalled, did not recall, "
             "or did not ask about (control-set items never count). Headline on each with its 95% bootstrap CI "
             "(the clean subset = not recalled; the same numbers as the breakdown 'recalled'); gap = recalled minus "
             "clean mean with a percentile bootstrap CI and a two-sided permutation test of the difference in "
             "means on per-example (per-cluster) values, significant when p < alpha. Unprobed examples are in "
             "neither group. Coverage: the probe's share of asked catalogue items recalled."))


def summary_line(blocks: dict[str, Any]) -> Optional[str]:
    """The split in one terminal line (None when the run has none)."""
    b = blocks.get(BLOCK)
    if b is None:
        return None
    n, g, m = b.examples, b.gap, b.metric
    test = (f"gap {g.diff:+.3f} [{g.ci_low:+.3f}, {g.ci_high:+.3f}], permutation p = {g.p_value:.3g}"
            f"{': SIGNIFICANT' if g.significant else ': n.s.'} at alpha {g.alpha:g}"
            if g.p_value is not None else f"gap test: {g.note or 'not run'}")
    return (f"contamination split (probe {b.probe_method}, {b.probe_task}): recalled {n['yes']} | not recalled "
            f"{n['no']} | unprobed {n['unprobed']} examples; {m} recalled {cell_text(asdict(b.recalled))} vs clean "
            f"subset {cell_text(asdict(b.clean))}; {test}")
