"""Whether a HalfCheetah run's policy runs upright or on its back (docs/learner.md, "The stalled
HalfCheetah seeds run on their backs").

Each run folder's latest policy (``robolearn train gym:HalfCheetah-v5`` or the gym part of ``bench
learn`` with ``--out``) acts deterministically in Gymnasium's ``HalfCheetah-v5`` for a few episodes;
per episode: the return, the torso's mean pitch (``qpos[2]``; about pi when the cheetah lies on its
back), the share of steps with the pitch beyond pi/2, the mean forward speed and the share of action
components at their bounds.

    .venv/bin/python scripts/halfcheetah-gait.py RUN [RUN ...]
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np

from robolearn.policy.loading import load_policy

EPISODES = 2


def main(runs: list[str]) -> None:
    env = gym.make("HalfCheetah-v5")
    data = env.unwrapped.data  # type: ignore[attr-defined]
    for run in runs:
        policy, _ = load_policy(Path(run))
        for episode in range(EPISODES):
            obs, _ = env.reset(seed=100 + episode)
            ret, pitch, speed, at_bound = 0.0, [], [], []
            done = False
            while not done:
                action = policy.act({"obs": obs[None].astype(np.float32)})[0]
                obs, reward, terminated, truncated, _ = env.step(action)
                ret += float(reward)
                pitch.append(float(data.qpos[2]))
                speed.append(float(data.qvel[0]))
                at_bound.append(float(np.mean(np.abs(action) > 0.99)))
                done = terminated or truncated
            p = np.asarray(pitch)
            print(
                f"{run} episode {episode}: return {ret:,.0f}, pitch {p.mean():.2f} rad "
                f"(beyond pi/2 in {np.mean(np.abs(p) > math.pi / 2):.0%} of steps), "
                f"speed {np.mean(speed):.2f} m/s, actions at a bound {np.mean(at_bound):.0%}"
            )


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
