"""How much one numpy call slows the MuJoCo step that follows it (docs/backends.md, "AVX-512 and the
engine").

A task's one-world cycle of episodes (``robolearn.bench.sim``'s, robolearn's own states and
controls) is stepped with the backend's ``step`` in a tight loop; between two engine calls one numpy
function runs on a small float64 array, and only the engine calls are timed. On an Intel Xeon with
AVX-512 some of numpy's 512-bit kernels make the next engine call slower; run it again with
``NPY_DISABLE_CPU_FEATURES="X86_V4 AVX512_ICL AVX512_SPR"`` to see numpy without them.

    .venv/bin/python scripts/numpy-before-engine.py [TASK]    # ant by default
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import mujoco
import numpy as np

from robolearn.bench.sim import _EpisodeCycle

ROUNDS = 8


def probes() -> dict[str, Callable[[], Any]]:
    """A numpy call on one world's small arrays, by name; ``none`` calls nothing."""
    rng = np.random.default_rng(0)
    x, low = rng.normal(size=(1, 8)), np.full((1, 8), -1.0)
    wrench = rng.normal(size=(1, 13, 6))
    positive = np.abs(x) + 0.1
    return {
        "none": lambda: None,
        "maximum": lambda: np.maximum(x, low),
        "minimum": lambda: np.minimum(x, low),
        "clip": lambda: np.clip(wrench, -1.0, 1.0),
        "exp": lambda: np.exp(x),
        "tanh": lambda: np.tanh(x),
        "tan": lambda: np.tan(x),
        "arctan2": lambda: np.arctan2(x, low),
        "sin": lambda: np.sin(x),
        "sqrt": lambda: np.sqrt(positive),
        "less, where": lambda: np.where(x <= low, low, x),
        "add": lambda: x + low,
        "sum": lambda: np.add.reduce(wrench, axis=None),
    }


def engine_microseconds(cycle: _EpisodeCycle, probe: Callable[[], Any]) -> float:
    """Mean microseconds of the backend's step over three passes through the cycle, ``probe``
    called before each."""
    sim = cycle.env.unwrapped.vec.sim  # type: ignore[attr-defined]
    model, data, substeps = sim.model, sim.data, cycle.env.unwrapped.vec._substeps  # type: ignore[attr-defined]
    mujoco.mj_setState(model, data, cycle.first, cycle.spec)
    mujoco.mj_forward(model, data)
    steps, spent = 3 * cycle.cycle, 0.0
    for i in range(steps):
        k = i % cycle.cycle
        probe()
        start = time.perf_counter()
        sim.step(cycle.controls[k][None], substeps)
        spent += time.perf_counter() - start
        state = cycle.resets.get(k)
        if state is not None:
            mujoco.mj_setState(model, data, state, cycle.spec)
            mujoco.mj_forward(model, data)
    return spent / steps * 1e6


def main(task: str = "ant") -> None:
    cycle = _EpisodeCycle(task, np.random.default_rng(0), seed=3)
    calls = probes()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(ROUNDS):  # the probes take turns, so each round sees the same machine
        for name, probe in calls.items():
            times[name].append(engine_microseconds(cycle, probe))
    base = statistics.median(times["none"])
    print(f"{task}: the backend's step after one numpy call (median of {ROUNDS} rounds)")
    for name, runs in times.items():
        us = statistics.median(runs)
        print(f"  {name:12s} {us:7.1f} us  ({us / base - 1:+.1%})")
    cycle.env.close()


if __name__ == "__main__":
    main(*sys.argv[1:2])
