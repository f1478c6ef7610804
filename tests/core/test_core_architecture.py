"""The architecture rules, checked on the source (docs/architecture.md): the core names no benchmark or method, no
import circle anywhere in the tree (imports inside functions count), and only
the store touches the cache and run-dir files; no two folders import each other; every module is at most 400 lines and
every function at most 60, with no waiver."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx

import pytest

pytestmark = pytest.mark.fast

from tests.source_tree import ROOTS, module_name as _module_name, shown, source_files

PKG = ROOTS["recbench"]
# the core is recbench/ without the test doubles; the benchmarks (tasks/) and knowledge graphs (kg/) are other folders
CORE_FILES = sorted(p for p in PKG.rglob("*.py") if p.relative_to(PKG).parts[0] != "testing")
# benchmark names anywhere; method names as identifiers in quotes ("pairwise" is also a plain statistics word)
BENCHMARK_WORDS = re.compile(r"perrec|PerRecBench|recbench_plus|RecBench\+|llmrec|LLMRec|explanation_judging|heapsort|"
                             r"[\"'](pointwise|pairwise|listwise|zero_shot|bm25_history|assistant|assistant_history)[\"']",
                             re.IGNORECASE)


#: every module of the package is at most this long, and every function at most MAX_FUNCTION_LINES: no waivers
MAX_LINES = 400
MAX_FUNCTION_LINES = 60


def _imports(path: Path) -> set[str]:
    """Every module a file imports (top level and inside functions), relative imports resolved."""
    out: set[str] = set()
    name = _module_name(path)
    pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return out


def import_graph() -> nx.DiGraph:
    """Module -> module it imports, over every file of the recbench package (tasks/ and kg/ included)."""
    files = {_module_name(p): p for p in source_files()}
    g = nx.DiGraph()
    g.add_nodes_from(files)
    for name, path in files.items():
        for target in _imports(path):
            while target and target not in files:
                target = target.rsplit(".", 1)[0] if "." in target else ""
            if target and target != name and target != "recbench":
                g.add_edge(name, target)
    return g


def test_core_mentions_no_benchmark_or_method_name():
    hits = [f"{shown(p)}:{i}: {line.strip()}" for p in CORE_FILES
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if BENCHMARK_WORDS.search(line)]
    assert not hits, "benchmark knowledge in the core:\n" + "\n".join(hits)


def test_no_import_circle_anywhere():
    g = import_graph()
    assert g.number_of_edges() > 100  # the graph was read (a broken reader would find no circle either)
    circles = [sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1]
    assert circles == [], f"import circles: {circles}"


def test_the_import_graph_sees_a_planted_circle(tmp_path, monkeypatch):
    a, b = PKG / "_circle_probe_a.py", PKG / "_circle_probe_b.py"
    try:
        a.write_text("def f():\n    from recbench._circle_probe_b import g\n")
        b.write_text("from recbench import _circle_probe_a\n")
        circles = [c for c in nx.strongly_connected_components(import_graph()) if len(c) > 1]
        assert {"recbench._circle_probe_a", "recbench._circle_probe_b"} in circles
    finally:
        a.unlink(missing_ok=True)
        b.unlink(missing_ok=True)


def _folder(module: str) -> str:
    """The folder of the package a module sits in (tasks, kg, api, ...; '' for a top-level module such as
    recbench/compare.py)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or module in ROOTS or (PKG / parts[-1]).is_dir() else ""


def folder_pairs(g: nx.DiGraph) -> list[tuple[str, str]]:
    """Pairs of recbench/ folders each of which imports the other (function-local imports count)."""
    edges = {(_folder(a), _folder(b)) for a, b in g.edges if _folder(a) != _folder(b)}
    return sorted((a, b) for a, b in edges if (b, a) in edges and a < b)


def test_no_two_folders_import_each_other():
    assert folder_pairs(import_graph()) == []


def test_the_folder_check_sees_a_planted_pair():
    g = import_graph()
    g.add_edge("recbench.api.types", "recbench.run.loop")  # api is imported by run; this plants the way back
    assert ("api", "run") in folder_pairs(g)


def test_every_module_is_short():
    long = [f"{shown(p)} ({n} lines)" for p in source_files()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES]
    assert not long, f"modules over {MAX_LINES} lines (split along the seams the docstring names): " + ", ".join(long)


def test_every_function_is_short():
    long = [f"{shown(p)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for p in source_files() for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: " + ", ".join(long)


def test_app_is_imported_by_no_core_module():
    importers = [str(p.relative_to(PKG)) for p in CORE_FILES
                 if p.name != "__main__.py" and "recbench.cli.app" in _imports(p)]
    assert importers == [], f"core modules importing recbench.cli.app: {importers}"


def test_only_the_store_touches_the_cache_and_run_dir_files():
    sqlite_users = [p.relative_to(PKG).as_posix() for p in CORE_FILES if "sqlite3" in _imports(p)]
    assert set(sqlite_users) <= {"store/response_cache.py", "store/cache_tools.py", "cli/cache.py"}, sqlite_users
    writers = [p.relative_to(PKG).as_posix() for p in CORE_FILES
               if re.search(r"open\([^)]*samples\.jsonl|samples_path", p.read_text())]
    assert set(writers) <= {"store/runstore.py", "store/schema.py"}, writers
