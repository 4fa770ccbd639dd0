"""What a fit leaves for a person to review: MuJoCo's HTML report and a plot of the trajectories."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from robolearn.sysid.fit import FitResult, simulate
from robolearn.sysid.model import SysidModel
from robolearn.sysid.recording import Recording

log = logging.getLogger(__name__)


def trajectory_error(measured: Recording, simulated: Recording) -> float:
    """Root-mean-square joint position error of a simulated recording against the measured one (rad or m)."""
    return float(np.sqrt(np.mean((measured.qpos - simulated.qpos) ** 2)))


def write_html_report(fit: FitResult, path: Path, title: str) -> None:
    """``mujoco.sysid``'s report (parameters, signals, confidence intervals, covariance), no videos."""
    from mujoco import sysid

    p = fit.problem
    report = sysid.default_report(
        models_sequences=p["sequences"],
        initial_params=p["params"],
        opt_params=p["fitted"],
        residual_fn=p["residual_fn"],
        opt_result=p["opt_result"],
        title=title,
        build_model=p["build_model"],
        generate_videos=False,
    )
    report.save(str(path))


def plot_trajectories(
    model: SysidModel, fit: FitResult, recordings: Sequence[Recording], path: Path, max_recordings: int = 2
) -> None:
    """A PNG of each joint's measured position against the nominal and the identified model's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [r.for_model(model) for r in recordings[:max_recordings]]
    nominal = [simulate(model, r, None) for r in shown]
    identified = [simulate(model, r, fit.params.dynamics()) for r in shown]
    n = len(model.joints)
    fig, axes = plt.subplots(n, len(shown), figsize=(6 * len(shown), 2.2 * n), squeeze=False, sharex="col")
    for c, (rec, nom, ide) in enumerate(zip(shown, nominal, identified, strict=True)):
        for j, joint in enumerate(model.joints):
            ax = axes[j, c]
            ax.plot(rec.times, rec.qpos[:, j], "k", lw=1.5, label="measured")
            ax.plot(rec.times, nom.qpos[:, j], "C3--", lw=1, label="nominal model")
            ax.plot(rec.times, ide.qpos[:, j], "C0", lw=1, label="identified model")
            ax.set_ylabel(joint)
        axes[0, c].set_title(
            f"{rec.name}: rms error {trajectory_error(rec, nom):.3g} nominal, "
            f"{trajectory_error(rec, ide):.3g} identified"
        )
        axes[-1, c].set_xlabel("time (s)")
    axes[0, 0].legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
