"""Order audits and random-ranker expectations in the report, on real run dirs made by the app with scripted models:
every number the order-audit tables and the 'random (expected)' rows show (Markdown, HTML, tables.csv) is the
metrics.json value."""
from __future__ import annotations

import html as _html
import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest
from tests.doubles import ScriptedBackend

from recbench.run.evaluate import run_from_config
from recbench.report import build_report, write_report
from recbench.report.audit_tables import p_text
from recbench.report.numbers import MISSING, fmt
from tests.helpers import compose_cfg

pytestmark = pytest.mark.full

USER_LINE = re.compile(r"^(User [A-Z]):\n- Average rating", re.M)


def first_shown(req) -> str:
    """Position-bound listwise model: ranks the users in display order."""
    users = USER_LINE.findall(req.messages[-1][1])
    return '{"ranking": [' + ", ".join(f'"{u}"' for u in users) + "]}"


def always_a(req) -> str:
    """Pairwise model that always picks the user shown first."""
    return "[User A]"


def first_candidates(req) -> str:
    """Sequential model that names the first 10 candidates as shown."""
    text = req.messages[-1][1].split("choosing only from these candidates (ID: title):")[1]
    ids = re.findall(r"^(\S+): ", text, re.M)[:10]
    return "[" + ", ".join(ids) + "]"


def _run(root: Path, name: str, overrides: list[str], backend=None) -> dict:
    cfg = compose_cfg([f"cache.path={root / 'cache.sqlite'}", "run.progress=false", *overrides])
    return run_from_config(cfg, root / name, backend=backend).to_dict()


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """PerRecBench listwise audited (K=4), pairwise (both orders), random; LLMRec sequential audited (K=3) and
    popularity."""
    root = tmp_path_factory.mktemp("audit_runs")
    _run(root, "perrec/listwise", ["method=listwise", "limit=9", "audit.orders=4"], ScriptedBackend(first_shown))
    _run(root, "perrec/pairwise", ["method=pairwise", "method.constrained=false", "limit=6"], ScriptedBackend(always_a))
    _run(root, "perrec/random", ["method=random", "limit=9"])
    _run(root, "seq/zero_shot", ["task=llmrec_sequential", "method=zero_shot", "limit=4", "audit.orders=3"],
         ScriptedBackend(first_candidates, batch_size=16))
    _run(root, "seq/popularity", ["task=llmrec_sequential", "method=popularity", "limit=4"])
    return root


def _m(root: Path, name: str) -> dict:
    return json.loads((root / name / "metrics.json").read_text())


def _audit_values(oa: dict, k_max: int, slots: int) -> list:
    """The order-audit row's numbers in column order, straight from metrics.json (None = not applicable)."""
    fs = oa.get("first_slot") or {}
    share = list(fs.get("share") or [])
    shown = min(slots, 10)
    vals = [oa["orders"]] + [oa["per_order"][j] if j < len(oa["per_order"]) else None for j in range(k_max)]
    vals += [oa["mean_over_orders"], oa["sd_over_orders"], oa["averaged_over_orders"], oa["kendalls_w_mean"],
             oa["kendalls_w_n"]]
    vals += [share[s] if s < len(share) else None for s in range(shown)]
    if slots > 10:
        vals.append(sum(share[10:]) if len(share) > 10 else None)
    return vals + [fs.get("n"), fs.get("chi2"), fs.get("p_value")]


def _texts(vals: list, styles: list[str]) -> list[str]:
    out = []
    for v, st in zip(vals, styles):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            out.append(MISSING)
        else:
            out.append(str(int(v)) if st == "int" else p_text(v) if st == "p" else fmt(v, int(st)))
    return out


def test_order_audit_table_equals_metrics_json(runs):
    rep = build_report([runs])
    t = next(t for t in rep.audit_tables if t.id == "order-audit")
    assert any(s.id == "order-audit" and t in s.tables for s in rep.sections)
    lw, seq = _m(runs, "perrec/listwise")["extra"]["order_audit"], _m(runs, "seq/zero_shot")["extra"]["order_audit"]
    rows = {tuple(lbl[:1]): cells for lbl, cells in t.rows}
    assert [lbl for lbl, _ in t.rows] == [["llmrec_sequential", "smollm2", "zero_shot", "ndcg@10"],
                                          ["perrec", "smollm2", "listwise", "ptc"]]
    slots = max(len(lw["first_slot"]["share"]), len(seq["first_slot"]["share"]))
    assert slots == 100  # sequential shows 100 candidates: slots 11+ summed into one column
    assert t.flat_columns()[:5] == ["K", "headline per display order · order 0", "headline per display order · order 1",
                                    "headline per display order · order 2", "headline per display order · order 3"]
    for key, oa in ((("perrec",), lw), (("llmrec_sequential",), seq)):
        got = [c.mean for c in rows[key]]
        want = [None if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in _audit_values(oa, 4, slots)]
        assert got == want
    # hand facts of the position-bound models: K, first slot always ranked first, rankings disagree across orders
    plw = rows[("perrec",)]
    assert plw[0].text == "4" and lw["orders"] == 4 and lw["per_order"][0] == _m(runs, "perrec/listwise")["metrics"]["ptc"]["mean"]
    assert lw["first_slot"]["share"][0] == 1.0 and lw["kendalls_w_mean"] < 1 and lw["first_slot"]["p_value"] < 1e-6
    assert rows[("llmrec_sequential",)][0].text == "3" and rows[("llmrec_sequential",)][4].missing  # no order 3
    assert seq["first_slot"]["share"][0] == 1.0


def test_pair_consistency_table_equals_metrics_json(runs):
    rep = build_report([runs])
    t = next(t for t in rep.audit_tables if t.id == "pair-order-consistency")
    b = _m(runs, "perrec/pairwise")["extra"]["pair_order_consistency"]
    assert [lbl for lbl, _ in t.rows] == [["perrec", "smollm2", "pairwise"]]
    cells = t.rows[0][1]
    assert [c.mean for c in cells] == [b["n"], b["consistent"], b["inconsistent"], b["first_slot_wins_inconsistent"],
                                       b["second_slot_wins_inconsistent"]]
    # always "[User A]": every comparison flips with the order, each inconsistency won by slot 1
    assert [c.text for c in cells][1:] == ["0.000", "1.000", "1.000", "0.000"] and b["n"] > 0


def _md_rows(md: str, title: str) -> list[list[str]]:
    block = md.split(f"### {title}")[1].split("\n_")[0]
    lines = [ln for ln in block.strip().splitlines() if ln.startswith("|")][2:]
    return [[c.strip() for c in ln.strip("|").split(" | ")] for ln in lines]


def test_markdown_html_csv_show_the_metrics_json_numbers(runs, tmp_path):
    written = write_report([runs], tmp_path / "rep")
    md = written["md"].read_text()
    assert "## Order audits" in md
    lw = _m(runs, "perrec/listwise")["extra"]["order_audit"]
    seq = _m(runs, "seq/zero_shot")["extra"]["order_audit"]
    styles = ["int"] + ["3"] * 4 + ["3", "3", "3", "3", "int"] + ["3"] * 11 + ["int", "2", "p"]
    rows = _md_rows(md, "Order audit: score, agreement and first slot across display orders")
    assert rows[0][4:] == _texts(_audit_values(seq, 4, 100), styles)
    assert rows[1][4:] == _texts(_audit_values(lw, 4, 100), styles)
    b = _m(runs, "perrec/pairwise")["extra"]["pair_order_consistency"]
    prow = _md_rows(md, "Pairwise order consistency")[0]
    assert prow == ["perrec", "smollm2", "pairwise", str(b["n"])] + [fmt(b[k]) for k in (
        "consistent", "inconsistent", "first_slot_wins_inconsistent", "second_slot_wins_inconsistent")]
    # HTML: each cell's data-value is the metrics.json number (repr), in column order
    page = written["html"].read_text()
    table = page.split('<table id="order-audit"')[1].split("</table>")[0]
    trs = table.split("<tbody>")[1].split("</tr>")[:2]
    for tr, oa in zip(trs, (seq, lw)):
        vals = [float(_html.unescape(v)) for v in re.findall(r'data-value="([^"]*)"', tr)]
        want = [float(v) for v in _audit_values(oa, 4, 100) if v is not None and not (isinstance(v, float) and math.isnan(v))]
        assert vals == want
    # tables.csv: the same numbers, one row per run
    csv = pd.read_csv(written["tables_csv"])
    oa_rows = csv[csv["table"] == "order-audit"]
    assert len(oa_rows) == 2
    r = oa_rows[oa_rows["task"] == "perrec"].iloc[0]
    assert r["K"] == 4 and r["headline per display order · order 2"] == pytest.approx(lw["per_order"][2], rel=1e-12)
    assert r["over orders · sd"] == pytest.approx(lw["sd_over_orders"], rel=1e-12)
    assert r["Kendall's W · W"] == pytest.approx(lw["kendalls_w_mean"], rel=1e-12)
    assert r["first-ranked display slot · p"] == pytest.approx(lw["first_slot"]["p_value"], rel=1e-12)
    pc = csv[csv["table"] == "pair-order-consistency"].iloc[0]
    assert pc["share of comparisons · consistent"] == b["consistent"]


def test_random_expected_rows_beside_sampled_metrics(runs, tmp_path):
    rep = build_report([runs])
    seq_t = next(t for t in rep.tables if t.section != "summary" and "llmrec_sequential" in t.id)
    exp = _m(runs, "seq/popularity")["extra"]["random_expectation"]
    assert exp == _m(runs, "seq/zero_shot")["extra"]["random_expectation"]
    label, cells = seq_t.rows[-1]
    assert label[0] == "random (expected)"
    metrics = [c[0] for c in seq_t.columns]
    assert "hr@10" in metrics and "ndcg@10" in metrics
    got = {c.metric: c for c in cells}
    for m in metrics:
        assert got[m].mean == exp[m] and got[m].ci_low is None and got[m].mark is None
        assert got[m].sources[0]["path"] == f"extra.random_expectation.{m}"
    # hand values for 1 positive among 100 candidates
    assert got["hr@10"].mean == pytest.approx(0.10)
    assert got["ndcg@10"].mean == pytest.approx(sum(1 / math.log2(r + 1) for r in range(1, 11)) / 100)
    # PerRecBench: PTC 0 in the reference table's overall column; slices and the Table-1 layout get no such row
    ref = next(t for t in rep.tables if t.id == "perrec-reference")
    lbl, cells = ref.rows[-1]
    assert lbl == ["random (expected)"] and ref.columns[-1] == ("all",)
    assert cells[-1].mean == 0.0 and all(c.missing for c in cells[:-1])
    assert all(lbl[0] != "random (expected)" for lbl, _ in next(t for t in rep.tables if t.id == "perrec-table1").rows)
    assert all(lbl[0] != "random (expected)" for lbl, _ in next(t for t in rep.tables if t.id == "summary").rows)
    # the written formats carry the row
    written = write_report([runs], tmp_path / "rep")
    csv = pd.read_csv(written["tables_csv"])
    row = csv[(csv["table"] == seq_t.id) & (csv["model"] == "random (expected)")].iloc[0]
    assert row["hr@10"] == exp["hr@10"] and row["ndcg@5"] == exp["ndcg@5"]
    md_row = [r for r in _md_rows(written["md"].read_text(), seq_t.title) if r[0] == "random (expected)"][0]
    assert md_row[2:] == [fmt(exp[m]) for m in metrics]


def test_no_audit_section_without_audited_runs(runs):
    rep = build_report([runs / "perrec" / "random", runs / "seq" / "popularity"])
    assert rep.audit_tables == [] and all(s.id != "order-audit" for s in rep.sections)
