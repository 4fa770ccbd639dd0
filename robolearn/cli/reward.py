"""``robolearn reward``: train a success classifier as a learned reward, or measure one."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated

import tyro

from robolearn.hil.config import RewardEvalCmd, RewardTrainCmd


@dataclass(frozen=True)
class RewardCmd:
    """Learned rewards for tasks where no simulator computes one."""

    what: tyro.conf.OmitSubcommandPrefixes[
        Annotated[RewardTrainCmd, tyro.conf.subcommand("train")]
        | Annotated[RewardEvalCmd, tyro.conf.subcommand("eval")]
    ]

    def check(self) -> None:
        """The chosen step's option ranges."""
        self.what.check()


def _show(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def run_reward_train(cmd: RewardTrainCmd) -> None:
    """``robolearn reward train DATASET``: train, report held-out precision and recall, save."""
    from robolearn.hil.reward_classifier import train_reward_classifier  # torch and pyarrow

    summary = train_reward_classifier(cmd)
    held = summary["held_out"]
    print(
        f"reward classifier trained on {summary['train_episodes']} episodes (threshold "
        f"{summary['threshold']:.2f} from {summary['validation_episodes']} validation episodes): held-out "
        f"precision {_show(held['precision'])}, recall {_show(held['recall'])} over "
        f"{summary['held_out_episodes']} episodes ({held['frames']} frames, {held['positives']} "
        f"successes); saved to {summary['out']}"
    )
    print(json.dumps(summary))


def run_reward_eval(cmd: RewardEvalCmd) -> None:
    """``robolearn reward eval CLASSIFIER DATASET``: frame-level precision and recall."""
    from robolearn.hil.reward_classifier import evaluate_reward_classifier  # torch and pyarrow

    result = evaluate_reward_classifier(cmd)
    print(
        f"{cmd.classifier} on {result['dataset']}: precision {_show(result['precision'])}, recall "
        f"{_show(result['recall'])} over {result['frames']} frames ({result['positives']} successes)"
    )
    print(json.dumps(result))


def run_reward(cmd: RewardCmd) -> None:
    """Dispatch to ``reward train`` or ``reward eval``."""
    if isinstance(cmd.what, RewardTrainCmd):
        run_reward_train(cmd.what)
    else:
        run_reward_eval(cmd.what)
