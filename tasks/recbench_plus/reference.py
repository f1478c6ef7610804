"""RecBench+ reference rows without a model: the catalogue's most-rated items that carry what the query names
(`popular_match`) and BM25 over each item's text against the query (`bm25_items`). Each answers with `n` catalogue
titles joined by [SEP], scored by the task exactly like a model's answer; neither reads the ground truth or the
query's hidden conditions, only the query text, the KG and (popular_match) the ratings."""
from __future__ import annotations

import re
from collections import Counter
from typing import Any, Iterable, Optional

import numpy as np

from recbench.api.errors import ConfigError
from recbench.api.task import ReferenceMethod
from recbench.tasks.recbench_plus import settings
from recbench.tasks.recbench_plus.methods import RecBenchPlusTaskView
from recbench.tasks.recbench_plus.metrics import SEP
from recbench.api.types import Example, Outcome

_WORD = re.compile(r"[^\W_]+")
#: entity names and titles shorter than this are not looked for in the query text (too many accidental hits)
MIN_NAME_CHARS = 4


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens for BM25 (runs of letters or digits, longer than one character)."""
    return [w for w in (m.lower() for m in _WORD.findall(text)) if len(w) > 1]


def item_text(kg: Any, item: str, title: Optional[str] = None) -> str:
    """The text BM25 indexes for an item: its title and every (relation, entity) fact ('Directed_by' as words)."""
    return " ".join([title or kg.display(item)] + [f"{rel.replace('_', ' ')} {t}" for rel, t in kg.facts(item)])


def words(text: str) -> tuple[str, ...]:
    """Lower-cased words of a text (runs of letters or digits): what names are matched on."""
    return tuple(m.lower() for m in _WORD.findall(text))


class PhraseIndex:
    """Names (as word sequences) found in a text as whole words, by looking up the text's word n-grams."""

    def __init__(self, names: Iterable[tuple[str, Any]]):
        self.by_words: dict[tuple[str, ...], list[Any]] = {}
        for name, value in names:
            w = words(name)
            if w and len(name) >= MIN_NAME_CHARS:
                self.by_words.setdefault(w, []).append(value)
        self.longest = max((len(w) for w in self.by_words), default=0)

    def find(self, text: str) -> list[Any]:
        """The values of every name occurring in the text (each once, in order of first occurrence)."""
        w = words(text)
        out: dict[Any, None] = {}
        for n in range(1, self.longest + 1):
            for k in range(len(w) - n + 1):
                for v in self.by_words.get(w[k:k + n], ()):
                    out[v] = None
        return list(out)


class _Reference(ReferenceMethod[RecBenchPlusTaskView]):
    """A model-free answer: `n` catalogue titles, best first, joined by [SEP] (items the query names left out)."""

    single_round = True
    conf_defaults = True  # a hand-built {"name": ...} gets conf/method/recbench_plus/<name>.yaml's keys
    settings_rules = settings.REFERENCE  # valid values of the method keys, checked before anything is loaded

    def prepare(self, examples: list[Example]) -> None:
        """Check that the task data has a catalogue (a KG); index its titles."""
        kg = self.task.kg
        if kg is None:
            raise ConfigError(f"method={self.name} needs the item catalogue (a KG): task.data.kind bundle or build, "
                              "or released files with task.data.catalogue")
        self.items = kg.items()
        self.titles = {i: kg.display(i) for i in self.items}
        self._titles_index = PhraseIndex((kg.display(i, with_year=False), i) for i in self.items)

    def ranked(self, example: Example) -> list[str]:
        """Catalogue item ids, best first."""
        raise NotImplementedError

    def predict(self, example: Example) -> Outcome:
        """Rank the catalogue, drop the items the query names, answer with the top n titles."""
        named = set(self._titles_index.find(str(example.data["query"])))
        top = [i for i in self.ranked(example) if i not in named][: int(self.cfg.n)]
        titles = [self.titles[i] for i in top]
        return Outcome(prediction=f" {SEP} ".join(titles), parse_status="ok",
                       details={"titles": titles, "k": 0, "item_ids": top, "named_in_query": sorted(named)})


class PopularMatch(_Reference):
    """The most-rated items carrying the most of the KG entities (people, genres, ...) the query names literally;
    plain popularity when it names none. The asking user's own ratings are left out of the counts (the ground truth
    is drawn from that user's history, so counting them would leak it)."""

    name = "popular_match"

    def prepare(self, examples: list[Example]) -> None:
        """Ratings per item from the task's histories; every (relation, entity) of the KG, by lower-cased name."""
        super().prepare(examples)
        if not self.task.has_histories():
            raise ConfigError(f"method={self.name} ranks by number of ratings, but task data "
                              f"'{self.task.cfg.data.kind}' has no ratings: use task.data.kind bundle or build, "
                              "or method=bm25_items")
        kg = self.task.kg
        self.counts = Counter(i for hist in self.task.histories.values() for i in hist)
        self.pos = {i: k for k, i in enumerate(self.items)}
        self.count_of = np.array([self.counts.get(i, 0) for i in self.items], np.int64)
        facts = sorted({f for i in self.items for f in kg.facts(i)})
        self.entities = PhraseIndex((target, (rel, target)) for rel, target in facts)

    def conditions(self, query: str) -> list[tuple[str, str]]:
        """The (relation, entity) pairs whose entity name occurs in the query text as whole words."""
        return sorted(self.entities.find(query))

    def ranked(self, example: Example) -> list[str]:
        """Most matched entities first, then most ratings by other users, then catalogue order."""
        hits = Counter(i for rel, t in self.conditions(str(example.data["query"]))
                       for i in self.task.kg.items_with(rel, t))
        own = Counter(self.task.histories.get(str(example.data.get("source_user") or ""), []))
        n_hits, n_own = np.zeros(len(self.items), np.int64), np.zeros(len(self.items), np.int64)
        for counter, arr in ((hits, n_hits), (own, n_own)):
            for i, c in counter.items():
                if i in self.pos:
                    arr[self.pos[i]] = c
        # numpy's lexsort (last key first; catalogue order breaks ties): a Python sort of the whole catalogue per
        # query took 0.1-0.2 s at 80,000 items
        order = np.lexsort((np.arange(len(self.items)), n_own - self.count_of, -n_hits))
        return [self.items[k] for k in order]


class BM25Items(_Reference):
    """BM25 (rank_bm25) of each item's text (title and every KG fact, e.g. 'Genre Horror Directed by ...') against
    the query; ties in catalogue order."""

    name = "bm25_items"

    def prepare(self, examples: list[Example]) -> None:
        """One BM25 index over the catalogue's item texts."""
        super().prepare(examples)
        from rank_bm25 import BM25Okapi

        docs = [tokenize(item_text(self.task.kg, i, self.titles[i])) for i in self.items]
        self.bm25 = BM25Okapi([d or ["_"] for d in docs])

    def ranked(self, example: Example) -> list[str]:
        """Items by BM25 score of the query, highest first."""
        scores = self.bm25.get_scores(tokenize(str(example.data["query"])))
        order = np.argsort(-np.asarray(scores), kind="stable")  # highest first, ties in catalogue order
        return [self.items[k] for k in order]
