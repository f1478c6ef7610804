"""Reading a probe's answer and matching it to a title: rapidfuzz similarity (0-100) over the forms a title takes.

The published protocol (Di Palma et al. 2025) counts an item as recalled when the answer's fuzzy similarity to the
true title is above 80; the scorer, the threshold and the compared length are task settings (conf/task/memorization*)."""
from __future__ import annotations

import re
from typing import Callable, Iterable, Sequence

from rapidfuzz import fuzz, process, utils

from recbench.kg.graph import display_title, split_year

#: rapidfuzz scorers a task may name in match.scorer (ratio: normalized Indel similarity of the whole strings)
SCORERS: dict[str, Callable[..., float]] = {
    "ratio": fuzz.ratio, "token_sort_ratio": fuzz.token_sort_ratio, "token_set_ratio": fuzz.token_set_ratio,
    "WRatio": fuzz.WRatio,
}

_LABEL = re.compile(r"^\s*(?:input|output|answer|title|next item|item)\s*:\s*", re.I)
_NUMBERING = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+")
_QUOTES = "\"'`“”‘’*"
_PAREN = re.compile(r"^(.*?)\s*(\([^()]*\))$")
_UNKNOWN = re.compile(r"^\W*(unknown|i don'?t know|n/?a|none)\W*$", re.I)


def main_title(title: str) -> str:
    """A title without its trailing year and trailing parenthesised part (an aka title, genres): 'Shanghai Triad
    (Yao a yao yao dao waipo qiao) (1995)' -> 'Shanghai Triad'."""
    base = split_year(title)[0]
    m = _PAREN.match(base)
    return m.group(1) if m and m.group(1) else base


def title_forms(title: str) -> list[str]:
    """The forms of a title an answer may take: as written, without its trailing year, with a trailing article moved
    to the front ('Usual Suspects, The (1995)' -> 'The Usual Suspects (1995)', 'The Usual Suspects'), and without a
    trailing parenthesised aka title or genres; no duplicates."""
    base, year = split_year(title)
    forms = [title.strip(), base, display_title(base)]
    if year is not None:
        forms.append(f"{display_title(base)} ({year})")
    main = main_title(title)
    forms += [main, display_title(main)]
    return list(dict.fromkeys(f for f in forms if f))


def base_title(title: str) -> str:
    """The main title (year and parenthesised part dropped), article in front: the words a prefix probe splits."""
    return display_title(main_title(title))


def first_line(text: str) -> str:
    """The first non-blank line of an answer, a leading label ('Answer:'), list marker and quotes removed."""
    line = next((ln for ln in str(text or "").splitlines() if ln.strip()), "")
    line = _NUMBERING.sub("", _LABEL.sub("", line)).strip()
    return line.strip(_QUOTES).strip()


def declined(text: str) -> bool:
    """True when the answer is the protocol's 'Unknown' (or another plain refusal)."""
    return bool(_UNKNOWN.match(first_line(text)))


def lookup_answer(text: str, key: str) -> str:
    """The title in an answer to an `<id>::` lookup: first line, an echoed '<id>::' dropped (this id or another one),
    cut at the next '::' (a record line goes on with its genres), its trailing full stop dropped."""
    line = first_line(text)
    m = re.match(rf"^\s*(?:{re.escape(str(key))}|[^\s:]{{1,40}})\s*::\s*", line)  # this id, or another echoed
    if m:
        line = line[m.end():]
    line = line.split("::", 1)[0].strip()
    if line.endswith(".") and not line.endswith(".."):
        line = line[:-1]
    return line.strip().strip(_QUOTES).strip()


def words(s: str) -> list[str]:
    """The words of a string as similarity compares them (lower-cased, punctuation as spaces)."""
    return utils.default_process(s).split()


def continuation(text: str, prefix: str, n_words: int) -> list[str]:
    """What an answer to a title-prefix prompt adds after the prefix: the answer's first line with the echoed prefix
    dropped (also where it dropped a leading article), then that remainder whole and cut to `n_words` words (the
    length of the true rest), trailing years removed."""
    line = split_year(first_line(text))[0]
    aw, pw = words(line), words(prefix)  # compared lower-cased, punctuation as spaces (as similarity does)
    if pw and aw[: len(pw)] == pw:
        rest = aw[len(pw):]
    elif pw and pw[-1] in aw[: len(pw) + 1]:
        rest = aw[aw.index(pw[-1]) + 1:]
    else:
        rest = aw
    whole = " ".join(rest).strip()
    cut = " ".join(rest[:n_words]).strip()
    return list(dict.fromkeys(c for c in (whole, cut) if c))


def similarity(answers: Iterable[str], truths: Sequence[str], scorer: str, max_chars: int) -> float:
    """The best rapidfuzz similarity (0-100) of any answer form to any truth form, each lower-cased, punctuation
    removed (rapidfuzz default_process) and cut to `max_chars` characters; 0 without an answer."""
    fn = SCORERS[scorer]
    tt = [utils.default_process(t)[:max_chars] for t in truths]
    best = 0.0
    for a in answers:
        pa = utils.default_process(a)[:max_chars]
        if pa:
            best = max([best] + [float(fn(pa, t)) for t in tt if t])
    return best


def nearest(query: str, choices: Sequence[str], scorer: str, cutoff: float) -> bool:
    """True when some choice (already processed with rapidfuzz default_process) is at least `cutoff` similar."""
    return process.extractOne(utils.default_process(query), choices, scorer=SCORERS[scorer], processor=None,
                              score_cutoff=cutoff) is not None
