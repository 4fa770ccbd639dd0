"""Excitation signals for system identification: bounded multisines.

A multisine is a sum of sines at several frequencies with Schroeder phases, which keep its peak low
for the energy it carries (Schroeder 1970, "Synthesis of low-peak-factor signals and binary
sequences with low autocorrelation"); each channel gets its own frequencies so that the fit can tell
the joints apart. The signal is scaled so that its largest excursion is exactly the amplitude
asked for, then faded in and out so that the robot starts and ends at rest: it never leaves the
band it is given, which the caller sets inside the safety limits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from robolearn.sysid.model import SysidError, SysidModel

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
    m = min(round(fade / dt), n_steps // 2)
    if m > 0:
        ramp[:m] = 0.5 - 0.5 * np.cos(np.pi * np.arange(m) / m)
        ramp[-m:] = ramp[:m][::-1]
    return out * ramp[:, None]


def joint_excitation(
    model: SysidModel,
    seconds: float,
    dt: float,
    amplitude: float,
    *,
    margin: float = 0.1,
    seed: int = 0,
) -> FloatArray:
    """(T, U) joint position targets: a multisine of ``amplitude`` (rad or m) around the home pose of
    each servo, every target kept ``margin`` inside its joint's range.

    Only for robots driven by joint position servos (an actuator per joint); the targets are what a
    safety layer would pass unchanged, as they never leave the joint limits.
    """
    import mujoco

    mj = model.spec.compile()
    joints = []
    for i in range(mj.nu):
        if (
            mj.actuator_trntype[i] != mujoco.mjtTrn.mjTRN_JOINT
            or mj.actuator_biastype[i] != mujoco.mjtBias.mjBIAS_AFFINE
        ):
            raise SysidError(
                f"robot {model.robot}: joint excitation needs a position servo per joint; actuator "
                f"{mj.actuator(i).name} is not one (excite it through its own controller instead)"
            )
        joints.append(int(mj.actuator_trnid[i, 0]))
    home = np.array(
        [model.home_qpos.get(mj.joint(j).name, float(mj.qpos0[mj.jnt_qposadr[j]])) for j in joints]
    )
    lo = np.where(mj.jnt_limited[joints], mj.jnt_range[joints, 0] + margin, -np.inf)
    hi = np.where(mj.jnt_limited[joints], mj.jnt_range[joints, 1] - margin, np.inf)
    n = round(seconds / dt)
    offsets = multisine(n, dt, np.full(len(joints), amplitude), seed=seed)
    return np.clip(home[None, :] + offsets, lo, hi)


def record_excitation(
    model: SysidModel,
    out: Path,
    episodes: int,
    seconds: float,
    amplitude: float,
    fps: int,
    sim_params: Path | None = None,
) -> dict[str, Any]:
    """Drive the simulated robot (its dynamics from ``sim_params``, else nominal) with joint
    multisines and save positions, velocities, efforts and commands as a LeRobot dataset at ``out``."""
    from robolearn.sysid.fit import simulate
    from robolearn.sysid.recording import Recording, write_dataset
    from robolearn.tasks.sim_params import load_sim_params

    dyn = load_sim_params(sim_params).dynamics() if sim_params is not None else None
    dt = 1.0 / fps
    recordings = []
    for ep in range(episodes):
        ctrl = joint_excitation(model, seconds, dt, amplitude, seed=ep)
        mj = model.spec.compile()
        start = np.array([model.home_qpos.get(j, float(mj.joint(j).qpos0[0])) for j in model.joints])
        n = len(ctrl)
        blank = Recording(
            f"episode {ep}",
            np.arange(n, dtype=np.float64) * dt,
            model.joints,
            np.tile(start, (n, 1)),
            np.zeros((n, len(model.joints))),
            model.actuators,
            ctrl,
        )
        recordings.append(simulate(model, blank, dyn))
    write_dataset(out, recordings, model.robot, fps)
    return {
        "robot": model.robot,
        "episodes": episodes,
        "frames": sum(len(r.times) for r in recordings),
        "out": str(out),
    }
