"""Packaging: one import name (recbench): tasks/, kg/, conf/ and data/ install inside it; a built wheel
runs from a fresh venv."""
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = pytest.mark.full

REPO = Path(__file__).resolve().parents[2]


def test_no_top_level_tasks_or_kg_import_names(tmp_path):
    code = ("import importlib.util, recbench.tasks.perrec, recbench.kg; "
            "print(importlib.util.find_spec('tasks'), importlib.util.find_spec('kg'))")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "None None"


def _installed_top_level_names() -> set[str]:
    """The import names the installed recbench distribution provides: the first part of every module path it maps
    (an editable install: its finder's mapping; a wheel install: the files its RECORD lists)."""
    import ast
    from importlib import metadata

    # the installed one (site-packages), not a recbench.egg-info a build left in the checkout
    dist = next(metadata.distributions(name="recbench", path=[sysconfig.get_paths()["purelib"]]))
    finder = next((f for f in dist.files or [] if str(f).endswith("_finder.py") and "__editable__" in str(f)), None)
    if finder is not None:
        tree = ast.parse(Path(dist.locate_file(finder)).read_text())
        mapping = next(ast.literal_eval(n.value) for n in ast.walk(tree) if isinstance(n, ast.AnnAssign)
                       and getattr(n.target, "id", "") == "MAPPING")
        return {name.split(".")[0] for name in mapping}
    return {Path(str(f)).parts[0] for f in dist.files or [] if str(f).endswith(".py") and ".dist-info" not in str(f)
            and not str(f).startswith("..")}


@pytest.mark.fast
def test_the_distribution_installs_one_import_name_and_nothing_imports_the_folders_by_theirs():
    """Package data (conf/, data/) and the benchmark packages load under recbench.* only: the installed metadata
    maps nothing else, and no module of the tree imports conf, data, tasks or kg as a top-level name."""
    import ast
    from importlib import metadata

    assert _installed_top_level_names() == {"recbench"}
    dist = next(metadata.distributions(name="recbench", path=[sysconfig.get_paths()["purelib"]]))
    assert dist.read_text("top_level.txt").split() == ["recbench"]
    bare = {"conf", "data", "tasks", "kg"}
    hits = []
    for folder in ("recbench", "tasks", "kg", "tests", "benchmarks", "scripts", "conf", "data"):
        for f in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
                hits += [f"{f.relative_to(REPO)}:{node.lineno}: {n}" for n in names if n.split(".")[0] in bare]
    assert not hits, hits


@pytest.mark.slow
def test_wheel_in_fresh_venv_runs_python_m_recbench(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist),
                    str(REPO)], check=True, timeout=600)
    wheel = next(dist.glob("recbench-*.whl"))
    import zipfile

    files = zipfile.ZipFile(wheel).namelist()  # one import name: every file under recbench/ (or the metadata)
    assert {f.split("/")[0] for f in files} == {"recbench", f"{wheel.name.split('-py')[0]}.dist-info"}, files
    assert {"recbench/conf/method/perrec/listwise.yaml", "recbench/conf/method/llmrec/random.yaml",  # conf/
            "recbench/tasks/perrec/task.py", "recbench/tasks/perrec/templates/listwise.j2",  # tasks/, its templates
            "recbench/kg/graph.py"} <= set(files)  # kg/
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    # the fresh venv borrows the already-installed third-party dependencies through a .pth file (no network),
    # but gets recbench ONLY from the wheel
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True)
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(RECBENCH_RUNS_DIR=str(work / "runs"), RECBENCH_CACHE_DIR=str(work / "cache"))
    where = subprocess.run([str(py), "-c", "import recbench.tasks.perrec as p, recbench.kg as k, recbench.conf as c; "
                            "print(p.__file__); print(k.__file__); print(c.__file__)"],
                           cwd=work, env=env, capture_output=True, text=True, check=True).stdout
    assert str(venv) in where and str(REPO) not in where  # imported from the wheel, not the checkout
    r = subprocess.run([str(py), "-m", "recbench", "method=bm25_history", "limit=10", "run.progress=false"],
                       cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (work / "runs" / "perrec" / "none" / "bm25_history" / "limit=10" / "metrics.json").exists()
    h = subprocess.run([str(py), "-m", "recbench", "--help"], cwd=work, env=env, capture_output=True, text=True)
    assert h.returncode == 0 and "task" in h.stdout
