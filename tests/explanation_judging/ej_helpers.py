"""Helpers for the explanation-judging tests: recompute every correlation from a run dir's samples.jsonl with scipy,
independently of the task's code."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from scipy import stats

FUNCS = {"pearson": stats.pearsonr, "spearman": stats.spearmanr, "kendall": stats.kendalltau}


def samples(run_dir: Path) -> list[dict]:
    """samples.jsonl as dicts."""
    return [json.loads(x) for x in (Path(run_dir) / "samples.jsonl").read_text().splitlines()]


def _corr(name: str, x: list[float], y: list[float]) -> float:
    if len(x) < 2 or len(set(x)) < 2 or len(set(y)) < 2:
        return math.nan
    return float(FUNCS[name](x, y)[0])


def recompute(recs: list[dict], fallback: float = 3.0) -> dict[str, dict[str, float]]:
    """aspect -> {<coef>_<level>: value, users_skipped, pairs_skipped} from the records alone (prediction = the judge's
    score, None scored as the fallback; truth.rating = the user's rating)."""
    out: dict[str, dict[str, float]] = {}
    for aspect in sorted({r["meta"]["aspect"] for r in recs}):
        rs = [r for r in recs if r["meta"]["aspect"] == aspect]
        x = [fallback if r["prediction"] is None else float(r["prediction"]) for r in rs]
        y = [float(r["truth"]["rating"]) for r in rs]
        v: dict[str, float] = {f"{c}_dataset": _corr(c, x, y) for c in FUNCS}
        for level, key in (("user", lambda r: r["meta"]["user_id"]),
                           ("pair", lambda r: (r["meta"]["user_id"], r["meta"]["movie_id"]))):
            groups: dict = {}
            for r, xi, yi in zip(rs, x, y):
                groups.setdefault(key(r), ([], []))
                groups[key(r)][0].append(xi)
                groups[key(r)][1].append(yi)
            for c in FUNCS:
                vals = [_corr(c, gx, gy) for gx, gy in groups.values()]
                ok = [t for t in vals if not math.isnan(t)]
                v[f"{c}_{level}"] = float(np.mean(ok)) if ok else math.nan
                v[f"{level}s_skipped"] = len(vals) - len(ok)
        out[aspect] = v
    return out


def same(a, b) -> bool:
    """Equal to 1e-12, NaN (or null) equal to NaN."""
    na = a is None or (isinstance(a, float) and math.isnan(a))
    nb = b is None or (isinstance(b, float) and math.isnan(b))
    return na and nb or (not na and not nb and abs(a - b) < 1e-12)
