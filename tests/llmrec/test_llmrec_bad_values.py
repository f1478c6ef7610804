"""LLMRec values that would be scored wrongly are refused (a rating off the 1-5 star scale, an item a P5 sequence
names but the catalogue lacks), each one DataError naming the file and line; reviews of items the metadata lacks are
loaded with a counted one-line warning (docs/llmrec.md, "Bad input")."""
from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from recbench.api.errors import DataError
from recbench.run.construct import bundled_data
from recbench.tasks.llmrec.data import load_p5, load_reviews

pytestmark = pytest.mark.fast


@pytest.fixture()
def reviews(tmp_path) -> Path:
    d = tmp_path / "reviews"
    shutil.copytree(bundled_data("llmrec_sample/reviews"), d)
    return d


def _edit_review(d: Path, line: int, **fields) -> None:
    p = d / "reviews.jsonl.gz"
    lines = gzip.decompress(p.read_bytes()).decode().splitlines()
    rec = json.loads(lines[line - 1])
    rec.update(fields)
    lines[line - 1] = json.dumps(rec)
    p.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))


@pytest.mark.parametrize("rating,shown", [(7.0, "7"), (-1.0, "-1"), (0.0, "0"), (5.5, "5.5")])
def test_a_rating_off_the_star_scale_is_refused_naming_the_line(reviews, rating, shown):
    _edit_review(reviews, 5, rating=rating)
    with pytest.raises(DataError, match=rf"reviews.jsonl.gz:5: field 'rating' = {shown} is outside the 1-5 star scale"):
        load_reviews(str(reviews))


def test_the_scale_ends_are_ratings(reviews):
    _edit_review(reviews, 5, rating=1.0)
    _edit_review(reviews, 6, rating=5)
    df = load_reviews(str(reviews))
    assert df["rating"].between(1, 5).all() and len(df) == 614


def test_a_review_of_an_item_the_metadata_lacks_is_counted_and_warned(reviews, capsys):
    _edit_review(reviews, 7, parent_asin="NOT_IN_META")
    df = load_reviews(str(reviews))
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("recbench")]
    assert len(err) == 1 and err[0].startswith("recbench: warning: ")
    assert "1 of 614 reviews name an item the item metadata lacks (first: 'NOT_IN_META' at " in err[0]
    assert "reviews.jsonl.gz:7)" in err[0]
    assert df.loc[df["item_id"] == "NOT_IN_META", "item_title"].tolist() == ["NOT_IN_META"]  # the id stands in


def test_an_item_the_catalogue_lacks_is_refused_naming_item_file_and_line(tmp_path):
    d = tmp_path / "p5"
    shutil.copytree(bundled_data("llmrec_sample/p5"), d)
    p = d / "sequential_data.txt"
    lines = p.read_text().splitlines()
    user = lines[3].split()[0]
    lines[3] += " 987654"
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=rf"sequential_data.txt:4: user {user}'s sequence names item 987654, which "
                                        r"items.tsv does not list"):
        load_p5(str(d))
    assert len(load_p5(str(bundled_data("llmrec_sample/p5"))).sequences) == 300  # the clean sample loads
