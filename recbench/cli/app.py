"""The Hydra application: config -> task, method, backend, cache, run store -> loop -> metrics.json + table."""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig

from recbench.api.errors import ConfigError
from recbench.cli.exits import (
    EXIT_CANNOT_RUN,
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    _on_sigterm,
    _user_errors,
    exit_code,
    exit_now,
    interrupted,
    worst_code,
)
from recbench.cli.overrides import (
    add_default_method,
    check_overrides,
    config_file_error,
    method_paths,
    quote_non_ascii,
)
from recbench.cli import single_run
from recbench.cli.summary import print_summary
from recbench.cli.sweep import check_sweep, failed_job_codes, is_multirun, sweep_message, write_job_failed
from recbench.store.schema import JOB_FAILED, RunResult
from recbench.run.construct import CONFIG_MODULE, register_resolvers, register_schemas
from recbench.run.evaluate import run_from_config
from recbench.store.redact import redact_text
from recbench.store.rundir import (
    discard_unused,
    remove_if_empty,
    runs_root,
    unusable_root,
)

log = logging.getLogger("recbench")


def _redact_hydra_files(hc: Any, run_dir: str, in_sweep: bool) -> None:
    """Mask URL secrets (user info, query) in the config copies Hydra wrote before recbench ran."""
    from recbench.store.redact import redact_files

    files = []
    if hc.output_subdir:
        files += [Path(run_dir, hc.output_subdir, n) for n in ("config.yaml", "hydra.yaml", "overrides.yaml")]
    if in_sweep:
        files.append(Path(str(hc.sweep.dir), "multirun.yaml"))
    redact_files(files)


def main() -> None:
    """`python -m recbench ...`: SIGTERM handled like Ctrl-C (one line saying what was kept, exit 143 / 130)."""
    import signal

    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        _main()
    except KeyboardInterrupt as e:  # outside a job (checks, Hydra's own code); a job's own handler says more
        code, line = interrupted(e)
        print(line, file=sys.stderr)
        exit_now(code)
    except SystemExit as e:
        if e.code in (EXIT_TERMINATED, EXIT_INTERRUPTED):  # the job's handler said what was kept: nothing is left
            exit_now(int(e.code))
        raise


def _main() -> None:
    """Validate overrides, then hand over to Hydra; exit with an honest code."""
    register_resolvers(schemas=False)  # registered before a compose: a config from the compose cache needs none
    composed = _check_args()
    codes: list[int] = []
    root = runs_root()
    blocked = unusable_root(root)  # Hydra makes the run dir before recbench runs: say it here, in one line
    if blocked:
        print(f"recbench: error: {blocked}", file=sys.stderr)
        sys.exit(EXIT_CANNOT_RUN)
    fresh = not root.exists()
    if composed is not None:  # a plain run: the one compose the checks read (cli/single_run.py)
        single_run.launch(composed, lambda cfg: _job(cfg, codes))
    else:
        _launch(codes)
    if fresh:  # a runs dir this invocation made and left empty (every job refused) is not left behind
        remove_if_empty(root)
    sys.exit(_final_code(codes))


def _check_args() -> Optional[single_run.Composed]:
    """The overrides checked (method paths, unknown keys and values, every sweep combination): one line, exit 2.
    A plain run's config, composed once (or read back) for the checks and the job; None for anything else."""
    import yaml
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        sys.argv[1:] = method_paths(add_default_method(quote_non_ascii(sys.argv[1:])))  # method=NAME: the task's benchmark folder
        composed = None if is_multirun(sys.argv[1:]) else single_run.compose(sys.argv[1:], _job, CONFIG_MODULE,
                                                                               register_schemas)
        if composed is None:
            register_schemas()
        if not check_overrides(sys.argv[1:], (composed.groups, composed.cfg) if composed else None):
            composed = None  # the detailed checks ran (and reset Hydra's state): hydra.main composes
    except ConfigError as e:
        print(f"recbench: config error: {e}", file=sys.stderr)
        sys.exit(EXIT_CANNOT_RUN)
    except (OmegaConfBaseException, HydraException) as e:  # e.g. a wrong type for a typed key (seed=abc)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        key = getattr(e, "full_key", None)
        print(f"recbench: config error: {key + ': ' if key else ''}{first}", file=sys.stderr)
        sys.exit(EXIT_CANNOT_RUN)
    except (yaml.YAMLError, UnicodeDecodeError) as e:  # a config file of the user's own (hydra.searchpath)
        print(f"recbench: config error: {config_file_error(e)}", file=sys.stderr)
        sys.exit(EXIT_CANNOT_RUN)
    if is_multirun(sys.argv[1:]):  # every combination composed and checked before the first job starts
        bad, total = check_sweep(sys.argv[1:])
        if bad:
            print(f"recbench: config error: {sweep_message(bad, total)}", file=sys.stderr)
            sys.exit(EXIT_CANNOT_RUN)
    return composed


def _launch(codes: list[int]) -> None:
    """Hydra's main over the config, each job run by `_job`; a launcher's job that died outside recbench is one
    line (exit 3)."""
    import hydra

    app = hydra.main(config_path=f"pkg://{CONFIG_MODULE}", config_name="config", version_base="1.3")(
        lambda cfg: _job(cfg, codes))
    if any(a.startswith("hydra/launcher=") and ("submitit" in a or "slurm" in a) for a in sys.argv[1:]):
        # Hydra prints a launcher's exception as a traceback and exits 1 unless HYDRA_FULL_ERROR hands it on: a
        # submitit job that died outside recbench is then one line below
        os.environ.setdefault("HYDRA_FULL_ERROR", "1")
    try:
        app()
    except Exception as e:  # noqa: BLE001 - a launcher's job that died outside recbench (SIGKILL, node lost, time limit)
        if type(e).__name__ != "UncompletedJobError":  # submitit's; anything else is a bug: its traceback
            raise
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"recbench: a sweep job died outside recbench ({first[:200]}); its finished examples are kept: rerun the "
              f"same command to go on (exit {EXIT_INCOMPLETE})", file=sys.stderr)
        sys.exit(EXIT_INCOMPLETE)


def _final_code(codes: list[int]) -> int:
    """The invocation's exit code: the worst job's (a sweep's failed jobs found on disk too), said in one line."""
    from recbench.cli.report_callback import last_sweep_dir  # hydra's callback module: only after a sweep

    if not is_multirun(sys.argv[1:]):
        return worst_code(codes)
    sweep_codes = failed_job_codes(last_sweep_dir())
    code = worst_code(codes + sweep_codes)
    if code != EXIT_OK:
        n_failed = max(sum(1 for c in codes if c != EXIT_OK), len(sweep_codes))
        print(f"recbench: sweep finished with {n_failed} failed or incomplete job(s); see job_failed.json in their "
              f"run dirs and the sweep report (exit {code})", file=sys.stderr)
    return code


def _job(cfg: DictConfig, codes: list[int]) -> Optional[float]:
    """One run (or one sweep job): its summary, its code in `codes`, its headline for Hydra's sweepers."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    hc = HydraConfig.get()
    run_dir = hc.runtime.output_dir
    in_sweep = hc.mode == RunMode.MULTIRUN
    if in_sweep:
        Path(run_dir, JOB_FAILED).unlink(missing_ok=True)  # a stale one from an earlier attempt
    _redact_hydra_files(hc, run_dir, in_sweep)
    tracking = _take_tracking(cfg)
    try:
        if cfg.mode != "run":  # mode=plan: count requests/tokens/cost, call no model
            from recbench.run.plan import run_mode

            run_mode(cfg, run_dir)
            codes.append(EXIT_OK)
            return None
        result = _run(cfg, run_dir, tracking)
    except _user_errors() as e:
        kind = "config error" if isinstance(e, ConfigError) else "error"
        print(f"recbench: {kind}: {redact_text(str(e))}", file=sys.stderr)
        codes.append(EXIT_CANNOT_RUN)
        if in_sweep:  # the sweep goes on; the report lists the job and the exit code says it failed
            write_job_failed(run_dir, e, EXIT_CANNOT_RUN, list(hc.overrides.task))
        else:  # a refused run leaves no run dir holding only Hydra's files (e.g. mode=<unknown>)
            discard_unused(run_dir)
        return None
    except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM: one line saying what was kept
        code, line = interrupted(e)
        print(line, file=sys.stderr)
        codes.append(code)
        raise SystemExit(code) from None
    except Exception as e:  # noqa: BLE001 - a bug or an unforeseen failure in one sweep job spares its siblings
        if not in_sweep:
            raise
        f = write_job_failed(run_dir, e, EXIT_CANNOT_RUN, list(hc.overrides.task))
        print(f"recbench: job failed: {type(e).__name__}: {e} (traceback in {f}); the sweep goes on",
              file=sys.stderr)
        codes.append(EXIT_CANNOT_RUN)
        return None
    return _summarize(result, in_sweep, codes)


def _take_tracking(cfg: DictConfig) -> Optional[dict[str, Any]]:
    """The `tracking` node (+tracking=NAME) taken off the config: the run's config.yaml and identity never hold it."""
    from omegaconf import OmegaConf, open_dict

    with open_dict(cfg):
        node = cfg.pop("tracking", None)
    return OmegaConf.to_container(node, resolve=True) if node is not None else None  # type: ignore[return-value]


def _run(cfg: DictConfig, run_dir: str, tracking: Optional[dict[str, Any]]) -> RunResult:
    """run_from_config, inside the tracker's run when one is chosen (recbench/publish/tracked_run.py)."""
    if tracking is None:
        return run_from_config(cfg, run_dir)
    from omegaconf import OmegaConf

    from recbench.publish.tracked_run import run_tracked

    return run_tracked(lambda: run_from_config(cfg, run_dir), tracking, run_dir,
                       lambda: OmegaConf.to_yaml(cfg, resolve=True))


def _summarize(result: RunResult, in_sweep: bool, codes: list[int]) -> Optional[float]:
    """The run's summary (one line in a sweep), its exit code, the incomplete line; the headline's mean."""
    print_summary(result, brief=in_sweep)  # a sweep ends with one table of all its runs
    code = exit_code(result)
    codes.append(code)
    if code == EXIT_INCOMPLETE:
        missing = result.this_invocation.backend_errors
        print(f"recbench: incomplete: {missing} example(s) abandoned after backend errors "
              f"({result.counts.examples} finished); the same command retries them", file=sys.stderr)
    head = result.metrics.get(result.headline_metric)
    return head.mean if head is not None else None
