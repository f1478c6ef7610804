"""Compact letter display (Piepho 2004, insert-and-absorb): rows sharing a letter are not significantly different."""
from __future__ import annotations

import string
from collections.abc import Hashable, Iterable, Sequence


def _letter(i: int) -> str:
    alphabet = string.ascii_lowercase
    out = ""
    i += 1
    while i:
        i, r = divmod(i - 1, len(alphabet))
        out = alphabet[r] + out
    return out


def compact_letters(names: Sequence[Hashable], different: Iterable[tuple[Hashable, Hashable]]) -> dict[Hashable, str]:
    """Letters per row; `names` best-first, `different` the pairs significantly different after correction.

    Insert: for each significant pair (i, j), every letter column holding both is split in two, one without i and
    one without j. Absorb: a column contained in another column is dropped. Columns are then lettered in the order
    of their best row, so the best row gets 'a'. Two rows share a letter exactly when their pair is not significant.
    """
    names = list(names)
    if len(set(names)) != len(names):
        raise ValueError(f"row names repeat: {names}")
    pos = {n: i for i, n in enumerate(names)}
    pairs = set()
    for x, y in different:
        if x not in pos or y not in pos:
            raise ValueError(f"pair ({x}, {y}) names a row that is not in {names}")
        if x != y:
            pairs.add((min(pos[x], pos[y]), max(pos[x], pos[y])))
    columns: list[frozenset[int]] = [frozenset(range(len(names)))] if names else []
    for i, j in sorted(pairs):
        new: list[frozenset[int]] = []
        for col in columns:
            if i in col and j in col:
                new.extend((col - {i}, col - {j}))
            else:
                new.append(col)
        uniq = list(dict.fromkeys(c for c in new if c))
        columns = [c for c in uniq if not any(c < other for other in uniq)]  # absorb
    columns.sort(key=lambda c: sorted(c))
    letters = {n: "" for n in names}
    for k, col in enumerate(columns):
        for i in sorted(col):
            letters[names[i]] += _letter(k)
    return letters
