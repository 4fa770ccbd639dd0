"""Where one world's step goes inside the environment's loop (docs/backends.md, "In the loop").

The environment of a task (``robolearn/PandaPickCube-v0`` by default) goes through
``robolearn.bench.sim``'s cycle of episodes, as ``bench sim --parts single`` steps it, with its
backend's ``step`` and the environment's ``reset`` timed where they run; then raw ``mj_step``
through the same states (the bench's contender). What the environment spends outside the engine
and its resets, here, is its Python as it runs between engine calls, where ``bench sim``'s "outside
the engine" rows time the same Python with the engine a no-op (warm caches, no physics between).

    .venv/bin/python scripts/engine-in-loop.py [TASK] [ROUNDS]
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

import numpy as np

from robolearn.bench.sim import _EpisodeCycle, _RawReplay


def main(task: str, rounds: int) -> None:
    cycle = _EpisodeCycle(task, np.random.default_rng(0), 0)
    raw = _RawReplay(cycle)
    sim: Any = cycle.env.unwrapped.vec.sim  # type: ignore[attr-defined]
    step, reset = sim.step, cycle.env.reset
    engine: list[int] = []
    resets: list[int] = []

    def timed_step(ctrl: Any, substeps: int) -> None:
        start = time.perf_counter_ns()
        step(ctrl, substeps)
        engine.append(time.perf_counter_ns() - start)

    def timed_reset(**kwargs: Any) -> Any:
        start = time.perf_counter_ns()
        out = reset(**kwargs)
        resets.append(time.perf_counter_ns() - start)
        return out

    sim.step, cycle.env.reset = timed_step, timed_reset
    n = 3 * cycle.cycle
    print(f"{task}: {cycle.label}, {rounds} rounds of {n} steps, microseconds per step")
    print("env step | engine in the loop | its resets | the rest (Python) | raw mj_step | ratio")
    for _ in range(rounds):
        engine.clear()
        resets.clear()
        start = time.perf_counter()
        for i in range(n):
            cycle.step_env(i)
        ours = (time.perf_counter() - start) / n * 1e6
        start = time.perf_counter()
        for i in range(n):
            raw.step(i)
        theirs = (time.perf_counter() - start) / n * 1e6
        in_engine, in_resets = sum(engine) / n / 1e3, sum(resets) / n / 1e3
        rest = ours - in_engine - in_resets
        print(
            f"{ours:8.1f} | {in_engine:18.1f} | {in_resets:10.1f} | {rest:17.1f} | {theirs:11.1f} | "
            f"{theirs / ours:.3f}"
        )
    print(f"reset median {statistics.median(resets) / 1e3:.0f} us ({len(resets)} in the last round)")
    cycle.env.close()


if __name__ == "__main__":
    task = sys.argv[1] if len(sys.argv) > 1 else "panda_pick_cube"
    main(task, int(sys.argv[2]) if len(sys.argv) > 2 else 4)
