"""The tracker interface: one `Tracker` subclass per experiment tracker (MLflow, Weights & Biases), found by name in
`TRACKERS` and imported only when chosen, so a third tracker (TensorBoard, Aim) is one module and one line here.

A tracker's life for one recbench run: `check` (can the store be reached? raises TrackerUnreachable), `start` (the
tracker run, its params and tags, under a sweep's parent when there is one), then `log` (metrics, artifacts,
samples) and `end` with FINISHED, FAILED or KILLED. A crash between `start` and `log` ends the run FAILED, never
FINISHED. A sweep is `start_sweep` / `end_sweep` around its jobs. `existing` and `retire` make re-logging
idempotent: one live tracker run per run dir, the same content never logged twice."""
from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Optional

from recbench.publish.content import RunContent

#: tracker name -> "module:class", imported on first use (the tracker's library is imported only then)
TRACKERS = {
    "mlflow": "recbench.publish.mlflow_tracker:MlflowTracker",
    "wandb": "recbench.publish.wandb_tracker:WandbTracker",
}
FINISHED, FAILED, KILLED = "FINISHED", "FAILED", "KILLED"


class TrackerUnreachable(RuntimeError):
    """The tracker's store or server cannot be reached, or its library is not installed: the run goes on
    untracked and says so in one line."""


class Tracker(ABC):
    """One experiment tracker. `node` is the `tracking` config node (conf/tracking/<name>.yaml) as a dict."""

    name = ""

    def __init__(self, node: dict[str, Any]):
        self.node = node
        self.run_ref: Optional[str] = None  # the tracker's id of the run started last

    @property
    def where(self) -> str:
        """Where this tracker writes, for messages (a URI, a folder)."""
        return str(self.node.get("uri") or "")

    @abstractmethod
    def check(self) -> None:
        """Raise TrackerUnreachable when the store or server cannot be reached (quickly: seconds)."""

    @abstractmethod
    def start(self, name: str, params: dict[str, str], tags: dict[str, str], parent: Optional[str]) -> str:
        """Start a tracker run with its params and tags (under the sweep run `parent` when given); its id."""

    @abstractmethod
    def log(self, content: RunContent) -> None:
        """Log the run's metrics, artifacts and samples into the run started last."""

    @abstractmethod
    def end(self, status: str) -> None:
        """End the run started last with FINISHED, FAILED or KILLED."""

    def start_sweep(self, sweep_dir: Path, params: dict[str, str]) -> str:
        """Start (or find again) the parent run of a sweep; its id, which each job's `start` takes as `parent`."""
        return str(sweep_dir)

    def end_sweep(self, ref: str, status: str, report: Optional[Path]) -> None:
        """End a sweep's parent run, with the sweep's report HTML when there is one."""

    def existing(self, content: RunContent) -> Optional[str]:
        """The id of a finished tracker run holding exactly this content (re-logging skips it), else None."""
        return None

    def retire(self, content: RunContent, keep: str) -> int:
        """Remove this run dir's older tracker runs besides `keep` (one live run per run dir); how many."""
        return 0


def make_tracker(node: dict[str, Any]) -> Tracker:
    """The tracker a `tracking` node names (its `name`); TrackerUnreachable when its library is not installed."""
    name = str(node.get("name") or "")
    if name not in TRACKERS:
        raise ValueError(f"tracking.name={name!r}: not a tracker (choose one of {', '.join(sorted(TRACKERS))})")
    module, cls = TRACKERS[name].split(":")
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        raise TrackerUnreachable(f"{name} is not installed ({e.name or e}); pip install 'recbench[tracking]'") from None
    return getattr(mod, cls)(node)
