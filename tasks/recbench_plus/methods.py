"""RecBench+ methods: the assistant prompt (with or without the user's history; fixed-K or open list)."""
from __future__ import annotations

from typing import Any, Optional, Protocol

from recbench.api.parsing import parse_list
from recbench.api.prompts import render
from recbench.api.errors import ConfigError
from recbench.api.task import Method, TaskView
from recbench.tasks.recbench_plus import settings
from recbench.api.types import Example, MethodGen, Outcome, Request, SamplingParams
from recbench.api.variant import PLAIN, Variant, variant_files, variant_name

PKG = "recbench.tasks.recbench_plus"


class RecBenchPlusTaskView(TaskView, Protocol):
    """What RecBench+'s methods need of their task (recbench.tasks.recbench_plus.task.RecBenchPlusTask provides it)."""

    kg: Optional[Any]  # the item catalogue (a recbench.kg.graph.KnowledgeGraph), None without one
    histories: dict[str, list[str]]  # user -> item ids, oldest first

    def has_histories(self) -> bool:
        """True when user histories are known."""

    def history_titles(self, example: Example, n: int, exclude_ground_truth: bool = True) -> list[str]:
        """The source user's last n history titles."""


class AssistantMethod(Method[RecBenchPlusTaskView]):
    """One chat request: system prompt + query (+ history); the raw answer is the prediction, scored as released."""

    name = "assistant"
    single_round = True  # one round of requests whatever the answers
    variants = frozenset({"template"})  # audit.templates=K asks with the first K of template_files()
    conf_defaults = True  # a hand-built {"name": "assistant"} gets conf/method/recbench_plus/assistant.yaml's keys
    settings_rules = settings.ASSISTANT  # valid values of the method keys, checked before anything is loaded

    def request_sampling(self) -> SamplingParams:
        """Explicit decoding parameters: the run's `sampling` block with this method's max_tokens."""
        max_tokens = int(self.cfg.max_tokens)
        if hasattr(Method, "sampling"):  # the core Method helper (run-level temperature/top_p/seed)
            return self.sampling(max_tokens)
        return SamplingParams(max_tokens=max_tokens)

    def template_files(self) -> list[str]:
        """The user template and its shipped paraphrases (<stem>_t1.j2, ...): audit.templates=K asks with the first K."""
        return variant_files(PKG, self.cfg.template)

    def messages(self, example: Example, template: int = 0) -> list[dict[str, str]]:
        """System + user messages of one query (templates system.j2 / assistant.j2 unless configured; `template` k > 0:
        the user template's k-th paraphrase, the system prompt unchanged)."""
        noun = example.meta.get("domain", "movie")
        history: list[str] = []
        if self.cfg.with_history:
            history = self.task.history_titles(example, int(self.cfg.history_len),
                                               exclude_ground_truth=bool(self.cfg.exclude_ground_truth))
        k = int(self.cfg.k or 0)
        system = render(PKG, self.cfg.system_template, noun=noun)
        name = self.cfg.template
        if template:
            name = variant_name(name, template)
        user = render(PKG, name, noun=noun, query=example.data["query"],
                      history=history, k=k)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def run(self, example: Example, variant: Variant = PLAIN) -> MethodGen:
        """Ask once; parse [SEP] titles (status ok), or a line/JSON list (repaired); keep the raw answer (`variant.
        template` k > 0: the template audit's k-th paraphrase)."""
        if self.cfg.with_history and not self.task.has_histories():
            raise ConfigError(f"method '{self.cfg.name}' needs user histories, but task data '{self.task.cfg.data.kind}' has none")
        req = Request.chat(self.messages(example, variant.template), self.request_sampling(), example_id=example.id,
                           adapter=self.cfg.adapter)  # a LoRA per request (vllm: enable_lora); hf: model.backend.adapter
        (resp,) = yield [req]
        text = resp.text
        if "[SEP]" in text:
            titles, status, note = [t.strip() for t in text.split("[SEP]") if t.strip()], "ok", ""
        else:
            parsed = parse_list(text)
            titles, status, note = (parsed.value or []), ("repaired" if parsed.ok else "failed"), parsed.note
        k = int(self.cfg.k or 0)
        return Outcome(prediction=text, parse_status=status,
                       details={"titles": titles, "k": k, "with_history": bool(self.cfg.with_history)}, notes=[note])
