"""PerRecBench ground truth that cannot be scored is refused, never ranked: each defect planted in a copy of the
bundled sample (recbench format and the released layout) is one DataError naming the file and the line or record."""
from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from recbench.store import derived_cache
from recbench.run.construct import bundled_data
from recbench.api.errors import ConfigError, DataError
from recbench.tasks.perrec.data import load_examples
from recbench.tasks.perrec.released import load_released, write_released

pytestmark = pytest.mark.fast


@pytest.fixture(autouse=True)
def no_derived_cache():
    """Every load parses the planted files (the derived-data cache would answer a second load from disk)."""
    derived_cache.configure(None)
    yield
    derived_cache._DIR.clear()


@pytest.fixture()
def data(tmp_path) -> Path:
    d = tmp_path / "data"
    shutil.copytree(bundled_data("perrec_sample"), d)
    return d


def _edit_group(d: Path, line: int, fn) -> None:
    p = d / "groups.jsonl"
    lines = p.read_text().splitlines()
    rec = json.loads(lines[line - 1])
    fn(rec)
    lines[line - 1] = json.dumps(rec)
    p.write_text("\n".join(lines) + "\n")


def _edit_ratings(d: Path, row: int, col: int, value: str) -> None:
    p = d / "ratings.csv.gz"
    lines = gzip.decompress(p.read_bytes()).decode().splitlines()
    parts = lines[row - 1].split(",")
    parts[col] = value
    lines[row - 1] = ",".join(parts)
    p.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))


def _dup_member(r):
    r["users"].append(dict(r["users"][0]))


GROUP_CASES = {
    "NaN rating": (lambda r: r["users"][0].update(rating=float("nan")), "groups.jsonl:2: member u0215: field 'rating' = NaN"),
    "null rating": (lambda r: r["users"][1].update(rating=None), "groups.jsonl:2: member u0113: field 'rating' = null"),
    "text rating": (lambda r: r["users"][0].update(rating="five"), "field 'rating' = \"five\" is not a finite number"),
    "infinite rating": (lambda r: r["users"][0].update(rating=float("inf")), "field 'rating' = Infinity"),
    "no rating": (lambda r: r["users"][0].pop("rating"), "groups.jsonl:2: member u0215: field 'rating' = null"),
    "NaN relative_rating": (lambda r: r["users"][0].update(relative_rating=float("nan")), "field 'relative_rating' = NaN"),
    "NaN avg_rating": (lambda r: r["users"][1].update(avg_rating=float("nan")), "field 'avg_rating' = NaN"),
    "text member timestamp": (lambda r: r["users"][0].update(timestamp="soon"), "field 'timestamp' = \"soon\""),
    "text group timestamp": (lambda r: r.update(timestamp="soon"), "groups.jsonl:2: field 'timestamp' = \"soon\""),
    "NaN item average": (lambda r: r.update(item_avg_rating=float("nan")), "field 'item_avg_rating' = NaN"),
    "user twice": (_dup_member, "groups.jsonl:2: member 3: user 'u0215' was already given at"),
    "one member": (lambda r: r.update(users=r["users"][:1]), "groups.jsonl:2: field 'users' must list at least 2 "
                                                             "members to rank (got 1)"),
    "no members": (lambda r: r.update(users=[]), "must list at least 2 members to rank (got 0)"),
    "members not a list": (lambda r: r.update(users="u1,u2"), "must list at least 2 members to rank (got str)"),
    "member without id": (lambda r: r["users"][1].pop("user_id"), "groups.jsonl:2: member 2 is not an object with a 'user_id'"),
    "no users field": (lambda r: r.pop("users"), "groups.jsonl:2: the group has no field 'users'"),
    "duplicate group_id": (lambda r: r.update(group_id="easy-0000"), "groups.jsonl:2: group_id 'easy-0000' was "
                                                                     "already given at"),
}


@pytest.mark.parametrize("case", sorted(GROUP_CASES))
def test_bad_group_is_refused_naming_file_and_line(data, case):
    fn, needle = GROUP_CASES[case]
    _edit_group(data, 2, fn)
    with pytest.raises(DataError) as e:
        load_examples(str(data), 4, 200)
    assert needle in str(e.value), str(e.value)
    assert str(data) in str(e.value)


def test_duplicate_group_id_names_both_lines(data):
    _edit_group(data, 7, lambda r: r.update(group_id="easy-0001"))
    with pytest.raises(DataError, match=r"groups.jsonl:7: group_id 'easy-0001' was already given at .*groups.jsonl:2;"):
        load_examples(str(data), 4, 200)


FILE_CASES = {
    "groups 0 bytes": (lambda d: (d / "groups.jsonl").write_text(""), "groups.jsonl: the file is empty (0 bytes)"),
    "groups blank": (lambda d: (d / "groups.jsonl").write_text("\n\n"), "groups.jsonl: the file holds no records"),
    "groups not UTF-8": (lambda d: (d / "groups.jsonl").write_bytes(
        (d / "groups.jsonl").read_bytes().replace(b"easy-0003", b"easy-\xe90003")), "groups.jsonl:4: not UTF-8 text"),
    "groups line a list": (lambda d: (d / "groups.jsonl").write_text(
        "[1, 2]\n" + (d / "groups.jsonl").read_text()), "groups.jsonl:1: expected a JSON object, got list"),
    "items not UTF-8": (lambda d: (d / "items.jsonl").write_bytes(
        (d / "items.jsonl").read_bytes().replace(b'"i0001"', b'"i0\xff01"')), "items.jsonl:2: not UTF-8 text"),
    "items 0 bytes": (lambda d: (d / "items.jsonl").write_text(""), "items.jsonl: the file is empty"),
    "ratings not gzip": (lambda d: (d / "ratings.csv.gz").write_bytes(gzip.decompress((d / "ratings.csv.gz").read_bytes())),
                         "ratings.csv.gz: cannot be read as gzip"),
    "ratings 0 bytes": (lambda d: (d / "ratings.csv.gz").write_bytes(b""), "ratings.csv.gz: the file is empty (0 bytes)"),
    "ratings cut short": (lambda d: (d / "ratings.csv.gz").write_bytes((d / "ratings.csv.gz").read_bytes()[:200]),
                          "the gzip stream is damaged or cut short"),
    "ratings text rating": (lambda d: _edit_ratings(d, 6, 2, "five"), "ratings.csv.gz:6: column 'rating' is 'five'"),
    "ratings empty rating": (lambda d: _edit_ratings(d, 9, 2, ""), "ratings.csv.gz:9: column 'rating' is empty"),
    "ratings NaN rating": (lambda d: _edit_ratings(d, 4, 2, "NaN"), "ratings.csv.gz:4: column 'rating' is "),
    "ratings text timestamp": (lambda d: _edit_ratings(d, 3, 3, "later"), "ratings.csv.gz:3: column 'timestamp' is 'later'"),
}


@pytest.mark.parametrize("case", sorted(FILE_CASES))
def test_bad_file_is_refused_naming_it(data, case):
    fn, needle = FILE_CASES[case]
    fn(data)
    with pytest.raises(DataError) as e:
        load_examples(str(data), 4, 200)
    assert needle in str(e.value), str(e.value)


def test_the_clean_copy_loads_every_group(data):
    assert len(load_examples(str(data), 4, 200)) == 120


def test_a_difficulty_the_data_lacks_is_refused(data):
    from tests.helpers import compose_cfg
    from recbench.run.construct import build_task

    task = build_task(compose_cfg(["method=bm25_history", f"task.data_dir={data}", "task.difficulties=[easy,extreme]"]))
    with pytest.raises(ConfigError, match=r"task.difficulties: 'extreme' is not a difficulty of the groups in .* "
                                          r"Difficulties there: easy, hard, medium"):
        task.load()


# ---- the released layout ---------------------------------------------------------------------------------
@pytest.fixture()
def released(tmp_path) -> Path:
    src = Path(bundled_data("perrec_sample"))
    test = list(load_examples(str(src), 4, 200))
    ratings = pd.read_csv(src / "ratings.csv.gz")
    items = pd.read_json(src / "items.jsonl", lines=True, dtype=False)
    out = write_released(tmp_path / "rel", test, [], ratings, items)
    load_released.cache_clear()
    return out


def _edit_easy(d: Path, fn) -> None:
    p = d / "item2group_avg_diff_sample-easy.json"
    groups = json.loads(p.read_text())
    fn(groups)
    p.write_text(json.dumps(groups))


RELEASED_CASES = {
    "NaN relative rating": (lambda d: _edit_easy(d, lambda g: g["i0000"][0][1].update(relative_rating=float("nan"))),
                            "record 'i0000' group 0 member 1: field 'relative_rating' = NaN"),
    "text rating": (lambda d: _edit_easy(d, lambda g: g["i0000"][0][0].update(rating="x")), "field 'rating' = \"x\""),
    "NaN item average": (lambda d: _edit_easy(d, lambda g: g["i0000"][0][0].update(item_avg_rating=float("nan"))),
                         "field 'item_avg_rating' = NaN"),
    "user twice": (lambda d: _edit_easy(d, lambda g: g["i0000"][0].append(dict(g["i0000"][0][0]))),
                   "record 'i0000' group 0 member 2: user 'u0192' was already given at"),
    "one member": (lambda d: _edit_easy(d, lambda g: g["i0000"][0].pop()), "a group must be a list of at least 2 members"),
    "NaN history rating": (lambda d: (d / "userid2history.json").write_text(
        (d / "userid2history.json").read_text().replace('"rating": 5.0', '"rating": NaN', 1)),
        "userid2history.json: record 'u0000' entry 0: field 'rating' = NaN"),
    "item key twice": (lambda d: (d / "item2group_avg_diff_sample-easy.json").write_text(
        (d / "item2group_avg_diff_sample-easy.json").read_text().replace('{"i0000":', '{"i0002": [], "i0000":', 1)),
        "key 'i0002' appears twice in one JSON object"),
    "not UTF-8": (lambda d: (d / "userid2history.json").write_bytes(b"\xff" + (d / "userid2history.json").read_bytes()),
                  "userid2history.json:1: not UTF-8 text"),
    "0 bytes": (lambda d: (d / "item2group_avg_diff_sample-hard.json").write_text(""), "hard.json: the file is empty"),
}


@pytest.mark.parametrize("case", sorted(RELEASED_CASES))
def test_bad_released_file_is_refused_naming_the_record(released, case):
    fn, needle = RELEASED_CASES[case]
    fn(released)
    with pytest.raises(DataError) as e:
        load_released(str(released), 4, 200)
    assert needle in str(e.value), str(e.value)


# ---- the builder (python -m recbench.build perrec) -------------------------------------------------------------
def _movielens(tmp_path: Path, rating_cell: str) -> Path:
    d = tmp_path / "ml"
    d.mkdir()
    (d / "movies.csv").write_text("movieId,title,genres\n1,A (1999),Drama\n2,B (2001),Comedy\n")
    (d / "ratings.csv").write_text(f"userId,movieId,rating,timestamp\n1,1,4.0,100\n1,2,{rating_cell},200\n2,1,3.5,150\n")
    return d


@pytest.mark.parametrize("cell, needle", [("four", "ratings.csv:3: column 'rating' is 'four', not a finite number"),
                                          ("", "ratings.csv:3: column 'rating' is empty, not a finite number")])
def test_builder_refuses_a_rating_it_would_drop_or_fail_on(tmp_path, capsys, cell, needle):
    """Before: '' was dropped silently and 'four' was a ValueError traceback; now one line and exit 2."""
    from recbench.tasks.perrec.build import main

    d = _movielens(tmp_path, cell)
    with pytest.raises(SystemExit) as e:
        main(["--source", "movielens", "--input", str(d), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and err[0].startswith("recbench: error: ") and needle in err[0], err
    assert not (tmp_path / "out").exists()


def test_builder_refuses_a_review_line_without_a_number(tmp_path, capsys):
    from recbench.tasks.perrec.build import main

    p = tmp_path / "reviews.jsonl"
    p.write_text('{"user_id": "u", "parent_asin": "a", "rating": 5, "timestamp": 1}\n'
                 '{"user_id": "u", "parent_asin": "b", "rating": NaN, "timestamp": 2}\n')
    with pytest.raises(SystemExit) as e:
        main(["--source", "amazon-jsonl", "--input", str(p), "--out", str(tmp_path / "out")])
    assert e.value.code == 2 and "reviews.jsonl:2: field 'rating' = NaN" in capsys.readouterr().err
