"""The audit interface (recbench.api.audits): a fifth audit is one module of its own. This test declares a small
example audit, answers per finish reason, registers it, and checks that a run with it enabled by config carries its
block in metrics.json (read back as its typed record), its terminal line and its report table; unregistered, a run
and a report show none of it. The run, the summary and the report are not touched to add it."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import pytest

from recbench.api import audits
from recbench.api.audits import Audit, Block
from recbench.api.types import Request, Response
from recbench.cli.summary import print_summary
from recbench.report import write_report
from recbench.report.presentation import AuditColumn, AuditTable
from recbench.run.evaluate import run_from_config
from recbench.store.schema import read_result
from tests.doubles import ScriptedBackend
from tests.toy import toy_cfg
from tests.toy.scripted import reverse

pytestmark = pytest.mark.fast
N = 9


@dataclass
class FinishBlock(Block):
    """metrics.json extra.finish_reasons: answers, and answers per finish reason."""

    answers: int = 0
    counts: dict[str, int] = field(default_factory=dict)


class FinishReasons(Audit):
    """audit.finish_reasons=true: how many answers stopped, and how many the token limit cut."""

    key = "finish_reasons"
    blocks = {"finish_reasons": FinishBlock}
    tables = (AuditTable(
        id="finish-reasons", title="Answers per finish reason", key="finish_reasons", metric_column=False,
        caption="Answers per finish reason (audit.finish_reasons; metrics.json extra.finish_reasons).",
        columns=(AuditColumn("", "answers", lambda b: b.answers, "int", "answers"),
                 AuditColumn("finish reason", "stop", lambda b: b.counts.get("stop", 0), "int", "stop"),
                 AuditColumn("finish reason", "length", lambda b: b.counts.get("length", 0), "int", "length"))),)

    def enabled(self, cfg: Any) -> bool:
        return bool((cfg.get("audit") or {}).get("finish_reasons"))

    def aggregate(self, cfg: Any, task: Any, records: list[Any]) -> dict[str, Any]:
        if not self.enabled(cfg):
            return {}
        counts = Counter(c.finish_reason for r in records for c in r.calls)
        return {self.key: {"answers": sum(counts.values()), "counts": dict(sorted(counts.items()))}}

    def terminal_line(self, blocks: dict[str, Any]) -> Optional[str]:
        b = blocks.get(self.key)
        if b is None:
            return None
        return f"finish reasons: {b.counts.get('length', 0)} of {b.answers} answers cut by the token limit"


class CutEveryThird(ScriptedBackend):
    """The scripted toy answers, every third one marked cut by the token limit."""

    def generate(self, requests: list[Request]) -> list[Response]:
        out = super().generate(requests)
        for i, r in enumerate(out):
            if (self.calls - len(out) + i) % 3 == 2:
                r.finish_reason = "length"
        return out


@pytest.fixture
def finish_audit():
    audit = audits.register(FinishReasons())
    yield audit
    audits.unregister(audit.key)


def _run(tmp_path: Path, *overrides: str):
    cfg = toy_cfg([f"limit={N}", *overrides], tmp_path)
    return run_from_config(cfg, tmp_path / "run", backend=CutEveryThird(reverse))


def test_an_example_audit_registered_and_enabled_shows_in_metrics_terminal_and_report(tmp_path, finish_audit, capsys):
    assert [a.key for a in audits.registered()][-1] == "finish_reasons"  # rank 100: after the four shipped audits
    result = _run(tmp_path, "+audit.finish_reasons=true")
    raw = result.to_dict()["extra"]["finish_reasons"]
    assert raw == {"answers": N, "counts": {"length": N // 3, "stop": N - N // 3}}  # 9 answers, every third cut
    assert isinstance(result.audits["finish_reasons"], FinishBlock) and "finish_reasons" not in result.extra
    typed = read_result(tmp_path / "run").audits["finish_reasons"]  # metrics.json, read back typed
    assert isinstance(typed, FinishBlock) and typed.answers == N and typed.counts["length"] == 3
    print_summary(result)
    assert "finish reasons: 3 of 9 answers cut by the token limit" in capsys.readouterr().out
    md = Path(write_report([tmp_path / "run"], tmp_path / "rep", formats=("md",))["md"]).read_text()
    part = md.split("Answers per finish reason")[1]
    row = next(x for x in part.splitlines() if x.startswith("| toy"))
    assert row.replace(" ", "").endswith("|9|6|3|")  # answers, stop, length


def test_the_example_audit_off_by_config_and_gone_once_unregistered(tmp_path, finish_audit, capsys):
    off = _run(tmp_path / "off")
    assert "finish_reasons" not in off.audits  # registered, not enabled: no block, no line
    audits.unregister("finish_reasons")
    assert "finish_reasons" not in [a.key for a in audits.registered()]
    result = _run(tmp_path / "gone", "+audit.finish_reasons=true")
    assert "finish_reasons" not in result.to_dict()["extra"]
    print_summary(result)
    assert "finish reasons" not in capsys.readouterr().out
    md = Path(write_report([tmp_path / "gone" / "run"], tmp_path / "rep", formats=("md",))["md"]).read_text()
    assert "Answers per finish reason" not in md
