"""The probe's readers on the real data sets in ../shared/data (skipped when absent): catalogue sizes, titles,
popularity and histories as the files hold them."""
from __future__ import annotations

import pytest

from recbench.tasks.memorization.catalogue import read_catalogue

pytestmark = pytest.mark.full  # reads 100k-200k ratings: seconds each


def test_real_movielens_100k(shared_data):
    cat = read_catalogue("ml100k", str(shared_data / "ml-100k"), "item_id")
    assert len(cat.items) == 1682 and cat.items["1"] == "Toy Story (1995)"
    assert cat.items["12"] == "Usual Suspects, The (1995)"
    pop = cat.popularity()
    assert pop["50"] == 583 and max(pop.values()) == 583  # Star Wars, the most rated film of ml-100k
    assert cat.deciles()["50"] == 10
    assert len(cat.histories()) == 943 and sum(map(len, cat.histories().values())) == 100_000


def test_real_amazon_beauty(shared_data):
    p5 = read_catalogue("p5", str(shared_data / "beauty_p5"), "asin")
    assert len(p5.items) == 12_094  # 12,101 items, 7 without a title
    assert p5.items["B004756YJA"] == "OPI Nail Lacquer, Simmer and Shimmer, 0.5-Fluid Ounce"
    assert len(p5.histories()) == 22_363
    az = read_catalogue("amazon2023", str(shared_data / "amazon2023_all_beauty"), "parent_asin")
    assert len(az.items) == 356 and len(az.interactions) == 2535
    ml1m = read_catalogue("movielens_dat", str(shared_data / "recbench_plus"), "MovieID")
    assert len(ml1m.items) == 3883 and ml1m.deciles() == {} and ml1m.histories() == {}
