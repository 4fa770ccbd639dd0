"""Simulation throughput, side by side in one run: robolearn's environments against Gymnasium,
EnvPool and the raw engine.

Three parts, each a set of contenders measured in turn:

- ``ant``: Ant-v5 with ``num_envs`` worlds as robolearn's ``TaskEnv("ant", "mujoco_batch")``, as
  Gymnasium's asynchronous vector env (one process per world), as EnvPool's C++ thread pool, and as
  the raw limit: ``mujoco.batch`` stepping robolearn's compiled model five physics steps per call.
- ``panda``: ``panda_pick_cube`` on ``mujoco_batch`` against ``mujoco.batch`` stepping its compiled
  model ``substeps`` physics steps per call.
- ``render``: camera frames per second and memory per backend and resolution
  (:mod:`robolearn.bench.render`).
- ``single``: one world of every registered task on ``mujoco`` and on ``pybullet``; and, stepped
  one world at a time as a researcher steps ``gymnasium.make``'s environment (issue 18),
  ``robolearn/Ant-v0`` against Gymnasium's own ``Ant-v5``, and ``robolearn/PandaPickCube-v0``
  against raw ``mujoco.mj_step`` on its compiled model with the same substeps; then the same three
  environments again with their engine's step made a no-op (the state stays where it is), whose
  microseconds per step (``one_world_python_us``) are everything a step spends outside the engine:
  where a ratio's gap comes from, the environment's own Python or its physics.

The raw engine runs no task code: from the same start as robolearn's environment it writes the
controls that environment's action term made of the same actions (recorded beforehand), then steps.
One-world Gymnasium environments (robolearn's and Gymnasium's) are reset when an episode ends, as
their user does.

Every contender steps with random actions drawn before timing, so drawing them is not timed.
Contenders of a part run alternately (in reverse order every other round) for ``rounds`` rounds,
each run ``seconds`` long after a warm-up of its own. A run's rate is environment steps (worlds x
calls) per wall-clock second (``time.perf_counter``); a contender's figure is its best run, the one
least disturbed on a shared machine, and ratios are of those figures. Every run's rate is kept in
the summary. A contender that cannot run gets ``None`` and the reason.

Beside it, each run's environment steps per CPU-second that the contender consumed (its threads,
and Gymnasium's worker processes) measure efficiency: on a machine shared with other jobs, wall
time depends on what the scheduler grants (64 worker processes get more of a busy machine than 2
threads do), CPU time much less.

The one-world comparisons (issue 18) are ratios of two single-threaded contenders whose steps take
about a millisecond, and a shared machine's speed drifts by tens of percent from one second to the
next (measured: the same raw pick-cube stepping at 2,400 to 4,200 steps per CPU-second in runs a
few minutes apart). Their runs are therefore interleaved: within a round the contenders take turns
in chunks of about :data:`CHUNK_SECONDS` until each has stepped ``seconds``, so that both see the
same machine, and a round's rate is each one's steps over its own time in its chunks.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import logging
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium
import mujoco
import mujoco.batch
import numpy as np
import numpy.typing as npt

from robolearn.bench.config import SimBenchCfg
from robolearn.bench.gpu import GPU_VS_RAW_GOAL
from robolearn.bench.render import render_rows
from robolearn.bench.report import machine_info, ratio, usable_cpus, versions
from robolearn.envs.task_env import TaskEnv
from robolearn.tasks import gym_id, make_task_cfg, task_names

log = logging.getLogger(__name__)

ROBOLEARN = "robolearn mujoco_batch"
GYMNASIUM = "gymnasium async"
ENVPOOL = "envpool"
RAW = "raw mujoco.batch"

RAW_ONE = "raw mj_step"
GYM_ANT_ID = "Ant-v5"
PICK_CUBE = "panda_pick_cube"

GOALS = {
    "ant_vs_envpool": 1.3,
    "ant_vs_raw": 0.85,
    "panda_vs_raw": 0.7,
    "one_world_vs_gymnasium": 1.0,
    "pick_cube_one_world_vs_raw": 0.8,
    "gpu_vs_raw": GPU_VS_RAW_GOAL,
}
"""Targets on a 2-core machine: batched Ant against EnvPool and against its raw engine, batched Panda
against its raw engine; one world of Ant against Gymnasium's Ant-v5 and of pick-cube against raw
``mj_step`` (issue 18); every task on MuJoCo Warp against raw MuJoCo Warp, its lowest ratio (issue 14,
on one GPU)."""
ACTION_BATCHES = 64
"""Distinct pre-drawn action batches each contender cycles through."""
REPLAY_EPISODES = 8
"""Episodes of the cycle the one-world pick-cube contenders repeat (:func:`_one_world_pick_cube`)."""
SINGLE_BACKENDS = ("mujoco", "pybullet")
"""Backends of the one-world part."""
CHUNK_SECONDS = 0.02
"""Length of one turn of an interleaved contender (s): short against the machine's drift, long
against the cost of switching (each turn reads the clocks twice)."""


@dataclass
class _Contender:
    """One way of stepping environments, ready to be timed."""

    name: str
    step: Callable[[int], object]
    """Called with the call's index; steps every environment once."""
    num_envs: int
    note: str
    close: Callable[[], object]
    worker_pids: tuple[int, ...] = ()
    """Processes besides this one that do the contender's work (their CPU time counts too)."""

    def cpu_seconds(self) -> float:
        """CPU time used so far by this process and the contender's worker processes (s)."""
        return time.process_time() + sum(_process_cpu_seconds(pid) for pid in self.worker_pids)


def _process_cpu_seconds(pid: int) -> float:
    """CPU time another process has run (s), from Linux's scheduler statistics (nanoseconds)."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0]) * 1e-9


def _rate(c: _Contender, seconds: float) -> tuple[float, float]:
    """Environment steps per wall-clock second and per CPU-second of stepping for about ``seconds``."""
    calls = 0
    cpu_start = c.cpu_seconds()
    start = now = time.perf_counter()
    deadline = start + seconds
    while now < deadline:
        c.step(calls)
        calls += 1
        now = time.perf_counter()
    cpu = c.cpu_seconds() - cpu_start
    return calls * c.num_envs / (now - start), calls * c.num_envs / cpu


def _warm_up(step: Callable[[int], object], seconds: float) -> None:
    """Run ``step`` at least 3 times and for about a tenth of a run, so caches and thread pools are warm."""
    deadline = time.perf_counter() + 0.1 * seconds
    calls = 0
    while calls < 3 or time.perf_counter() < deadline:
        step(calls)
        calls += 1


def _interleaved_rates(contenders: list[_Contender], seconds: float) -> list[tuple[float, float]]:
    """Each contender's environment steps per wall-clock and per CPU-second, the contenders taking
    turns of about :data:`CHUNK_SECONDS` (in alternating order) until each has stepped ``seconds``."""
    chunks = []
    for c in contenders:  # calls per turn, from a short timed probe
        calls, start = 0, time.perf_counter()
        while calls < 3 or time.perf_counter() - start < 0.1 * CHUNK_SECONDS:
            c.step(calls)
            calls += 1
        chunks.append(max(1, round(calls * CHUNK_SECONDS / (time.perf_counter() - start))))
    k = len(contenders)
    wall, cpu, calls_made = [0.0] * k, [0.0] * k, [0] * k
    order = list(range(k))
    while min(wall) < seconds:
        for j in order:
            c, first = contenders[j], calls_made[j]
            cpu_start, start = c.cpu_seconds(), time.perf_counter()
            for i in range(first, first + chunks[j]):
                c.step(i)
            wall[j] += time.perf_counter() - start
            cpu[j] += c.cpu_seconds() - cpu_start
            calls_made[j] += chunks[j]
        order.reverse()
    return [
        (n * c.num_envs / w, n * c.num_envs / t)
        for c, n, w, t in zip(contenders, calls_made, wall, cpu, strict=True)
    ]


def _measure(
    part: str,
    contenders: list[_Contender],
    cfg: SimBenchCfg,
    progress: Callable[[str], None],
    interleave: bool = False,
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Each contender's wall-clock and CPU rates in every round; the contenders alternate within a
    round, run by run or (``interleave``) in turns of :data:`CHUNK_SECONDS` within one run."""
    rates: dict[str, list[float]] = {c.name: [] for c in contenders}
    cpu_rates: dict[str, list[float]] = {c.name: [] for c in contenders}
    for r in range(cfg.rounds):
        ordered = contenders if r % 2 == 0 else contenders[::-1]
        if interleave:
            for c in ordered:
                _warm_up(c.step, cfg.seconds)
            measured = list(zip(ordered, _interleaved_rates(ordered, cfg.seconds), strict=True))
        else:
            measured = []
            for c in ordered:
                _warm_up(c.step, cfg.seconds)
                measured.append((c, _rate(c, cfg.seconds)))
        for c, (rate, cpu_rate) in measured:
            rates[c.name].append(rate)
            cpu_rates[c.name].append(cpu_rate)
            progress(
                f"{part}: {c.name}, round {r + 1}/{cfg.rounds}: {rate:,.0f} env steps/s, "
                f"{cpu_rate:,.0f} per CPU-second"
            )
    return rates, cpu_rates


def _random_actions(env: TaskEnv, rng: np.random.Generator) -> npt.NDArray[np.float64]:
    """(ACTION_BATCHES, num_envs, A) actions uniform in the task's bounds."""
    act = env.cfg.action
    size = (ACTION_BATCHES, env.num_envs, len(act.names))
    return rng.uniform(np.asarray(act.low), np.asarray(act.high), size=size)


def _robolearn(env: TaskEnv, actions: npt.NDArray[np.float64], name: str) -> _Contender:
    def step(i: int) -> object:
        return env.step(actions[i % ACTION_BATCHES])

    note = f"{env.cfg.substeps} physics steps per env step"
    if env.sim.name == "mujoco_batch":
        note += f", {env.sim.batch.nthread} threads"  # type: ignore[attr-defined]
    return _Contender(name, step, env.num_envs, note, env.close)


def _raw(env: TaskEnv, actions: npt.NDArray[np.float64], nthread: int, seed: int) -> _Contender:
    """mujoco.batch on the env's compiled model with no task code, from the env's current state.

    Each call writes the next batch of the controls the env's action term made of ``actions``,
    recorded by stepping the env through them once (then the env is reset), and steps the physics.
    """
    sim: Any = env.sim
    batch = mujoco.batch.Batch(sim.model, env.num_envs, nthread=nthread)
    batch.state[:] = sim.batch.state
    controls = np.empty((len(actions), env.num_envs, sim.num_controls))
    env.autoreset = False  # a reset would zero a world's controls before they are recorded
    for i, action in enumerate(actions):
        env.step(action)
        controls[i] = sim.mj_field("ctrl")
    env.autoreset = True
    env.reset(seed=seed)
    ctrl = batch.bind("ctrl")
    substeps = env.cfg.substeps

    def step(i: int) -> None:
        ctrl[:] = controls[i % len(controls)]
        batch.step(nstep=substeps)

    note = f"mujoco.batch.step(nstep={substeps}), {batch.nthread} threads"
    return _Contender(RAW, step, env.num_envs, note, lambda: None)


def _envpool_ant(cfg: SimBenchCfg, unavailable: dict[str, str]) -> Any:
    """EnvPool's synchronous Ant-v5 (every world stepped per call) on the threads the batch uses, or None."""
    try:
        import envpool
    except ImportError as exc:
        unavailable[ENVPOOL] = f"envpool does not import ({exc}); pip install robolearn[bench] (Linux)"
        log.warning("ant: envpool skipped: %s", unavailable[ENVPOOL])
        return None
    threads = min(cfg.nthread or usable_cpus(), cfg.num_envs)
    try:
        pool = envpool.make(
            "Ant-v5",
            env_type="gymnasium",
            num_envs=cfg.num_envs,
            batch_size=cfg.num_envs,
            num_threads=threads,
            seed=cfg.seed,
        )
        pool.reset()
    except Exception as exc:  # EnvPool reports unknown ids and bad options as plain RuntimeErrors
        unavailable[ENVPOOL] = f"envpool failed: {exc}"
        log.warning("ant: envpool skipped: %s", unavailable[ENVPOOL])
        return None
    return pool


def _ant_contenders(cfg: SimBenchCfg, rng: np.random.Generator) -> tuple[list[_Contender], dict[str, str]]:
    n = cfg.num_envs
    unavailable: dict[str, str] = {}
    with contextlib.ExitStack() as cleanup:  # closes what was built if building fails
        # Gymnasium's worker processes are forked first, before this part starts any thread pool.
        gym_env = gymnasium.make_vec("Ant-v5", num_envs=n, vectorization_mode="async")
        cleanup.callback(gym_env.close)
        gym_env.reset(seed=cfg.seed)
        env = TaskEnv("ant", "mujoco_batch", n, seed=cfg.seed, nthread=cfg.nthread)
        cleanup.callback(env.close)
        env.reset()
        actions = _random_actions(env, rng)
        raw = _raw(env, actions, cfg.nthread, cfg.seed)
        contenders = [
            _robolearn(env, actions, ROBOLEARN),
            _Contender(
                GYMNASIUM,
                lambda i: gym_env.step(actions[i % ACTION_BATCHES]),
                n,
                f"make_vec(vectorization_mode='async'): {n} processes",
                gym_env.close,
                tuple(p.pid for p in getattr(gym_env, "processes", ())),
            ),
        ]
        pool = _envpool_ant(cfg, unavailable)
        if pool is not None:
            cleanup.callback(pool.close)
            version, threads = importlib.metadata.version("envpool"), pool.config["num_threads"]
            note = f"envpool {version}, batch_size={n}, {threads} threads"
            contenders.append(
                _Contender(ENVPOOL, lambda i: pool.step(actions[i % ACTION_BATCHES]), n, note, pool.close)
            )
        contenders.append(raw)
        cleanup.pop_all()  # built: the contenders close what they hold
    return contenders, unavailable


def _panda_contenders(cfg: SimBenchCfg, rng: np.random.Generator) -> list[_Contender]:
    env = TaskEnv("panda_pick_cube", "mujoco_batch", cfg.num_envs, seed=cfg.seed, nthread=cfg.nthread)
    env.reset()
    actions = _random_actions(env, rng)
    raw = _raw(env, actions, cfg.nthread, cfg.seed)
    return [_robolearn(env, actions, ROBOLEARN), raw]


def _single_contenders(
    task: str, cfg: SimBenchCfg, rng: np.random.Generator
) -> tuple[list[_Contender], dict[str, str]]:
    backends = make_task_cfg(task).backends
    contenders: list[_Contender] = []
    unavailable: dict[str, str] = {}
    for backend in SINGLE_BACKENDS:
        if backend not in backends:
            unavailable[backend] = f"the task runs on {', '.join(backends)} only"
            continue
        try:
            env = TaskEnv(task, backend, 1, seed=cfg.seed)
            env.reset()
        except Exception as exc:  # a backend under construction may fail in any way: record how
            unavailable[backend] = f"{type(exc).__name__}: {exc}"
            log.warning("single: %s on %s failed: %s", task, backend, unavailable[backend])
            continue
        contenders.append(_robolearn(env, _random_actions(env, rng), backend))
    return contenders, unavailable


def _gym_one_world(
    env_id: str, actions: npt.NDArray[Any], seed: int, note: str, physics: bool = True
) -> _Contender:
    """A ``gymnasium.make`` environment stepped one world at a time, reset where an episode ends
    (without ``physics``: its engine step a no-op, see :func:`_without_physics`)."""
    env = gymnasium.make(env_id)
    env.reset(seed=seed)
    if not physics:
        _without_physics(env)
        note = f"{note}, engine step a no-op"

    def step(i: int) -> None:
        _, _, terminated, truncated, _ = env.step(actions[i % ACTION_BATCHES])
        if terminated or truncated:
            env.reset()

    return _Contender(env_id, step, 1, note, env.close)


def _without_physics(env: Any) -> None:
    """Make a one-world environment's engine step a no-op: robolearn's backend ``step`` (with its
    stability check), Gymnasium's ``do_simulation`` (with its control check); the state stays put."""
    inner = env.unwrapped
    if hasattr(inner, "vec"):  # robolearn's TaskGymEnv
        inner.vec.sim.step = lambda ctrl, substeps: None
    else:  # Gymnasium's MujocoEnv
        inner.do_simulation = lambda action, n_frames: None


def _one_world_actions(env: Any, rng: np.random.Generator) -> npt.NDArray[np.float32]:
    """(ACTION_BATCHES, A) actions uniform in a one-world environment's action space."""
    space = env.action_space
    return rng.uniform(space.low, space.high, size=(ACTION_BATCHES, *space.shape)).astype(np.float32)


def _probe_actions(env_id: str, rng: np.random.Generator) -> npt.NDArray[np.float32]:
    """:func:`_one_world_actions` of a ``gymnasium.make`` environment made and closed for it."""
    probe = gymnasium.make(env_id)
    try:
        return _one_world_actions(probe, rng)
    finally:
        probe.close()


class _EpisodeCycle:
    """One world of a task's ``gymnasium.make`` environment through a fixed cycle of episodes, and
    what another contender needs to go through the same states.

    The cycle is :data:`REPLAY_EPISODES` episodes: the environment steps through the pre-drawn
    actions from a reset with ``seed`` (each later episode from its own reset), then starts over
    with a reset with ``seed``. The other contender (raw ``mj_step`` on the compiled model, or
    Gymnasium's own environment of the same model) starts each episode from the state the
    environment reset to and takes the same actions, so the two do the same physics work, state for
    state. A contender that resets from its own random stream, or never, goes through states that
    cost another amount: the raw pick-cube loop without resets took 7 % less per step, Gymnasium's
    Ant-v5 from its own resets ended an episode every 100 steps where robolearn's ended every 250
    (measured), and what a ratio measures must be the code around the physics.
    """

    def __init__(self, task: str, rng: np.random.Generator, seed: int) -> None:
        self.task, self.seed = task, seed
        self.env = gymnasium.make(gym_id(task))
        self.env.reset(seed=seed)
        self.actions = _one_world_actions(self.env, rng)
        sim: Any = self.env.unwrapped.vec.sim  # type: ignore[attr-defined]
        self.model, self.spec = sim.model, int(mujoco.mjtState.mjSTATE_INTEGRATION)
        first = self._state(sim.data)
        controls: list[npt.NDArray[np.float64]] = []
        self.resets: dict[int, npt.NDArray[np.float64]] = {}
        """Step of the cycle after which an episode ended -> the state the next one starts from."""
        for episode in range(REPLAY_EPISODES):
            ended = False
            while not ended:
                _, _, terminated, truncated, _ = self.env.step(self.actions[len(controls) % ACTION_BATCHES])
                controls.append(sim.data.ctrl.copy())
                ended = bool(terminated or truncated)
            if episode + 1 < REPLAY_EPISODES:
                self.env.reset()
                self.resets[len(controls) - 1] = self._state(sim.data)
        self.env.reset(seed=seed)
        self.resets[len(controls) - 1] = first  # the cycle ends where it began
        self.first = first
        self.controls = np.array(controls)
        """The controls the environment's action term made of each step's action, in order."""
        self.cycle = len(controls)
        self.label = f"{REPLAY_EPISODES} episodes ({self.cycle} steps) repeated"

    def _state(self, data: mujoco.MjData) -> npt.NDArray[np.float64]:
        state = np.empty(mujoco.mj_stateSize(self.model, self.spec))
        mujoco.mj_getState(self.model, data, state, self.spec)
        return state

    def qpos_qvel(
        self, state: npt.NDArray[np.float64]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """The generalized positions and velocities in a recorded state."""
        data = mujoco.MjData(self.model)
        mujoco.mj_setState(self.model, data, state, self.spec)
        return data.qpos.copy(), data.qvel.copy()

    def step_env(self, i: int) -> tuple[bool, bool]:
        """Step ``i`` of the cycle in the environment; its terminated and truncated flags."""
        k = i % self.cycle
        _, _, terminated, truncated, _ = self.env.step(self.actions[k % ACTION_BATCHES])
        if k == self.cycle - 1:
            self.env.reset(seed=self.seed)
        elif terminated or truncated:
            self.env.reset()
        return terminated, truncated

    def contender(self) -> _Contender:
        ours_id = gym_id(self.task)
        note = f"gymnasium.make({ours_id!r}), backend mujoco, {self.label}"
        return _Contender(ours_id, self.step_env, 1, note, self.env.close)


class _RawReplay:
    """Raw ``mj_step`` on an :class:`_EpisodeCycle`'s compiled model: it writes the controls the
    environment's action term made, steps the task's substeps and restores the environment's reset
    states where its episodes ended."""

    def __init__(self, cycle: _EpisodeCycle) -> None:
        self.cycle, self.model = cycle, cycle.model
        self.data = mujoco.MjData(self.model)
        mujoco.mj_setState(self.model, self.data, cycle.first, cycle.spec)
        mujoco.mj_forward(self.model, self.data)
        self.substeps = make_task_cfg(cycle.task).substeps

    def step(self, i: int) -> None:
        cycle = self.cycle
        k = i % cycle.cycle
        self.data.ctrl[:] = cycle.controls[k]
        mujoco.mj_step(self.model, self.data, nstep=self.substeps)
        state = cycle.resets.get(k)
        if state is not None:
            mujoco.mj_setState(self.model, self.data, state, cycle.spec)

    def contender(self) -> _Contender:
        steps = f"mujoco.mj_step(nstep={self.substeps})"
        note = f"{steps} on the same model through the same states, {self.cycle.label}"
        return _Contender(RAW_ONE, self.step, 1, note, lambda: None)


class _GymnasiumReplay:
    """A Gymnasium environment of the same model (Ant-v5 for ``ant``) through an
    :class:`_EpisodeCycle`'s states: the same actions, and at each of its episodes' starts its own
    ``reset``, then ``set_state`` to the robolearn environment's reset state (one ``mj_forward``
    more per episode than a plain reset). Like the robolearn environment it resets with the seed
    once a cycle, where the cycle starts over (seeding makes a new generator, tens of microseconds)."""

    def __init__(self, cycle: _EpisodeCycle, env_id: str) -> None:
        self.cycle, self.env_id = cycle, env_id
        self.env = gymnasium.make(env_id)
        self.starts = {k: cycle.qpos_qvel(state) for k, state in cycle.resets.items()}
        self._start(cycle.cycle - 1)

    def _start(self, k: int) -> None:
        """Start the episode that follows step ``k`` of the cycle."""
        self.env.reset(seed=self.cycle.seed if k == self.cycle.cycle - 1 else None)
        self.env.unwrapped.set_state(*self.starts[k])  # type: ignore[attr-defined]

    def step(self, i: int) -> tuple[bool, bool]:
        """Step ``i`` of the cycle; the environment's terminated and truncated flags."""
        cycle = self.cycle
        k = i % cycle.cycle
        _, _, terminated, truncated, _ = self.env.step(cycle.actions[k % ACTION_BATCHES])
        if k in self.starts:
            self._start(k)
        return terminated, truncated

    def contender(self) -> _Contender:
        note = f"gymnasium.make({self.env_id!r}) through the same states, {self.cycle.label}"
        return _Contender(self.env_id, self.step, 1, note, self.env.close)


def _one_world_ant(cfg: SimBenchCfg, rng: np.random.Generator) -> list[_Contender]:
    """``robolearn/Ant-v0`` and Gymnasium's ``Ant-v5`` (the same model and physics), one world each,
    through the same cycle of episodes (:class:`_EpisodeCycle`)."""
    cycle = _EpisodeCycle("ant", rng, cfg.seed)
    return [cycle.contender(), _GymnasiumReplay(cycle, GYM_ANT_ID).contender()]


def _one_world_pick_cube(cfg: SimBenchCfg, rng: np.random.Generator) -> list[_Contender]:
    """``robolearn/PandaPickCube-v0`` and raw ``mj_step`` through the same cycle of episodes."""
    cycle = _EpisodeCycle(PICK_CUBE, rng, cfg.seed)
    return [cycle.contender(), _RawReplay(cycle).contender()]


def _time_part(
    part: str,
    contenders: list[_Contender],
    unavailable: dict[str, str],
    reference: str,
    cfg: SimBenchCfg,
    progress: Callable[[str], None],
    interleave: bool = False,
) -> tuple[list[dict[str, Any]], dict[str, dict[str, list[float]]]]:
    """Time the contenders (``interleave``: see :func:`_measure`), then close them; return their
    table rows and every run's rates.

    A row's ``reference_ratio`` is the reference contender's wall-clock figure over the row's.
    """
    try:
        rates, cpu_rates = _measure(part, contenders, cfg, progress, interleave)
    finally:
        for c in contenders:
            c.close()
    best = {name: max(r) for name, r in rates.items()}
    rows = [
        {
            "part": part,
            "contender": c.name,
            "num_envs": c.num_envs,
            "steps_per_s": best[c.name],
            "median_steps_per_s": statistics.median(rates[c.name]),
            "steps_per_cpu_s": max(cpu_rates[c.name]),
            "reference_ratio": ratio(best.get(reference), best[c.name]),
            "note": c.note,
        }
        for c in contenders
    ]
    rows += [_row_of_unavailable(part, name, reason) for name, reason in unavailable.items()]
    runs = {c.name: {"steps_per_s": rates[c.name], "steps_per_cpu_s": cpu_rates[c.name]} for c in contenders}
    return rows, runs


def _row_of_unavailable(part: str, name: str, reason: str) -> dict[str, Any]:
    empty = ("num_envs", "steps_per_s", "median_steps_per_s", "steps_per_cpu_s", "reference_ratio")
    return {"part": part, "contender": name} | dict.fromkeys(empty) | {"note": reason}


def _figures(
    runs: dict[str, dict[str, list[float]]], unavailable: dict[str, str], kind: str = "steps_per_s"
) -> dict[str, Any]:
    """Each contender's best rate of one kind, None for those that could not run, and why."""
    figures: dict[str, Any] = {name: max(r[kind]) for name, r in runs.items()} | dict.fromkeys(unavailable)
    if unavailable:
        figures["unavailable"] = dict(unavailable)
    return figures


def _ratios(ant: dict[str, Any] | None, panda: dict[str, Any] | None) -> dict[str, float | None]:
    """The headline ratios of robolearn's batched environments, from the parts that ran."""
    ratios: dict[str, float | None] = {}
    if ant is not None:
        ratios["ant_vs_envpool"] = ratio(ant[ROBOLEARN], ant.get(ENVPOOL))
        ratios["ant_vs_gymnasium"] = ratio(ant[ROBOLEARN], ant[GYMNASIUM])
        ratios["ant_vs_raw"] = ratio(ant[ROBOLEARN], ant[RAW])
    if panda is not None:
        ratios["panda_vs_raw"] = ratio(panda[ROBOLEARN], panda[RAW])
    return ratios


def _outside_the_engine(cfg: SimBenchCfg, rng: np.random.Generator) -> list[_Contender]:
    """The one-world parts' Gymnasium environments with their engine step a no-op."""
    contenders = []
    for env_id in (gym_id("ant"), GYM_ANT_ID, gym_id(PICK_CUBE)):
        actions = _probe_actions(env_id, rng)
        contenders.append(
            _gym_one_world(env_id, actions, cfg.seed, f"gymnasium.make({env_id!r})", physics=False)
        )
    return contenders


def _one_world_ratios(figures: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    """The headline ratios of the one-world parts, from each contender's figure of one kind."""
    ant, pick = figures["ant"], figures[PICK_CUBE]
    return {
        "one_world_vs_gymnasium": ratio(ant[gym_id("ant")], ant[GYM_ANT_ID]),
        "pick_cube_one_world_vs_raw": ratio(pick[gym_id(PICK_CUBE)], pick[RAW_ONE]),
    }


def _one_world_parts(
    cfg: SimBenchCfg, rng: np.random.Generator, say: Callable[[str], None]
) -> tuple[list[dict[str, Any]], dict[str, dict[str, dict[str, list[float]]]], dict[str, Any]]:
    """Time the one-world comparisons; return their rows, every run's rates and the summary entries
    (figures and ratios, wall-clock and, under ``per_cpu_second``, per CPU-second)."""
    rows: list[dict[str, Any]] = []
    runs: dict[str, dict[str, dict[str, list[float]]]] = {}
    wall: dict[str, Any] = {}
    cpu: dict[str, Any] = {}
    for task, build in (("ant", _one_world_ant), (PICK_CUBE, _one_world_pick_cube)):
        label = f"one world {task}"
        say(f"{label}: building one world per contender")
        part_rows, runs[label] = _time_part(
            label, build(cfg, rng), {}, gym_id(task), cfg, say, interleave=True
        )
        rows += part_rows
        wall[task] = _figures(runs[label], {})
        cpu[task] = _figures(runs[label], {}, "steps_per_cpu_s")
    label = "one world outside the engine"
    say(f"{label}: building one world per contender")
    part_rows, runs[label] = _time_part(
        label, _outside_the_engine(cfg, rng), {}, gym_id("ant"), cfg, say, interleave=True
    )
    rows += part_rows
    summary = {"one_world": wall} | _one_world_ratios(wall)
    # Microseconds per step outside the engine: the best run's, as every figure here.
    summary["one_world_python_us"] = {name: 1e6 / rate for name, rate in _figures(runs[label], {}).items()}
    summary["per_cpu_second"] = {"one_world": cpu} | _one_world_ratios(cpu)
    return rows, runs, summary


def run_sim_bench(
    cfg: SimBenchCfg, progress: Callable[[str], None] | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run the parts of ``cfg``; return one table row per contender and the summary (JSON-ready).

    ``progress`` receives a line per part and per timed run (default: the module's logger).
    """
    cfg.check()
    say = progress if progress is not None else log.info
    rng = np.random.default_rng(cfg.seed)
    rows: list[dict[str, Any]] = []
    runs: dict[str, dict[str, dict[str, list[float]]]] = {}
    summary: dict[str, Any] = {
        "num_envs": cfg.num_envs,
        "seconds": cfg.seconds,
        "rounds": cfg.rounds,
        "nthread": cfg.nthread,
        "machine": machine_info(),
        "versions": versions(("robolearn", "mujoco", "gymnasium", "envpool", "numpy", "pybullet")),
    }
    unavailable: dict[str, dict[str, str]] = {}
    if "ant" in cfg.parts:
        say(f"ant: building {cfg.num_envs} worlds per contender")
        contenders, unavailable["ant"] = _ant_contenders(cfg, rng)
        part_rows, runs["ant"] = _time_part("ant", contenders, unavailable["ant"], ROBOLEARN, cfg, say)
        rows += part_rows
    if "panda" in cfg.parts:
        say(f"panda: building {cfg.num_envs} worlds per contender")
        unavailable["panda"] = {}
        part_rows, runs["panda"] = _time_part("panda", _panda_contenders(cfg, rng), {}, ROBOLEARN, cfg, say)
        rows += part_rows
    batched = [part for part in ("ant", "panda") if part in runs]
    for part in batched:
        summary[part] = _figures(runs[part], unavailable[part])
    summary |= _ratios(summary.get("ant"), summary.get("panda"))
    per_cpu = {part: _figures(runs[part], unavailable[part], "steps_per_cpu_s") for part in batched}
    summary["per_cpu_second"] = per_cpu | _ratios(per_cpu.get("ant"), per_cpu.get("panda"))
    if "single" in cfg.parts:
        part_rows, one_world_runs, one_world = _one_world_parts(cfg, rng, say)
        rows += part_rows
        runs |= one_world_runs
        summary["per_cpu_second"] |= one_world.pop("per_cpu_second")
        summary |= one_world
        summary["single"] = {}
        for task in task_names():
            contenders, missing = _single_contenders(task, cfg, rng)
            label = f"single {task}"
            part_rows, runs[label] = _time_part(label, contenders, missing, "mujoco", cfg, say)
            rows += part_rows
            summary["single"][task] = _figures(runs[label], missing)
    if "gpu" in cfg.parts:
        from robolearn.bench.gpu import gpu_sim_part

        gpu_rows, gpu_summary = gpu_sim_part(
            cfg.seconds,
            cfg.seed,
            say,
            device=cfg.gpu_device,
            world_counts=cfg.gpu_worlds,
            tasks=cfg.gpu_tasks,
        )
        rows += gpu_rows
        summary |= gpu_summary
    if "render" in cfg.parts:
        render = render_rows(cfg.num_envs, cfg.seconds, cfg.seed, say)
        rows += render
        keys = ("num_envs", "frames_per_s", "memory_mb", "frame_bytes")
        summary["render"] = {r["contender"]: {k: r[k] for k in keys} for r in render}
    summary["goals"] = {
        key: {"goal": goal, "met": None if summary[key] is None else summary[key] >= goal}
        for key, goal in GOALS.items()
        if key in summary
    }
    summary["runs"] = runs
    summary["machine"]["load_average_1min_at_end"] = os.getloadavg()[0]
    return rows, summary
