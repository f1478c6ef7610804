"""Sweeps (`python -m recbench -m ...`): every combination checked before the first job starts (compose each, then
method for task, value ranges, `???` keys, data folders and API-key variables; the launcher runs only when every
combination can run), and each failed job's job_failed.json and exit code."""
from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Optional

from omegaconf import DictConfig, OmegaConf

from recbench.cli.exits import EXIT_CANNOT_RUN, EXIT_INCOMPLETE
from recbench.store.schema import JOB_FAILED, JobFailed, SchemaError, read_job_failed

#: at most this many combinations are composed before launch (beyond it the rest are checked as they run)
MAX_CHECKED = 2000


def is_multirun(argv: list[str]) -> bool:
    """True for `python -m recbench -m ...` / `--multirun`."""
    return any(a in ("-m", "--multirun") for a in argv)


def combinations(args: list[str]) -> list[list[str]]:
    """Every job's override list: a sweep override (a,b,c / range / glob) fans out, the others are kept as given."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(args)
    choices: list[list[str]] = []
    for a, o in zip(args, parsed):
        if o.is_sweep_override() and not o.key_or_group.startswith("hydra"):
            head = a.split("=", 1)[0]
            choices.append([f"{head}={v}" for v in o.sweep_string_iterator()])
        else:
            choices.append([a])
    return [list(c) for c in itertools.product(*choices)]


def _method_problem(cfg: DictConfig) -> tuple[str, bool]:
    """('' or the reason the method does not fit the task, whether the method calls a model)."""
    from hydra.utils import get_class

    task_cfg, method_cfg = cfg.task, cfg.method
    try:
        cls = get_class(str(task_cfg._target_))
    except Exception as e:  # noqa: BLE001 - an unimportable task class is the combination's problem
        return f"task._target_={task_cfg.get('_target_')}: cannot import ({type(e).__name__}: {e})", True
    methods = getattr(cls, "methods", None) or {}
    kind = str(method_cfg.get("kind") or method_cfg.get("name"))
    uses_model = not bool(method_cfg.get("model_free", False))
    if isinstance(methods, dict) and methods:
        if kind not in methods:
            return (f"method '{method_cfg.get('name')}' is not a method of task {task_cfg.get('name')}; valid: "
                    f"{', '.join(sorted(methods))}"), uses_model
        uses_model = uses_model and bool(getattr(methods[kind], "needs_backend", True))
    return "", uses_model


def problems(cfg: DictConfig, env: dict[str, str] | None = None) -> list[str]:
    """Why one composed combination cannot run ([] when it can)."""
    from recbench.api.config import validate
    from recbench.api.errors import ConfigError

    env = os.environ if env is None else env
    out: list[str] = []
    missing = sorted(k for k in OmegaConf.missing_keys(cfg) if not k.startswith("hydra"))
    if missing:
        out.append("required key(s) not set: " + ", ".join(f"{k}=???" for k in missing) + " (give them on the "
                   "command line)")
        return out
    try:
        OmegaConf.to_container(cfg, resolve=True)
    except Exception as e:  # noqa: BLE001 - interpolation errors: one line naming the key
        return [f"{getattr(e, 'full_key', '') or 'config'}: {str(e).strip().splitlines()[0]}"]
    try:
        validate(cfg)
    except ConfigError as e:
        out.append(str(e))
    why, uses_model = _method_problem(cfg)
    if why:
        out.append(why)
    task = cfg.task
    for key in ("data_dir",):
        v = task.get(key)
        if v is not None and not Path(str(v)).exists():
            out.append(f"task.{key}={v}: no such folder (point task.{key} at the data, see docs/)")
    data = task.get("data")
    if isinstance(data, DictConfig) and data.get("path") is not None and not Path(str(data.path)).exists():
        out.append(f"task.data.path={data.path}: no such file")
    backend = (cfg.get("model") or {}).get("backend") or {}
    key_env = backend.get("api_key_env") if isinstance(backend, DictConfig) else None
    if uses_model and cfg.mode == "run" and key_env and not env.get(str(key_env)):
        out.append(f"model {cfg.model.get('name')}: environment variable {key_env} is not set (export {key_env}=...)")
    return out


def check_sweep(argv: list[str]) -> tuple[list[str], int]:
    """(one line per combination of the multirun in argv that cannot run, 'overrides: reason; reason'; the number of
    combinations): the first list is empty when every combination can run."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from recbench.cli.overrides import method_paths
    from recbench.run.construct import CONFIG_MODULE

    args = [a for a in method_paths(argv) if "=" in a and not a.startswith("-")]  # method=NAME: the task's folder
    keep = [a for a in args if not a.lstrip("+~").startswith("hydra") or a.startswith("hydra.searchpath")]
    combos = combinations(keep)[:MAX_CHECKED]
    swept = {a.split("=", 1)[0] for a in keep if len({c[keep.index(a)] for c in combos}) > 1}
    bad: list[str] = []
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
            for combo in combos:
                label = " ".join(_shown(c) for c in combo if c.split("=", 1)[0] in swept) or " ".join(map(_shown, combo))
                try:
                    cfg = compose(config_name="config", overrides=combo)
                except Exception as e:  # noqa: BLE001 - a combination that does not compose
                    cause = e.__cause__ or e
                    bad.append(f"{label}: {str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__}")
                    continue
                why = problems(cfg)
                if why:
                    bad.append(f"{label}: {'; '.join(why)}")
    finally:
        GlobalHydra.instance().clear()
    return bad, len(combos)


def _shown(override: str) -> str:
    """An override as the user wrote it: method=<benchmark>/<name> (the task's folder, recbench.cli.overrides
    .method_paths) shows as method=<name>."""
    key, _, value = override.partition("=")
    return f"method={value.rsplit('/', 1)[-1]}" if key == "method" else override


def sweep_message(bad: list[str], total: int) -> str:
    """The one message that stops a sweep: how many combinations cannot run, one line each."""
    lines = [f"sweep not started: {len(bad)} of {total} combination(s) cannot run (nothing was run):"]
    lines += [f"  {b}" for b in bad]
    lines.append("Fix or drop these values and run the sweep again.")
    return "\n".join(lines)


def write_job_failed(run_dir: str | Path, error: BaseException, code: int, overrides: list[str]) -> Path:
    """job_failed.json in a sweep job's run dir (recbench.store.schema.JobFailed): the error, the last lines of its
    traceback, the job's exit code and overrides."""
    return JobFailed.of(error, code, overrides).write(run_dir)


def failed_job_codes(sweep_dir: Optional[str | Path]) -> list[int]:
    """Exit codes of a sweep's failed jobs, read from disk (a launcher may run jobs in other processes): one per
    job_failed.json, EXIT_INCOMPLETE per metrics.json with complete=false."""
    import json

    if not sweep_dir or not Path(sweep_dir).is_dir():
        return []
    out = []
    for f in Path(sweep_dir).rglob(JOB_FAILED):
        try:
            rec = read_job_failed(f.parent)
            out.append(rec.exit_code if rec is not None else EXIT_CANNOT_RUN)
        except SchemaError:  # unreadable: the job failed all the same
            out.append(EXIT_CANNOT_RUN)
    for f in Path(sweep_dir).rglob("metrics.json"):
        if (f.parent / JOB_FAILED).exists():  # counted above; its metrics.json holds what finished
            continue
        try:
            if json.loads(f.read_text(encoding="utf-8")).get("complete") is False:
                out.append(EXIT_INCOMPLETE)
        except (OSError, ValueError):
            continue
    return out
