"""The HTML report in a real browser (Debian's headless Chromium, started by the test over the DevTools pipe)."""
from __future__ import annotations

from pathlib import Path

import pytest
from report_cdp import check_report_page, find_chromium

from recbench.run.evaluate import run_from_config
from recbench.report import write_report
from tests.doubles import ScriptedBackend
from tests.helpers import compose_cfg, listwise_answer

pytestmark = [pytest.mark.skipif(find_chromium() is None, reason="chromium not installed (apt-get install -y chromium)"),
              pytest.mark.full]


def _run(root: Path, name: str, overrides: list[str], backend=None) -> None:
    cfg = compose_cfg([f"cache.path={root / 'cache.sqlite'}", "run.progress=false", *overrides])
    run_from_config(cfg, root / name, backend=backend)


def test_report_renders_in_chromium_with_cells_equal_to_metrics_json(tmp_path):
    diffs = "task.difficulties=[easy,hard]"
    _run(tmp_path, "runs/listwise", ["method=listwise", diffs, "limit=60"], ScriptedBackend(listwise_answer))
    # a second model that answered nothing parseable, on 6 easy groups only
    _run(tmp_path, "runs/broken", ["model=gpt4o", "method=listwise", "task.difficulties=[easy]", "limit=6"],
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
    # a long note wraps inside its cell (it made the column about 780 px wide); every table has its legend
    assert max(map(len, facts["notes"])) > 40 and facts["widest_cell"] < 300, (facts["notes"], facts["widest_cell"])
    assert {"summary", "perrec-table1"} <= set(facts["legends"]) <= set(facts["tables"])
    assert "ptc: personalization tau correlation" in facts["legends"]["perrec-table1"]


def test_sweep_report_letters_and_comparisons_equal_recbench_compare_json(tmp_path):
    """The sweep report's significance groups and comparisons table, read in Chromium, against the compare CLI."""
    import json
    import subprocess
    import sys

    from recbench.stats.verdicts import Comparison, ci_disagrees, letters
    from recbench.report.numbers import fmt
    from recbench.report.significance import precision_short

    diffs = "task.difficulties=[easy,hard]"
    _run(tmp_path, "runs/listwise", ["method=listwise", diffs, "limit=60"], ScriptedBackend(listwise_answer))
    _run(tmp_path, "runs/broken", ["model=gpt4o", "method=listwise", diffs, "limit=60"],
         ScriptedBackend(lambda r: "no idea"))
    for seed in (0, 1):
        _run(tmp_path, f"runs/random{seed}", ["method=random", diffs, f"seed={seed}", "limit=60"])
    _run(tmp_path, "runs/bm25", ["method=bm25_history", diffs, "limit=60"])
    out = write_report([tmp_path / "runs"], tmp_path / "report")
    facts = check_report_page(out["html"])
    js = tmp_path / "compare.json"
    subprocess.run([sys.executable, "-m", "recbench.compare", str(tmp_path / "runs"), "--metric", "ptc", "--no-slices",
                    "--pool-seeds", "--json", str(js)], check=True, capture_output=True)
    records = json.loads(js.read_text())
    records = records["comparisons"] if isinstance(records, dict) else records
    assert len(records) == 6  # 4 systems of one task: every pair once
    # the comparisons table: one row per pair, same difference, CI, Holm p and verdict as the CLI
    page = {tuple(r["row"]): r["cells"] for r in facts["comparisons"]}
    shown = {"listwise": "smollm2 · listwise", "broken": "gpt4o · listwise", "bm25": "bm25_history",
             "random0 [2 seeds]": "random [2 seeds]"}
    assert len(page) == len(records)
    for rec in records:
        cells = page[(shown[rec["run_a"]], shown[rec["run_b"]])]
        verdict = f"{shown[rec['better']]} better" if rec["better"] else "not distinguishable"
        verdict += " *" if ci_disagrees(Comparison(**{k: v for k, v in rec.items()
                                                      if k in Comparison.__dataclass_fields__})) else ""
        c = Comparison(**{k: v for k, v in rec.items() if k in Comparison.__dataclass_fields__})
        assert cells == [fmt(rec["diff"]), f"[{rec['ci_low']:.3f}, {rec['ci_high']:.3f}]",
                         f"{rec['p_adjusted']:.3g} ({precision_short(c)})", verdict], (rec, cells)
    # the summary's perrec column: its rows are the same four systems, so its letters are the CLI's letters
    comps = [Comparison(**{k: v for k, v in r.items() if k in Comparison.__dataclass_fields__}) for r in records]
    expected = letters(comps, "ptc", "all")
    row_of = {"listwise": "smollm2", "broken": "gpt4o", "bm25": "bm25_history", "random0 [2 seeds]": "random"}
    got = {tuple(x["row"])[0]: x["letters"] for x in facts["letters"] if x["table"] == "summary"}
    assert got == {row_of[k]: v for k, v in expected.items()}
    assert got["bm25_history"] != got["random"]  # bm25 beats random: no shared letter
    assert not set(got["bm25_history"]) & set(got["random"])
