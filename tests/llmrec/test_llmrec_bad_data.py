"""LLMRec data that cannot be scored is refused: each defect planted in a copy of the bundled sample (Amazon Reviews
2023 format, P5 format, frozen candidates) is one DataError naming the file and the line or record."""
from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from recbench.run.construct import bundled_data
from recbench.api.errors import DataError
from recbench.tasks.llmrec.candidates import CandidateFileError, load_candidates
from recbench.tasks.llmrec.data import load_p5, load_reviews

pytestmark = pytest.mark.fast


@pytest.fixture()
def reviews(tmp_path) -> Path:
    d = tmp_path / "reviews"
    shutil.copytree(bundled_data("llmrec_sample/reviews"), d)
    return d


@pytest.fixture()
def p5(tmp_path) -> Path:
    d = tmp_path / "p5"
    shutil.copytree(bundled_data("llmrec_sample/p5"), d)
    return d


def _edit_review(d: Path, line: int, fn) -> None:
    p = d / "reviews.jsonl.gz"
    lines = gzip.decompress(p.read_bytes()).decode().splitlines()
    rec = json.loads(lines[line - 1])
    fn(rec)
    lines[line - 1] = json.dumps(rec)
    p.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))


REVIEW_CASES = {
    "text rating": (lambda d: _edit_review(d, 4, lambda r: r.update(rating="five")),
                    "reviews.jsonl.gz:4: field 'rating' = \"five\" is not a finite number"),
    "NaN rating": (lambda d: _edit_review(d, 2, lambda r: r.update(rating=float("nan"))),
                   "reviews.jsonl.gz:2: field 'rating' = NaN"),
    "null rating": (lambda d: _edit_review(d, 5, lambda r: r.update(rating=None)), "reviews.jsonl.gz:5: field 'rating' = null"),
    "text timestamp": (lambda d: _edit_review(d, 3, lambda r: r.update(timestamp="later")),
                       "reviews.jsonl.gz:3: field 'timestamp' = \"later\""),
    "missing text": (lambda d: _edit_review(d, 6, lambda r: r.pop("text")), "reviews.jsonl.gz:6: the review lacks field(s) ['text']"),
    "not gzip": (lambda d: (d / "reviews.jsonl.gz").write_bytes(gzip.decompress((d / "reviews.jsonl.gz").read_bytes())),
                 "reviews.jsonl.gz: cannot be read as gzip"),
    "0 bytes": (lambda d: (d / "reviews.jsonl.gz").write_bytes(b""), "reviews.jsonl.gz: the file is empty (0 bytes)"),
    "no records": (lambda d: (d / "reviews.jsonl.gz").write_bytes(gzip.compress(b"\n")), "the file holds no records"),
    "not UTF-8": (lambda d: (d / "reviews.jsonl.gz").write_bytes(gzip.compress(
        gzip.decompress((d / "reviews.jsonl.gz").read_bytes()).replace(b'"text": "', b'"text": "\xff', 1))),
        "reviews.jsonl.gz:1: not UTF-8 text"),
    "bad JSON line": (lambda d: (d / "reviews.jsonl.gz").write_bytes(gzip.compress(
        b'{"oops\n' + gzip.decompress((d / "reviews.jsonl.gz").read_bytes()))), "reviews.jsonl.gz:1: not valid JSON"),
    "meta not UTF-8": (lambda d: (d / "meta.jsonl.gz").write_bytes(gzip.compress(
        b"\xff" + gzip.decompress((d / "meta.jsonl.gz").read_bytes()))), "meta.jsonl.gz:1: not UTF-8 text"),
}


@pytest.mark.parametrize("case", sorted(REVIEW_CASES))
def test_bad_review_file_is_refused_naming_the_line(reviews, case):
    fn, needle = REVIEW_CASES[case]
    fn(reviews)
    with pytest.raises(DataError) as e:
        load_reviews(str(reviews))
    assert needle in str(e.value), str(e.value)


def test_grouped_review_json_names_the_user_and_review(tmp_path):
    d = tmp_path / "grouped"
    d.mkdir()
    users = [{"user_id": "A", "reviews": [{"parent_asin": "i1", "rating": 5, "title": "t", "text": "x", "timestamp": 1},
                                          {"parent_asin": "i2", "rating": None, "title": "t", "text": "y", "timestamp": 2}]}]
    (d / "filtered_user_reviews.json").write_text(json.dumps(users))
    with pytest.raises(DataError, match=r"filtered_user_reviews.json: user A review 2: field 'rating' = null"):
        load_reviews(str(d))


def test_the_clean_copies_load(reviews, p5):
    assert len(load_reviews(str(reviews))) == 614 and len(load_p5(str(p5)).sequences) == 300


P5_CASES = {
    "user twice": (lambda d: (d / "sequential_data.txt").write_text(
        (d / "sequential_data.txt").read_text() + "7 1 2 3\n"), "sequential_data.txt:301: user '7' was already given at "),
    "0 bytes": (lambda d: (d / "sequential_data.txt").write_text(""), "sequential_data.txt: the file is empty"),
    "not UTF-8": (lambda d: (d / "sequential_data.txt").write_bytes(
        (d / "sequential_data.txt").read_bytes().replace(b"\n", b"\n\xfe", 1)), "sequential_data.txt:2: not UTF-8 text"),
    "one item": (lambda d: (d / "sequential_data.txt").write_text("1 5\n"), "sequential_data.txt:1: user 1 has 1 item(s)"),
    "titles 0 bytes": (lambda d: (d / "items.tsv").write_text(""), "items.tsv: the file is empty"),
}


@pytest.mark.parametrize("case", sorted(P5_CASES))
def test_bad_p5_file_is_refused_naming_the_line(p5, case):
    fn, needle = P5_CASES[case]
    fn(p5)
    with pytest.raises(DataError) as e:
        load_p5(str(p5))
    assert needle in str(e.value), str(e.value)


def test_a_damaged_candidate_file_is_a_user_error(p5):
    """CandidateFileError is a DataError (one line, exit 2), not a crash; a torn line without a recorded hash names it."""
    data = load_p5(str(p5))
    path = p5 / "candidates_sequential.jsonl.gz"
    raw = gzip.decompress(path.read_bytes())
    path.write_bytes(gzip.compress(raw[:-40]))
    (p5 / "candidates_sequential.jsonl.gz.manifest.json").unlink()
    assert issubclass(CandidateFileError, DataError)
    with pytest.raises(CandidateFileError, match=r"sha256 .* != recorded"):
        load_candidates(path, "0" * 64, data)
    with pytest.raises(CandidateFileError, match=r"candidates_sequential.jsonl.gz:300: not valid JSON"):
        load_candidates(path, None, data)
    path.write_bytes(raw)  # the plain bytes under a .gz name
    with pytest.raises(DataError, match=r"candidates_sequential.jsonl.gz: cannot be read as gzip"):
        load_candidates(path, None, data)
