"""Hydra callback: write the cross-benchmark report into <sweep dir>/report when a multirun ends."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)

_LAST: dict[str, Path] = {}


def last_sweep_dir() -> Path | None:
    """The sweep dir of the multirun that ended last in this process (None before any)."""
    return _LAST.get("sweep_dir")


class ReportCallback(Callback):
    """on_multirun_end: collect every run under the sweep dir into report.md / report.html / CSVs."""

    def __init__(self, enabled: bool = True, out_subdir: str = "report", title: str = "recbench sweep report",
                 formats: Sequence[str] = ("md", "csv", "html")):
        self.enabled, self.out_subdir, self.title, self.formats = enabled, out_subdir, title, list(formats)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Write the report; a failure is logged, never raised (the sweep's results are already on disk)."""
        _LAST["sweep_dir"] = Path(str(config.hydra.sweep.dir))
        sweep_dir = Path(str(config.hydra.sweep.dir))
        try:  # one side-by-side table of the sweep's runs (each job printed one line)
            from recbench.cli.sweep_table import print_sweep

            print_sweep(sweep_dir)
        except Exception as e:  # noqa: BLE001 - like the report, the table must not fail a finished sweep
            log.error("sweep table failed: %s", e)
        if not self.enabled:
            return
        from recbench.report.writer import write_report

        quiet = logging.getLogger("recbench.report.writer")  # its INFO 'report: N runs -> PATH' would print as a
        level = quiet.level  # raw '[HYDRA] report: ...' line under Hydra's multirun logging; the path is printed below
        quiet.setLevel(max(logging.WARNING, level))
        # the report reads every run and compares every pair: seconds to minutes, said before, never silent
        print(f"writing the sweep's report into {sweep_dir / self.out_subdir} (tables, significance groups, paired "
              "comparisons) ...", flush=True)
        try:
            bound = float(OmegaConf.select(config, "report.max_parse_failure_rate", default=0.5))
            written = write_report([sweep_dir], sweep_dir / self.out_subdir, title=self.title, formats=self.formats,
                                   max_parse_failure_rate=bound)
        except Exception as e:  # noqa: BLE001 - reporting must not turn a finished sweep into a failure
            log.error("sweep report failed: %s (rerun: python -m recbench.report %s)", e, sweep_dir)
            return
        finally:
            quiet.setLevel(level)
        print(f"sweep report: {written.get('html') or written.get('md')}")  # printed once (not logged as well)
