"""separated_chains finds each block's greedy chain the same way whether its rows come sorted by block and relative
rating (the duckdb engine's stream, which skips the sort) or in any order (the pandas engine); hand-computed chains."""
from __future__ import annotations

import pandas as pd
import pytest

from recbench.tasks.perrec.build.pandas_engine import separated_chains

pytestmark = pytest.mark.fast

#: block 0: -1.0, then the first more than 0.6 above it (0.0), then above 0.6 (0.7); block 1: 0.2 is not 0.6 above 0.1;
#: block 2: two users at the same relative rating, the first in the rows' order starts the chain
E = pd.DataFrame({"blk": [0, 0, 0, 0, 0, 1, 1, 2, 2, 2], "i": [5, 5, 5, 5, 5, 5, 5, 8, 8, 8],
                  "relative_rating": [-1.0, -0.5, 0.0, 0.7, 0.8, 0.1, 0.2, -0.3, -0.3, 0.4]},
                 index=[10, 11, 12, 13, 14, 20, 21, 30, 31, 32])


@pytest.mark.parametrize("shuffle", [False, True], ids=["sorted", "shuffled"])
def test_chains_are_the_same_sorted_or_not(shuffle):
    e = E
    if shuffle:  # any order; the tied 30 and 31 keep their relative order (the sort is stable)
        e = E.iloc[[9, 3, 7, 0, 5, 8, 2, 6, 4, 1]]
    members, lengths, items = separated_chains(e, 0.6)
    want = [[10, 12, 13], [20], [30, 32]]
    got = [list(m[m >= 0]) for m in members]
    assert got == want and lengths.tolist() == [3, 1, 2] and items.tolist() == [5, 5, 8]
