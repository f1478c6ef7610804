"""The training curve CSV: one row per logged step with reward, KL and each component; the end summary is skipped."""
from __future__ import annotations

import csv
import math

import pytest

pytestmark = pytest.mark.fast
# transformers (the curve module's TrainerCallback) is imported in the tests, not at collection: every pytest-xdist
# worker collects every file, and importing it costs seconds of CPU in each


def test_curve_rows_and_plot(tmp_path):
    from transformers import TrainerState

    from recbench.tasks.recbench_plus.train.curve import CurveLogger, plot_curve, read_curve, rft_columns

    cols = rft_columns(["recall", "cmr"])
    log = CurveLogger(tmp_path / "curve.csv", cols)
    state = TrainerState()
    for step, (r, kl, rec) in enumerate([(0.1, 0.0, 0.05), (0.3, 0.002, 0.2)], start=1):
        state.global_step = step
        log.on_log(None, state, None, logs={"reward": r, "kl": kl, "rewards/recall/mean": rec, "loss": 0.01})
    log.on_log(None, state, None, logs={"train_runtime": 12.0, "train_loss": 0.01})  # summary: not a step
    rows = list(csv.DictReader(open(tmp_path / "curve.csv")))
    assert [r["step"] for r in rows] == ["1", "2"] and list(rows[0]) == list(cols)
    assert rows[1]["reward"] == "0.3" and rows[1]["kl"] == "0.002" and rows[1]["rewards/recall/mean"] == "0.2"
    c = read_curve(tmp_path / "curve.csv")
    assert c["reward"] == [0.1, 0.3] and math.isnan(c["rewards/cmr/mean"][0])
    png = plot_curve(tmp_path / "curve.csv", tmp_path / "curve.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_thirds_trend_hand_computed():
    from recbench.tasks.recbench_plus.train.curve import thirds

    t = thirds([0.0, -0.2, 0.1, 0.3, 0.5, 0.4, 0.6])  # 7 steps: thirds of 2 steps
    assert t["third"] == 2 and math.isclose(t["first"], -0.1) and math.isclose(t["last"], 0.5)
    assert math.isclose(t["rise"], 0.6)
    assert math.isclose(thirds([1.0, math.nan, 0.0, 2.0])["first"], 1.0)  # NaN skipped
    import pytest

    with pytest.raises(ValueError):
        thirds([0.1, 0.2])


def test_block_means_and_the_smoothed_plot(tmp_path):
    import math

    from recbench.tasks.recbench_plus.train.curve import blocks, plot_curve

    assert blocks([1.0, 2.0, 3.0, 4.0, math.nan, 6.0, 7.0], 3) == [2.0, 5.0, 7.0]
    f = tmp_path / "curve.csv"
    f.write_text("step,reward,kl\n" + "".join(f"{i},{0.1 * i},{0.01 * i}\n" for i in range(1, 7)))
    png = plot_curve(f, tmp_path / "c.png", window=3)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
