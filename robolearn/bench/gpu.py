"""``robolearn bench sim --parts gpu`` (issue 14): task environments on MuJoCo Warp against raw MuJoCo Warp.

For every task that runs on ``mujoco_warp``, at 1,024, 4,096 and 8,192 worlds on one CUDA device:
robolearn's environment steps per second (actions in, terms evaluated, observations out, ended worlds
reset, all on the device) beside raw MuJoCo Warp: ``mujoco_warp.step`` called ``substeps`` times on
the same model and data, recorded once as a graph and replayed (a CUDA graph on CUDA, as the backend
records its own step), with no robolearn code at all: no task terms, no checks of the state, not the
backend's stages after the substeps. That is the physics limit a MuJoCo Warp user gets by hand; the
ratio is ``gpu_vs_raw`` (goal: at least 0.8).

CUDA by default. ``--gpu-device cpu`` runs the same code on Warp's CPU device (tests and smoke runs,
with small ``--gpu-worlds``): its figures say nothing a GPU user cares about.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

from robolearn.bench.config import GPU_WORLDS, check_warp_device
from robolearn.errors import RobolearnError
from robolearn.tasks import make_task_cfg, task_names
from robolearn.tasks.worlds import TaskWorlds

log = logging.getLogger(__name__)

GPU_VS_RAW_GOAL = 0.8
"""Environment steps/s over raw MuJoCo Warp steps/s that the gpu part aims at (issue 14)."""
PLAYGROUND_PANDA_STEPS_PER_S: dict[str, float] | None = None
"""MuJoCo Playground's published environment steps/s of its Panda pick-cube task by world count, to
set beside ours: not quoted (see :data:`PLAYGROUND_PANDA_NOTE`), so the comparison is null."""
PLAYGROUND_PANDA_SOURCE = "Zakka et al., MuJoCo Playground, arXiv:2502.08844 (2025)"
PLAYGROUND_PANDA_NOTE = (
    "not quoted: of the Playground paper only its abstract, and of its repository the README, were "
    "reachable where this bench was written, and neither states Panda steps/s; a figure is not invented"
)
"""Why :data:`PLAYGROUND_PANDA_STEPS_PER_S` is null (the summary carries it beside the null)."""


def require_device(device: str = "cuda") -> str:
    """The name of the device the gpu parts run on (``cuda``, ``cuda:N`` or ``cpu``, Warp's CPU device);
    raises :class:`RobolearnError` in one line where the gpu extra or the CUDA device is missing."""
    try:
        import torch
        import warp as wp
    except ImportError as exc:
        missing = f"--parts gpu needs the gpu extra ({exc.name} is missing): pip install 'robolearn[gpu]'"
        raise RobolearnError(missing) from exc
    check_warp_device("--gpu-device", device)
    if device == "cpu":
        return "Warp CPU device"
    if not torch.cuda.is_available() or not wp.is_cuda_available():
        raise RobolearnError(
            "--parts gpu needs a CUDA GPU; none is visible (--gpu-device cpu runs it on Warp's CPU device, "
            "for tests)"
        )
    return torch.cuda.get_device_name(torch.device(device))


@contextlib.contextmanager
def on_warp_device(device: str) -> Iterator[None]:
    """Worlds made meanwhile simulate on ``device``: the backend reads its device from the environment
    (``ROBOLEARN_WARP_DEVICE``, as ``robolearn train`` and ``eval`` take it), restored afterwards."""
    from robolearn.sim.mujoco_warp_backend import DEVICE_ENV

    before = os.environ.get(DEVICE_ENV)
    os.environ[DEVICE_ENV] = device
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(DEVICE_ENV, None)
        else:
            os.environ[DEVICE_ENV] = before


def _rate(step: Callable[[], None], seconds: float, sync: Callable[[], None]) -> float:
    """Calls of ``step`` per second over ``seconds`` of wall clock, after a warm-up call."""
    step()
    sync()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step()
        count += 1
        if count % 16 == 0:
            sync()
    sync()
    return count / (time.perf_counter() - start)


def raw_stepper(sim: Any, substeps: int) -> Callable[[], None]:
    """``substeps`` calls of ``mujoco_warp.step`` on ``sim``'s model and data, recorded once as a graph
    (on CUDA after a direct call, which loads the kernels) and replayed by the returned function."""
    import mujoco_warp as mjw
    import warp as wp

    def launch() -> None:
        for _ in range(substeps):
            mjw.step(sim.m, sim.d)

    with wp.ScopedDevice(sim.wp_device):
        if sim.wp_device.is_cuda:  # a CUDA capture cannot load kernels; Warp's CPU capture can
            launch()
        with wp.ScopedCapture() as capture:
            launch()
    graph = capture.graph
    return lambda: wp.capture_launch(graph)


def _task_rates(
    task: str, num_worlds: int, seconds: float, seed: int, say: Callable[[str], None]
) -> tuple[float, float, float]:
    """(environment steps/s, raw MuJoCo Warp steps/s, seconds to the first step's end) of one task at
    ``num_worlds`` worlds, each said as soon as it is measured: a run cut short still tells."""
    import torch
    import warp as wp

    start = time.perf_counter()
    worlds = TaskWorlds(task, "mujoco_warp", num_worlds, seed=seed)
    try:
        xp, device, sim = worlds.xp, worlds.device, cast(Any, worlds.sim)
        worlds.reset_worlds(xp.arange(num_worlds, device=device))
        gen = torch.Generator(device=device).manual_seed(seed)
        low, high = worlds._act_low_x, worlds._act_high_x
        actions = low + (high - low) * torch.rand((num_worlds, len(low)), generator=gen, device=device)

        def env_step() -> None:
            result = worlds.advance(actions)
            worlds.observe()
            # On this backend the results are device tensors, typed as the host's arrays.
            done = cast(torch.Tensor, result.terminated | result.truncated)
            worlds.reset_worlds(cast(Any, torch.nonzero(done).squeeze(1)))

        def sync() -> None:
            wp.synchronize_device(sim.wp_device)

        # The first step loads Warp's kernels (compiles them where its cache is empty: minutes on a
        # fresh machine), so it is timed apart from the rates.
        env_step()
        sync()
        setup = time.perf_counter() - start
        say(f"gpu {task}, {num_worlds} worlds: built, reset and first step in {setup:.1f} s")
        env = _rate(env_step, seconds, sync) * num_worlds
        say(f"gpu {task}, {num_worlds} worlds: robolearn {env:,.0f} env steps/s")
        # The raw contender drives the same worlds with the controls of the same actions.
        sim.mj_field("ctrl")[:] = worlds.cfg.action.to_controls(worlds, actions, **worlds.cfg.action.params)
        raw = _rate(raw_stepper(sim, worlds.cfg.substeps), seconds, sync) * num_worlds
        say(f"gpu {task}, {num_worlds} worlds: raw mujoco_warp {raw:,.0f} steps/s ({env / raw:.2f})")
    finally:
        worlds.close()
    return env, raw, setup


def gpu_sim_part(
    seconds: float,
    seed: int,
    say: Callable[[str], None] = log.info,
    *,
    device: str = "cuda",
    world_counts: Sequence[int] = GPU_WORLDS,
    tasks: Sequence[str] = (),
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Table rows and the summary (``gpu_env_steps_per_s``, ``gpu_raw_steps_per_s``, ``gpu_vs_raw``) of
    ``tasks`` (every task on mujoco_warp when empty) at ``world_counts`` worlds on ``device``."""
    name = require_device(device)
    on_warp = [t for t in task_names() if "mujoco_warp" in make_task_cfg(t).backends]
    unknown = sorted(set(tasks) - set(on_warp))
    if unknown:
        raise RobolearnError(
            f"--gpu-tasks {' '.join(unknown)}: not tasks on mujoco_warp; choose from {', '.join(on_warp)}"
        )
    chosen = list(tasks) or on_warp
    rows: list[dict[str, Any]] = []
    env_rates: dict[str, dict[str, float]] = {}
    raw_rates: dict[str, dict[str, float]] = {}
    ratios: dict[str, dict[str, float]] = {}
    setups: dict[str, dict[str, float]] = {}
    with on_warp_device(device):
        for task in chosen:
            env_rates[task], raw_rates[task], ratios[task], setups[task] = {}, {}, {}, {}
            for n in world_counts:
                say(f"gpu {task}: {n} worlds on {name}")
                env, raw, setups[task][str(n)] = _task_rates(task, n, seconds, seed, say)
                env_rates[task][str(n)], raw_rates[task][str(n)] = env, raw
                ratios[task][str(n)] = env / raw
                # In the shared table's columns (robolearn.bench.report): ref/this on the raw row
                # is robolearn's rate over raw's, the task's gpu_vs_raw at n worlds.
                rows.append(
                    {"part": "gpu", "contender": f"robolearn {task}", "num_envs": n, "steps_per_s": env}
                    | {"note": name}
                )
                rows.append(
                    {"part": "gpu", "contender": f"raw mujoco_warp {task}", "num_envs": n, "steps_per_s": raw}
                    | {"reference_ratio": env / raw, "note": "mujoco_warp.step replayed, no task code"}
                )
    summary = {
        "gpu_device": name,
        "gpu_world_counts": list(world_counts),
        "gpu_env_steps_per_s": env_rates,
        "gpu_raw_steps_per_s": raw_rates,
        "gpu_vs_raw_by_task": ratios,
        # Worlds built, reset and stepped once: Warp's kernel compilation where its cache was empty.
        "gpu_setup_seconds": setups,
        # The headline: the lowest ratio of any task at any world count.
        "gpu_vs_raw": min((r for by_n in ratios.values() for r in by_n.values()), default=None),
        "gpu_vs_raw_goal": GPU_VS_RAW_GOAL,
        "playground_panda_steps_per_s": PLAYGROUND_PANDA_STEPS_PER_S,
        "playground_panda": {"source": PLAYGROUND_PANDA_SOURCE, "note": PLAYGROUND_PANDA_NOTE},
    }
    return rows, summary
