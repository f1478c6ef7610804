"""`python -m recbench list models|tasks|methods|metrics`: what the config groups hold, one line each (no torch import;
task classes are read from recbench/cli/task_index.json, not imported)."""
from __future__ import annotations

import argparse
import re
import shutil
import sys
import textwrap
from functools import lru_cache
from typing import Optional

import yaml

from recbench.api.conf_files import (  # noqa: F401
    benchmark_of,
    conf_dir,
    first_sentence,
    merged,
    read_entry,
)
from recbench.cli.task_index import entry

GROUPS = ("models", "tasks", "methods", "metrics")


def description(group: str, name: str) -> str:
    """The entry's `description:`, else its first comment line."""
    data, comment = read_entry(group, name)
    return str(data.get("description") or comment or "(no description)")


def names(group: str) -> list[str]:
    """Entry names of one config group folder, sorted."""
    return sorted(p.stem for p in (conf_dir() / group).glob("*.yaml"))


def papers() -> list[str]:
    """Every paper tag the model configs use (`papers:`)."""
    return sorted({p for n in names("model") for p in (read_entry("model", n)[0].get("papers") or [])})


def list_models(paper: Optional[str] = None) -> list[str]:
    """One line per model config: name, papers, backend kind, description (only `paper`'s models when given)."""
    lines = []
    for n in names("model"):
        data, _ = read_entry("model", n)
        papers = list(data.get("papers") or [])
        if paper and paper not in papers:
            continue
        target = str((data.get("backend") or {}).get("_target_", "")) if data.get("backend") else ""
        kind = target.rsplit(".", 1)[-1].replace("Backend", "").lower() or "none"
        tag = ",".join(papers) or "-"
        lines.append(f"{n:<16} {kind:<11} {tag:<22} {description('model', n)}")
    return lines


def method_folders() -> list[str]:
    """The benchmarks that have method configs: the folders of conf/method/ (conf/method/<benchmark>/<name>.yaml)."""
    return sorted(p.name for p in (conf_dir() / "method").iterdir() if p.is_dir() and any(p.glob("*.yaml")))


def task_benchmark(task: str) -> Optional[str]:
    """The conf/method/ folder of a packaged task config: the benchmark its `_target_` class belongs to (None when
    that benchmark has no method folder)."""
    if task not in names("task"):
        raise ValueError(f"Unknown task '{task}'. Valid choices for --task: {', '.join(names('task'))}")
    bench = benchmark_of(str(merged("task", task).get("_target_") or ""))
    return bench if bench in method_folders() else None


def method_group(benchmark: str) -> str:
    """The config group path of one benchmark's method configs: method/<benchmark>."""
    return f"method/{benchmark}"


def task_target(task: str) -> str:
    """The `_target_` class path of a packaged task config (merged with its defaults)."""
    if task not in names("task"):
        raise ValueError(f"Unknown task '{task}'. Valid choices for --task: {', '.join(names('task'))}")
    target = merged("task", task).get("_target_")
    if not target:
        raise ValueError(f"{conf_dir() / 'task' / (task + '.yaml')}: no _target_ (nor in its defaults)")
    return str(target)


@lru_cache(maxsize=None)
def task_methods(task: str) -> frozenset[str]:
    """Method kinds the task's class accepts (its `methods` mapping), from the task index (no import)."""
    return frozenset(entry(task_target(task))["methods"])


def accepts(allowed: frozenset[str], benchmark: str, method: str) -> bool:
    """True when the method config conf/method/<benchmark>/<method>.yaml names (by its kind, else its name) one of a
    task's method classes."""
    data = merged(method_group(benchmark), method)
    return str(data.get("kind") or data.get("name") or method) in allowed


def methods_for_task(task: str, own: Optional[list[str]] = None) -> list[str]:
    """The method names a task accepts, sorted: the configs of its benchmark's folder whose class the task has, plus
    `own` (method configs of the user's own config folders: whether the task takes them cannot be told here)."""
    allowed, bench = task_methods(task), task_benchmark(task)
    packaged = [n for n in names(method_group(bench)) if accepts(allowed, bench, n)] if bench else []
    return sorted(set(packaged) | set(own or []))


def default_choice(group: str) -> Optional[str]:
    """The option conf/config.yaml's defaults list picks for a config group (e.g. the default task)."""
    data = yaml.safe_load((conf_dir() / "config.yaml").read_text(encoding="utf-8")) or {}
    return next((str(d[group]) for d in data.get("defaults") or [] if isinstance(d, dict) and group in d), None)


def _method_line(label: str, group: str, name: str, width: int) -> str:
    free = "no model" if merged(group, name).get("model_free") else "model"
    return f"{label:<{width}} {free:<9} {description(group, name)}"


def list_methods(task: Optional[str] = None) -> list[str]:
    """One line per method config: name, needs-model flag, description. With a task: the names it accepts (those of
    its benchmark's folder); without: every benchmark's, as <benchmark>/<name> (method= takes either form)."""
    if task:
        bench = task_benchmark(task)
        return [_method_line(n, method_group(bench), n, 20) for n in methods_for_task(task)] if bench else []
    return [_method_line(f"{b}/{n}", method_group(b), n, 32) for b in method_folders()
            for n in names(method_group(b))]


def list_tasks() -> list[str]:
    """One line per task config: name, benchmark family, description (columns as wide as their longest entry)."""
    rows = []
    for n in names("task"):
        target = str(merged("task", n).get("_target_", ""))
        rows.append((n, target.split(".")[2] if target.startswith("recbench.tasks.") else "-"))
    w0, w1 = (max(len(r[i]) for r in rows) for i in (0, 1))
    return [f"{n:<{w0}} {family:<{w1}} {description('task', n)}" for n, family in rows]


def _metric_line(name: str, where: str, direction: str, meaning: str, why_n: str, width: int) -> str:
    return f"{name:<{width}} {where:<14} {direction:<7} {meaning}" + (f" [{why_n}]" if why_n else "")


def list_metrics(task: Optional[str] = None) -> list[str]:
    """One line per metric: name, where it is declared (a benchmark, or 'standard': selectable by name), direction
    (higher / lower is better, none), meaning [on which examples it is defined, when not all]. With a task: the
    metrics its class declares and those its config names (`metrics:`)."""
    from recbench.api.metric_spec import _REGISTRY
    from recbench.api.metrics import find_spec  # noqa: F401 - importing registers the standard metrics

    std = {n: ("standard", s.direction, s.meaning, s.why_n) for n, s in _REGISTRY.items()}
    rows: dict[str, tuple[str, str, str, str]] = {}
    if task is None:
        rows.update(std)
        targets = sorted({task_target(t) for t in names("task")})
    else:
        targets = [task_target(task)]
    for target in targets:
        family = target.split(".")[2] if target.startswith("recbench.tasks.") else target
        for m in entry(target)["metrics"]:
            rows.setdefault(m["name"], (family, m["direction"], m["meaning"], m["why_n"]))
    if task is not None:
        if merged("task", task).get("items"):  # a YAML task whose rows are item lists (task.items)
            from recbench.api.item_lists import LIST_METRICS

            for s in LIST_METRICS:
                if not s.meaning.startswith("old name of"):
                    rows.setdefault(s.name, std.get(s.name, ("standard", s.direction, s.meaning, s.why_n)))
        rubric = merged("task", task).get("judge_rubric") or {}  # a YAML task that opts in to judging
        if rubric:
            from recbench.api.judge_metrics import judge_metric_specs

            for s in judge_metric_specs(rubric):
                rows.setdefault(s.name, ("judged", s.direction, s.meaning, s.why_n))
        for item in merged("task", task).get("metrics") or []:
            name = str(item.get("name") if isinstance(item, dict) else item)
            base = name.split("@", 1)[0]
            if base in std:
                rows.setdefault(name, std[base])
    width = max((len(n) for n in rows), default=0)
    return [_metric_line(n, *r, width) for n, r in rows.items()]


#: the widest line printed (a terminal's own width when narrower), as compare's tables
WIDTH = 120


def main(argv: Optional[list[str]] = None) -> int:
    """CLI: list models [--paper P] | tasks | methods [--task T] | metrics [--task T]; prints one line per entry
    (wrapped to 120 columns, or the terminal's width when narrower, under its own column)."""
    ap = argparse.ArgumentParser(prog="python -m recbench list", description="List what the config groups hold.")
    ap.add_argument("what", choices=GROUPS)
    ap.add_argument("--paper", choices=papers(), help="models: only those this paper ran")
    ap.add_argument("--task", help="methods: only those this task accepts (its benchmark's conf/method/ folder); "
                                   "metrics: only this task's")
    args = ap.parse_args(argv)
    if args.paper and args.what != "models":
        ap.error("--paper applies to 'list models' only")
    if args.task and args.what not in ("methods", "metrics"):
        ap.error("--task applies to 'list methods' and 'list metrics' only")
    try:
        if args.what == "models":
            lines = list_models(args.paper)
        elif args.what == "tasks":
            lines = list_tasks()
        elif args.what == "metrics":
            lines = list_metrics(args.task)
        else:
            lines = list_methods(args.task)
    except ValueError as e:
        print(f"error: {e}")
        return 2
    width = min(WIDTH, shutil.get_terminal_size().columns) if sys.stdout.isatty() else WIDTH
    print("\n".join(fit(lines, width)))
    return 0


def fit(lines: list[str], width: int) -> list[str]:
    """Lines wider than `width` wrapped, the continuation indented under the last column (the text after the
    widest run of column padding)."""
    out = []
    for ln in lines:
        if len(ln) <= width:
            out.append(ln)
            continue
        padded = [m.end() for m in re.finditer(r" {2,}", ln) if m.end() < width // 2]  # column padding
        gaps = [i for i in range(1, len(ln)) if ln[i - 1] == " " and ln[i] != " " and i < width // 2]
        col = max(padded, default=max(gaps, default=0))
        out += textwrap.wrap(ln, width, subsequent_indent=" " * col, break_long_words=False) or [ln]
    return out
