"""The exact sign-flip distribution of differences that lie on a lattice, by a discrete Fourier transform.

The sign-flip statistic is S = sum_i e_i |d_i| with independent signs e_i = +-1 (probability 1/2 each). When every
|d_i| is a whole multiple k_i of one step h (PTC of small groups: thirds and sixths; rating errors on a half-point
scale; counts), S / h is an integer in [-K, K], K = sum k_i, and its distribution is known exactly: its discrete
Fourier transform on N > 2K points is the product of the units' cos(2 pi j k_i / N) (a unit adds +k_i or -k_i with
probability 1/2 each), grouped by distinct k as cos(...)^count. One inverse real FFT gives every probability, and
the two-sided p = P(|S| >= |s_observed|) is a tail sum: O(n + N log N) whatever the p, against Monte Carlo's
resamples x units. The only error is floating-point rounding of the transform, bounded by `fft_error` (about 1e-9
at 60,000 units of PTC; tests/stats/test_stats_lattice.py checks the p against full enumeration and scipy).
"""
from __future__ import annotations

import math

import numpy as np

#: the largest transform (points) computed: 2^23 (64 MB of float64 probabilities); a wider lattice is left to Monte Carlo
MAX_POINTS = 2 ** 23
#: the steps tried are the smallest |d| divided by 1 .. MAX_DIVISOR (thirds of sixths, twelfths, ...)
MAX_DIVISOR = 60
#: |d| / h within this of a whole number counts as on the lattice (float rounding of thirds is ~1e-16)
ON_LATTICE_TOL = 1e-7


def lattice_steps(d: np.ndarray) -> np.ndarray | None:
    """|d| as whole multiples k >= 1 of one step (int64), or None when no step h = min|d| / q (q <= MAX_DIVISOR) fits
    every unit or the transform would exceed MAX_POINTS."""
    a = np.abs(np.asarray(d, dtype=float))
    if len(a) == 0 or not np.all(np.isfinite(a)) or a.min() <= 0:
        return None
    u = np.unique(a)
    r = u / u[0]
    for q in range(1, MAX_DIVISOR + 1):
        k = r * q
        if np.max(np.abs(k - np.rint(k))) <= ON_LATTICE_TOL * max(1.0, float(k[-1])):
            steps = np.rint(a / u[0] * q).astype(np.int64)
            return steps if 2 * int(steps.sum()) + 1 <= MAX_POINTS else None
    return None


def _points(total: int) -> int:
    """A transform length above 2 * total (no wrap-around) that FFTs fast: the next power of two."""
    return 1 << (2 * total).bit_length()


def fft_error(points: int) -> float:
    """A bound on the rounding error of a tail sum of the inverse transform: points x log2(points) x 4 eps (each of the
    points probabilities is off by at most about log2(points) x eps of the transform's largest value, 1)."""
    return points * max(1.0, math.log2(points)) * 4 * float(np.finfo(np.float64).eps)


def sign_flip_lattice_p(steps: np.ndarray, signs: np.ndarray) -> tuple[float, float]:
    """Exact two-sided sign-flip p of sum(signs * steps) (steps >= 1 whole numbers, signs +-1) and its rounding bound.

    p = P(|S| >= |s|) over the 2^n equally likely sign vectors, S = sum e_i steps_i (the observed sum counts as
    extreme, as scipy counts ties)."""
    total = int(steps.sum())
    n_pts = _points(total)
    observed = abs(int(np.dot(signs.astype(np.int64), steps)))
    values, counts = np.unique(steps, return_counts=True)
    omega = 2 * np.pi * np.arange(n_pts // 2 + 1) / n_pts
    log_mag = np.zeros(len(omega))
    negative = np.zeros(len(omega), dtype=bool)
    for v, c in zip(values.tolist(), counts.tolist()):  # cos^c in logs: 60,000 units underflow nothing they need
        cv = np.cos(omega * v)
        with np.errstate(divide="ignore"):
            log_mag += c * np.log(np.abs(cv))
        if c % 2:
            negative ^= cv < 0
    spectrum = np.exp(log_mag)
    spectrum[negative] *= -1
    pmf = np.fft.irfft(spectrum, n_pts)  # pmf[s mod n_pts] = P(S = s), s in [-total, total]
    upper = float(pmf[observed:total + 1].sum())
    lower = float(pmf[n_pts - total:n_pts - observed + 1].sum()) if observed > 0 else float(pmf[n_pts - total:].sum())
    p = upper + lower if observed > 0 else 1.0
    return min(1.0, max(0.0, p)), fft_error(n_pts)
