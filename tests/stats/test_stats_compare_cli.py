"""`python -m recbench.compare` keeps the user's order (issue 30, item 3): a = the first run named, b = the second,
--margin says which direction its non-inferiority test runs, slices come in the task's order, no progress bar is left
in the output, and the tables open with one header line within 120 columns."""
from __future__ import annotations

import json

import numpy as np
import pytest

from recbench.cli.compare import main
from tests.stats.test_stats_compare import write_run

pytestmark = pytest.mark.fast
ORDER = ("easy", "medium", "hard")  # PerRecBench's breakdown_order, not alphabetical (easy, hard, medium)


def _runs(tmp_path):
    """'random' and 'bm25' runs of 60 paired examples, bm25 better by about 0.3, difficulty slices in task order."""
    rng = np.random.default_rng(8)
    base = rng.normal(0, 1, 60)
    meta = [{"difficulty": ORDER[i % 3]} for i in range(60)]
    runs = {}
    for name, shift in (("random", 0.0), ("bm25", 0.3)):
        d = write_run(tmp_path / name, {"ptc": (base + shift + rng.normal(0, 0.2, 60)).tolist()}, method=name,
                      meta=meta)
        m = json.loads((d / "metrics.json").read_text())
        m["breakdown"] = {"difficulty": {v: {"n": 20, "metrics": {}} for v in ORDER}}
        (d / "metrics.json").write_text(json.dumps(m))
        runs[name] = d
    return runs


def _compare(capsys, tmp_path, *runs, extra=()):
    out_json = tmp_path / "v.json"
    assert main([*map(str, runs), "--resamples", "199", "--json", str(out_json), *extra]) == 0
    cap = capsys.readouterr()
    return json.loads(out_json.read_text()), cap.out, cap.err


def test_a_is_the_first_run_named_and_the_margin_names_its_direction(tmp_path, capsys):
    runs = _runs(tmp_path)
    recs, out, _ = _compare(capsys, tmp_path, runs["random"], runs["bm25"], extra=("--margin", "0.05"))
    assert {(r["run_a"], r["run_b"]) for r in recs} == {("random", "bm25")}  # alphabetical order would be bm25 first
    overall = next(r for r in recs if r["slice"] == "all")
    assert overall["diff"] < 0 and overall["better"] == "bm25"
    assert "random  vs  bm25  (diff = random − bm25)" in out
    assert "bm25 better" in out and "a better" not in out and "b better" not in out  # labels, never the letters' a/b
    # b (bm25) is better, so it is not worse than a (random) by 0.05: the test runs b against a, as asked
    assert overall["noninferior"] is True and overall["margin_verdict"].endswith("bm25 non-inferior to random")
    text = " ".join(out.split())
    assert ("ptc (higher is better): bm25 non-inf = yes rejects H0 'random - bm25 >= 0.05', i.e. shows bm25 is not "
            "worse than random by 0.05 or more") in text
    recs2, out2, _ = _compare(capsys, tmp_path, runs["bm25"], runs["random"], extra=("--margin", "0.05"))
    overall2 = next(r for r in recs2 if r["slice"] == "all")
    assert (overall2["run_a"], overall2["run_b"]) == ("bm25", "random") and overall2["diff"] == -overall["diff"]
    assert overall2["noninferior"] is False  # random is worse than bm25 by more than 0.05


def test_slices_follow_the_task_order(tmp_path, capsys):
    runs = _runs(tmp_path)
    recs, out, _ = _compare(capsys, tmp_path, runs["random"], runs["bm25"])
    assert [r["slice"] for r in recs] == ["all", *(f"difficulty={v}" for v in ORDER)]
    rows = [ln for ln in out.splitlines() if ln.startswith("│")]
    assert [ln.split("│")[1].strip() for ln in rows] == ["all", *(f"difficulty={v}" for v in ORDER)]


def test_no_progress_bar_one_header_line_and_120_columns(tmp_path, capsys):
    runs = _runs(tmp_path)
    _, out, err = _compare(capsys, tmp_path, runs["random"], runs["bm25"], extra=("--margin", "0.05"))
    assert "\r" not in out + err and "pair/s" not in out + err and "compare:" not in out + err  # no tqdm line
    lines = out.splitlines()
    assert max(len(ln) for ln in lines) <= 120
    for top in (k for k, ln in enumerate(lines) if ln.startswith("┏")):  # header row, then the rule under it
        assert lines[top + 1].startswith("┃") and lines[top + 2].startswith("┡")


def test_runs_are_named_by_label_so_the_significance_letters_cannot_be_mistaken_for_them(tmp_path, capsys):
    """Issue 44 item 5: with the arguments reversed, the letter 'a' went to run b. The tables now name both runs by
    their labels (title, mean columns, verdict), so 'a'/'b' only ever mean significance letters."""
    runs = _runs(tmp_path)
    _, out, _ = _compare(capsys, tmp_path, runs["bm25"], runs["random"])
    header = next(ln for ln in out.splitlines() if ln.startswith("┃"))
    assert "bm25" in header and "random" in header and " a " not in header and " b " not in header
    assert "bm25  vs  random  (diff = bm25 − random)" in out
    assert "significance groups (toy ptc, all; best first; a shared letter = not distinguishable): bm25 a, random b" \
        in " ".join(out.split())


def test_a_metric_equal_to_another_on_every_slice_is_one_row(tmp_path, capsys):
    """ptc_parsed equal to ptc (every answer parsed) is folded into ptc's rows, as the run summary folds it; the json
    keeps both."""
    runs = _runs(tmp_path)
    for d in runs.values():
        lines = [json.loads(ln) for ln in (d / "samples.jsonl").read_text().splitlines()]
        for r in lines:
            r["metrics"]["ptc_parsed"] = r["metrics"]["ptc"]
        (d / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
        m = json.loads((d / "metrics.json").read_text())
        m["metrics"]["ptc_parsed"] = m["metrics"]["ptc"]
        m["metric_info"]["ptc_parsed"] = m["metric_info"]["ptc"]
        (d / "metrics.json").write_text(json.dumps(m))
    recs, out, _ = _compare(capsys, tmp_path, runs["random"], runs["bm25"])
    assert {r["metric"] for r in recs} == {"ptc", "ptc_parsed"}
    rows = [ln for ln in out.splitlines() if ln.startswith("│")]
    assert len(rows) == 4 and not any("ptc_parsed" in ln for ln in rows)
    assert "ptc_parsed = ptc on every slice and pair (one row shown; the json has both)" in out
