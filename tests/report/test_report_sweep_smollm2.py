"""The issue's sweep: one Hydra multirun over SmolLM2 (pointwise, pairwise, listwise) and two reference baselines
on PerRecBench groups of two difficulties; the multirun callback writes the report; headless Chromium checks it;
a rerun of the sweep resumes (no model call); mode=plan on a finished config finds everything cached."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from report_cdp import check_report_page, find_chromium

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "perrec_sample"

pytestmark = pytest.mark.slow


def tiny_perrec(folder: Path, per_difficulty: dict[str, int]) -> Path:
    """A PerRecBench data dir with the first N bundled groups of each difficulty (items and ratings linked)."""
    folder.mkdir(parents=True)
    for f in ("items.jsonl", "ratings.csv.gz"):
        (folder / f).symlink_to(SAMPLE / f)
    left = dict(per_difficulty)
    keep = []
    for line in (SAMPLE / "groups.jsonl").read_text().splitlines():
        d = json.loads(line).get("difficulty")
        if left.get(d, 0) > 0:
            keep.append(line)
            left[d] -= 1
    (folder / "groups.jsonl").write_text("\n".join(keep) + "\n")
    return folder


def _recbench(args: list[str], env: dict, timeout: int = 1500) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "recbench", *args], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=timeout)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sweep")
    data = tiny_perrec(tmp / "data", {"easy": 1, "medium": 1})
    env = {**os.environ, "RECBENCH_RUNS_DIR": str(tmp / "runs"), "RECBENCH_CACHE_DIR": str(tmp / "cache")}
    args = ["-m", "model=smollm2", "method=pointwise,pairwise,listwise,random,bm25_history",
            f"task.data_dir={data}", "task.difficulties=[easy,medium]", "++method.max_tokens=32",
            "run.progress=false", f"hydra.sweep.dir={tmp / 'sweep'}"]
    first = _recbench(args, env)
    return {"dir": tmp / "sweep", "args": args, "env": env, "first": first, "data": data}


def _all_metrics(sweep_dir: Path) -> dict[str, dict]:
    return {str(p.parent.relative_to(sweep_dir)): json.loads(p.read_text())
            for p in sweep_dir.rglob("metrics.json") if "report" not in p.parts}


def test_sweep_writes_the_report_and_it_renders_in_chromium(sweep):
    metrics = _all_metrics(sweep["dir"])
    assert len(metrics) == 5
    assert {(m["model"], m["method"]) for m in metrics.values()} == {
        ("smollm2", "pointwise"), ("smollm2", "pairwise"), ("smollm2", "listwise"), ("none", "random"),
        ("none", "bm25_history")}
    for m in metrics.values():
        assert set(m["breakdown"]["difficulty"]) == {"easy", "medium"}
        assert m["counts"]["examples"] == 2
    report = sweep["dir"] / "report"
    for f in ("report.md", "report.html", "cells.csv", "runs.csv", "tables.csv"):
        assert (report / f).stat().st_size > 0, f
    md = (report / "report.md").read_text()
    assert "| model | pointwise · easy | pointwise · medium | pairwise · easy | pairwise · medium | listwise · easy " \
           "| listwise · medium | average |" in md
    assert "| bm25_history |" in md and "| random |" in md
    if find_chromium() is None:
        pytest.skip("chromium not installed (apt-get install -y chromium): HTML not opened in a browser")
    facts = check_report_page(report / "report.html")
    assert {"summary", "perrec-table1", "perrec-reference"} <= set(facts["tables"])
    failed = any(json.loads((d / "metrics.json").read_text())["counts"]["parse_failed"]
                 for d in (sweep["dir"]).rglob("*") if (d / "metrics.json").is_file())
    charts = {"perrec: ptc", "PTC vs group size"} | ({"Parse-failure rates"} if failed else set())
    assert {i["alt"] for i in facts["images"]} >= charts  # the parse-failure chart only when an answer failed
    # every Table 1 cell is a metrics.json value: 3 methods x 2 difficulties
    assert sum(1 for c in facts["cells"] if c["table"] == "perrec-table1" and c["sources"]) == 6
    assert facts["checked_cells"] >= 6 + 4


def test_rerunning_the_sweep_resumes_without_model_calls(sweep):
    before = _all_metrics(sweep["dir"])
    _recbench(sweep["args"], sweep["env"])
    after = _all_metrics(sweep["dir"])
    for k, m in after.items():
        inv = m["this_invocation"]
        assert inv["examples_skipped"] == 2 and inv["examples_finished"] == 0, k
        assert inv["backend_calls"] == 0, k
        assert m["metrics"] == before[k]["metrics"], k


def test_plan_mode_finds_a_finished_config_fully_cached(sweep, tmp_path):
    env = {**sweep["env"], "RECBENCH_RUNS_DIR": str(tmp_path / "plan_runs")}
    r = _recbench(["mode=plan", "model=smollm2", "method=listwise", f"task.data_dir={sweep['data']}",
                   "task.difficulties=[easy,medium]", "++method.max_tokens=32", "run.progress=false"], env)
    plan = json.loads(next((tmp_path / "plan_runs").rglob("plan.json")).read_text())
    real = next(m for m in _all_metrics(sweep["dir"]).values() if m["method"] == "listwise")
    assert plan["requests"] == real["counts"]["model_calls"] == 2
    assert plan["cached_share"] == 1.0
    assert plan["tokenizer"].startswith("model tokenizer")
    assert plan["prompt_tokens"] == real["counts"]["prompt_tokens"]  # the model's own tokenizer + chat template
    assert not list((tmp_path / "plan_runs").rglob("metrics.json"))  # nothing was evaluated
    assert "cached share" in r.stdout
