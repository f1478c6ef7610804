"""The report's tables as booktabs LaTeX (`python -m recbench.report ... --latex`): one .tex file per table beside
the HTML (the cross-benchmark summary and each benchmark's tables), drawn from the same `Table` objects the HTML
shows (recbench/report/builder.py), so every value, CI, significance letter, reference mark and best mark is the
one the HTML shows; nothing is recomputed. `report.tex` is a document that inputs them all (pdflatex report.tex).

A table file needs only `\\usepackage{booktabs}` and `\\usepackage{graphicx}` (wide tables are scaled to the text
width) in the paper's preamble; amssymb for the reference marks."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from recbench.report.legends import legend_lines, table_metrics
from recbench.report.tables import Cell, Table

#: characters LaTeX reserves, written so that they print as themselves
_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
            "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}",
            ">": r"\textgreater{}", "|": r"\textbar{}"}
#: the report's own symbols in pdflatex's default fonts (amssymb for the triangles)
_SYMBOLS = {"—": "---", "–": "--", "×": r"$\times$", "·": r"$\cdot$", "▲": r"$\blacktriangle$",
            "▼": r"$\blacktriangledown$", "†": r"\dag{}", "★": r"$\star$", "≥": r"$\geq$", "≤": r"$\leq$",
            "±": r"$\pm$", "…": r"\ldots{}", "↑": r"$\uparrow$", "↓": r"$\downarrow$", "→": r"$\rightarrow$",
            "≈": r"$\approx$", "‡": r"\ddag{}", "•": r"$\bullet$", "’": "'", "‘": "`", "“": "``", "”": "''", "−": "-"}
#: more value columns than this: the tabular is scaled to the text width
_WIDE = 6

PREAMBLE = r"""\documentclass[10pt]{article}
\usepackage[utf8]{inputenc}
\usepackage[margin=1.5cm,landscape]{geometry}
\usepackage{booktabs}
\usepackage{graphicx}
\usepackage{amssymb}
\begin{document}
"""


def tex(text: Any) -> str:
    """Plain text as LaTeX: reserved characters escaped, the report's symbols mapped; any other character outside
    Latin-1 (which pdflatex's utf8 input knows) as '?'."""
    out = []
    for ch in str(text):
        if ch in _SPECIAL:
            out.append(_SPECIAL[ch])
        elif ch in _SYMBOLS:
            out.append(_SYMBOLS[ch])
        else:
            out.append(ch if ord(ch) < 256 else "?")
    return "".join(out)


def cell_tex(c: Cell) -> str:
    """One cell as the HTML shows it: the value (bold = best, underlined = second best), '(tie)', the significance
    letters as a superscript, the reference mark, the CI below in small type, and the summary's chosen method."""
    if c.missing:
        return "---"
    v = tex(c.text)
    v = rf"\textbf{{{v}}}" if c.mark == "best" else rf"\underline{{{v}}}" if c.mark == "second" else v
    if c.tie:
        v += r" {\scriptsize(tie)}"
    if c.letters:
        v += rf"\textsuperscript{{{tex(c.letters)}}}"
    if c.ref_mark:
        v += tex(c.ref_mark)
    extra = [x for x in (c.ci_text, c.note) if x]
    if extra:
        lines = r"\\ ".join(rf"{{\scriptsize {tex(x)}}}" for x in extra)
        v = rf"\begin{{tabular}}[t]{{@{{}}r@{{}}}}{v}\\ {lines}\end{{tabular}}"
    return v


def _header_rows(t: Table) -> list[str]:
    """The column header levels: \\multicolumn over spans with a \\cmidrule under each spanned group."""
    first = len(t.row_header)
    rows = []
    for level, hrow in enumerate(t.header):
        labels = [tex(h) if level == len(t.header) - 1 else "" for h in t.row_header]
        rules, col = [], first + 1
        for label, span in hrow:
            labels.append(rf"\multicolumn{{{span}}}{{c}}{{{tex(label)}}}" if span > 1 else tex(label))
            if span > 1:
                rules.append(rf"\cmidrule(lr){{{col}-{col + span - 1}}}")
            col += span
        rows.append(" & ".join(labels) + r" \\" + (" " + " ".join(rules) if rules else ""))
    if not t.header:  # a table without column levels: the row headers alone
        rows.append(" & ".join(tex(h) for h in t.row_header) + r" \\")
    return rows


def _label(table_id: str) -> str:
    return "tab:" + re.sub(r"[^A-Za-z0-9:-]+", "-", table_id).strip("-")


def table_tex(t: Table) -> str:
    """One report table as a booktabs `table` float: caption (the HTML's caption), label tab:<table id>, the metric
    legend below in small type."""
    spec = "l" * len(t.row_header) + "r" * len(t.columns)
    body = [rf"\begin{{tabular}}{{{spec}}}", r"\toprule", *_header_rows(t), r"\midrule"]
    for labels, cells in t.rows:
        body.append(" & ".join([tex(x) for x in labels] + [cell_tex(c) for c in cells]) + r" \\")
    body += [r"\bottomrule", r"\end{tabular}"]
    tabular = "\n".join(body)
    if len(t.columns) > _WIDE:
        tabular = "\\resizebox{\\linewidth}{!}{%\n" + tabular + "}"
    legend = legend_lines(table_metrics(t))
    notes = ("\n\\par\\smallskip{\\footnotesize " + r"\\ ".join(tex(x) for x in legend) + "}") if legend else ""
    return "\n".join([r"\begin{table}[htbp]", r"\centering", r"\small", rf"\caption{{{tex(t.title)}. {tex(t.caption)}}}",
                      rf"\label{{{_label(t.id)}}}", tabular + notes, r"\end{table}", ""])


def write_latex(sections: list[Any], out: Path, title: str) -> dict[str, Path]:
    """Every table of the report's sections as `<out>/latex/<table id>.tex`, and `<out>/report.tex` inputting them
    (compile with pdflatex in `out`); returns {'tex': report.tex, 'tex:<id>': each table}."""
    folder = out / "latex"
    folder.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    doc = [PREAMBLE, rf"\section*{{{tex(title)}}}"]
    for s in sections:
        if not s.tables:
            continue
        doc.append(rf"\subsection*{{{tex(s.title)}}}")
        for t in s.tables:
            name = re.sub(r"[^A-Za-z0-9-]+", "-", t.id).strip("-") or "table"  # \input reads a dot as an extension
            path = folder / f"{name}.tex"
            path.write_text(table_tex(t), encoding="utf-8")
            written[f"tex:{t.id}"] = path
            doc.append(rf"\input{{latex/{name}}}")
            doc.append(r"\clearpage")
    doc.append(r"\end{document}")
    written["tex"] = out / "report.tex"
    written["tex"].write_text("\n".join(doc) + "\n", encoding="utf-8")
    return written
