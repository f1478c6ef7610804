"""The judge-validity audit's metrics.json block as typed records (`JudgeValidityBlock`), its report table declared
as data, and its terminal lines: one per finding that should change a reader's mind
(recbench/audits/judge_validity.py computes the block and registers them with the audit; docs/judges.md)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

from recbench.api.audits import Block
from recbench.api.audit_tables import AuditColumn, AuditTable

#: the metrics.json extra key of the audit
KEY = "judge_validity"
#: position consistency below this share: most pairwise verdicts are ties by the both-orders rule
CONSISTENCY_FLOOR = 0.5
#: a length correlation this strong (|rho|), its CI excluding 0, is a finding
LENGTH_RHO = 0.3
#: Krippendorff's tentative-conclusions threshold (Krippendorff 2004, 241): a panel agreeing less disagrees
ALPHA_FLOOR = 0.667
#: re-asked verdicts changing more often than this (lower CI end above 0) are a finding
FLIP_FLOOR = 0.1


@dataclass
class Estimate(Block):
    """A value with its CI and the number of units it is computed on (`mean`: a share, a mean score, alpha)."""

    mean: Optional[float] = None
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    n: int = 0


@dataclass
class LengthBias(Block):
    """Spearman rho of the judge's score (or the win) against answer length, its bootstrap CI and scipy's p."""

    against: str = ""
    rho: Optional[float] = None
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    p_value: Optional[float] = None
    n: int = 0
    note: Optional[str] = None

    @property
    def mean(self) -> Optional[float]:
        """rho, under the name a report CI cell reads."""
        return self.rho

    @property
    def found(self) -> bool:
        """True when |rho| >= LENGTH_RHO and the CI excludes 0."""
        return _ok(self.rho, self.ci_low, self.ci_high) and abs(self.rho) >= LENGTH_RHO and \
            (self.ci_low > 0 or self.ci_high < 0)


@dataclass
class Position(Block):
    """Pairwise: the share of pairs whose verdict survives the swap, and the share of verdicts for the first slot."""

    consistent: Estimate = field(default_factory=Estimate)
    first_position: Estimate = field(default_factory=Estimate)
    n_pairs: int = 0


@dataclass
class SelfPreference(Block):
    """Whose answers are the judge's own: the judged run's (`self_judged`), the reference run's, or neither; the
    judge's score of its own answers (pointwise: mean per aspect; pairwise: the win rate of its own answers)."""

    self_judged: bool = False
    reference_self_judged: bool = False
    own_scores: dict[str, Estimate] = field(default_factory=dict)


@dataclass
class Panel(Block):
    """judge.panel: Krippendorff's alpha (ordinal) of the judges per aspect (pairwise: 'verdict', loss < tie < win),
    with a bootstrap CI over answers, and the panel's majority verdict (mean majority score / majority win rate)."""

    judges: list[str] = field(default_factory=list)
    alpha: dict[str, Estimate] = field(default_factory=dict)
    majority: dict[str, Estimate] = field(default_factory=dict)


@dataclass
class Noise(Block):
    """judge.repeats: the share of verdicts (pointwise: each aspect's score) that change when asked again."""

    repeats: list[str] = field(default_factory=list)
    temperature: Optional[float] = None
    flips: Estimate = field(default_factory=Estimate)
    by_aspect: dict[str, Estimate] = field(default_factory=dict)


@dataclass
class JudgeValidityBlock(Block):
    """metrics.json extra.judge_validity."""

    judge: str = ""
    protocol: str = ""
    paired: bool = False  # judged against a reference run in both display orders (outcomes, not scores)
    tag: str = ""
    records: str = ""
    judged: int = 0
    parsed: int = 0
    scores: dict[str, Estimate] = field(default_factory=dict)  # pointwise: judge_<aspect>; pairwise: judge_win_rate
    position: Optional[Position] = None
    length_bias: dict[str, LengthBias] = field(default_factory=dict)
    self_preference: SelfPreference = field(default_factory=SelfPreference)
    panel: Optional[Panel] = None
    noise: Optional[Noise] = None
    findings: list[str] = field(default_factory=list)
    note: str = ""

    @property
    def metric(self) -> str:
        """The first judged metric (the row's metric in the report)."""
        return next(iter(self.scores), "")


def _ok(*vs: Any) -> bool:
    return all(isinstance(v, (int, float)) and math.isfinite(v) for v in vs)


def pct(e: Estimate) -> str:
    """'31% [18%, 47%]' ('—' without a value)."""
    if not _ok(e.mean):
        return "—"
    return f"{e.mean:.0%}" + (f" [{e.ci_low:.0%}, {e.ci_high:.0%}]" if _ok(e.ci_low, e.ci_high) else "")


def num(e: Any, digits: int = 2) -> str:
    """'0.62 [0.41, 0.77]' from an Estimate or a LengthBias ('—' without a value)."""
    v = e.mean
    if not _ok(v):
        return "—"
    return f"{v:.{digits}f}" + (f" [{e.ci_low:.{digits}f}, {e.ci_high:.{digits}f}]" if _ok(e.ci_low, e.ci_high) else "")


# ---- findings: one terminal line each --------------------------------------------------------------------------
def _position_findings(b: JudgeValidityBlock) -> list[str]:
    p = b.position
    if p is None or not p.n_pairs:
        return []
    out = []
    c, f = p.consistent, p.first_position
    if _ok(c.mean) and c.mean < CONSISTENCY_FLOOR:
        out.append(f"judge position-consistent on {pct(c)} of {p.n_pairs} pairs: pairwise verdicts are mostly ties "
                   "(a pair counts only when both display orders agree)")
    if _ok(f.ci_low, f.ci_high) and (f.ci_low > 0.5 or f.ci_high < 0.5):
        slot = "first" if f.mean > 0.5 else "second"
        out.append(f"judge prefers the answer shown {slot}: {pct(f) if slot == 'first' else pct(_flip(f))} of its "
                   f"verdicts pick the {slot} slot (50% without position bias)")
    return out


def _flip(e: Estimate) -> Estimate:
    return Estimate(1 - e.mean, 1 - e.ci_high, 1 - e.ci_low, e.n)


def _length_findings(b: JudgeValidityBlock) -> list[str]:
    found = [(k, lb) for k, lb in b.length_bias.items() if lb.found]
    if not found:
        return []
    rises = all(lb.rho > 0 for _, lb in found)
    what = "wins rise with how much longer the answer is than the reference's" if b.paired else \
        "scores " + ("rise" if rises else "move") + " with answer length"
    parts = ", ".join(f"{k} rho {num(lb)}" for k, lb in found)
    return [f"judge {what} ({parts}; Spearman, n={found[0][1].n}): length may be scored, not quality"]


def _self_findings(b: JudgeValidityBlock) -> list[str]:
    s = b.self_preference
    if not (s.self_judged or s.reference_self_judged):
        return []
    whose = "the judged model" if s.self_judged else "the reference run's model"
    own = ", ".join(f"{k} {num(e)}" for k, e in s.own_scores.items()) or "—"
    return [f"the judge is {whose}: self-preference possible (its score of its own answers: {own})"]


def _panel_findings(b: JudgeValidityBlock) -> list[str]:
    if b.panel is None:
        return []
    low = [(k, e) for k, e in b.panel.alpha.items() if _ok(e.mean) and e.mean < ALPHA_FLOOR]
    if not low:
        return []
    parts = ", ".join(f"{k} {num(e)}" for k, e in low)
    return [f"judge panel ({len(b.panel.judges)} judges) agrees little: Krippendorff's alpha (ordinal) {parts}, "
            f"below {ALPHA_FLOOR}: its verdicts depend on which judge is asked"]


def _noise_findings(b: JudgeValidityBlock) -> list[str]:
    n = b.noise
    if n is None or not _ok(n.flips.ci_low) or n.flips.ci_low <= 0 or n.flips.mean < FLIP_FLOOR:
        return []
    return [f"judge verdicts change on {pct(n.flips)} of re-asks (judge.repeats={len(n.repeats)}, temperature "
            f"{n.temperature}): differences between runs smaller than that are the judge's noise"]


def findings(b: JudgeValidityBlock) -> list[str]:
    """The findings that should change a reader's mind, one line each."""
    return [*_position_findings(b), *_length_findings(b), *_self_findings(b), *_panel_findings(b),
            *_noise_findings(b)]


def summary_lines(blocks: dict[str, Any]) -> Optional[str]:
    """The audit in the terminal: one line per finding (joined by newlines), or one line saying none was found."""
    b = blocks.get(KEY)
    if b is None:
        return None
    found = b.findings
    head = f"judge validity ({b.tag}, {b.parsed} of {b.judged} judged answers parsed)"
    if found:
        return "\n".join(f"{head}: {line}" if i == 0 else line for i, line in enumerate(found))
    bits = [f"position-consistent {pct(b.position.consistent)}"] if b.position is not None else []
    bits += [f"length rho {k} {num(lb)}" for k, lb in list(b.length_bias.items())[:1]]
    return f"{head}: no finding ({'; '.join(bits) or 'nothing measured'})"


# ---- the report table ----------------------------------------------------------------------------------------
def _columns(blocks: list[JudgeValidityBlock]) -> list[AuditColumn]:
    """Judge, counts, swap consistency and first-slot share (pairwise), one length-rho column per aspect, self-judged,
    one panel-alpha column per aspect, re-ask flips."""
    lengths = list(dict.fromkeys(k for b in blocks for k in b.length_bias))
    alphas = list(dict.fromkeys(k for b in blocks if b.panel for k in b.panel.alpha))
    # a cell's metric is the judged metric it is about (its legend line), the run's first one by default
    cols = [AuditColumn("", "judge (protocol)", lambda b: f"{b.judge} ({b.protocol})", "text"),
            AuditColumn("", "parsed / judged", lambda b: f"{b.parsed} / {b.judged}", "text")]
    if any(b.position is not None for b in blocks):
        cols += [AuditColumn("position (pairwise)", "consistent",
                             lambda b: b.position.consistent if b.position else None, "ci"),
                 AuditColumn("position (pairwise)", "first slot",
                             lambda b: b.position.first_position if b.position else None, "ci")]
    cols += [AuditColumn("length bias (Spearman rho)", k, lambda b, k=k: b.length_bias.get(k), "ci", _metric(k))
             for k in lengths]
    cols.append(AuditColumn("", "self-judged", lambda b: _self_text(b.self_preference), "text"))
    cols += [AuditColumn("panel alpha (ordinal)", k, lambda b, k=k: b.panel.alpha.get(k) if b.panel else None,
                         "ci", _metric(k)) for k in alphas]
    if any(b.noise is not None for b in blocks):
        cols.append(AuditColumn("", "re-ask flips", lambda b: b.noise.flips if b.noise else None, "ci"))
    return cols


def _metric(key: str) -> str:
    """The judged metric of a length or panel column: judge_<aspect>, or judge_win_rate for a pairwise verdict."""
    return "judge_win_rate" if key in ("win", "verdict") else f"judge_{key}"


def _self_text(s: SelfPreference) -> str:
    return "judged model" if s.self_judged else "reference model" if s.reference_self_judged else "no"


JUDGE_VALIDITY_TABLE = AuditTable(
    id="judge-validity", title="Judge validity: position, length, self-preference, panel, noise", key=KEY,
    columns=_columns, metric_column=False, section="judge-validity",
    caption=("Judge-validity audit (every judged run; metrics.json extra.judge_validity, from judge/<tag>/ records). "
             "Judge (protocol): the judge whose verdicts these are (judge.name). Position (pairwise): consistent = "
             "share of pairs whose verdict survives the swap of display orders (both orders prefer the same answer, "
             "or both tie); first slot = share of all verdicts picking the answer shown first (0.5 without position "
             "bias); exact 95% CIs. Length bias: Spearman rho of each aspect's 1-5 score (pairwise: of the outcome "
             "1/0.5/0) against the answer's length in words (pairwise: minus the reference answer's), 95% bootstrap "
             "CI over answers. Self-judged: the judge's backend is the judged model (or the reference run's). Panel "
             "alpha: Krippendorff's alpha (ordinal) of judge.name and judge.panel over the same answers, 95% "
             "bootstrap CI over answers (below 0.667: little agreement). Re-ask flips: share of verdicts that "
             "change when the judge is asked again (judge.repeats), exact 95% CI."))
