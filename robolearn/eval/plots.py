"""Pictures of results: learning curves as PNG."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np

matplotlib.use("Agg")  # files only; no display is needed or wanted
import matplotlib.pyplot as plt


def plot_learning_curve(evals: Sequence[dict[str, Any]], path: Path, title: str) -> Path:
    """Evaluated success rate (with its 95% interval) and return against environment steps."""
    steps = [e["env_steps"] for e in evals]
    fig, (ax_s, ax_r) = plt.subplots(1, 2, figsize=(10, 3.6))
    ax_s.plot(steps, [e["success_rate"] for e in evals], marker="o")
    ax_s.fill_between(
        steps,
        [e["success_rate_ci95"][0] for e in evals],
        [e["success_rate_ci95"][1] for e in evals],
        alpha=0.25,
    )
    ax_s.set(xlabel="environment steps", ylabel="success rate", ylim=(-0.02, 1.02), title=f"{title}: success")
    ax_r.plot(steps, [e["return_mean"] for e in evals], marker="o", color="tab:orange")
    ax_r.set(xlabel="environment steps", ylabel="return", title=f"{title}: return")
    for ax in (ax_s, ax_r):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_intervention_rate(rates: Sequence[float], path: Path, title: str, window: int = 20) -> Path:
    """Share of each training episode's steps a human drove, with a moving average."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    episodes = range(1, len(rates) + 1)
    ax.plot(episodes, rates, ".", alpha=0.35, label="per episode")
    if len(rates) >= window:
        smooth = np.convolve(rates, np.full(window, 1.0 / window), mode="valid")
        ax.plot(range(window, len(rates) + 1), smooth, label=f"mean of {window}")
    ax.set(
        xlabel="training episode",
        ylabel="intervention rate",
        ylim=(-0.02, 1.02),
        title=f"{title}: interventions",
    )
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_success_by_minute(
    runs: dict[str, dict[str, tuple[float, float, float]]],
    zero_shot: float,
    path: Path,
    title: str,
) -> Path:
    """Success on the robot against robot minutes trained, one line per run: each run's
    ``{minute: (success, low, high)}`` (the 95% interval as a band), and the zero-shot success of
    the policy the fine-tuned runs started from as a dashed level."""
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    ax.axhline(zero_shot, color="grey", linestyle="--", label=f"zero-shot ({zero_shot:.2f})")
    for name, points in runs.items():
        minutes = sorted(points, key=float)
        xs = [float(m) for m in minutes]
        line = ax.plot(xs, [points[m][0] for m in minutes], marker="o", label=name)[0]
        ax.fill_between(
            xs,
            [points[m][1] for m in minutes],
            [points[m][2] for m in minutes],
            color=line.get_color(),
            alpha=0.15,
        )
    ax.set(xlabel="robot minutes trained", ylabel="success on the robot", ylim=(-0.02, 1.02), title=title)
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
