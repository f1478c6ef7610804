"""A trl/transformers callback that appends each logged step to a CSV and shows reward / KL on the progress bar."""
from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any, Optional, Sequence

from transformers import TrainerCallback
from transformers.trainer_callback import ProgressCallback

SFT_COLUMNS = ("step", "loss", "mean_token_accuracy", "grad_norm", "learning_rate")
RFT_BASE_COLUMNS = ("step", "reward", "reward_std", "kl", "loss", "entropy", "completions/mean_length",
                    "frac_reward_zero_std", "grad_norm", "learning_rate")


def rft_columns(components: Sequence[str]) -> tuple[str, ...]:
    """CSV columns of a GRPO run: step, mean reward, its std, KL, ..., then each component's mean."""
    return RFT_BASE_COLUMNS + tuple(f"rewards/{c}/mean" for c in components)


class CurveLogger(TrainerCallback):
    """Writes one CSV row per logged training step (columns fixed up front; missing values left empty)."""

    def __init__(self, path: str | Path, columns: Sequence[str], postfix: Sequence[str] = ("reward", "kl", "loss")):
        self.path, self.columns, self.postfix = Path(path), list(columns), list(postfix)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "w", newline="") as f:
            csv.writer(f).writerow(self.columns)
        self.rows: list[dict[str, Any]] = []
        self._progress: Optional[ProgressCallback] = None

    def attach(self, trainer: Any) -> "CurveLogger":
        """Find the trainer's progress bar, to show the latest reward / KL on it."""
        self._progress = next((c for c in trainer.callback_handler.callbacks if isinstance(c, ProgressCallback)), None)
        return self

    def on_log(self, args, state, control, logs: Optional[dict] = None, **kwargs):
        """Append the step's metrics (training logs only; the end-of-training summary is skipped)."""
        logs = logs or {}
        if "train_runtime" in logs or not any(k in logs for k in self.columns[1:]):
            return
        row = {c: logs.get(c, "") for c in self.columns}
        row["step"] = state.global_step
        self.rows.append(row)
        with open(self.path, "a", newline="") as f:
            csv.writer(f).writerow([row[c] for c in self.columns])
        bar = getattr(self._progress, "training_bar", None)
        if bar is not None:
            bar.set_postfix({k: f"{float(logs[k]):.3f}" for k in self.postfix
                             if isinstance(logs.get(k), (int, float)) and not math.isnan(float(logs[k]))})


def read_curve(path: str | Path) -> dict[str, list[float]]:
    """The CSV as {column: values} (empty cells as NaN)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    cols = rows[0].keys() if rows else []
    return {c: [float(r[c]) if r[c] not in ("", None) else math.nan for r in rows] for c in cols}


def plot_curve(path: str | Path, out: str | Path, columns: Sequence[str] = (), window: int = 1) -> Path:
    """A PNG of the curve: mean reward (or loss) and each reward component per step, KL on a second axis; with
    window > 1 the steps are faint and the mean over each block of `window` steps (e.g. one epoch) is drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c = read_curve(path)
    main = list(columns) or [k for k in c if k == "reward" or k.startswith("rewards/")] or ["loss"]
    fig, ax = plt.subplots(figsize=(7, 4))
    for k in main:
        label = k.replace("rewards/", "").replace("/mean", "")
        line, = ax.plot(c["step"], c[k], marker="o", alpha=0.3 if window > 1 else 1.0, label=None if window > 1 else label)
        if window > 1:
            means = blocks(c[k], window)
            ax.plot([c["step"][min(i * window + window - 1, len(c["step"]) - 1)] for i in range(len(means))], means,
                    color=line.get_color(), linewidth=2.5, marker="s", label=f"{label} (mean per {window} steps)")
    ax.set_xlabel("step")
    ax.legend(loc="upper left", fontsize=8)
    if "kl" in c and not columns:
        ax2 = ax.twinx()
        ax2.plot(c["step"], c["kl"], color="grey", linestyle="--", label="kl")
        ax2.set_ylabel("KL")
    fig.tight_layout()
    fig.savefig(str(out), dpi=120)
    plt.close(fig)
    return Path(out)


def thirds(values: Sequence[float]) -> dict[str, float]:
    """Mean of the first and of the last third of a per-step series (NaN skipped) and their difference: the trend."""
    n = len(values) // 3
    if n == 0:
        raise ValueError(f"need at least 3 steps for a trend, got {len(values)}")
    first, last = _nanmean(values[:n]), _nanmean(values[-n:])
    return {"steps": len(values), "third": n, "first": first, "last": last, "rise": last - first}


def blocks(values: Sequence[float], size: int) -> list[float]:
    """Mean of each consecutive block of `size` steps (the last block may be shorter; NaN skipped)."""
    return [_nanmean(values[i:i + size]) for i in range(0, len(values), size)]


def _nanmean(values: Sequence[float]) -> float:
    xs = [x for x in values if not math.isnan(x)]
    return sum(xs) / len(xs) if xs else math.nan
