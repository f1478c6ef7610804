"""Judge answers for the stub OpenAI-compatible server (`python -m recbench.testing.openai_stub --answer NAME`): a
judge whose verdicts are known, to check the judge layer and its validity audit (docs/judges.md) without a model.

- `judge_always_a`: every pairwise prompt answered {"winner": "A"}: the judge with total position bias; the
  both-orders rule makes every verdict a tie and the validity audit reports 0% position consistency.
- `judge_prefers_longer`: the longer of Text A and Text B wins (a tie when equal): position-consistent, and length
  biased by construction; a pointwise prompt gets every aspect it names scored by the answer's length.
"""
from __future__ import annotations

import json
import re

#: the answer texts of the packaged pairwise template (recbench/judges/templates/pairwise.j2)
_TEXT = re.compile(r'Text ([AB]):\s*\n"""(.*?)"""', re.S)
#: the aspects a pointwise prompt names ("- aspect: definition")
_ASPECT = re.compile(r"^- ([a-z][a-z0-9_]*):", re.M)


def judge_always_a(messages: list[dict]) -> str:
    """{"winner": "A"} to everything."""
    return json.dumps({"winner": "A", "reason": "x"})


def judge_prefers_longer(messages: list[dict]) -> str:
    """Pairwise: the longer text wins (in words); pointwise: every aspect scored 1-5 by the answer's length."""
    text = messages[-1]["content"] if messages else ""
    texts = dict(_TEXT.findall(text))
    if "A" in texts and "B" in texts:
        a, b = len(texts["A"].split()), len(texts["B"].split())
        return json.dumps({"winner": "A" if a > b else "B" if b > a else "tie", "reason": f"{a} vs {b} words"})
    answer = re.search(r'"""(.*?)"""', text, re.S)
    score = min(5, 1 + len(answer.group(1).split()) // 10) if answer else 3
    return json.dumps({**{a: score for a in _ASPECT.findall(text)}, "reason": "longer is better"})


#: --answer choices of the stub's command line
ANSWERS = {"judge_always_a": judge_always_a, "judge_prefers_longer": judge_prefers_longer}
