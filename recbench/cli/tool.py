"""`python -m recbench.tool <module> [key=value ...]`: a benchmark's tool that asks a model (e.g. a profile writer),
run on the parts a run builds from the same overrides, so that the tool imports no run/ or cli/ code.

The module (a name under recbench.tasks such as `<benchmark>.<module>`, or a full module name) declares
`run_tool(cfg, task, backend, args)`, `TOOL_KEYS` (its own key=value arguments, handed to it in `args`, e.g. out=) and
`TOOL_REQUIRED` (those it cannot run without: missing, its docstring is printed and the exit status is 2, before
anything is built). Every other argument is a config override, composed as a run's (task=, model=, sampling, cache);
the task and the model's backend are built as a run builds them."""
from __future__ import annotations

import importlib
import sys
from typing import Any, Optional

from recbench.api.errors import ConfigError, DataError
from recbench.run.construct import CONFIG_MODULE, build_backend, build_task, register_resolvers


def tool_module(name: str) -> Any:
    """The tool's module: `name` under recbench.tasks, or a full module name; a ConfigError when it is no tool."""
    full = name if name.startswith("recbench.") else f"recbench.tasks.{name}"
    try:
        module = importlib.import_module(full)
    except ModuleNotFoundError as e:
        raise ConfigError(f"no tool module '{full}' ({e})") from None
    if not callable(getattr(module, "run_tool", None)):
        raise ConfigError(f"'{full}' is not a tool: it has no run_tool(cfg, task, backend, args)")
    return module


def main(argv: Optional[list[str]] = None) -> None:
    """Compose the config, build the task and the backend, and hand them to the tool's run_tool (a ConfigError or a
    DataError: one line on stderr, exit status 2)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if argv else 2)
    try:
        _run(argv)
    except (ConfigError, DataError) as e:
        print(f"recbench.tool: {e}", file=sys.stderr)
        sys.exit(2)


def _run(argv: list[str]) -> None:
    module = tool_module(argv[0])
    keys = tuple(getattr(module, "TOOL_KEYS", ()))
    args = dict(a.split("=", 1) for a in argv[1:] if a.split("=", 1)[0] in keys)
    if any(not args.get(k) for k in getattr(module, "TOOL_REQUIRED", ())):
        print(module.__doc__)
        sys.exit(2)
    from hydra import compose, initialize_config_module

    register_resolvers()
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[a for a in argv[1:] if a.split("=", 1)[0] not in keys])
    module.run_tool(cfg, build_task(cfg), build_backend(cfg.model), args)
