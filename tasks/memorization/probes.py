"""The probes (methods of the memorization task): each asks about one real or fabricated item (or user) and returns
the answer forms the task matches against the truth.

- id_to_title: the published protocol (Di Palma et al. 2025): the model is cast as the data set, a few `Input:
  <id>::` -> `<id>::<title>` turns precede the query, greedy decoding.
- prefix_to_title: the first words of a title -> the rest of it.
- history_to_next: a user's interactions, oldest first -> the next item (the user's last one).
- id_to_title_loglik: the id_to_title prompt, the answer chosen among the true record and shuffled other titles of
  the same set by log-likelihood (backends that score choices: hf; others pick one choice or answer freely).
"""
from __future__ import annotations

from typing import Any, ClassVar, Protocol

from recbench.api.prompts import render
from recbench.api.task import Method, TaskView
from recbench.api.types import Constraint, Example, MethodGen, Outcome, Request
from recbench.api.variant import PLAIN, Variant
from recbench.tasks.memorization import settings
from recbench.tasks.memorization.control import seeded
from recbench.tasks.memorization.matching import continuation, declined, first_line, lookup_answer, words

PKG = "recbench.tasks.memorization"


class ProbeTaskView(TaskView, Protocol):
    """What the probes use of their task (recbench.tasks.memorization.task.MemorizationTask)."""

    seed: int
    dataset_name: str
    key_name: str

    def neighbors(self, example: Example, k: int) -> list[tuple[str, str]]:
        """The rolling few-shot window of (key, title) records."""

    def distractors(self, example: Example, k: int) -> list[str]:
        """Other titles of the example's set."""

    def split_title(self, title: str, which: str) -> tuple[str, str]:
        """(prefix, rest) of a title."""

    def title_of(self, item_id: str, which: str) -> str:
        """The title of an item of one set."""


class Probe(Method[ProbeTaskView]):
    """One request per example; `probe` names what the task builds examples for, `unit` whether they are items or
    users."""

    probe: ClassVar[str] = "id"
    unit: ClassVar[str] = "item"
    single_round = True  # one round of requests whatever the answers

    def system(self) -> dict[str, str]:
        """The system message: the model cast as the data set (or as its recommender)."""
        return {"role": "system", "content": render(PKG, self.cfg.system_template, dataset=self.task.dataset_name,
                                                    key_name=self.task.key_name)}

    def ask(self, example: Example, messages: list[dict[str, str]], **kw: Any) -> Request:
        """The request: messages, the run's sampling with this probe's max_tokens."""
        return Request.chat(messages, self.sampling(int(self.cfg.max_tokens)), example_id=example.id, **kw)

    def shown(self, example: Example) -> list[str]:
        """The titles the prompt shows (few-shot records, a history): an answer repeating one is a copy."""
        return [title for _, title in self.task.neighbors(example, int(self.cfg.few_shot))]

    def outcome(self, example: Example, text: str, answers: list[str], line: str) -> Outcome:
        """The Outcome of a generated answer: the answer forms matched to the truth (`answers`), the whole title the
        answer names (`line`, matched to the true title and to the shown ones), parse status ok unless empty."""
        if declined(text):
            return Outcome(prediction="Unknown", parse_status="ok",
                           details={"answers": [], "line": "", "shown": self.shown(example), "declined": True})
        return Outcome(prediction=answers[0] if answers else "", parse_status="ok" if answers else "failed",
                       details={"answers": answers, "line": line, "shown": self.shown(example), "declined": False})


class IdToTitle(Probe):
    """Item id -> title, with the `few_shot` preceding records of the same set as chat turns."""

    name = "id_to_title"
    probe = "id"
    settings_rules = settings.LOOKUP

    def query(self, key: str) -> str:
        """The user turn asking for one key."""
        return render(PKG, self.cfg.query_template, key=key)

    def record(self, key: str, title: str) -> str:
        """A record as the data set writes it (the assistant turn of a few-shot example)."""
        return render(PKG, self.cfg.answer_template, key=key, title=title)

    def messages(self, example: Example) -> list[dict[str, str]]:
        """System, the rolling few-shot window (query -> record turns), then the query for this item."""
        msgs = [self.system()]
        for key, title in self.task.neighbors(example, int(self.cfg.few_shot)):
            msgs += [{"role": "user", "content": self.query(key)}, {"role": "assistant", "content": self.record(key, title)}]
        return msgs + [{"role": "user", "content": self.query(example.data["key"])}]

    def run(self, example: Example, variant: Variant = PLAIN) -> MethodGen:
        """Ask once; the answer's title (an echoed id and anything after the next '::' dropped)."""
        (resp,) = yield [self.ask(example, self.messages(example))]
        title = lookup_answer(resp.text, example.data["key"])
        return self.outcome(example, resp.text, [title] if title else [], title)


class PrefixToTitle(IdToTitle):
    """The first words of a title -> the full title; the words after the prefix are compared with the true rest."""

    name = "prefix_to_title"
    probe = "prefix"
    settings_rules = settings.PREFIX

    def messages(self, example: Example) -> list[dict[str, str]]:
        """System, few-shot prefix -> title turns of the preceding multi-word titles of the same set, the query."""
        msgs = [self.system()]
        for key, title in self.task.neighbors(example, int(self.cfg.few_shot)):
            prefix, _ = self.task.split_title(title, example.data["set"])
            msgs += [{"role": "user", "content": self.query(prefix)}, {"role": "assistant", "content": title}]
        return msgs + [{"role": "user", "content": self.query(example.data["prefix"])}]

    def run(self, example: Example, variant: Variant = PLAIN) -> MethodGen:
        """Ask once; the answer's continuation after the prefix, whole and cut to the true rest's length."""
        (resp,) = yield [self.ask(example, self.messages(example))]
        answers = continuation(resp.text, example.data["prefix"], len(words(example.data["rest"])))
        return self.outcome(example, resp.text, answers, first_line(resp.text))


class HistoryToNext(Probe):
    """A user's last `history_len` items (titles, oldest first) -> the title of the next one."""

    name = "history_to_next"
    probe = "history"
    unit = "user"
    settings_rules = settings.HISTORY

    def shown(self, example: Example) -> list[str]:
        """The history titles the prompt shows, oldest first."""
        return [self.task.title_of(i, example.data["set"]) for i in example.data["history"][-int(self.cfg.history_len):]]

    def messages(self, example: Example) -> list[dict[str, str]]:
        """System + the user's history."""
        return [self.system(), {"role": "user", "content": render(PKG, self.cfg.query_template, user=example.data["user"],
                                                                  history=self.shown(example))}]

    def run(self, example: Example, variant: Variant = PLAIN) -> MethodGen:
        """Ask once; the answer's first line is the named item."""
        (resp,) = yield [self.ask(example, self.messages(example))]
        title = first_line(resp.text)
        return self.outcome(example, resp.text, [title] if title else [], title)


class IdToTitleLoglik(IdToTitle):
    """The id_to_title prompt; the answer is chosen among `n_choices` records (the true title and other titles of
    the same set, in a seeded order) by total log-likelihood. Recalled: the true record scores strictly highest."""

    name = "id_to_title_loglik"
    probe = "id"
    settings_rules = settings.LIKELIHOOD

    def run(self, example: Example, variant: Variant = PLAIN) -> MethodGen:
        """Ask once with a choice constraint; read every choice's log-likelihood where the backend reports them."""
        key, true = example.data["key"], example.data["title"]
        titles = [true] + self.task.distractors(example, int(self.cfg.n_choices) - 1)
        seeded(self.task.seed, "choices", example.id).shuffle(titles)
        choices = tuple(self.record(key, t) for t in titles)
        truth = self.record(key, true)
        (resp,) = yield [self.ask(example, self.messages(example), constraint=Constraint(kind="choice", choices=choices))]
        scores = {d.get("choice"): d.get("logprob") for d in resp.logprobs or [] if isinstance(d, dict)}
        if set(choices) <= set(scores) and all(isinstance(scores[c], (int, float)) for c in choices):
            mine = float(scores[truth])
            others = [float(scores[c]) for c in choices if c != truth]
            rank = 1 + sum(1 for x in others if x >= mine)
            details = {"how": "choice_likelihood", "rank": rank, "n_choices": len(choices), "true_logprob": mine,
                       "best_other_logprob": max(others), "recalled": rank == 1 and mine > max(others)}
            return Outcome(prediction=resp.text, parse_status="ok", details=details)
        chosen = resp.text.strip()
        ok = chosen in choices
        return Outcome(prediction=chosen, parse_status="ok" if ok else "failed",
                       details={"how": "chosen_choice" if ok else "free_text", "rank": None, "n_choices": len(choices),
                                "recalled": ok and chosen == truth, "true_logprob": None})


PROBES: dict[str, type[Probe]] = {c.name: c for c in (IdToTitle, PrefixToTitle, HistoryToNext, IdToTitleLoglik)}
