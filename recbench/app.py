"""The Hydra application: config -> task, method, backend, cache, run store -> loop -> metrics.json + table."""
from __future__ import annotations

import logging
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

from recbench import derived_cache
from recbench.backends.base import Backend
from recbench.cache import CacheError, ResponseCache
from recbench.config_schema import validate
from recbench.construct import (CONFIG_MODULE, LazyBackend, build_backend, build_task, bundled_data,  # noqa: F401
                                data_source, register_resolvers, select_examples)
from recbench.diskspace import DiskFull
from recbench.redact import redact_text
from recbench.registry import ConfigError, DataError, suggest
from recbench.runstore import RunDirInUse, RunStore, inputs_fingerprint, mark_finished, restore_prompts, reuse_finished
from recbench.rundir import discard_unused, remove_if_empty, runs_root, unusable_root
from recbench.schema import RunResult, SchemaError
from recbench.summary import (PSEUDO_METRICS, REPAIRED_LEGEND, fallback_note, print_summary,  # noqa: F401
                              selection_line)

log = logging.getLogger("recbench")

#: exit codes of `python -m recbench` (documented in the README)
EXIT_OK = 0  # every example finished
EXIT_CANNOT_RUN = 2  # config, data, run dir in use, cache or server problem: nothing (more) could run
EXIT_INCOMPLETE = 3  # finished, but some examples were abandoned after backend errors: rerun the same command
EXIT_INTERRUPTED = 130  # Ctrl-C: what finished is kept; rerun the same command to go on
EXIT_TERMINATED = 143  # SIGTERM (128 + 15), handled like Ctrl-C


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread by the handler main() installs, so it unwinds like Ctrl-C."""


def _on_sigterm(signum: int, frame: Any) -> None:
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM during the cleanup ends the process at once
    raise Terminated()


def interrupted(e: KeyboardInterrupt) -> tuple[int, str]:
    """(exit code, the one line) for Ctrl-C (130) or SIGTERM (143): which signal, and what was kept."""
    code, how = (EXIT_TERMINATED, "terminated (SIGTERM)") if isinstance(e, Terminated) else \
        (EXIT_INTERRUPTED, "interrupted (Ctrl-C)")
    kept = getattr(e, "recbench_kept", None)
    if kept is None:
        return code, f"recbench: {how} before any example ran: rerun the same command"
    done, total, run_dir = kept
    return code, (f"recbench: {how}: {done} of {total} examples finished and kept in {run_dir}, paid answers are in "
                  "the response cache; no metrics.json was written for this invocation: rerun the same command to go "
                  "on")


class CannotRun(RuntimeError):
    """A user-facing failure before or during a run (one clean line, no traceback)."""


def _user_errors() -> tuple[type[BaseException], ...]:
    """Exception types that are the user's to fix and are shown as one line."""
    from recbench.backends import base

    unavailable = getattr(base, "BackendUnavailable", CannotRun)  # a dead server, raised by the backend layer
    return (ConfigError, DataError, CannotRun, RunDirInUse, CacheError, SchemaError, unavailable, FileNotFoundError,
            DiskFull)


def _redact_hydra_files(hc: Any, run_dir: str, in_sweep: bool) -> None:
    """Mask URL secrets (user info, query) in the config copies Hydra wrote before recbench ran."""
    from recbench.redact import redact_files

    files = []
    if hc.output_subdir:
        files += [Path(run_dir, hc.output_subdir, n) for n in ("config.yaml", "hydra.yaml", "overrides.yaml")]
    if in_sweep:
        files.append(Path(str(hc.sweep.dir), "multirun.yaml"))
    redact_files(files)


def run_from_config(cfg: DictConfig, run_dir: str | Path, backend: Optional[Backend] = None) -> dict[str, Any]:
    """Evaluate one (task, model, method) into run_dir, resuming what is there; returns metrics.json's content."""
    t0 = time.time()
    try:  # every config and data check before the run dir is written: a refused run leaves no trace in it
        validate(cfg)
        derived_cache.configure(cfg.cache.derived_dir)
        config_text = OmegaConf.to_yaml(cfg, resolve=True)
        inputs = None  # runs with a given backend object (tests, benchmarks) leave no reusable mark
        if backend is None:  # a finished run asked again: nothing to load, run or re-aggregate
            inputs = inputs_fingerprint(config_text, OmegaConf.to_container(cfg.task, resolve=True))
            reused = _reuse_finished(cfg, run_dir, inputs, t0)
            if reused is not None:
                return reused
        from recbench.audit import maybe_audit  # numpy, the task's data libraries: only when something runs
        from recbench.loop import EvalLoop, aggregate

        task = build_task(cfg)
        method = task.make_method(cfg.method, cfg.sampling)
        method = maybe_audit(task, method, cfg.get("audit"))  # audit.orders=K: K display orders per example
        if method.needs_backend and backend is None:  # a package or API key the model needs: before data or bars
            LazyBackend(cfg.model).preflight()
        examples = select_examples(task.load(), cfg.limit, cfg.run.limit_strategy, int(cfg.seed), task.breakdown_by,
                                   source=data_source(task))
    except BaseException:
        discard_unused(run_dir)  # the run dir Hydra made for this job, if it holds only Hydra's own files
        raise
    uses_model = method.needs_backend
    lazy = LazyBackend(cfg.model) if uses_model and backend is None else None
    store = RunStore(run_dir)
    cache = None
    try:
        store.write_text("config.yaml", redact_text(config_text))  # secrets in URLs never reach a file
        cache = ResponseCache(cfg.cache.path, enabled=cfg.cache.enabled)
        restored, lost = restore_prompts(store, cache)  # a deleted prompts.jsonl, rebuilt from the cache
        if restored or lost:
            log.warning("prompts.jsonl lacked %d prompt(s) of finished examples: %d restored from the response "
                        "cache%s", restored + lost, restored, f", {lost} not in the cache (the viewer marks them "
                        "missing)" if lost else "")
        loop = EvalLoop(task, method, backend if uses_model else None, cache, store, chunk_size=cfg.run.chunk_size,
                        store_prompts=cfg.run.store_prompts, progress=cfg.run.progress, backend_factory=lazy)
        complete = False
        wanted = {e.id for e in examples}
        try:
            loop.run(examples)
            complete = loop.stats.backend_errors == 0
        except BaseException as e:  # interrupted or failed: no metrics.json from a partial state; say what is kept
            e.recbench_kept = (sum(1 for r in store.records() if r.id in wanted), len(examples), str(store.dir))
            _write_versions(store, backend, lazy, uses_model, quiet=True)
            raise
        _write_versions(store, backend, lazy, uses_model)
        records = [r for r in store.records() if r.id in wanted]
        agg = aggregate(task, records, n_boot=cfg.run.bootstrap_resamples, level=cfg.run.ci_level, seed=cfg.seed)
        agg["counts"].backend_errors = loop.stats.backend_errors
        result = RunResult(
            task=task.identity(), model=cfg.model.name if uses_model else "none", method=method.name,
            complete=complete and len(records) == len(examples), run_dir=str(store.dir), **agg,
            this_invocation={**vars(loop.stats), "total_wall_time_s": time.time() - t0,
                             "model_loaded": bool(backend is not None or (lazy is not None and lazy.built))})
        # cost of all the run's tokens (cached answers included) from the optional price table in the model config
        from recbench.cost import run_cost

        price = cfg.model.get("price") if uses_model else None
        c = result.counts
        result.cost = run_cost(price, c.prompt_tokens, c.completion_tokens)
        if result.cost is not None:  # what this invocation paid (cache hits cost nothing)
            result.cost["this_invocation"] = run_cost(price, loop.stats.prompt_tokens,
                                                      loop.stats.completion_tokens)["total"]
        store.write_result(result)
        mark_finished(store.dir, inputs if result.complete else None)  # what a finished rerun may reuse
    finally:
        store.close()
        if cache is not None:
            cache.close()
    return result.to_dict()


def _write_versions(store: RunStore, backend: Optional[Backend], lazy: Optional[LazyBackend], uses_model: bool,
                    quiet: bool = False) -> None:
    """versions.json with the backend's identity and effective parameters (quiet: a failure to write is ignored,
    for the error path, where the first error is the one to report)."""
    try:
        built = backend if backend is not None else (lazy() if lazy is not None and lazy.built else None)
        if built is not None and uses_model:
            store.write_versions({"backend_identity": built.identity(), "backend_params": built.effective_params()})
        elif not (store.dir / "versions.json").exists():
            store.write_versions({"backend_identity": None, "backend_params": None})
    except (OSError, DiskFull):
        if not quiet:
            raise


def _reuse_finished(cfg: DictConfig, run_dir: str | Path, inputs: Optional[str], t0: float) -> Optional[dict[str, Any]]:
    """metrics.json of an unchanged complete run with this invocation's counters (0 calls, all skipped), or None."""
    from recbench.loop import LoopStats

    price = cfg.model.get("price")
    cost = None
    if price:  # written only where metrics.json has a cost block (a priced model): nothing was paid now
        from recbench.cost import run_cost

        cost = (run_cost(price, 0, 0) or {}).get("total")
    inv = {**vars(LoopStats(wall_time_s=time.time() - t0)), "total_wall_time_s": time.time() - t0, "model_loaded": False}
    return reuse_finished(run_dir, inputs, inv, cost)


# ---- friendly validation of command-line overrides ---------------------------------------------
def check_overrides(argv: list[str]) -> None:
    """Fail early, listing valid choices, on an unknown config group value or key."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    args = [a for a in argv if "=" in a and not a.startswith("-")]
    if not args:
        return
    parsed = OverridesParser.create().parse_overrides(args)
    # a user's own config folders (hydra.searchpath=[file://...]) add choices: look them up there too
    search = [a for a in args if a.split("=", 1)[0] == "hydra.searchpath"]
    if _composes_cleanly(args, parsed, search):
        return
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        groups = set(loader.list_groups(""))
        chosen: list[str] = []
        for o in parsed:
            key = o.key_or_group
            if o.package or key.startswith("hydra") or o.is_add() or o.is_delete() or o.is_force_add():
                continue
            values = [str(v) for v in o.sweep_string_iterator()] if o.is_sweep_override() else [o.get_value_element_as_str()]
            if key in groups:
                options = loader.get_group_options(key, config_name="config", overrides=search)
                for v in values:
                    if v not in options:
                        valid, scope = _choices_for_task(key, options, parsed)
                        raise ConfigError(f"Unknown {key} '{v}'.{suggest(v, valid)} Valid choices for {key}{scope}: "
                                          f"{', '.join(sorted(valid))}"
                                          + (" (every task's: python -m recbench list methods)" if scope else ""))
                chosen.append(f"{key}={values[0]}")
        cfg = compose(config_name="config", overrides=search + chosen)
        for o in parsed:
            key = o.key_or_group
            if key in groups or key.startswith("hydra") or o.is_add() or o.is_delete() or o.is_force_add():
                continue
            node: Any = cfg
            parts = key.split(".")
            for depth, part in enumerate(parts):
                if not isinstance(node, DictConfig) or part not in list(node.keys()):  # keys(): `???` counts too
                    where = ".".join(parts[:depth]) or "the top level"
                    valid = sorted(node.keys()) if isinstance(node, DictConfig) else []
                    raise ConfigError(
                        f"Unknown config key '{key}'.{suggest(part, [str(v) for v in valid])} Valid keys at {where}: "
                        f"{', '.join(map(str, valid))}. (To add a new key on purpose use +{key}=...)"
                    )
                node = node[part]
        # values of typed keys (seed=abc, limit=x) fail here, at compose time, with the key named
        plain = [a for a, o in zip(args, parsed) if not o.is_sweep_override() and not o.key_or_group.startswith("hydra")
                 and o.key_or_group not in groups]
        try:
            compose(config_name="config", overrides=search + chosen + plain)
        except Exception as e:  # noqa: BLE001 - hydra/omegaconf composition errors: one line naming the override
            cause = e.__cause__ or e
            lines = [ln.strip() for ln in str(cause).strip().splitlines() if ln.strip()]
            raise ConfigError(f"{lines[0] if lines else type(cause).__name__} "
                              f"({next((ln for ln in lines if ln.startswith('full_key')), 'override').strip()})") from None
    GlobalHydra.instance().clear()


def _choices_for_task(group: str, options: list[str], parsed: list[Any]) -> tuple[list[str], str]:
    """(choices, ' with task=T'): for `method`, only the methods the one chosen task accepts (the command's task=,
    else the default task); every option otherwise, or when the task cannot be told."""
    if group != "method":
        return options, ""
    from recbench import catalogue

    tasks = [o for o in parsed if o.key_or_group == "task" and not o.package]
    if len(tasks) > 1 or (tasks and tasks[0].is_sweep_override()):
        return options, ""
    task = tasks[0].get_value_element_as_str() if tasks else catalogue.default_choice("task")
    try:
        valid = catalogue.methods_for_task(str(task), list(options))
    except (ValueError, ImportError):  # a task of the user's own config folders: its methods cannot be told here
        return options, ""
    return (valid, f" with task={task}") if valid else (options, "")


def _composes_cleanly(args: list[str], parsed: list[Any], search: list[str]) -> bool:
    """One compose of every override (the common case: nothing to report). True when it succeeds and each plain
    key override sets a key of a struct node (one that could not have been created by the override); anything
    else (a sweep, a package override, a failure) goes to the detailed checks, which name the problem."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    if any(o.is_sweep_override() or o.package for o in parsed):
        return False
    own = [a for a, o in zip(args, parsed) if not o.key_or_group.startswith("hydra")]
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
            groups = set(GlobalHydra.instance().config_loader().list_groups(""))
            cfg = compose(config_name="config", overrides=search + own)
    except Exception:  # noqa: BLE001 - the detailed checks turn it into one line naming the override
        return False
    finally:
        GlobalHydra.instance().clear()
    for o in parsed:
        key = o.key_or_group
        if key in groups or key.startswith("hydra") or o.is_add() or o.is_delete() or o.is_force_add():
            continue
        parent = OmegaConf.select(cfg, key.rsplit(".", 1)[0]) if "." in key else cfg
        if not isinstance(parent, DictConfig):
            return False
        if not OmegaConf.is_struct(parent) and not _declared_field(parent, key.rsplit(".", 1)[-1]):
            return False  # a key an open dict accepts silently: the detailed checks decide
    return True


def _declared_field(node: DictConfig, name: str) -> bool:
    """True when an open node is typed by a structured config (e.g. model.backend) that declares `name`."""
    import dataclasses

    t = OmegaConf.get_type(node)
    return dataclasses.is_dataclass(t) and name in {f.name for f in dataclasses.fields(t)}


def config_file_error(e: BaseException) -> str:
    """One line for a config file that is not YAML (naming the file and line) or not UTF-8."""
    mark = getattr(e, "context_mark", None) or getattr(e, "problem_mark", None)  # an unclosed [ or " at its start
    if mark is not None:
        return (f"{mark.name}:{mark.line + 1}: not valid YAML ({getattr(e, 'problem', None) or type(e).__name__}). "
                "Fix the file")
    if isinstance(e, UnicodeDecodeError):
        return (f"a config file holds a byte that is not UTF-8 (0x{e.object[e.start]:02x} at byte {e.start}): re-save "
                "it as UTF-8 (your own config folders: hydra.searchpath)")
    return f"a config file cannot be read ({type(e).__name__}: {str(e).strip().splitlines()[0]}). Fix the file"


def add_default_method(argv: list[str]) -> list[str]:
    """Append `method=<task's default_method>` when one task is chosen and no method is given."""
    tasks = [a.split("=", 1)[1] for a in argv if a.startswith("task=")]
    if len(tasks) != 1 or "," in tasks[0] or any(a.startswith(("method=", "+method=")) for a in argv):
        return argv
    f = resources.files(CONFIG_MODULE).joinpath("task", f"{tasks[0]}.yaml")
    default = OmegaConf.load(str(f)).get("default_method") if f.is_file() else None
    return [*argv, f"method={default}"] if default else argv


#: how bad each exit code is, for a sweep's one exit code (the worst job's): interrupted > cannot run > incomplete > ok
SEVERITY = {EXIT_OK: 0, EXIT_INCOMPLETE: 1, EXIT_CANNOT_RUN: 2, EXIT_INTERRUPTED: 3, EXIT_TERMINATED: 3}


def worst_code(codes: list[int]) -> int:
    """The exit code of the worst job (EXIT_OK for none)."""
    return max(codes, key=lambda c: SEVERITY.get(c, 2), default=EXIT_OK)


def write_job_failed(run_dir: str | Path, error: BaseException, code: int, overrides: list[str]) -> Path:
    """job_failed.json in a sweep job's run dir: the error, the last lines of its traceback, the job's exit code."""
    import json
    import traceback

    d = Path(run_dir)
    d.mkdir(parents=True, exist_ok=True)
    tb = traceback.format_exception(type(error), error, error.__traceback__)
    f = d / "job_failed.json"
    f.write_text(redact_text(json.dumps({"error": f"{type(error).__name__}: {error}", "exit_code": code,
                                         "overrides": overrides, "traceback_tail": "".join(tb)[-3000:]}, indent=2))
                 + "\n", encoding="utf-8")
    return f


def failed_job_codes(sweep_dir: Optional[str | Path]) -> list[int]:
    """Exit codes of a sweep's failed jobs, read from disk (a launcher may run jobs in other processes): one per
    job_failed.json, EXIT_INCOMPLETE per metrics.json with complete=false."""
    import json

    if not sweep_dir or not Path(sweep_dir).is_dir():
        return []
    out = []
    for f in Path(sweep_dir).rglob("job_failed.json"):
        try:
            out.append(int(json.loads(f.read_text(encoding="utf-8")).get("exit_code", EXIT_CANNOT_RUN)))
        except (OSError, ValueError):
            out.append(EXIT_CANNOT_RUN)
    for f in Path(sweep_dir).rglob("metrics.json"):
        if (f.parent / "job_failed.json").exists():  # counted above; its metrics.json holds what finished
            continue
        try:
            if json.loads(f.read_text(encoding="utf-8")).get("complete") is False:
                out.append(EXIT_INCOMPLETE)
        except (OSError, ValueError):
            continue
    return out


def exit_code(metrics: dict[str, Any]) -> int:
    """0 when every example finished, EXIT_INCOMPLETE when some were abandoned after backend errors."""
    return EXIT_OK if metrics.get("complete") else EXIT_INCOMPLETE


def main() -> None:
    """`python -m recbench ...`: SIGTERM handled like Ctrl-C (one line saying what was kept, exit 143 / 130)."""
    import signal

    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        _main()
    except KeyboardInterrupt as e:  # outside a job (checks, Hydra's own code); a job's own handler says more
        code, line = interrupted(e)
        print(line, file=sys.stderr)
        sys.exit(code)


def _main() -> None:
    """Validate overrides, then hand over to Hydra; exit with an honest code."""
    import hydra
    from hydra.core.hydra_config import HydraConfig

    register_resolvers()
    sys.argv[1:] = add_default_method(sys.argv[1:])
    import yaml
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        check_overrides(sys.argv[1:])
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
    from recbench.sweep_checks import check_sweep, is_multirun, sweep_message

    if is_multirun(sys.argv[1:]):  # every combination composed and checked before the first job starts
        bad, total = check_sweep(sys.argv[1:])
        if bad:
            print(f"recbench: config error: {sweep_message(bad, total)}", file=sys.stderr)
            sys.exit(EXIT_CANNOT_RUN)
    codes: list[int] = []

    @hydra.main(config_path=f"pkg://{CONFIG_MODULE}", config_name="config", version_base="1.3")
    def _app(cfg: DictConfig) -> Optional[float]:
        from hydra.types import RunMode

        hc = HydraConfig.get()
        run_dir = hc.runtime.output_dir
        in_sweep = hc.mode == RunMode.MULTIRUN
        if in_sweep:
            Path(run_dir, "job_failed.json").unlink(missing_ok=True)  # a stale one from an earlier attempt
        _redact_hydra_files(hc, run_dir, in_sweep)
        try:
            if cfg.mode != "run":  # mode=plan: count requests/tokens/cost, call no model
                from recbench.plan import run_mode

                run_mode(cfg, run_dir)
                codes.append(EXIT_OK)
                return None
            metrics = run_from_config(cfg, run_dir)
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
        print_summary(metrics, brief=in_sweep)  # a sweep ends with one table of all its runs
        code = exit_code(metrics)
        codes.append(code)
        if code == EXIT_INCOMPLETE:
            n = metrics["counts"]["examples"]
            missing = metrics["this_invocation"]["backend_errors"]
            print(f"recbench: incomplete: {missing} example(s) abandoned after backend errors ({n} finished); "
                  "the same command retries them", file=sys.stderr)
        return metrics["metrics"].get(metrics["headline_metric"], {}).get("mean")

    root = runs_root()
    blocked = unusable_root(root)  # Hydra makes the run dir before recbench runs: say it here, in one line
    if blocked:
        print(f"recbench: error: {blocked}", file=sys.stderr)
        sys.exit(EXIT_CANNOT_RUN)
    fresh = not root.exists()
    _app()
    if fresh:  # a runs dir this invocation made and left empty (every job refused) is not left behind
        remove_if_empty(root)
    from recbench.report.callback import last_sweep_dir

    sweep_codes = failed_job_codes(last_sweep_dir()) if is_multirun(sys.argv[1:]) else []
    code = worst_code(codes + sweep_codes)
    if is_multirun(sys.argv[1:]) and code != EXIT_OK:
        n_failed = max(sum(1 for c in codes if c != EXIT_OK), len(sweep_codes))
        print(f"recbench: sweep finished with {n_failed} failed or incomplete job(s); see job_failed.json in their "
              f"run dirs and the sweep report (exit {code})", file=sys.stderr)
    sys.exit(code)
