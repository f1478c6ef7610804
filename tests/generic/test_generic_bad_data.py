"""A config-only benchmark refuses data it cannot score and templates that reach outside themselves: a missing, empty
or NaN ground truth, a non-number where the parser reads numbers, a file that is not UTF-8 or JSON, a repeated id,
and `{% include %}` / `{% import %}` / `{% extends %}` in an inline template (one error naming the record or key)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from recbench.run.construct import build_task, bundled_data
from recbench.api.errors import ConfigError, DataError
from tests.helpers import compose_cfg

pytestmark = pytest.mark.fast


def _yesno(tmp_path: Path, text: str | bytes, *overrides: str):
    p = tmp_path / "rows.jsonl"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return build_task(compose_cfg(["task=generic_yesno", "method=random", f"task.data.path={p}", *overrides]))


def _rows() -> list[str]:
    return Path(bundled_data("generic_sample/yesno.jsonl")).read_text().splitlines()


def _with(i: int, **kw) -> str:
    rows = _rows()
    rows[i] = json.dumps({**json.loads(rows[i]), **kw})
    return "\n".join(rows) + "\n"


@pytest.mark.parametrize("text, error, needle", [
    (_with(2, label=None), DataError, "rows.jsonl: record 3 (id u03): the ground truth 'label' is missing or empty"),
    (_with(4, label=""), DataError, "record 5 (id u05): the ground truth 'label' is missing or empty"),
    (_with(1, label=float("nan")), DataError, "record 2 (id u02): the ground truth 'label' is missing or empty"),
    (_with(3, id="u01"), ConfigError, "id 'u01' is given twice in"),
    ("\n".join(_rows()[:2] + ["{oops"]) + "\n", DataError, "rows.jsonl:3: not valid JSON"),
    ("\n".join(_rows()[:2] + ['"just text"']) + "\n", DataError, "rows.jsonl:3: expected a JSON object, got str"),
    ("\n".join(_rows()).replace("Interstellar", "Inter\udcffstellar") + "\n", DataError, "rows.jsonl:1: not UTF-8 text"),
    ("", DataError, "rows.jsonl: the file is empty"),
])
def test_bad_rows_are_refused_naming_the_record(tmp_path, text, error, needle):
    raw = text.encode("utf-8", errors="surrogateescape")
    with pytest.raises(error) as e:
        _yesno(tmp_path, raw).load()
    assert needle in str(e.value), str(e.value)


@pytest.mark.parametrize("rating, needle", [("five", "field 'rating' = \"five\" is not a finite number"),
                                            ("", "the ground truth 'rating' is missing or empty")])
def test_a_number_parser_needs_numeric_ground_truth(tmp_path, rating, needle):
    p = tmp_path / "r.csv"
    p.write_text(f"id,history,item,rating\n1,a,b,4\n2,a,c,{rating}\n")
    task = build_task(compose_cfg(["task=generic_rating_csv", "method=zero_shot", f"task.data.path={p}"]))
    with pytest.raises(DataError, match=r"r.csv: record 2 \(id 2\): "):
        task.load()
    with pytest.raises(DataError) as e:
        task.load()
    assert needle in str(e.value)


def test_the_bundled_rows_load(tmp_path):
    assert len(_yesno(tmp_path, "\n".join(_rows()) + "\n").load()) == 12


@pytest.mark.parametrize("template", ['{% include "/etc/hostname" %}', '{% import "macros.j2" as m %}{{ candidate }}',
                                      '{% extends "base.j2" %}'])
def test_an_inline_template_cannot_reach_other_files(tmp_path, template):
    (tmp_path / "macros.j2").write_text("{% macro x() %}x{% endmacro %}")
    task = _yesno(tmp_path, "\n".join(_rows()) + "\n", f"task.prompt.template='{template}'")
    with pytest.raises(ConfigError, match=r"task.prompt.template: TemplateNotFound: '.*': a template given as text "
                                          r"cannot include, import or extend another template"):
        task.load()


def test_a_broken_parquet_file_is_a_data_error(tmp_path):
    pytest.importorskip("pyarrow")
    p = tmp_path / "rows.parquet"
    p.write_text("not parquet")
    task = build_task(compose_cfg(["task=generic_yesno", "method=random", f"task.data.path={p}"]))
    with pytest.raises(DataError, match="rows.parquet: cannot be read as parquet"):
        task.load()
