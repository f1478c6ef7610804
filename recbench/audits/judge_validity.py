"""Judge-validity audit: on every judged run (judge=<model>, docs/judges.md), how far the judge's verdicts can be
trusted, measured from its records (`<run dir>/judge/<tag>/`, read by recbench.store.judge_records) after the judge
pass. No extra request is sent: everything comes from what the judge pass wrote.

- position consistency (pairwise): the share of pairs whose verdict survives the swap of display orders, and the
  share of all verdicts that pick the first slot (recbench.stats.judging.position_consistency);
- length bias: Spearman rho of each aspect's score (pairwise: the outcome 1/0.5/0) against the answer's length in
  words (pairwise: minus the reference answer's), with a bootstrap CI (`length_bias`);
- self-preference: whether the judge's backend is the judged model (judge.json `self_judged`) or the reference
  run's, and the judge's score of its own answers;
- panel agreement (judge.panel): Krippendorff's alpha (ordinal) of the judges over the same answers, as the
  `krippendorff` package computes it, with a bootstrap CI over answers, and the panel's majority verdict;
- noise floor (judge.repeats): the share of verdicts that change when the judge is asked again.

The block is written to metrics.json (extra.judge_validity), its findings are the terminal lines, its table is the
report's (recbench/audits/judge_validity_blocks.py); the Bradley-Terry ranking of runs judged pairwise is a report
table of its own, declared here by name and built by the report (recbench/report/judge_ranking.py).
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Optional

import numpy as np

from recbench.api.audit_tables import AuditTable
from recbench.api.audits import Audit, register
from recbench.audits.judge_validity_blocks import (KEY, JUDGE_VALIDITY_TABLE, JudgeValidityBlock, findings,
                                                   summary_lines)
from recbench.stats.bootstrap import bootstrap_ci
from recbench.stats.judging import (krippendorff_alpha, length_bias, panel_majority, position_consistency,
                                    verdict_flip_rate, win_rate)
from recbench.store.judge_records import JUDGE_DIR, JudgeRecords, judge_records, judge_tag

#: a pairwise verdict as a number (the ordinal scale of panel agreement, the outcome of the win rate)
OUTCOME = {"win": 1.0, "tie": 0.5, "loss": 0.0}


def configured_tags(cfg: Any) -> Optional[tuple[str, list[str], list[str]]]:
    """(the judge's tag, the panel's tags, the repeats' tags) the config names (None: no judge)."""
    j = cfg.get("judge") or {}
    name = str(j.get("name") or "none")
    if name == "none":
        return None
    protocol = str(j.get("protocol"))
    panel = [judge_tag(str(n), protocol) for n in (j.get("panel") or []) if str(n) != name]
    repeats = [judge_tag(name, protocol, k) for k in range(1, int(j.get("repeats") or 0) + 1)]
    return judge_tag(name, protocol), panel, repeats


def _estimate(d: dict[str, Any], key: str = "estimate") -> dict[str, Any]:
    """A stats result as the block's Estimate form (NaN written as null)."""
    def clean(v: Any) -> Any:
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
    return {"mean": clean(d[key]), "ci_low": clean(d["ci_low"]), "ci_high": clean(d["ci_high"]), "n": int(d["n"])}


def _ci(value: float, ci: tuple[float, float], n: int) -> dict[str, Any]:
    return _estimate({"estimate": value, "ci_low": ci[0], "ci_high": ci[1], "n": n})


def outcome(rec: Any) -> Optional[float]:
    """A pairwise judge record's outcome for the judged run (1 win, 0.5 tie, 0 loss; None when it failed)."""
    return OUTCOME.get(rec.prediction) if rec.parse_status != "failed" else None


def score(rec: Any, aspect: str) -> float:
    """A pointwise judge record's score of one aspect (NaN when it failed or is missing)."""
    p = rec.prediction if isinstance(rec.prediction, dict) else {}
    v = p.get(aspect) if rec.parse_status != "failed" else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan


def aspects_of(jr: JudgeRecords) -> list[str]:
    """The rubric's aspects (judge.json), else those the records score."""
    rubric = jr.manifest.get("rubric") or {}
    return list(rubric) or list(dict.fromkeys(a for r in jr.records if isinstance(r.prediction, dict)
                                              for a in r.prediction))


def verdicts(jr: JudgeRecords, ids: list[str], pairwise: bool) -> dict[str, list[float]]:
    """Per aspect ('verdict' for pairwise), the judge's value for each id (NaN: not judged or failed)."""
    by_id = {r.id: r for r in jr.records}
    if pairwise:
        return {"verdict": [_nan(outcome(by_id[i])) if i in by_id else math.nan for i in ids]}
    return {a: [score(by_id[i], a) if i in by_id else math.nan for i in ids] for a in aspects_of(jr)}


def _nan(v: Optional[float]) -> float:
    return math.nan if v is None else v


# ---- the statistics ------------------------------------------------------------------------------------------
def position(records: list[Any], alpha: float) -> Optional[dict[str, Any]]:
    """Pairwise swap consistency and first-slot share over the pairs whose two orders both parsed."""
    first, swapped = [], []
    for r in records:
        orders = {o.get("run_answer_at"): o.get("winner") for o in r.details.get("orders") or []}
        if orders.get("A") is not None and orders.get("B") is not None:
            first.append(orders["A"])
            swapped.append(orders["B"])
    if not first:
        return None
    p = position_consistency(first, swapped, alpha=alpha)
    return {"consistent": _ci(p["consistent"], p["consistent_ci"], p["n_pairs"]),
            "first_position": _ci(p["first_position_rate"], p["first_position_ci"], 2 * p["n_pairs"]),
            "n_pairs": p["n_pairs"]}


def _length(values: list[float], lengths: list[float], against: str, n_boot: int, seed: int,
            alpha: float) -> dict[str, Any]:
    lb = length_bias(values, lengths, n_boot=n_boot, seed=seed, alpha=alpha)
    clean = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in lb.items()}
    return {"against": against, "rho": clean["rho"], "ci_low": clean["ci_low"], "ci_high": clean["ci_high"],
            "p_value": clean["p_value"], "n": lb["n"], "note": lb["note"]}


def length_biases(records: list[Any], pairwise: bool, aspects: list[str], n_boot: int, seed: int,
                  alpha: float) -> dict[str, Any]:
    """Per aspect (pairwise: 'win'), Spearman rho of the judge's value against the answer's length."""
    lengths = [float(r.details.get("answer_length") or 0) for r in records]
    if pairwise:
        diff = [n - float(r.details.get("reference_length") or 0) for n, r in zip(lengths, records)]
        return {"win": _length([_nan(outcome(r)) for r in records], diff, "answer length minus the reference's",
                               n_boot, seed, alpha)}
    return {a: _length([score(r, a) for r in records], lengths, "answer length", n_boot, seed, alpha)
            for a in aspects}


def scores(records: list[Any], pairwise: bool, aspects: list[str], n_boot: int, seed: int,
           alpha: float) -> dict[str, Any]:
    """The judged metrics with their bootstrap CIs: judge_win_rate, or judge_<aspect> per aspect."""
    if pairwise:
        xs = [o for o in (outcome(r) for r in records) if o is not None]
        return {"judge_win_rate": _estimate(win_rate(xs, n_boot=n_boot, seed=seed, alpha=alpha))}
    return {f"judge_{a}": mean_ci([score(r, a) for r in records], n_boot, seed, alpha) for a in aspects}


def mean_ci(values: Any, n_boot: int, seed: int, alpha: float) -> dict[str, Any]:
    """The mean of the defined values with its percentile bootstrap CI (recbench.stats.bootstrap)."""
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    lo, hi = bootstrap_ci(x, n_boot=n_boot, level=1 - alpha, seed=seed)
    return _estimate({"estimate": float(x.mean()) if x.size else math.nan, "ci_low": lo, "ci_high": hi, "n": x.size})


def panel(dirs: list[JudgeRecords], ids: list[str], pairwise: bool, n_boot: int, seed: int,
          alpha: float) -> dict[str, Any]:
    """Krippendorff's alpha (ordinal) of the judges x answers matrix per aspect, and the panel's majority."""
    per_judge = [verdicts(d, ids, pairwise) for d in dirs]
    out: dict[str, Any] = {"judges": [d.tag for d in dirs], "alpha": {}, "majority": {}}
    for aspect in per_judge[0]:
        m = np.asarray([v.get(aspect, [math.nan] * len(ids)) for v in per_judge], dtype=float)
        ka = krippendorff_alpha(m, level="ordinal", n_boot=n_boot, seed=seed, alpha=alpha)
        out["alpha"][aspect] = _estimate({**ka, "n": int((~np.isnan(m)).any(axis=0).sum())})
        out["majority"][aspect] = mean_ci(panel_majority(m), n_boot, seed, alpha)
    return out


def noise(main: JudgeRecords, repeats: list[JudgeRecords], ids: list[str], pairwise: bool, temperature: Any,
          alpha: float) -> dict[str, Any]:
    """The share of verdicts (each aspect's score) that change between the judge and each of its repeats, pooled."""
    first = verdicts(main, ids, pairwise)
    again = [verdicts(r, ids, pairwise) for r in repeats]
    by_aspect = {a: verdict_flip_rate(v * len(again), [x for r in again for x in r.get(a, [math.nan] * len(ids))],
                                      alpha=alpha) for a, v in first.items()}
    pooled_a = [x for a, v in first.items() for x in v * len(again)]
    pooled_b = [x for a in first for r in again for x in r.get(a, [math.nan] * len(ids))]
    return {"repeats": [r.tag for r in repeats], "temperature": temperature,
            "flips": _estimate(verdict_flip_rate(pooled_a, pooled_b, alpha=alpha)),
            "by_aspect": {a: _estimate(e) for a, e in by_aspect.items()}}


def _reference_is_judge(manifest: dict[str, Any]) -> bool:
    """True when the reference run's backend identity (its versions.json) is the judge's."""
    ref = manifest.get("reference")
    p = Path(str(ref)) / "versions.json" if ref else None
    if p is None or not p.is_file():
        return False
    try:
        ident = json.loads(p.read_text(encoding="utf-8")).get("backend_identity")
    except (OSError, json.JSONDecodeError):
        return False
    return ident is not None and ident == manifest.get("identity")


def self_preference(manifest: dict[str, Any], block_scores: dict[str, Any], pairwise: bool) -> dict[str, Any]:
    """Whose answers are the judge's own, and its score of them."""
    own = bool(manifest.get("self_judged"))
    ref = pairwise and _reference_is_judge(manifest)
    scores_of_own: dict[str, Any] = {}
    if own:
        scores_of_own = dict(block_scores)
    elif ref:  # the reference answers are the judge's: their win rate is 1 minus the run's
        e = block_scores["judge_win_rate"]
        flip = (lambda v: None if v is None else 1 - v)
        scores_of_own = {"reference_win_rate": {"mean": flip(e["mean"]), "ci_low": flip(e["ci_high"]),
                                                "ci_high": flip(e["ci_low"]), "n": e["n"]}}
    return {"self_judged": own, "reference_self_judged": ref, "own_scores": scores_of_own}


def validity_block(cfg: Any, records: list[Any], run_dir: str | Path) -> dict[str, JudgeValidityBlock]:
    """metrics.json's extra.judge_validity, typed, from a run's judge dirs ({} when the run was not judged)."""
    tags = configured_tags(cfg)
    dirs = judge_records(run_dir) if tags is not None else {}
    if tags is None or tags[0] not in dirs:
        return {}
    main_tag, panel_tags, repeat_tags = tags
    ids = sorted({r.id for r in records})
    wanted = set(ids)
    main = dirs[main_tag]
    recs = sorted((r for r in main.records if r.id in wanted), key=lambda r: r.id)
    pairwise = bool(main.manifest.get("reference"))  # judged against a reference run, in both orders
    n_boot, seed, alpha = int(cfg.run.bootstrap_resamples), int(cfg.seed), 1 - float(cfg.run.ci_level)
    aspects = aspects_of(main)
    block: dict[str, Any] = {
        "judge": str(main.manifest.get("judge") or cfg.judge.name), "protocol": main.protocol, "paired": pairwise,
        "tag": main_tag,
        "records": f"{JUDGE_DIR}/{main_tag}/samples.jsonl", "judged": len(recs),
        "parsed": sum(r.parse_status != "failed" for r in recs),
        "scores": scores(recs, pairwise, aspects, n_boot, seed, alpha),
        "position": position(recs, alpha) if pairwise else None,
        "length_bias": length_biases(recs, pairwise, aspects, n_boot, seed, alpha)}
    block["self_preference"] = self_preference(main.manifest, block["scores"], pairwise)
    members = [dirs[t] for t in panel_tags if t in dirs]
    block["panel"] = panel([main, *members], ids, pairwise, n_boot, seed, alpha) if members else None
    again = [dirs[t] for t in repeat_tags if t in dirs]
    block["noise"] = noise(main, again, ids, pairwise, cfg.judge.get("temperature"), alpha) if again else None
    block["note"] = ("judged answers whose judge answer did not parse are left out of every statistic; "
                     "pairwise position counts pairs whose two orders both parsed")
    typed = JudgeValidityBlock.from_dict(block)  # the statistics' records typed once, here; the findings read them
    typed.findings = findings(typed)
    return {KEY: typed}


#: the report's Bradley-Terry ranking of runs judged pairwise, a table of its own rows built by the report
RANKING_TABLE = AuditTable(id="judge-ranking", title="Judge ranking", caption="",
                           build="recbench.report.judge_ranking:ranking_table", section="judge-validity")


class JudgeValidity(Audit):
    """Every judged run: the judge's validity from its records, after the judge pass."""

    key = KEY
    rank = 50
    blocks = {KEY: JudgeValidityBlock}
    tables = (JUDGE_VALIDITY_TABLE, RANKING_TABLE)

    def enabled(self, cfg: Any) -> bool:
        """A judge is configured (judge.name other than none)."""
        return configured_tags(cfg) is not None

    def from_run_dir(self, cfg: Any, task: Any, records: list[Any], run_dir: str | Path) -> dict[str, Any]:
        """The block from the run's judge dirs ({} when the run was not judged)."""
        return validity_block(cfg, records, run_dir) if self.enabled(cfg) else {}

    def terminal_line(self, blocks: dict[str, Any]) -> Optional[str]:
        """One line per finding."""
        return summary_lines(blocks)


AUDIT = register(JudgeValidity())
