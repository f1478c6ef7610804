"""Entry point: python -m recbench task=... model=... method=... | python -m recbench <subcommand> ..."""
from __future__ import annotations

import importlib
import os
import sys
from typing import Any

#: `python -m recbench <name> ...` -> module whose main(argv) handles it (imported only when named)
SUBCOMMANDS = {
    "list": "recbench.cli.catalogue",
    "doctor": "recbench.cli.doctor",
}


def fast_help() -> str:
    """Usage and the config groups with their choices, read from the packaged conf/ folder (no Hydra import)."""
    from importlib import resources

    conf = resources.files("recbench.conf")
    lines = ["usage: python -m recbench [group=option ...] [key=value ...]      (one run; -m for a sweep)",
             "       python -m recbench list models|tasks|methods|metrics [--task T] [--paper P]",
             "       python -m recbench doctor",
             "", "Config groups (group=option):"]

    def options(folder: Any) -> list[str]:
        return sorted(f.name[:-5] for f in folder.iterdir() if f.name.endswith(".yaml"))

    for group in ("task", "model", "method", "hydra/launcher"):
        folder = conf.joinpath(*group.split("/"))
        if group == "method":  # conf/method/<benchmark>/: method=<name> picks the chosen task's benchmark folder
            lines += [f"  method, {b.name} tasks: {', '.join(options(b))}" for b in sorted(folder.iterdir(),
                                                                                   key=lambda b: b.name)
                      if b.is_dir() and options(b)]
            continue
        lines.append(f"  {group}: {', '.join(options(folder))}")
    lines += ["", "Common keys: limit=N run.limit_strategy=first|stratified|random seed=S mode=run|plan "
              "sampling.temperature=T cache.enabled=false",
              "The composed config of a command: python -m recbench <overrides> --cfg job",
              "Hydra's own options: python -m recbench --hydra-help",
              "Exit codes: 0 complete, 2 could not run, 3 examples abandoned (rerun retries them), 130 interrupted"]
    return "\n".join(lines)


def main() -> None:
    """Dispatch a subcommand (list, doctor) or --help, else run the Hydra app; a reader that closes the pipe early
    (`list methods | head`) ends it quietly."""
    try:
        _dispatch()
    except BrokenPipeError:  # the Python docs' recipe: stdout's reader is gone, so flushing it at exit must not fail
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)


def _dispatch() -> None:
    if sys.argv[1:] in (["--help"], ["-h"]):
        print(fast_help())
        return
    if len(sys.argv) > 1 and sys.argv[1] in SUBCOMMANDS:
        sys.exit(importlib.import_module(SUBCOMMANDS[sys.argv[1]]).main(sys.argv[2:]) or 0)
    from recbench.cli.app import main as app_main

    app_main()


if __name__ == "__main__":
    main()
