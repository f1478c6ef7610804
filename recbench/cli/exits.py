"""Exit codes of `python -m recbench` (documented in the README), Ctrl-C / SIGTERM lines, and a sweep's one code."""
from __future__ import annotations

import logging
import sys
from typing import Any

from recbench.api.errors import CannotRun, ConfigError, DataError
from recbench.store.diskspace import DiskFull
from recbench.store.response_cache import CacheError
from recbench.store.runstore import RunDirInUse
from recbench.store.schema import RunResult, SchemaError

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


def exit_now(code: int) -> None:
    """End the process after a signal's line without the interpreter's teardown: the run's files, cache and lock
    were closed while the interrupt unwound (the line says what they kept), and the teardown's garbage collection of
    the model and data took 1.8 s at load 3 and 19-28 s at load 14-16 (issue 44), past a scheduler's grace period."""
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more to say
            pass
    logging.shutdown()
    os._exit(code)


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


def _user_errors() -> tuple[type[BaseException], ...]:
    """Exception types that are the user's to fix and are shown as one line."""
    from recbench.backends import base

    unavailable = getattr(base, "BackendUnavailable", CannotRun)  # a dead server, raised by the backend layer
    return (ConfigError, DataError, CannotRun, RunDirInUse, CacheError, SchemaError, unavailable, FileNotFoundError,
            DiskFull)


#: how bad each exit code is, for a sweep's one exit code (the worst job's): interrupted > cannot run > incomplete > ok
SEVERITY = {EXIT_OK: 0, EXIT_INCOMPLETE: 1, EXIT_CANNOT_RUN: 2, EXIT_INTERRUPTED: 3, EXIT_TERMINATED: 3}


def worst_code(codes: list[int]) -> int:
    """The exit code of the worst job (EXIT_OK for none)."""
    return max(codes, key=lambda c: SEVERITY.get(c, 2), default=EXIT_OK)


def exit_code(result: RunResult) -> int:
    """0 when every example finished, EXIT_INCOMPLETE when some were abandoned after backend errors."""
    return EXIT_OK if result.complete else EXIT_INCOMPLETE
