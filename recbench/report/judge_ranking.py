"""The report's ranking of runs judged pairwise: Bradley-Terry strengths with bootstrap CIs
(recbench.stats.bradley_terry), a report table the judge-validity audit declares by name (its `RANKING_TABLE`,
build = 'recbench.report.judge_ranking:ranking_table'; docs/judges.md, "Ranking runs judged pairwise").

Where the comparisons come from: every run of the report judged with judge.protocol=pairwise contributes one
comparison per judged example, (the run, its reference run, the outcome for the run: 1 win, 0.5 tie, 0 loss), read
from its judge records (judge/<tag>/samples.jsonl; an example whose judge answer did not parse is left out). The
reference run is a player too, whether or not it is in the report (runs judged against each other are each other's
reference). Runs are grouped by task and judge (judge.name and protocol: verdicts of two judges are not one scale);
a group with three or more players is ranked. The bootstrap resamples the comparisons (judged examples).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from recbench.report.audit_tables import AuditCell, cell, row_labels
from recbench.report.tables import Table, _header
from recbench.stats.bradley_terry import bradley_terry
from recbench.store.judge_records import judge_records, judged_tag
from recbench.store.schema import SchemaError, read_config

#: a group is ranked from this many players (runs and references) on
MIN_PLAYERS = 3
#: bootstrap resamples of the comparisons
N_BOOT = 500
OUTCOME = {"win": 1.0, "tie": 0.5, "loss": 0.0}


def _key(path: Any) -> str:
    return str(Path(str(path)).resolve())


def _reference_label(path: str) -> str:
    """A reference run outside the report: '<model> <method> (reference)' from its config.yaml, else its path."""
    try:
        cfg = read_config(Path(path))
    except SchemaError:
        cfg = {}
    model, method = (cfg.get("model") or {}).get("name"), (cfg.get("method") or {}).get("name")
    return f"{model} {method} (reference)" if model and method else f"{path} (reference)"


def comparisons(runs: list[Any]) -> tuple[dict[tuple[str, str], list[tuple[str, str, float]]], dict[str, str]]:
    """(task, judge tag) -> [(run key, reference key, outcome)], and every player's key -> label."""
    named = row_labels(runs)
    labels = {_key(r.dir): " ".join(named[id(r)][1:]) for r in runs}
    groups: dict[tuple[str, str], list[tuple[str, str, float]]] = {}
    for r in runs:
        cfg = r.source.config
        tag = judged_tag(cfg)
        jr = judge_records(r.dir).get(tag) if tag is not None else None
        ref = jr.manifest.get("reference") if jr is not None else None
        if not ref:  # not judged, or judged by a protocol without a reference run (scores, not comparisons)
            continue
        ref_key = _key(ref)
        labels.setdefault(ref_key, _reference_label(str(ref)))
        rows = groups.setdefault((r.task, tag), [])
        rows += [(_key(r.dir), ref_key, OUTCOME[x.prediction]) for x in jr.records
                 if x.parse_status != "failed" and x.prediction in OUTCOME]
    return groups, _unique(labels)


def _unique(labels: dict[str, str]) -> dict[str, str]:
    """Labels made distinct by their folder name where two players share one."""
    seen: dict[str, int] = {}
    for v in labels.values():
        seen[v] = seen.get(v, 0) + 1
    return {k: (f"{v} [{Path(k).name}]" if seen[v] > 1 else v) for k, v in labels.items()}


def ranking_table(runs: list[Any]) -> Optional[Table]:
    """One row per player of every group with at least MIN_PLAYERS players, strongest first (None when none)."""
    groups, labels = comparisons(runs)
    rows = []
    for (task, tag), wins in sorted(groups.items()):
        if len({p for w in wins for p in w[:2]}) < MIN_PLAYERS:
            continue
        for rank, s in enumerate(bradley_terry(wins, n_boot=N_BOOT, seed=0), start=1):
            won = sum(o for a, _, o in wins if a == s["run"]) + sum(1 - o for _, b, o in wins if b == s["run"])
            rows.append(([task, tag, str(rank), labels.get(s["run"], s["run"])],
                         [AuditCell(metric="", mean=s["strength"], ci_low=s["ci_low"], ci_high=s["ci_high"]),
                          cell("", s["n_comparisons"], "int"), cell("", won / s["n_comparisons"], "3"),
                          AuditCell(metric="", shown="yes" if s["regularised"] else "no")]))
    if not rows:
        return None
    cols = [("", "strength"), ("", "comparisons"), ("", "score (ties half)"), ("", "regularised")]
    return Table(id="judge-ranking", title="Judge ranking: Bradley-Terry strengths of runs judged pairwise",
                 caption=CAPTION, row_header=["task", "judge", "rank", "run"], header=_header(cols), columns=cols,
                 rows=rows, section="judge-validity")


CAPTION = ("Runs of one task judged pairwise by one judge (the 'judge' column: judge.name-protocol), each judged "
           "example one comparison (the run against its judge.reference run, both display orders asked, a win only "
           "when both agree, a tie counted half each way); the reference runs are players too. Strength: "
           "Bradley-Terry log-strength by maximum likelihood (choix), mean 0 within the group, 95% percentile "
           f"bootstrap CI over the comparisons ({N_BOOT} resamples); P(i beats j) = 1 / (1 + exp(s_j - s_i)). "
           "Score: the player's wins plus half its ties over its comparisons. Regularised: some player never "
           "scored against the rest, so maximum likelihood is infinite and choix's regularised estimate is shown. "
           f"Groups with fewer than {MIN_PLAYERS} players are not ranked (see judge_win_rate and its CI).")
