"""Packaging: recbench/tasks/ and recbench/kg/ install inside the recbench namespace; a built wheel runs from a fresh venv."""
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_no_top_level_tasks_or_kg_import_names(tmp_path):
    code = ("import importlib.util, recbench.tasks.perrec, recbench.kg; "
            "print(importlib.util.find_spec('tasks'), importlib.util.find_spec('kg'))")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "None None"


@pytest.mark.slow
def test_wheel_in_fresh_venv_runs_python_m_recbench(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist),
                    str(REPO)], check=True, timeout=600)
    wheel = next(dist.glob("recbench-*.whl"))
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
    where = subprocess.run([str(py), "-c", "import recbench.tasks.perrec as p, recbench.conf as c; print(p.__file__); print(c.__file__)"],
                           cwd=work, env=env, capture_output=True, text=True, check=True).stdout
    assert str(venv) in where and str(REPO) not in where  # imported from the wheel, not the checkout
    r = subprocess.run([str(py), "-m", "recbench", "method=bm25_history", "limit=10", "run.progress=false"],
                       cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (work / "runs" / "perrec" / "none" / "bm25_history" / "limit=10" / "metrics.json").exists()
    h = subprocess.run([str(py), "-m", "recbench", "--help"], cwd=work, env=env, capture_output=True, text=True)
    assert h.returncode == 0 and "task" in h.stdout
