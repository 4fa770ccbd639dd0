"""``robolearn distill``: DAgger from a task's scripted expert, a progress bar, then the summary."""

from __future__ import annotations

import json
import sys
from typing import Any

from robolearn.rl.config import DistillCmd

__all__ = ["DistillCmd", "run_distill"]


def run_distill(cmd: DistillCmd) -> None:
    """The ``distill`` subcommand: a progress bar on stderr, then the results (last line JSON)."""
    from tqdm import tqdm

    from robolearn.rl.distill import distill  # torch: only when distilling

    with tqdm(total=cmd.iterations, desc=f"distill {cmd.task}", unit="round", file=sys.stderr) as bar:

        def progress(result: dict[str, Any]) -> None:
            bar.set_postfix(
                success=f"{result['success_rate']:.2f}",
                loss=f"{result['loss']:.1e}",
                samples=str(result["samples"]),
                refresh=False,
            )
            bar.update(1)

        summary = distill(cmd, progress)
    print(
        f"{summary['task']}: success {summary['success_rate_nominal']:.1%} nominal, "
        f"{summary['success_rate_randomized']:.1%} randomized, after {summary['env_steps']} env steps "
        f"in {summary['train_minutes']:.1f} min ({summary['wall_minutes']:.1f} with the final evaluations)"
    )
    print(f"run: {summary['run_dir']}  (curve: {summary['learning_curve']})")
    print(json.dumps({k: v for k, v in summary.items() if k != "evals"}))
