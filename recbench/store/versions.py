"""What versions.json records about the code: package versions, recbench's requirements, the git commit."""
from __future__ import annotations

import functools
import subprocess
from importlib import metadata
from pathlib import Path


@functools.lru_cache(maxsize=1)
def package_versions() -> dict[str, str]:
    """Installed versions of recbench, the packages it declares and vllm (read once per process)."""
    pkgs = {}
    for name in ["recbench", *recbench_requirements(), "vllm"]:
        try:
            pkgs[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return pkgs


def recbench_requirements() -> list[str]:
    """Names of the packages recbench declares (core and extras), for versions.json."""
    import re

    try:
        reqs = metadata.requires("recbench") or []
    except metadata.PackageNotFoundError:
        return []
    return list(dict.fromkeys(re.split(r"[\s<>=!~;\[(]", r, maxsplit=1)[0] for r in reqs))


@functools.lru_cache(maxsize=1)
def git_commit() -> str | None:
    """The commit of the recbench checkout, when running from one (read once per process)."""
    here = Path(__file__).resolve().parents[1]  # the recbench package
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None
