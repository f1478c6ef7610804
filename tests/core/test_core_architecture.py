"""The architecture rules of issue 14, checked on the source: the core names no benchmark or method, app and plan
do not import each other, and only the cache and run-store modules touch the cache and run-dir files."""
from __future__ import annotations

import ast
import re
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "recbench"
# the core is recbench/ outside the task packages (tasks/, kg/ install as recbench.tasks / recbench.kg)
CORE_FILES = sorted(p for p in CORE.rglob("*.py") if "testing" not in p.parts)
# benchmark names anywhere; method names as identifiers in quotes ("pairwise" is also a plain statistics word)
BENCHMARK_WORDS = re.compile(r"perrec|PerRecBench|recbench_plus|RecBench\+|llmrec|LLMRec|heapsort|"
                             r"[\"'](pointwise|pairwise|listwise|zero_shot|bm25_history|assistant|assistant_history)[\"']",
                             re.IGNORECASE)


def _imports(path: Path) -> set[str]:
    """Every module a file imports (top level and inside functions)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


def test_core_mentions_no_benchmark_or_method_name():
    hits = [f"{p.relative_to(CORE.parent)}:{i}: {line.strip()}" for p in CORE_FILES
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if BENCHMARK_WORDS.search(line)]
    assert not hits, "benchmark knowledge in the core:\n" + "\n".join(hits)


def test_no_import_circle_between_app_plan_and_compare():
    for name in ("plan.py", "compare.py", "construct.py", "loop.py", "runstore.py", "schema.py"):
        path = CORE / name
        if path.exists():
            assert "recbench.app" not in _imports(path), f"{name} imports recbench.app"
    # construct (task, backend, resolvers) is the shared builder; app itself is imported by no core module
    importers = [p.name for p in CORE_FILES if p.name != "__main__.py" and "recbench.app" in _imports(p)]
    assert importers == [], f"core modules importing recbench.app: {importers}"


def test_only_cache_and_runstore_touch_their_files():
    sqlite_users = [p.name for p in CORE_FILES if "sqlite3" in _imports(p)]
    assert set(sqlite_users) <= {"cache.py", "cache_tools.py"}, sqlite_users
    writers = [p.name for p in CORE_FILES if re.search(r"open\([^)]*samples\.jsonl|samples_path", p.read_text())]
    assert set(writers) <= {"runstore.py", "schema.py"}, writers
