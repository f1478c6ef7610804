"""Category shards: a duckdb-engine build over many categories prepares one category per submitit job (the local
executor or SLURM, as the sweeps' `hydra/launcher=submitit_local|slurm`), then merges them in this process with
the one selection a single build runs (build/merge.py select), so the groups equal a single build's with the same seed.

Every category file is checked before any job starts; a failed job is named with its category and its one-line
error; categories already prepared are kept, so rerunning the same command redoes only the failed ones."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from recbench.api.errors import DataError
from recbench.store.diskspace import DiskFull
from recbench.tasks.perrec.build.config import BuildConfig
from recbench.tasks.perrec.build.duckdb_engine import Category, Engine, prepare
from recbench.tasks.perrec.build.checks import check_inputs


def prepare_job(cat: Category, folder: str, cfg: BuildConfig, eng: Engine) -> Optional[str]:
    """One shard job: prepare a category; its DataError or DiskFull comes back as a line (None when prepared)."""
    try:
        prepare(cat, Path(folder), cfg, eng)
    except (DataError, DiskFull, FileNotFoundError) as e:
        return str(e)
    return None


def executor(launcher: str, folder: Path, eng: Engine) -> Any:
    """The submitit executor of a launcher: 'submitit_local' (separate local processes) or 'slurm'."""
    import submitit

    ex = submitit.AutoExecutor(folder=str(folder), cluster="local" if launcher == "submitit_local" else "slurm")
    ex.update_parameters(timeout_min=240, cpus_per_task=max(1, eng.threads), name="perrec-build")
    return ex


def build_sharded(cats: list[Category], out: Optional[str], cfg: BuildConfig, eng: Engine, launcher: str,
                  work: Optional[str] = None) -> dict[str, Any]:
    """Prepare each category in its own job, wait for all, then merge and write the build (stats returned)."""
    from recbench.tasks.perrec.build.run import build_categories
    from recbench.tasks.perrec.build.merge import category_folder, work_folder

    if out is None:
        raise DataError("a sharded build needs --out (the jobs share its work folder). Fix: add --out")
    check_inputs(cats)  # every category, in one line, before any job
    work_dir = work_folder(out, work)
    todo = [(i, c) for i, c in enumerate(cats) if not _prepared(category_folder(work_dir, i, c), c)]
    ex = executor(launcher, work_dir / ".submitit", eng)
    jobs = [(c, ex.submit(prepare_job, c, str(category_folder(work_dir, i, c)), cfg, eng)) for i, c in todo]
    failed = []
    for c, job in jobs:
        try:
            err = job.result()
        except Exception as e:  # the job process died (killed, out of memory): its category is named
            err = f"job {job.job_id} failed ({str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__})"
        if err:
            failed.append(f"category '{c.domain}': {err}")
    if failed:
        raise DataError(f"{len(failed)} of {len(cats)} category job(s) failed, nothing merged: {' | '.join(failed)}. "
                        "Fix and rerun the same command (prepared categories are kept)")
    return build_categories(cats, out, cfg, eng, work, prepared=True)


def _prepared(folder: Path, cat: Category) -> bool:
    """True when the folder holds a finished preparation of this very category."""
    import json

    p = folder / "prepared.json"
    return p.is_file() and json.loads(p.read_text()).get("category") == cat.__dict__
