"""The installed conf/ folder read as plain YAML, without Hydra: an entry, its first comment sentence, an entry merged
with its same-group defaults, and the benchmark a task or method class belongs to."""
from __future__ import annotations

import importlib.util
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

import yaml

#: a full stop that ends a sentence (not "et al.", "e.g.", "i.e." or an ellipsis), followed by a new sentence
SENTENCE_END = re.compile(r"(?<!\bal)(?<!e\.g)(?<!i\.e)(?<!\.\.)\.\s+(?=[A-Z(`])")


#: a comment line that ends with a full stop (same exceptions): the next comment line starts a new sentence
LINE_END = re.compile(r"(?<!\bal)(?<!e\.g)(?<!i\.e)(?<!\.\.)\.$")


def conf_dir() -> Path:
    """The installed config folder (the `recbench.conf` package) without importing the app."""
    spec = importlib.util.find_spec("recbench.conf")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("recbench.conf is not installed. Fix: pip install -e . in the project root")
    return Path(list(spec.submodule_search_locations)[0])


@lru_cache(maxsize=None)
def read_entry(group: str, name: str) -> tuple[dict[str, Any], str]:
    """(YAML mapping, first comment line) of conf/<group>/<name>.yaml."""
    path = conf_dir() / group / f"{name}.yaml"
    text = path.read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not valid YAML ({e}). Fix the file") from None
    return data, first_sentence(text)


def first_sentence(text: str) -> str:
    """The first sentence of a file's leading comment block (continuation lines joined; indented examples, and a
    line ending with a full stop, end it)."""
    parts: list[str] = []
    for ln in text.splitlines():
        if not ln.startswith("#") or ln.startswith("#   ") or not ln.strip("# "):
            if parts:
                break
            continue
        parts.append(ln.lstrip("# ").strip())
        if LINE_END.search(parts[-1]):
            break
    joined = " ".join(parts)
    end = SENTENCE_END.search(joined)
    return joined[: end.start() + 1] if end else joined


def merged(group: str, name: str) -> dict[str, Any]:
    """The entry with the same-group configs of its `defaults:` list merged under it (shallow, enough for listing)."""
    data, _ = read_entry(group, name)
    out: dict[str, Any] = {}
    for d in data.get("defaults") or []:
        if isinstance(d, str) and d != "_self_" and (conf_dir() / group / f"{d}.yaml").is_file():
            out.update(merged(group, d))
    out.update({k: v for k, v in data.items() if k != "defaults"})
    return out


def benchmark_of(target: str) -> Optional[str]:
    """The benchmark of a task class path (`recbench.tasks.<benchmark>.module.Class`); None for a class elsewhere."""
    parts = str(target).split(".")
    return parts[2] if len(parts) > 3 and parts[:2] == ["recbench", "tasks"] else None
