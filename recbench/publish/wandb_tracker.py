"""Weights & Biases behind the tracker interface, offline by default (`WANDB_MODE=offline` needs no account; `wandb
sync` uploads later), online when the user is logged in. One W&B run per run dir (its id is a hash of the run
dir, so re-logging resumes the same run), a sweep as a W&B group, the samples as a W&B Table."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Optional

import wandb

from recbench.publish.content import TAG_CONTENT, RunContent
from recbench.publish.tracker import FAILED, FINISHED, KILLED, Tracker, TrackerUnreachable
from recbench.publish.wandb_offline import read_offline_run
from recbench.store.schema import read_run

_EXIT = {FINISHED: 0, FAILED: 1, KILLED: 130}


def run_id(run_dir: str | Path) -> str:
    """The W&B run id of a run dir (the same on every re-log, so `wandb sync` meets one run)."""
    return "rb" + hashlib.sha1(str(Path(run_dir).resolve()).encode()).hexdigest()[:14]


def _text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)


class WandbTracker(Tracker):
    """tracking.project, tracking.entity, tracking.mode, tracking.dir, tracking.table_rows (conf/tracking/wandb.yaml)."""

    name = "wandb"

    def __init__(self, node: dict[str, Any]):
        super().__init__(node)
        os.environ.setdefault("WANDB_SILENT", "true")
        self.mode = str(node.get("mode") or os.environ.get("WANDB_MODE") or "offline")
        self.dir = Path(str(node.get("dir") or "."))
        self.run: Any = None

    @property
    def where(self) -> str:
        """The mode and the folder of offline runs."""
        return f"{self.mode} ({self.dir / 'wandb'})"

    def check(self) -> None:
        """Offline: the folder can be written; online: an API key is set (`wandb login`)."""
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise TrackerUnreachable(f"cannot make {self.dir} ({e.strerror})") from None
        if self.mode == "online" and not (os.environ.get("WANDB_API_KEY") or wandb.api.api_key):
            raise TrackerUnreachable("not logged in (wandb login, or WANDB_MODE=offline)")

    def _init(self, name: str, config: dict[str, Any], group: Optional[str], job_type: str, rid: str) -> Any:
        settings = wandb.Settings(init_timeout=float(self.node.get("timeout_s") or 30), console="off",
                                  x_disable_stats=True)
        return wandb.init(project=str(self.node.get("project") or "recbench"), entity=self.node.get("entity"),
                          name=name, group=group, job_type=job_type, config=config, mode=self.mode,
                          dir=str(self.dir), id=rid, resume="allow", settings=settings, reinit="create_new")

    def start(self, name: str, params: dict[str, str], tags: dict[str, str], parent: Optional[str]) -> str:
        """A W&B run with the config (params) and the identity tags, in the sweep's group when there is one."""
        self.run = self._init(name, {**params, **tags}, parent, "run", run_id(tags.get("recbench.run_dir", name)))
        self.run_ref = self.run.id
        return self.run.id

    def log(self, content: RunContent) -> None:
        """Metrics (summary and one logged step), the samples as a Table, the files as an artifact."""
        run = self.run
        run.config.update(content.tags, allow_val_change=True)
        run.log(dict(content.metrics))
        run.summary.update({**content.metrics, TAG_CONTENT: content.sha})
        rows = int(self.node.get("table_rows") or 10000)
        samples = read_run(content.run_dir).samples()
        if samples:
            names = sorted({m for s in samples[:rows] for m in s.metrics})
            table = wandb.Table(columns=["id", "parse_status", "prediction", "truth", "meta", *names])
            for s in samples[:rows]:
                table.add_data(s.id, s.parse_status, _text(s.prediction), _text(s.truth), _text(s.meta),
                               *(s.metrics.get(m) for m in names))
            run.log({"samples": table})
            run.summary["samples_rows_logged"] = min(rows, len(samples))
        art = wandb.Artifact(f"recbench-{run.id}", type="recbench-run")
        for path in content.artifacts:
            art.add_file(str(path))
            if path.suffix == ".html":
                run.log({"report": wandb.Html(path.read_text(encoding="utf-8"))})
        if content.samples_link:
            art.add_reference(content.samples_link, name="samples.jsonl")
        run.log_artifact(art)

    def end(self, status: str) -> None:
        """finish() with exit code 0 (FINISHED), 1 (FAILED) or 130 (KILLED): W&B shows the last two as failed."""
        if self.run is not None:
            self.run.finish(exit_code=_EXIT.get(status, 1))
            self.run = None

    def start_sweep(self, sweep_dir: Path, params: dict[str, str]) -> str:
        """The sweep is a W&B group named after the sweep dir; its jobs' runs join it."""
        return f"sweep-{sweep_dir.name}"

    def end_sweep(self, ref: str, status: str, report: Optional[Path]) -> None:
        """A run of job type 'sweep' in the group holding the sweep report."""
        run = self._init(ref, {"recbench.kind": "sweep"}, ref, "sweep", run_id(ref + "/sweep"))
        if report is not None and report.is_file():
            run.log({"report": wandb.Html(report.read_text(encoding="utf-8"))})
            art = wandb.Artifact(f"recbench-{run.id}", type="recbench-sweep")
            art.add_file(str(report))
            run.log_artifact(art)
        run.finish(exit_code=_EXIT.get(status, 1))

    def existing(self, content: RunContent) -> Optional[str]:
        """An offline run of this run dir that ended with exit code 0 and holds the same metrics.json."""
        rid = run_id(content.run_dir)
        for path in sorted((self.dir / "wandb").glob(f"offline-run-*-{rid}/run-{rid}.wandb")):
            seen = read_offline_run(path)
            if seen.get("exit_code") == 0 and seen["summary"].get(TAG_CONTENT) == content.sha:
                return rid
        return None
