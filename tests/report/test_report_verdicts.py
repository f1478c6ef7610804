"""One verdict everywhere (issue 20, item 2): `python -m recbench.compare <sweep dir>` and the sweep report's
comparisons.json agree on every shared record; every letter of the report (slice columns included) has its records in
comparisons.json and follows from them; captions explain the letters, the family and the CI."""
from __future__ import annotations

import json
from html import unescape
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from recbench.run.evaluate import run_from_config
from recbench.report import write_report
from recbench.stats import compact_letters
from tests.doubles import ScriptedBackend
from tests.helpers import compose_cfg, listwise_answer

pytestmark = pytest.mark.full

REPO = Path(__file__).resolve().parents[2]
KEY = ("run_a", "run_b", "metric", "slice")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    """PerRecBench on the bundled 120 groups: a scripted listwise model and three model-free reference rows; LLMRec
    rating (lower-is-better MAE) with its three reference rows; then the report, then compare --json on the dir."""
    root = tmp_path_factory.mktemp("verdicts")

    def run(name, overrides, backend=None):
        cfg = compose_cfg([f"cache.path={root / 'cache.sqlite'}", "run.progress=false", *overrides])
        run_from_config(cfg, root / "sweep" / name, backend=backend)

    run("perrec/lm/listwise", ["method=listwise"], ScriptedBackend(listwise_answer, name="lm"))
    for m in ("bm25_history", "random", "user_avg"):
        run(f"perrec/none/{m}", [f"method={m}"])
    for m in ("user_mean", "item_mean", "global_mean"):
        run(f"llmrec_rating/none/{m}", ["task=llmrec_rating", f"method={m}"])
    write_report([root / "sweep"], root / "report")
    proc = subprocess.run([sys.executable, "-m", "recbench.compare", str(root / "sweep"), "--json",
                           str(root / "compare.json")], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (root / "compare.out").write_text(proc.stdout)
    return root


def _records(path: Path) -> dict[tuple, dict]:
    recs = json.loads(path.read_text())
    by = {tuple(r[k] for k in KEY): r for r in recs}
    assert len(by) == len(recs)
    return by


def test_compare_and_the_report_agree_on_every_shared_record(sweep):
    cli, rep = _records(sweep / "compare.json"), _records(sweep / "report" / "comparisons.json")
    shared = set(cli) & set(rep)
    assert shared == set(rep)  # compare covers every metric and slice: each report record is one of its records
    fields = ("p_value", "p_adjusted", "significant", "better", "verdict", "family", "family_size", "ci_low", "ci_high",
              "diff")
    diff = [(k, f, cli[k][f], rep[k][f]) for k in shared for f in fields if cli[k][f] != rep[k][f]]
    assert not diff, diff[:5]
    # one family per (task, metric, slice): 4 PerRecBench runs -> 6 pairs, 3 LLMRec rating runs -> 3 pairs
    sizes = {(r["task"], r["metric"], r["slice"]): r["family_size"] for r in rep.values()}
    assert {s for (t, _, _), s in sizes.items() if t == "perrec"} == {6}
    assert {s for (t, _, _), s in sizes.items() if t == "llmrec_rating"} == {3}
    assert {("perrec", "ptc", f"difficulty={d}") for d in ("easy", "medium", "hard")} <= set(sizes)
    mae = [r for k, r in rep.items() if k[2] == "mae"]
    assert mae and all(r["direction"] == "lower" and r["higher_is_better"] is False for r in mae)
    assert all(r["verdict"] == (f"{r['better']} better" if r["significant"] else "n.s.") for r in rep.values())
    bm25 = next(r for k, r in rep.items() if {k[0], k[1]} == {"perrec/none/bm25_history", "perrec/none/random"}
                and k[2:] == ("ptc", "all"))
    assert bm25["better"] == "perrec/none/bm25_history" and bm25["verdict"] == "perrec/none/bm25_history better"
    print(f"\n{len(shared)} shared records agree; bm25_history vs random ptc p_adj {bm25['p_adjusted']:.4g} "
          f"(Holm over {bm25['family_size']} pairs)")


def test_every_letter_has_its_records_and_follows_from_them(sweep):
    groups = pd.read_csv(sweep / "report" / "significance_groups.csv", keep_default_na=False)
    recs = _records(sweep / "report" / "comparisons.json")
    assert {"difficulty=easy", "difficulty=medium", "difficulty=hard", "all"} <= set(groups["slice"])
    checked = 0
    for (table, column), g in groups.groupby(["table", "column"]):
        systems = list(g["system"])
        metric, slice_ = g["metric"].iloc[0], g["slice"].iloc[0]
        pair_recs = []
        for i, a in enumerate(systems):
            for b in systems[i + 1:]:
                r = recs.get((a, b, metric, slice_)) or recs.get((b, a, metric, slice_))
                assert r is not None, f"{table} / {column}: no record of {a} vs {b} on {metric} {slice_}"
                assert r["family"] == g["family"].iloc[0] and r["family_size"] == g["family_size"].iloc[0]
                pair_recs.append(r)
        means = {}
        for r in pair_recs:
            means[r["run_a"]], means[r["run_b"]] = r["mean_a"], r["mean_b"]
        sign = -1 if pair_recs[0]["higher_is_better"] else 1
        order = sorted(systems, key=lambda s: sign * means[s])
        expected = compact_letters(order, [(r["run_a"], r["run_b"]) for r in pair_recs if r["significant"]])
        assert dict(zip(g["system"], g["letters"])) == expected, (table, column)
        checked += 1
    assert checked >= 6


def test_captions_explain_letters_family_and_ci(sweep):
    md = (sweep / "report" / "report.md").read_text()
    html = unescape((sweep / "report" / "report.html").read_text())
    for text in (md, html):
        assert "Superscript letters: within a column, rows that share a letter are not significantly different" in text
        assert "Every letter's records are in comparisons.csv / comparisons.json" in text
        assert "unadjusted 95% paired bootstrap CI" in text
        assert "family 'perrec · ptc · all' (6 pairs" in text
    assert "p (Holm, 6 pairs)" in md
    csv = pd.read_csv(sweep / "report" / "comparisons.csv")
    assert {"family", "family_size", "correction", "direction", "verdict"} <= set(csv.columns)
    out = " ".join((sweep / "compare.out").read_text().split())
    assert "95% CI = unadjusted paired bootstrap" in out
    assert "family = one task, metric and slice; holm over its pairs of runs" in out
    assert "perrec ptc: 6 pairs x 9 slices" in out and "llmrec_rating mae: 3 pairs x 8 slices" in out
