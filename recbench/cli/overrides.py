"""Command-line overrides checked before Hydra runs: unknown groups, keys and values named with the valid choices."""
from __future__ import annotations

import logging
from importlib import resources
from pathlib import Path
from typing import Any, Optional

import yaml

from omegaconf import DictConfig, OmegaConf

from recbench.api.errors import ConfigError, suggest
from recbench.cli.backend_keys import check_backend_keys
from recbench.run.construct import CONFIG_MODULE, register_schemas

log = logging.getLogger("recbench")


# ---- friendly validation of command-line overrides ---------------------------------------------
def _check_key(cfg: DictConfig, key: str) -> None:
    """A ConfigError naming the valid keys where a dotted key leaves the composed config."""
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


def check_overrides(argv: list[str], composed: Optional[tuple[set, DictConfig]] = None) -> bool:
    """Fail early, listing valid choices, on an unknown config group value or key. `composed`: (config groups, the
    run's config) already composed from these overrides (cli/single_run.py), read instead of composing again. True
    when the one compose was clean (the detailed checks did not run)."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    args = [a for a in method_paths(argv) if "=" in a and not a.startswith("-")]  # method=NAME: the task's folder
    if not args:
        return True
    parsed = OverridesParser.create().parse_overrides(args)
    # a user's own config folders (hydra.searchpath=[file://...]) add choices: look them up there too
    search = [a for a in args if a.split("=", 1)[0] == "hydra.searchpath"]
    if _composes_cleanly(args, parsed, search, composed):
        return True
    register_schemas()  # a config read back from the compose cache registered none
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        groups = set(loader.list_groups(""))
        chosen: list[str] = []
        for o in parsed:
            key = o.key_or_group
            if o.is_add() and key in groups and not o.is_sweep_override():  # +model@judge=NAME, +tracking=NAME
                chosen.append(args[parsed.index(o)])
                continue
            if o.package or key.startswith("hydra") or o.is_add() or o.is_delete() or o.is_force_add():
                continue
            values = [str(v) for v in o.sweep_string_iterator()] if o.is_sweep_override() else [o.get_value_element_as_str()]
            values = [v[1:-1] if len(v) > 1 and v[0] == v[-1] and v[0] in "'\"" else v for v in values]  # "modèle"
            if key in groups:
                options = _group_options(loader, key, search)
                for v in values:
                    if v not in options:
                        valid, scope = _choices_for_task(key, options, parsed, search)
                        raise ConfigError(f"Unknown {key} '{v}'.{suggest(v.rsplit('/', 1)[-1], valid)} Valid choices "
                                          f"for {key}{scope}: "
                                          f"{', '.join(sorted(valid))}"
                                          + (" (every task's: python -m recbench list methods)" if scope else ""))
                chosen.append(f"{key}={values[0]}")
        cfg = compose(config_name="config", overrides=search + chosen)
        for o in parsed:
            key = o.key_or_group
            if not (key in groups or key.startswith("hydra") or o.is_add() or o.is_delete() or o.is_force_add()):
                _check_key(cfg, key)
        # values of typed keys (seed=abc, limit=x) fail here, at compose time, with the key named
        plain = [a for a, o in zip(args, parsed) if not o.is_sweep_override() and not o.key_or_group.startswith("hydra")
                 and o.key_or_group not in groups]
        try:
            full = compose(config_name="config", overrides=search + chosen + plain)
        except Exception as e:  # noqa: BLE001 - hydra/omegaconf composition errors: one line naming the override
            cause = e.__cause__ or e
            lines = [ln.strip() for ln in str(cause).strip().splitlines() if ln.strip()]
            raise ConfigError(f"{lines[0] if lines else type(cause).__name__} "
                              f"({next((ln for ln in lines if ln.startswith('full_key')), 'override').strip()})") from None
        check_backend_keys(full)
    GlobalHydra.instance().clear()
    return False


def _group_options(loader: Any, group: str, search: list[str]) -> list[str]:
    """A config group's options, those of its sub-folders as <folder>/<name> (method: <benchmark>/<name>)."""
    options = list(loader.get_group_options(group, config_name="config", overrides=search))
    for sub in loader.list_groups(group):
        options += [f"{sub}/{o}" for o in _group_options(loader, f"{group}/{sub}", search)]
    return options


def _choices_for_task(group: str, options: list[str], parsed: list[Any], search: list[str]) -> tuple[list[str], str]:
    """(choices, ' with task=T'): for `method`, only the methods the one chosen task accepts (the command's task=,
    else the default task): its benchmark's folder, and the user's own method configs (a task of the user's own
    folders: its benchmark's whole folder); every option otherwise, or when the task cannot be told."""
    if group == "judge":  # judge=NAME takes any model entry (judge_paths)
        from recbench.cli import catalogue

        return sorted({*options, *(n for n in catalogue.names("model") if n != "none")}), ""
    if group != "method":
        return options, ""
    from recbench.cli import catalogue

    tasks = [o for o in parsed if o.key_or_group == "task" and not o.package]
    if len(tasks) > 1 or (tasks and tasks[0].is_sweep_override()):
        return options, ""
    task = tasks[0].get_value_element_as_str() if tasks else catalogue.default_choice("task")
    own = [o for o in options if "/" not in o]
    try:
        valid = catalogue.methods_for_task(str(task), own)
    except (ValueError, ImportError):  # a task of the user's own config folders: its benchmark's folder, if any
        bench = _task_benchmark(str(task), _own_folders(search))
        if bench is None:
            return options, ""
        valid = sorted({*own, *(o.split("/", 1)[1] for o in options if o.startswith(f"{bench}/"))})
    return (valid, f" with task={task}") if valid else (options, "")


def _composes_cleanly(args: list[str], parsed: list[Any], search: list[str],
                      composed: Optional[tuple[set, DictConfig]] = None) -> bool:
    """One compose of every override (the common case: nothing to report), or the `composed` config of a run. True
    when it succeeds and each plain key override sets a key of a struct node (one that could not have been created
    by the override); anything else (a sweep, a package override, a failure) goes to the detailed checks, which name
    the problem."""
    if any(o.is_sweep_override() or o.package for o in parsed):
        return False
    if composed is not None:
        groups, cfg = composed
    else:
        found = _compose_checked(args, parsed, search)
        if found is None:
            return False
        groups, cfg = found
    check_backend_keys(cfg)
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


def _compose_checked(args: list[str], parsed: list[Any], search: list[str]) -> Optional[tuple[set, DictConfig]]:
    """(config groups, the config composed from every override but Hydra's own); None when it does not compose."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    own = [a for a, o in zip(args, parsed) if not o.key_or_group.startswith("hydra")]
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
            groups = set(GlobalHydra.instance().config_loader().list_groups(""))
            return groups, compose(config_name="config", overrides=search + own)
    except Exception:  # noqa: BLE001 - the detailed checks turn it into one line naming the override
        return None
    finally:
        GlobalHydra.instance().clear()


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


def quote_non_ascii(argv: list[str]) -> list[str]:
    """argv with each override value (each element of a comma sweep) that holds a non-ASCII character quoted:
    Hydra's override grammar reads such a value only in quotes (model=modèle then reads as a name the checks can
    call unknown, +task.note=é as the text it is)."""
    def quoted(v: str) -> str:
        if v.isascii() or v[:1] in "'\"" or ("'" in v and '"' in v):
            return v
        return f'"{v}"' if '"' not in v else f"'{v}'"

    out = []
    for a in argv:
        key, eq, value = a.partition("=")
        if not eq or a.startswith("-") or value.isascii() or value[:1] in "[{(" or "(" in value:
            out.append(a)
        else:
            out.append(f"{key}={','.join(quoted(v) for v in value.split(','))}")
    return out


def add_default_method(argv: list[str]) -> list[str]:
    """Append `method=<task's default_method>` when one task is chosen and no method is given."""
    tasks = [a.split("=", 1)[1] for a in argv if a.startswith("task=")]
    if len(tasks) != 1 or "," in tasks[0] or any(a.startswith(("method=", "+method=")) for a in argv):
        return argv
    f = resources.files(CONFIG_MODULE).joinpath("task", f"{tasks[0]}.yaml")
    default = OmegaConf.load(str(f)).get("default_method") if f.is_file() else None
    return [*argv, f"method={default}"] if default else argv


# ---- method=NAME -> method=<benchmark>/NAME ------------------------------------------------------------------------
def method_paths(argv: list[str]) -> list[str]:
    """argv with each bare `method=NAME` (also a sweep a,b,c or glob(...)) written as `method=<benchmark>/NAME`, the
    conf/method/<benchmark>/ folder of the chosen task (the command's task=, else the default task), so the
    same name picks each benchmark's own config. Left as given: a path (method=<benchmark>/<name>),
    a method config of the user's own folders (hydra.searchpath), a name no folder holds (the checks list the
    valid ones). A name the task's benchmark lacks but another has maps there, and the task's method check names
    the valid methods, as for a method of another task. A task= sweep over benchmarks whose configs for the name
    differ cannot be written as one override: ConfigError."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from recbench.cli import catalogue

    argv = judge_paths(argv)
    at = [i for i, a in enumerate(argv) if a.startswith("method=")]
    if not at:
        return argv
    args = [a for a in argv if "=" in a and not a.startswith("-")]
    folders = _own_folders(args)
    parsed = {a: o for a, o in zip(args, OverridesParser.create().parse_overrides(args))}
    tasks = [parsed[a] for a in args if a.startswith("task=")]
    if tasks:
        o = tasks[-1]
        names = [str(v) for v in o.sweep_string_iterator()] if o.is_sweep_override() else [o.get_value_element_as_str()]
    else:
        names = [str(catalogue.default_choice("task"))]
    benches = sorted({_task_benchmark(t, folders) for t in names}, key=str)
    out = list(argv)
    for i in at:
        o = parsed[argv[i]]
        if o.value_type is not None and o.value_type.name == "GLOB_CHOICE_SWEEP":
            pool = {n for b in benches if b for n in catalogue.names(catalogue.method_group(b))}
            values = o.value().filter(sorted(pool)) or None
        elif o.is_sweep_override():
            values = [str(v) for v in o.sweep_string_iterator()] if o.value_type.name.endswith("CHOICE_SWEEP") else None
        else:
            values = [o.get_value_element_as_str()] if isinstance(o.value(), str) else None
        if not values:  # range sweep, null, a number: left to Hydra and the checks
            continue
        paths = [_method_path(v, benches, folders) for v in values]
        if o.is_sweep_override():
            out[i] = f"method={','.join(paths)}"
        else:
            out[i] = f"method={paths[0]}"
    return out


def judge_paths(argv: list[str]) -> list[str]:
    """argv with `judge=NAME` (also a sweep a,b) written as `+model@judge=NAME` when every NAME is a model entry
    (conf/model/, or the user's own folders): the judge is configured exactly like `model`, merged over the judge
    settings of conf/judge/none.yaml (docs/judges.md). `judge=none` and unknown names are left to the checks."""
    folders = _own_folders([a for a in argv if "=" in a and not a.startswith("-")])
    from recbench.cli import catalogue

    models = set(catalogue.names("model")) | {p.stem for f in folders for p in (f / "model").glob("*.yaml")}
    out = []
    for a in argv:
        key, eq, value = a.partition("=")
        names = [v.strip() for v in value.split(",")]
        if key == "judge" and eq and names != ["none"] and all(n in models and n != "none" for n in names):
            a = f"+model@judge={value}"
        out.append(a)
    return out


def _method_path(name: str, benches: list[Optional[str]], folders: list[Path]) -> str:
    """The config path of one method name for the chosen task(s)' benchmarks (see method_paths)."""
    from recbench.cli import catalogue

    if "/" in name or "${" in name or any((f / "method" / f"{name}.yaml").is_file() for f in folders):
        return name

    def holds(bench: str) -> bool:
        group = catalogue.method_group(bench)
        return name in catalogue.names(group) or any((f / group / f"{name}.yaml").is_file() for f in folders)

    others = [b for b in catalogue.method_folders() if holds(b)]
    found = {b: (b if b and holds(b) else next(iter(others), None)) for b in benches}
    paths = sorted({f"{b}/{name}" for b in found.values() if b})
    if len(paths) > 1:
        raise ConfigError(f"method={name} is a different config for each benchmark that the task= sweep spans "
                          f"({', '.join(paths)}): sweep one benchmark's tasks at a time, or name one "
                          f"(method={paths[0]})")
    return paths[0] if paths else name


def _own_folders(args: list[str]) -> list[Path]:
    """The user's own config folders of a command (hydra.searchpath=[file://...]), as paths."""
    out: list[Path] = []
    for a in args:
        if a.split("=", 1)[0] == "hydra.searchpath":
            out += [Path(e.strip().strip("'\"")[len("file://"):]) for e in a.split("=", 1)[1].strip("[]").split(",")
                    if e.strip().strip("'\"").startswith("file://")]
    return out


def _task_benchmark(task: str, folders: list[Path], seen: tuple[str, ...] = ()) -> Optional[str]:
    """The conf/method/ folder of a task config: a packaged one, or one of the user's own folders (its `_target_`,
    else that of the config its defaults list names); None when it cannot be told."""
    from recbench.cli import catalogue

    own = next((f / "task" / f"{task}.yaml" for f in folders if (f / "task" / f"{task}.yaml").is_file()), None)
    if own is None:
        return catalogue.task_benchmark(task) if task in catalogue.names("task") else None
    try:
        data = yaml.safe_load(own.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError):  # the config checks name the file and line
        return None
    if not isinstance(data, dict):
        return None
    if data.get("_target_"):
        bench = catalogue.benchmark_of(str(data["_target_"]))
        return bench if bench in catalogue.method_folders() else None
    parents = [d for d in data.get("defaults") or [] if isinstance(d, str) and d != "_self_" and d not in seen]
    return next((b for b in (_task_benchmark(d, folders, (*seen, task)) for d in parents) if b), None)
