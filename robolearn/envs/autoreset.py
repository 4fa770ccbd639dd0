"""Reading what a same-step autoreset vector environment returns, Gymnasium's way.

Under Gymnasium's ``AutoresetMode.SAME_STEP`` a world whose episode ends is reset inside the same
``step``: the returned observation is already its next episode's first, the step's own outcome
moves into the info dict (``info["final_obs"]``: an object array with the world's last
observation, None elsewhere; ``info["final_info"]``: that step's info, each key with its
``_``-prefixed mask; ``info["_final_obs"]`` and ``info["_final_info"]`` mark the worlds), and the
top-level info holds what ``reset`` returned for those worlds. Both
:class:`~robolearn.envs.task_env.TaskEnv` and :class:`~robolearn.envs.gym_adapter.GymVectorTask`
follow that convention; the functions here are how robolearn's loops read it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from robolearn.sim.backend import BoolArray, FloatArray, IntArray
from robolearn.tasks.core import Observation

SUCCESS_KEYS = ("success", "is_success")
"""Step-info keys that report success: robolearn's tasks say ``success``; Gymnasium-Robotics and
Stable-Baselines3 (which reads it at an episode's end) say ``is_success``."""


def transition_next_obs(next_obs: Observation, info: dict[str, Any]) -> Observation:
    """The next state of each world's transition: ``info["final_obs"]`` where an episode ended
    (the returned observation already starts the next one), else the returned observation."""
    if "final_obs" not in info:
        return next_obs
    ended = np.flatnonzero(info["_final_obs"])
    out = {k: v.copy() for k, v in next_obs.items()}
    for key, value in out.items():
        value[ended] = np.stack([info["final_obs"][i][key] for i in ended])
    return out


def step_info(info: dict[str, Any], key: str, num_envs: int) -> tuple[npt.NDArray[Any], BoolArray]:
    """Each world's ``info[key]`` for the step just taken, and which worlds reported it.

    Where an episode ended, the step's info is in ``info["final_info"]`` (the top level holds the
    reset's info there).
    """
    values: npt.NDArray[Any] = np.zeros(num_envs, dtype=bool)
    present = np.zeros(num_envs, dtype=bool)
    for source in (info, info.get("final_info", {})):
        if key in source:
            mask = np.asarray(source[f"_{key}"], bool)
            if not present.any():
                values = np.zeros(num_envs, dtype=np.asarray(source[key]).dtype)
            values[mask] = np.asarray(source[key])[mask]
            present |= mask
    return values, present


def step_success(info: dict[str, Any], num_envs: int) -> tuple[BoolArray, BoolArray]:
    """Each world's success in the step just taken (any of :data:`SUCCESS_KEYS`), and which
    worlds reported one."""
    success = np.zeros(num_envs, dtype=bool)
    reported = np.zeros(num_envs, dtype=bool)
    for key in SUCCESS_KEYS:
        values, present = step_info(info, key, num_envs)
        success |= values.astype(bool) & present
        reported |= present
    return success, reported


class EndedEpisodes(NamedTuple):
    """The episodes that ended in one step, one entry per world in ``worlds``."""

    worlds: IntArray
    returns: FloatArray
    lengths: IntArray
    successes: BoolArray | None
    """Whether the success condition held at any step; None where the env reports no success."""


class EpisodeStatistics:
    """Each world's running episode return, length and success, beside a same-step autoreset env.

    Returns and lengths count as Gymnasium's ``RecordEpisodeStatistics`` counts them under
    ``SAME_STEP`` (every step belongs to an episode); success is whether a success key
    (:data:`SUCCESS_KEYS`) was true at any step of the episode. robolearn's loops keep this beside
    the environment instead of wrapping it, because Gymnasium's vector wrappers do not forward
    attributes (a task's name, its counters, ``render``) and a wrapper's ``info["episode"]`` would
    clash with one a user adds.
    """

    def __init__(self, num_envs: int) -> None:
        self.returns = np.zeros(num_envs)
        self.lengths = np.zeros(num_envs, dtype=np.int64)
        self.successes = np.zeros(num_envs, dtype=bool)
        self.reports_success = False
        """Whether the env has reported success in any step (Gymnasium envs may never)."""

    def reset(self, mask: BoolArray | None = None) -> None:
        """Start new episodes in the masked worlds (all without a mask)."""
        ids = slice(None) if mask is None else np.asarray(mask, bool)
        self.returns[ids], self.lengths[ids], self.successes[ids] = 0.0, 0, False

    def step(
        self, reward: npt.ArrayLike, terminated: npt.ArrayLike, truncated: npt.ArrayLike, info: dict[str, Any]
    ) -> EndedEpisodes:
        """Count one step of every world; return the episodes it ended (their counters restart)."""
        self.returns += np.asarray(reward, np.float64)
        self.lengths += 1
        success, reported = step_success(info, len(self.lengths))
        self.reports_success |= bool(reported.any())
        self.successes |= success
        return self.end(np.asarray(terminated, bool) | np.asarray(truncated, bool))

    def end(self, mask: BoolArray, success: BoolArray | None = None) -> EndedEpisodes:
        """End the masked worlds' episodes here (``success``: a verdict from outside the env)."""
        ids = np.flatnonzero(mask)
        successes = self.successes[ids] if success is None else np.asarray(success, bool)[ids]
        ended = EndedEpisodes(
            ids,
            self.returns[ids].copy(),
            self.lengths[ids].copy(),
            successes.copy() if self.reports_success or success is not None else None,
        )
        self.reset(np.asarray(mask, bool))
        return ended
