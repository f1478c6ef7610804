"""The HTML report in a real browser (Debian's headless Chromium, started by the test over the DevTools pipe)."""
from __future__ import annotations

from pathlib import Path

import pytest
from report_cdp import check_report_page, find_chromium

from recbench.app import run_from_config
from recbench.report import write_report
from tests.doubles import ScriptedBackend
from tests.helpers import compose_cfg, listwise_answer

pytestmark = pytest.mark.skipif(find_chromium() is None,
                                reason="chromium not installed (apt-get install -y chromium)")


def _run(root: Path, name: str, overrides: list[str], backend=None) -> None:
    cfg = compose_cfg([f"cache.path={root / 'cache.sqlite'}", "run.progress=false", *overrides])
    run_from_config(cfg, root / name, backend=backend)


def test_report_renders_in_chromium_with_cells_equal_to_metrics_json(tmp_path):
    diffs = "task.difficulties=[easy,hard]"
    _run(tmp_path, "runs/listwise", ["method=listwise", diffs, "limit=60"], ScriptedBackend(listwise_answer))
    # a second model that answered nothing parseable, on 6 easy groups only
    _run(tmp_path, "runs/broken", ["model=gpt4o", "method=listwise", diffs, "limit=6"],
         ScriptedBackend(lambda r: "no idea"))
    for seed in (0, 1):
        _run(tmp_path, f"runs/random{seed}", ["method=random", diffs, f"seed={seed}", "limit=60"])
    _run(tmp_path, "runs/bm25", ["method=bm25_history", diffs, "limit=60"])
    out = write_report([tmp_path / "runs"], tmp_path / "report")
    facts = check_report_page(out["html"])
    assert {"summary", "perrec-table1", "perrec-reference"} <= set(facts["tables"])
    assert len(facts["images"]) >= 3  # headline bars, PTC vs group size, parse failures
    assert facts["checked_cells"] >= 10
    # gpt4o never ran a hard group: its listwise/hard cell (and its average) is a dash, not zero
    assert any(m["table"] == "perrec-table1" and m["text"] == "—" for m in facts["missing"])
    assert facts["scripts"] == 0
