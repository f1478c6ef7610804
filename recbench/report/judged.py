"""The judge beside every judged number: a report table showing judge_* metrics names, in its caption, the judge
(judge.name and protocol, and the reference run of a pairwise judge) of the runs behind those cells, read from each
run's config.yaml (docs/judges.md)."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from recbench.api.judge_metrics import PREFIX
from recbench.store.schema import SchemaError, read_config


@lru_cache(maxsize=4096)
def judge_of(run_dir: str) -> str:
    """'smollm2 (pointwise)' or 'smollm2 (pairwise, against runs/ref)' for a judged run dir ('' when not judged)."""
    try:
        j = read_config(Path(run_dir)).get("judge") or {}
    except SchemaError:
        return ""
    name = j.get("name")
    if name in (None, "none"):
        return ""
    ref = j.get("reference")
    served = (j.get("backend") or {}).get("model")  # a server entry (openai-server) names its served model
    who = f"{name} [{served}]" if served and served != name else str(name)
    return f"{who} ({j.get('protocol')}" + (f", against {ref}" if ref else "") + ")"


def _dirs(run_dir: str) -> list[str]:
    """The run dirs behind a cell's source (a pooled cell names several, space-separated)."""
    return [run_dir] if Path(run_dir).is_dir() else run_dir.split()


def judged_caption(table) -> str:
    """'Judged metrics (judge_*): judged by X.' for a table with judged cells (naming the rows of each judge when
    its rows have several); '' when it shows none."""
    rows: dict[str, list[str]] = {}
    for labels, cells in table.rows:
        for c in cells:
            if not str(c.metric).startswith(PREFIX):
                continue
            for judge in (judge_of(d) for s in c.sources for d in _dirs(str(s.get("run_dir", "")))):
                if judge:
                    rows.setdefault(judge, [])
                    label = " ".join(str(x) for x in labels if x)
                    if label not in rows[judge]:
                        rows[judge].append(label)
    if not rows:
        return ""
    if len(rows) == 1:
        return f"Judged metrics ({PREFIX}*): judged by {next(iter(rows))}."
    return f"Judged metrics ({PREFIX}*): " + "; ".join(f"judged by {j} in {', '.join(ls)}" for j, ls in rows.items()) + "."


def name_the_judge(table) -> None:
    """The table's caption with judged_caption added as a sentence of its own (unchanged without judged cells)."""
    more = judged_caption(table)
    if more:
        base = table.caption.rstrip()
        table.caption = f"{base}{'' if not base or base.endswith('.') else '.'} {more}".strip()
