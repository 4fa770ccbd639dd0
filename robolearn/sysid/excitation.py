"""Excitation signals for system identification: bounded multisines.

A multisine is a sum of sines at several frequencies with Schroeder phases, which keep its peak low
for the energy it carries (Schroeder 1970, "Synthesis of low-peak-factor signals and binary
sequences with low autocorrelation"); each channel gets its own frequencies so that the fit can tell
the joints apart. The signal is scaled so that its largest excursion is exactly the amplitude
asked for, then faded in and out so that the robot starts and ends at rest: it never leaves the
band it is given, which the caller sets inside the safety limits.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from robolearn.sysid.model import SysidError

FloatArray = npt.NDArray[np.float64]


def multisine(
    n_steps: int,
    dt: float,
    amplitude: FloatArray,
    *,
    f_low: float = 0.2,
    f_high: float = 2.0,
    n_freqs: int = 6,
    fade: float = 0.5,
    seed: int = 0,
) -> FloatArray:
    """(n_steps, C) offsets, channel c within ``[-amplitude[c], amplitude[c]]``.

    ``f_low`` and ``f_high`` (Hz) bound the frequencies; ``fade`` (s) is the raised-cosine ramp at
    each end; ``seed`` draws which frequencies each channel gets.
    """
    amp = np.asarray(amplitude, dtype=np.float64).reshape(-1)
    if n_steps < 2 or dt <= 0:
        raise SysidError(f"an excitation needs at least 2 steps of positive length, got {n_steps} x {dt} s")
    if not (0 < f_low < f_high) or f_high >= 0.5 / dt:
        raise SysidError(
            f"excitation frequencies must satisfy 0 < f_low < f_high < {0.5 / dt:g} Hz (half the sample "
            f"rate), got {f_low:g}..{f_high:g}"
        )
    if not np.isfinite(amp).all() or (amp < 0).any():
        raise SysidError("excitation amplitudes must be finite and >= 0")
    rng = np.random.default_rng(seed)
    t = np.arange(n_steps) * dt
    grid = np.geomspace(f_low, f_high, n_freqs * len(amp))
    out = np.zeros((n_steps, len(amp)))
    for c in range(len(amp)):
        # Interleaved frequencies: channel c takes every len(amp)-th one from a shuffled start.
        freqs = grid[(np.arange(n_freqs) * len(amp) + (c + rng.integers(len(amp)))) % len(grid)]
        k = np.arange(1, n_freqs + 1)
        phases = -np.pi * k * (k - 1) / n_freqs  # Schroeder
        signal = np.sin(2 * np.pi * freqs[None, :] * t[:, None] + phases[None, :]).sum(axis=1)
        peak = np.abs(signal).max()
        out[:, c] = amp[c] * signal / peak if peak > 0 else 0.0
    ramp = np.ones(n_steps)
    m = min(int(round(fade / dt)), n_steps // 2)
    if m > 0:
        ramp[:m] = 0.5 - 0.5 * np.cos(np.pi * np.arange(m) / m)
        ramp[-m:] = ramp[:m][::-1]
    return out * ramp[:, None]
