"""Which config keys make two runs one configuration in a report (conf/report/config_keys.yaml): keys that pick a
subset of a benchmark's data (the benchmarks' presentations declare theirs) and keys that never tell two
configurations apart."""
from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Optional

import yaml


@dataclass
class ConfigKeys:
    """Subset keys (runs differing only there are parts of one configuration) and ignored keys (bookkeeping)."""

    subset_keys: list[str]
    ignore_keys: list[str]

    @staticmethod
    def load(path: Optional[str | Path] = None) -> "ConfigKeys":
        """The packaged conf/report/config_keys.yaml (or a YAML file of the same shape)."""
        text = (Path(path).read_text() if path else
                resources.files("recbench.conf").joinpath("report", "config_keys.yaml").read_text())
        d = yaml.safe_load(text) or {}
        return ConfigKeys(subset_keys=list(d.get("subset_keys") or []), ignore_keys=list(d.get("ignore_keys") or []))

    def ignored(self, key: str) -> bool:
        """True for a flattened config key ('run.limit_strategy') that never distinguishes configurations (a seed
        neither: seeds are averaged)."""
        if key.split(".")[-1] == "seed":
            return True
        return any(key == k or key.startswith(k + ".") for k in self.ignore_keys)
