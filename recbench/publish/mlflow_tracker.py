"""MLflow behind the tracker interface: one MLflow run per recbench run, a sweep as a parent run whose children are
its jobs (`mlflow.parentRunId`). `tracking.uri` is any MLflow tracking URI: `sqlite:///path/mlflow.db` or a file
store offline, a server's http(s) URL. Artifacts of a sqlite store go beside the database (`mlartifacts/`)."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Optional

from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

from recbench.publish.content import TAG_CONTENT, TAG_KIND, TAG_RUN_DIR, TAG_SWEEP_DIR, RunContent
from recbench.publish.tracker import FINISHED, Tracker, TrackerUnreachable

#: MLflow's limits on one log_batch call
_PARAMS_PER_BATCH = 100
_METRICS_PER_BATCH = 1000


def _quoted(value: str) -> str:
    """A value in an MLflow filter string (single quotes, or double quotes when it holds one)."""
    return f'"{value}"' if "'" in value else f"'{value}'"


#: what a connection failure is called inside requests' long messages
_CAUSES = ("Connection refused", "Name or service not known", "timed out", "No route to host",
           "Temporary failure in name resolution", "certificate verify failed")


def _short(e: BaseException) -> str:
    """A failure to reach the store in a few words (requests' messages run to a paragraph)."""
    text = str(e)
    cause = next((c for c in _CAUSES if c.lower() in text.lower()), None)
    if cause is not None:
        return cause.lower()
    return ((text.strip().splitlines() or [type(e).__name__])[0])[:200]


def _chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


class MlflowTracker(Tracker):
    """tracking.uri, tracking.experiment, tracking.timeout_s (conf/tracking/mlflow.yaml)."""

    name = "mlflow"

    def __init__(self, node: dict[str, Any]):
        super().__init__(node)
        uri = str(node.get("uri") or "sqlite:///mlflow.db")
        if uri.startswith(("http://", "https://")):  # a server that is down costs seconds, not minutes of retries
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(int(node.get("timeout_s") or 10)))
        self.uri = uri
        self.client = MlflowClient(tracking_uri=uri)
        self._experiment: Optional[str] = None

    @property
    def where(self) -> str:
        """The tracking URI."""
        return self.uri

    def check(self) -> None:
        """The store answers a search (a sqlite database is created, its folder made, on first use)."""
        if self.uri.startswith("sqlite:///"):
            db = Path(self.uri[len("sqlite:///"):])
            try:
                db.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise TrackerUnreachable(f"cannot make {db.parent} ({e.strerror})") from None
        try:
            self.experiment_id()
        except Exception as e:  # noqa: BLE001 - any failure to reach the store is one line, never a failed run
            raise TrackerUnreachable(_short(e)) from None

    def experiment_id(self) -> str:
        """The experiment's id (tracking.experiment, made on first use)."""
        if self._experiment is None:
            name = str(self.node.get("experiment") or "recbench")
            exp = self.client.get_experiment_by_name(name)
            if exp is None:
                location = None
                if self.uri.startswith("sqlite:///"):
                    location = (Path(self.uri[len("sqlite:///"):]).resolve().parent / "mlartifacts" / name).as_uri()
                self._experiment = self.client.create_experiment(name, artifact_location=location)
            else:
                self._experiment = exp.experiment_id
        return self._experiment

    def start(self, name: str, params: dict[str, str], tags: dict[str, str], parent: Optional[str]) -> str:
        """A new MLflow run (RUNNING) with every param and tag; a child of `parent` in a sweep."""
        tags = {**tags, **({"mlflow.parentRunId": parent} if parent else {})}
        run = self.client.create_run(self.experiment_id(), tags=tags, run_name=name)
        self.run_ref = run.info.run_id
        for chunk in _chunks([Param(k, v) for k, v in params.items()], _PARAMS_PER_BATCH):
            self.client.log_batch(self.run_ref, params=chunk)
        return self.run_ref

    def log(self, content: RunContent) -> None:
        """Every metric (slices and CI bounds), the identity tags, metrics.json, samples.jsonl and the report."""
        assert self.run_ref is not None, "log before start"
        now = int(time.time() * 1000)
        metrics = [Metric(k, v, now, 0) for k, v in content.metrics.items()]
        for chunk in _chunks(metrics, _METRICS_PER_BATCH):
            self.client.log_batch(self.run_ref, metrics=chunk)
        self.client.log_batch(self.run_ref, tags=[RunTag(k, v) for k, v in content.tags.items()])
        for path in content.artifacts:
            self.client.log_artifact(self.run_ref, str(path))

    def end(self, status: str) -> None:
        """The run's end status."""
        if self.run_ref is not None:
            self.client.set_terminated(self.run_ref, status)

    def _search(self, filters: list[str]) -> list[Any]:
        return self.client.search_runs([self.experiment_id()], filter_string=" and ".join(filters), max_results=1000)

    def start_sweep(self, sweep_dir: Path, params: dict[str, str]) -> str:
        """The sweep's parent run: found again by its sweep dir, else made (RUNNING)."""
        found = self._search([f"tags.`{TAG_SWEEP_DIR}` = {_quoted(str(sweep_dir))}", f"tags.`{TAG_KIND}` = 'sweep'"])
        if found:
            return found[0].info.run_id
        run = self.client.create_run(self.experiment_id(), run_name=f"sweep {sweep_dir.name}",
                                     tags={TAG_SWEEP_DIR: str(sweep_dir), TAG_KIND: "sweep"})
        for chunk in _chunks([Param(k, v) for k, v in params.items()], _PARAMS_PER_BATCH):
            self.client.log_batch(run.info.run_id, params=chunk)
        return run.info.run_id

    def end_sweep(self, ref: str, status: str, report: Optional[Path]) -> None:
        """The sweep report as the parent's artifact, then its status."""
        if report is not None and report.is_file():
            self.client.log_artifact(ref, str(report))
        self.client.set_terminated(ref, status)

    def existing(self, content: RunContent) -> Optional[str]:
        """A FINISHED run of this run dir holding the same metrics.json (by hash)."""
        found = self._search([f"tags.`{TAG_RUN_DIR}` = {_quoted(str(content.run_dir))}",
                              f"tags.`{TAG_CONTENT}` = '{content.sha}'", f"attributes.status = '{FINISHED}'"])
        return found[0].info.run_id if found else None

    def retire(self, content: RunContent, keep: str) -> int:
        """Delete this run dir's other runs (MLflow keeps them, marked deleted, until `mlflow gc`)."""
        old = [r.info.run_id for r in self._search([f"tags.`{TAG_RUN_DIR}` = {_quoted(str(content.run_dir))}"])
               if r.info.run_id != keep]
        for run_id in old:
            self.client.delete_run(run_id)
        return len(old)
