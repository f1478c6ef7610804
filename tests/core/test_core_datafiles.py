"""recbench.api.datafiles: every defect of a data file is one DataError naming the file, the line and the fix."""
from __future__ import annotations

import gzip

import pytest

from recbench.api.datafiles import (check_unique, finite, jsonl_records, numeric_columns, read_csv, read_json, read_text,
                                text_lines)
from recbench.api.errors import DataError

pytestmark = pytest.mark.fast


def test_text_lines_numbers_lines_and_skips_blanks(tmp_path):
    p = tmp_path / "a.txt"
    p.write_text("one\n\n  \nfour\n")
    assert list(text_lines(p)) == [(1, "one"), (4, "four")]


@pytest.mark.parametrize("content, needle", [
    (b"", "a.jsonl: the file is empty (0 bytes)"),
    (b"\n \n", "a.jsonl: the file holds no records"),
    (b'{"a": 1}\n{"b": "x\xff"}\n', "a.jsonl:2: not UTF-8 text (byte 0xff at column 9)"),
    (b'{"a": 1}\n{oops\n', "a.jsonl:2: not valid JSON"),
    (b'{"a": 1}\n[1, 2]\n', "a.jsonl:2: expected a JSON object, got list"),
])
def test_jsonl_defects_name_the_line(tmp_path, content, needle):
    p = tmp_path / "a.jsonl"
    p.write_bytes(content)
    with pytest.raises(DataError) as e:
        list(jsonl_records(p))
    assert needle in str(e.value)


def test_gzip_name_with_plain_bytes_or_a_cut_stream(tmp_path):
    p = tmp_path / "r.csv.gz"
    p.write_bytes(b"user_id,rating\nu1,5\n")
    with pytest.raises(DataError, match="r.csv.gz: cannot be read as gzip .* not gzip data: gzip it or drop the .gz"):
        read_text(p)
    p.write_bytes(gzip.compress(b"user_id,rating\n" * 100)[:30])
    with pytest.raises(DataError, match="damaged or cut short"):
        read_text(p)
    p.write_bytes(gzip.compress("a,b\n1,é\n".encode()))
    assert read_text(p) == "a,b\n1,é\n"


def test_non_utf8_in_a_gzip_file_names_line_and_column(tmp_path):
    p = tmp_path / "x.jsonl.gz"
    p.write_bytes(gzip.compress(b'{"a": 1}\n{"a": 2}\n{"a": "\xe9t\xe9"}\n'))
    with pytest.raises(DataError, match=r"x.jsonl.gz:3: not UTF-8 text \(byte 0xe9 at column 8\)"):
        list(jsonl_records(p))


def test_read_json_refuses_a_key_given_twice_and_names_syntax_lines(tmp_path):
    p = tmp_path / "g.json"
    p.write_text('{"i1": [1],\n "i1": [2]}')
    with pytest.raises(DataError, match="key 'i1' appears twice"):
        read_json(p)
    p.write_text('{"a": 1,\n "b": }')
    with pytest.raises(DataError, match=r"g.json:2: not valid JSON"):
        read_json(p)
    p.write_text('{"a": NaN}')  # NaN parses (Python's json): finite() refuses it where a number is needed
    assert read_json(p)["a"] != read_json(p)["a"]


@pytest.mark.parametrize("value, shown", [(None, "null"), ("abc", '"abc"'), (float("nan"), "NaN"),
                                          (float("inf"), "Infinity"), (True, "true"), ([1], "[1]")])
def test_finite_refuses_what_is_not_a_finite_number(value, shown):
    with pytest.raises(DataError, match=f"f.jsonl:3: field 'rating' = {shown.replace('[', '.').replace(']', '.')} "
                                        "is not a finite number"):
        finite(value, "f.jsonl:3", "rating")


def test_finite_accepts_numbers_and_numeric_text():
    assert finite(4, "w", "r") == 4.0 and finite("3.5", "w", "r") == 3.5 and finite(-0.0, "w", "r") == 0.0


def test_numeric_columns_name_the_file_line_of_the_first_bad_row(tmp_path):
    p = tmp_path / "ratings.csv"
    p.write_text("user_id,item_id,rating,timestamp\nu1,i1,5,10\nu1,i2,,11\nu2,i1,four,12\n")
    df = read_csv(p)
    with pytest.raises(DataError, match=r"ratings.csv:3: column 'rating' is empty, not a finite number \(2 such row"):
        numeric_columns(df, ["rating", "timestamp"], p)
    p.write_text("user_id,item_id,rating,timestamp\nu1,i1,5,10\nu1,i2,4,soon\n")
    with pytest.raises(DataError, match=r"ratings.csv:3: column 'timestamp' is 'soon'"):
        numeric_columns(read_csv(p), ["rating", "timestamp"], p)
    p.write_text("user_id,item_id,rating,timestamp\nu1,i1,5,10\n")
    out = numeric_columns(read_csv(p), ["rating"], p)
    assert out["rating"].tolist() == [5.0]


def test_a_byte_order_mark_is_not_part_of_the_first_column(tmp_path):
    p = tmp_path / "t.csv"
    p.write_bytes(b"\xef\xbb\xbfuser_id,rating\nu1,5\n")
    assert list(read_csv(p).columns) == ["user_id", "rating"]


def test_read_csv_refuses_an_empty_or_ragged_table(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("\n\n")
    with pytest.raises(DataError, match="t.csv: the file holds no header and no rows"):
        read_csv(p)
    p.write_text('a,b\n1,"unclosed\n')
    with pytest.raises(DataError, match="t.csv: not a well-formed table"):
        read_csv(p)


def test_check_unique_names_both_places():
    check_unique([("a", "f:1"), ("b", "f:2")], "group_id")
    with pytest.raises(DataError, match="f:3: group_id 'a' was already given at f:1"):
        check_unique([("a", "f:1"), ("b", "f:2"), ("a", "f:3")], "group_id")
