"""The control set: fabricated items (and users) asked exactly like the real ones, so that a model which completes
anything plausibly is not counted as remembering.

A fabricated item has an id outside the catalogue (numeric ids continue after the largest; other ids, e.g. ASINs,
keep the shape of a real id with fresh characters) and an invented title spliced from real ones: the first half of
one title's words, the second half of another's with its parenthesised part (an aka title, genres), the year of a
third where titles carry years, in the catalogue's article style ('Title, The'). A title as similar as the match
threshold to any form of a real title is drawn again. Spliced titles keep the catalogue's vocabulary, lengths and
format, so generic completion scores about the same on both sets and the difference is memory. Everything is drawn
from `random.Random` seeded by the task seed: the same seed gives the same control set. Fabricated users (for
history_to_next) get ids outside the user ids, histories of control items, and lengths drawn from the real users'."""
from __future__ import annotations

import functools
import hashlib
import random
import re
import string
from typing import Optional

from rapidfuzz import utils

from recbench.kg.graph import display_title, split_year
from recbench.store.derived_cache import disk_cached
from recbench.tasks.memorization.catalogue import item_files, read_catalogue
from recbench.tasks.memorization.matching import nearest, title_forms

_ARTICLE = re.compile(r"^(The|A|An)\s+(.+)$")
_SUFFIX_ARTICLE = re.compile(r",\s*(The|A|An)$")
_PAREN = re.compile(r"^(.*?)\s*(\([^()]*\))$")
#: draws per wanted title before giving up (a catalogue too small or too uniform to splice new titles from)
MAX_TRIES = 200


def seeded(seed: int, *parts: object) -> random.Random:
    """A random.Random seeded from the task seed and a purpose (stable across Python versions and processes)."""
    digest = hashlib.blake2b("|".join(map(str, (seed, *parts))).encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))


def fabricate_ids(real: list[str], n: int, seed: int, what: str = "item") -> list[str]:
    """n ids outside `real`: continuing the numeric range after its largest id, else in the shape of a random real id
    (letters and digits replaced, the first two characters kept)."""
    taken = set(real)
    if real and all(i.isdigit() for i in real):
        start = max(int(i) for i in real) + 1
        return [str(start + k) for k in range(n)]
    rng = seeded(seed, what, "ids")
    out: list[str] = []
    misses = 0
    while len(out) < n:
        tpl = rng.choice(real) if real else "X0000000"
        keep = 2 if len(tpl) >= 6 else 1 if len(tpl) >= 2 else 0  # 'B0' of an ASIN, 'u' of 'u12'
        new = tpl[:keep] + "".join(_fresh(rng, c) for c in tpl[keep:]) + ("".join(
            rng.choice(string.digits) for _ in range(misses // 50)))  # short ids run out: lengthen them
        if new in taken:
            misses += 1
            continue
        taken.add(new)
        out.append(new)
    return out


def _fresh(rng: random.Random, c: str) -> str:
    """A random character of the same class (digit, upper, lower); anything else kept."""
    if c.isdigit():
        return rng.choice(string.digits)
    if c.isupper():
        return rng.choice(string.ascii_uppercase)
    return rng.choice(string.ascii_lowercase) if c.islower() else c


def _suffix_style(titles: list[str]) -> bool:
    """True when the catalogue writes leading articles at the end ('Usual Suspects, The'), as MovieLens does."""
    bases = [split_year(t)[0] for t in titles]
    return sum(1 for b in bases if _SUFFIX_ARTICLE.search(b)) > 0.02 * max(1, len(bases))


def _parts(title: str) -> tuple[list[str], str, Optional[int]]:
    """(words of the main title, article in front; a trailing parenthesised part such as an aka title or genres;
    the year) of a catalogue title."""
    base, year = split_year(title)
    m = _PAREN.match(base)
    main, paren = (m.group(1), m.group(2)) if m else (base, "")
    return display_title(main).split(), paren, year


def fabricate_titles(real: list[str], n: int, seed: int, scorer: str, threshold: float) -> list[str]:
    """n invented titles of at least two words: the first half of one real title's words, the second half of
    another's, that other's parenthesised part and the year of a third (where titles carry them), written in the
    catalogue's article style; none is as similar as `threshold` to any form of a real title."""
    parts = [_parts(t) for t in real]
    multi = [k for k, (w, _, _) in enumerate(parts) if len(w) >= 2] or list(range(len(parts)))
    years = [y for _, _, y in parts if y is not None]
    suffix = _suffix_style(real)
    known = sorted({utils.default_process(f) for t in real for f in title_forms(t)})
    rng = seeded(seed, "control", "titles")
    out: list[str] = []
    seen: set[str] = set()
    tries = 0
    while len(out) < n:
        tries += 1
        if tries > MAX_TRIES * max(1, n):
            raise ValueError(f"could not invent {n} control titles unlike the catalogue's {len(real)} "
                             f"(made {len(out)}); lower task.control.n")
        (a, _, _), (b, paren, _) = parts[rng.choice(multi)], parts[rng.choice(multi)]
        words = a[: max(1, (len(a) + 1) // 2)] + (b[len(b) // 2:] if len(b) > 1 else b)
        if len(words) < 2:
            continue
        main = " ".join(words)
        main = main[0].upper() + main[1:]
        m = _ARTICLE.match(main)
        shown = f"{m.group(2)}, {m.group(1)}" if (m and suffix) else main
        title = " ".join(x for x in (shown, paren) if x) + (f" ({rng.choice(years)})" if years else "")
        key = utils.default_process(title)
        if key in seen or any(nearest(f, known, scorer, threshold) for f in title_forms(title)):
            continue
        seen.add(key)
        out.append(title)
    return out


def fabricate_items(real: dict[str, str], n: int, seed: int, scorer: str, threshold: float) -> dict[str, str]:
    """The control catalogue: n fabricated (id -> title) pairs for the real catalogue `real`."""
    ids = fabricate_ids(list(real), n, seed)
    return dict(zip(ids, fabricate_titles(list(real.values()), n, seed, scorer, threshold)))


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """A digest of the modules the control set depends on (reading, matching, drawing): part of its cache key."""
    from pathlib import Path

    here = Path(__file__).parent
    return hashlib.sha256(b"".join((here / f).read_bytes() for f in ("catalogue.py", "matching.py", "control.py"))
                          ).hexdigest()[:16]


def control_catalogue(fmt: str, path: str, id_field: str, n: int, seed: int, scorer: str,
                      threshold: float) -> dict[str, str]:
    """The control catalogue of a data set folder, kept in the derived-data cache (drawing it checks every invented
    title against every real one: seconds for a catalogue of 12,000 Amazon titles)."""
    return _control_catalogue(fmt, path, id_field, n, seed, scorer, threshold, code_digest())


@functools.lru_cache(maxsize=4)
@disk_cached("memorization_control", lambda fmt, path, *rest: item_files(fmt, path))
def _control_catalogue(fmt: str, path: str, id_field: str, n: int, seed: int, scorer: str, threshold: float,
                       code: str) -> dict[str, str]:
    return fabricate_items(read_catalogue(fmt, path, id_field).items, n, seed, scorer, threshold)


def history_lengths(real: list[int], n: int, seed: int, cap: Optional[int] = None) -> list[int]:
    """n history lengths for control users, drawn from the real users' lengths (capped), so both sets look alike."""
    rng = seeded(seed, "control", "history_lengths")
    return [min(rng.choice(real), cap) if cap else rng.choice(real) for _ in range(n)]
