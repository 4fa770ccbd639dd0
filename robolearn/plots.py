"""Pictures of results: learning curves as PNG."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

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
