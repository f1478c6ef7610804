"""The toy task the core tests run on (tests/toy/task.py), its configs (tests/toy/conf) and scripted answers
(tests/toy/scripted.py): the core is tested without any benchmark."""
from __future__ import annotations

from pathlib import Path

CONF = Path(__file__).resolve().parent / "conf"
#: the override that adds tests/toy/conf to Hydra's config search path (task=toy, method=toy_rank|toy_popular,
#: model=toy_scripted)
SEARCHPATH = f"hydra.searchpath=[file://{CONF}]"
#: the toy run: task, model method, scripted model, no progress bar
TOY = [SEARCHPATH, "task=toy", "method=toy_rank", "model=toy_scripted", "run.progress=false"]
#: the environment a toy run must not inherit from the shell or from an earlier test: a key, a server, a job's cache
FOREIGN_ENV = ("RECBENCH_OPENAI_BASE_URL", "RECBENCH_JOB_CACHE_DIR", "OPENAI_API_KEY")


def toy_cfg(overrides: list[str] = (), tmp_path=None):
    """The composed config of a toy run (TOY, then `overrides`); with tmp_path its response cache lives there."""
    from tests.helpers import compose_cfg

    cache = [f"cache.path={tmp_path / 'cache.sqlite'}"] if tmp_path is not None else []
    return compose_cfg([*TOY, *cache, *overrides])


def isolate(monkeypatch, tmp: Path) -> None:
    """Runs and cache under tmp, run from tmp, no key or server from the environment, no Hydra traceback noise."""
    for k in FOREIGN_ENV:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("RECBENCH_RUNS_DIR", str(tmp / "runs"))
    monkeypatch.setenv("RECBENCH_CACHE_DIR", str(tmp / "cache"))
    monkeypatch.setenv("HYDRA_FULL_ERROR", "0")
    monkeypatch.chdir(tmp)


def toy_cli(tmp: Path, *args: str, popen: bool = False, env: dict | None = None, **kw):
    """`python -m recbench <TOY> <args>` in a subprocess (the full tier's end-to-end runs) from tmp, its runs and
    cache under tmp; flags such as -m go first. Popen when `popen`, else the finished CompletedProcess."""
    import os
    import subprocess
    import sys

    repo = str(CONF.parents[2])
    e = {k: v for k, v in os.environ.items() if k not in FOREIGN_ENV}
    e.update(RECBENCH_RUNS_DIR=str(tmp / "runs"), RECBENCH_CACHE_DIR=str(tmp / "cache"), HYDRA_FULL_ERROR="0",
             PYTHONPATH=os.pathsep.join([repo, *filter(None, [os.environ.get("PYTHONPATH")])]), **(env or {}))
    flags = [a for a in args if a.startswith("-")]
    cmd = [sys.executable, "-m", "recbench", *flags, *TOY, *[a for a in args if not a.startswith("-")]]
    if popen:
        return subprocess.Popen(cmd, cwd=tmp, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, cwd=tmp, env=e, capture_output=True, text=True, timeout=600, **kw)
