"""The explanation-judging data: HTML stripped as a reader sees it, the bundled sample loads, and every defect of the
ratings file (a rating outside 1-5, a missing column, an empty value) is one `recbench:` line naming the file, the
column and the fix, with nothing written."""
from __future__ import annotations

import shutil

import pandas as pd
import pytest
from tests.helpers import compose_cfg, run_cli

from recbench.api.errors import DataError
from recbench.run.construct import build_task, bundled_data
from recbench.tasks.explanation_judging.data import strip_html
from recbench.tasks.explanation_judging.settings import ASPECTS

pytestmark = pytest.mark.fast

FILE = "df_explanation_selected.csv"


def test_tooltips_and_entities_are_stripped():
    raw = ('这部电影的导演是<span style="text-decoration:underline" data-toggle="tooltip" data-html="true" '
           "title='<img src=\"/static/figures/attribute/c_1.jpg\" style=\"height:200px\"/>'>史蒂文·斯皮尔伯格 </span>"
           " &amp; more")
    assert strip_html(raw) == "这部电影的导演是 史蒂文·斯皮尔伯格 & more"
    assert strip_html("和你兴趣相似的用户中，看过这部电影的87.3%都喜欢") == "和你兴趣相似的用户中，看过这部电影的87.3%都喜欢"


def test_the_bundled_sample_loads_one_example_per_explanation_and_aspect():
    task = build_task(compose_cfg(["task=explanation_judging"]))
    exs = task.load()
    df = pd.read_csv(bundled_data(f"explanation_judging_sample/{FILE}"))
    assert len(exs) == 4 * len(df) and [e.meta["aspect"] for e in exs[:4]] == list(ASPECTS)
    e = exs[0]
    assert set(e.meta) == {"user_id", "movie_id", "explanation_type", "aspect"}
    assert "<" not in " ".join(x.data["explanation"] for x in exs)
    assert e.data["rating"] == int(df[ASPECTS[0]].iloc[0]) and task.truth(e) == {"rating": e.data["rating"]}
    msgs = task.messages(e)
    user = msgs[-1]["content"]
    assert e.data["movie_title"] in user and e.data["explanation"] in user
    assert "This explanation is convincing to me." in user and "1" in user and "5" in user


def _planted(tmp_path, edit):
    d = tmp_path / "data"
    shutil.copytree(bundled_data("explanation_judging_sample"), d)
    df = pd.read_csv(d / FILE, dtype=str)
    edit(df)
    df.to_csv(d / FILE, index=False)
    return d


CASES = {
    "rating 6": (lambda df: df.__setitem__("transparency", df["transparency"].where(df.index != 4, "6")),
                 f"{FILE}:6: column 'transparency' is 6, not a whole rating from 1 to 5"),
    "rating 0": (lambda df: df.__setitem__("satisfaction", df["satisfaction"].where(df.index != 0, "0")),
                 f"{FILE}:2: column 'satisfaction' is 0, not a whole rating from 1 to 5"),
    "NaN rating": (lambda df: df.__setitem__("persuasiveness", df["persuasiveness"].where(df.index != 2, None)),
                   f"{FILE}:4: column 'persuasiveness' is empty, not a whole rating from 1 to 5"),
    "missing column": (lambda df: df.pop("interest_accuracy"),
                       f"{FILE}: missing column(s) ['interest_accuracy']"),
    "empty explanation": (lambda df: df.__setitem__("explanation", df["explanation"].where(df.index != 1, None)),
                          f"{FILE}:3: column 'explanation' is empty"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_defect_is_one_line_naming_file_column_and_fix(tmp_path, capfd, monkeypatch, case):
    edit, message = CASES[case]
    d = _planted(tmp_path, edit)
    with pytest.raises(DataError) as e:
        build_task(compose_cfg(["task=explanation_judging", f"task.data_dir={d}"])).load()
    assert message in str(e.value) and "Fix" in str(e.value), str(e.value)
    monkeypatch.setenv("RECBENCH_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("RECBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    r = run_cli(["task=explanation_judging", "method=random_judge", f"task.data_dir={d}", "run.progress=false"], capfd)
    assert r.code == 2 and message in r.one_error_line(), r.err
    written = [p for p in (tmp_path / "runs").rglob("*") if p.is_file()] if (tmp_path / "runs").exists() else []
    assert not written, written


def test_a_missing_folder_names_the_setting(tmp_path):
    with pytest.raises(DataError, match="task.data_dir"):
        build_task(compose_cfg(["task=explanation_judging", f"task.data_dir={tmp_path / 'nowhere'}"])).load()
