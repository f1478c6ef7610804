"""`python -m recbench.report ... --latex` (issue 43): a booktabs .tex file per report table beside the HTML, each cell
as the HTML shows it (value, significance letters, reference marks, CI) because both are drawn from the same Table
objects; report.tex compiles with pdflatex where TeX (with booktabs) is installed, and the test skips cleanly
otherwise (scripts/test.sh installs texlive-latex-base and texlive-latex-recommended)."""
from __future__ import annotations

import re
import shutil
import subprocess
from html import unescape

import pytest

from recbench.report.__main__ import main as report_main
from recbench.report.latex import cell_tex, tex
from recbench.report.tables import Cell
from tests.publish.runs import model_free_sweep

pytestmark = pytest.mark.full


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("latex")
    sweep = model_free_sweep(root)
    assert report_main([str(sweep), "-o", str(root / "report"), "--latex"]) == 0
    return root / "report"


def _html_tables(html: str) -> dict[str, list[tuple[str, str, str]]]:
    """table id -> (mark, value, letters, CI) of each shown cell, in order, as the HTML page has them."""
    out = {}
    for tid, body in re.findall(r'<table id="([^"]+)" class="report">(.*?)</table>', html, re.S):
        cells = re.findall(r'<td class="num ?([^"]*)"[^>]*><span class="v">([^<]*)</span>(?:<span class="tie"[^>]*>[^<]*'
                           r'</span>)?(?:<sup class="cld" data-letters="([^"]*)">[^<]*</sup>)?(?:<span class="refmark">'
                           r'[^<]*</span>)?(?:<small>(\[[^<]*\])</small>)?', body)
        out[tid] = [(mark.split()[0] if mark else "", unescape(v), unescape(l), unescape(ci))
                    for mark, v, l, ci in cells]
    return out


def test_every_table_has_its_tex_with_the_htmls_values_letters_and_cis(report):
    html = _html_tables((report / "report.html").read_text(encoding="utf-8"))
    assert {"summary", "perrec-reference"} <= set(html)
    assert any(letters for cells in html.values() for _, _, letters, _ in cells)  # letters are there to compare
    for tid, cells in html.items():
        body = (report / "latex" / f"{re.sub(r'[^A-Za-z0-9-]+', '-', tid).strip('-')}.tex").read_text(encoding="utf-8")
        assert body.count(r"\toprule") == 1 and r"\bottomrule" in body
        pos = 0
        for mark, value, letters, ci in cells:  # each cell's pieces appear in the HTML's order
            shown = {"best": rf"\textbf{{{tex(value)}}}", "second": rf"\underline{{{tex(value)}}}"}.get(mark, tex(value))
            want = shown + (rf"\textsuperscript{{{tex(letters)}}}" if letters else "")
            at = body.find(want, pos)
            assert at >= 0, (tid, value, letters)
            if ci:
                assert body.find(tex(ci), at) >= 0, (tid, ci)
            pos = at + len(want)
    doc = (report / "report.tex").read_text(encoding="utf-8")
    assert r"\usepackage{booktabs}" in doc and doc.count(r"\input{latex/") == len(list((report / "latex").iterdir()))


def test_cells_are_marked_as_the_html_marks_them():
    assert cell_tex(Cell("m", mean=0.5, mark="best", letters="ab")) == r"\textbf{0.500}\textsuperscript{ab}"
    assert cell_tex(Cell("m", mean=0.5, mark="second", tie=True, ref_mark="▲")) == \
        r"\underline{0.500} {\scriptsize(tie)}$\blacktriangle$"
    assert cell_tex(Cell("m")) == "---"
    assert tex("hr@10 & 50%_x ↑ é ✓") == r"hr@10 \& 50\%\_x $\uparrow$ é ?"


def test_report_tex_compiles_with_pdflatex(report, tmp_path):
    if shutil.which("pdflatex") is None or shutil.which("kpsewhich") is None:
        pytest.skip("pdflatex is not installed (scripts/test.sh installs texlive-latex-base, texlive-latex-recommended)")
    if not subprocess.run(["kpsewhich", "booktabs.sty"], capture_output=True, text=True).stdout.strip():
        pytest.skip("booktabs.sty is not installed (Debian: texlive-latex-recommended)")
    work = tmp_path / "tex"
    shutil.copytree(report, work)
    p = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "report.tex"], cwd=work,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-3000:]
    assert (work / "report.pdf").stat().st_size > 1000
    assert "Missing character" not in (work / "report.log").read_text(encoding="latin-1")
