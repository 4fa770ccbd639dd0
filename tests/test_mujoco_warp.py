"""The MuJoCo Warp backend (issue 14) on Warp's CPU device: the same trajectories as mujoco_batch.

Every task on ``mujoco_warp`` is stepped beside ``mujoco_batch`` from the same state under the same
actions (the scripted expert's, computed from the CPU backend's observations; seeded random actions
for ant, which has no expert), and every step's observations, rewards and flags are compared.
MuJoCo Warp computes in single precision and mujoco_batch in double, so the tolerances below are
what a full episode allows. They are set at about five times the largest differences measured over
a full episode (two worlds, seed 3, MuJoCo Warp 4.0 on Warp's CPU device; position, velocity, other,
reward):

- panda_reach 6.4e-7 m, 4.0e-6 m/s, reward 2.0e-6; panda_pick_cube 1.4e-4 m (the cube resting on
  soft contacts), 9.8e-6 m/s, reward 1.5e-4 (with the expert that servoes the impedance target; the
  tool servo before it drove an episode with 4.7e-6 m/s and reward 4.0e-6).
- quadrotor_hover 1.5 mm and 0.6 mm/s, attitude and body rates 2.6e-4, reward 1.8e-2 (its precision
  term falls 10 per metre at the target, so the reward's tolerance is 11 times the position's);
  quadrotor_waypoints 0.9 mm, 0.2 mm/s, 7.6e-4, reward 2.8e-3 (open loop: the device's drone gets
  the actions computed for the CPU one, so a 1e-5 attitude difference becomes a drift).
- car_checkpoints: the car's position 7.5 cm, body velocity 4.2 cm/s, other 0.19 (steering, heading
  terms), reward 1.1e-3; its four wheels' contacts (cylinders on a plane) come and go at different
  substeps, and a checkpoint can be reached one step apart (its observations then jump by a metre in
  one backend a step early): the checkpoint observations and rewards are compared while both backends
  aim at the same checkpoint. Its tolerances keep the earlier, wider margins (0.1 m, 0.1 m/s, 0.25).
- ant: identical to float precision until a foot touches the floor, not after: MuJoCo Warp gives a
  capsule-plane contact another tangent basis than MuJoCo (same normal), and ant.xml's pyramidal
  friction cone is not invariant to turning it, so the friction at a foot impact differs by tens of
  percent in one 10 ms step (measured; :mod:`robolearn.tasks.ant`). Ant is chaotic after that: the
  default run compares its steps before contact and checks that the contact forces carry its weight;
  its full-episode tolerance is a distribution (``slow``): 32 episodes per backend from the same resets
  under the same seeded Gaussian actions (sigma 0.5), each to its termination or 1000 steps; the means
  of return, forward velocity, length and contact-force magnitude must lie within 3 standard errors.
  Measured: return 17.5 +- 4.2 (device) vs 14.2 +- 5.5, forward velocity 0.058 +- 0.041 vs 0.006 +-
  0.050 m/s, length 167 +- 41 vs 190 +- 42 steps, contact force 0.84 +- 0.03 vs 0.81 +- 0.03: at most
  0.8 standard errors apart. Halving the gear of the two +x legs on the CPU backend only gives 4.4
  (length 494 +- 61 steps) and 3.5 (contact force) and fails it.

The default run compares a full episode of every task but ant, and runs each scripted expert for 20
episodes (one per world, 20 worlds) needing 19 successes: affordable since the backend replays a
recorded graph per control step on the CPU device too (a control step of two worlds took 0.3 to
0.7 s launched from Python, 3 to 20 ms replayed). The worlds are made once per module (fixtures), so
each kind of model loads its kernels once. Warp caches compiled kernels on disk (``~/.cache/warp``,
or ``WARP_CACHE_PATH``), keyed by their code, not by the checkout: a fresh clone on a machine that ran
the tests before compiles nothing; an empty cache adds about 3 minutes (docs/backends.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest

pytest.importorskip("mujoco_warp", reason="the gpu extra (pip install 'robolearn[gpu]') is not installed")

from robolearn.envs.task_env import TaskEnv
from robolearn.eval.evaluation import evaluate
from robolearn.sim.backend import make_backend
from robolearn.sim.mujoco_warp_backend import DEVICE_ENV
from robolearn.tasks import make_task_cfg, task_names
from robolearn.tasks.worlds import TaskWorlds


class Tolerance(NamedTuple):
    """How far a device trajectory may be from the CPU backend's, per task."""

    pos: float
    """Largest difference of a position observation (m, units ``m``)."""
    vel: float
    """Largest difference of a velocity observation (m/s)."""
    other: float
    """Largest difference of any other observation (rad, rad/s, N, 1)."""
    reward: float
    """Largest difference of a step's reward."""
    event_steps: int = 0
    """Steps by which a world's first success, termination or truncation may differ."""
    progress: tuple[str, ...] = ()
    """Task state keys counting discrete progress (a checkpoint index): observations and rewards are
    compared where they agree, and they may disagree for ``event_steps`` steps per event."""
    frame: str | None = None
    """A frame whose position is compared at every step (m, within ``pos``), progress or not."""


TOLERANCES = {
    "panda_reach": Tolerance(5e-6, 3e-5, 1e-5, 2e-5),
    "panda_pick_cube": Tolerance(7e-4, 3e-5, 1e-5, 7e-4),
    "quadrotor_hover": Tolerance(5e-3, 3e-3, 1.5e-3, 5.5e-2),
    "quadrotor_waypoints": Tolerance(5e-3, 1e-3, 4e-3, 1e-2, event_steps=1, progress=("waypoint_index",)),
    "car_checkpoints": Tolerance(
        0.1, 0.1, 0.25, 5e-3, event_steps=2, progress=("next_index",), frame="racecar"
    ),
}
"""Per task; ant's full episodes are compared as a distribution (see the module doc)."""
ANT_STEPS_BEFORE_CONTACT = 2
"""Control steps of ant's seeded actions before a foot first touches the floor (0.1 s of fall)."""
ANT_TOL = Tolerance(1e-4, 1e-3, 1e-3, 1e-3)
"""Ant before contact: float precision."""

WARP_TASKS = [t for t in task_names() if "mujoco_warp" in make_task_cfg(t).backends]


@pytest.fixture(autouse=True)
def _warp_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Warp's CPU device even where CUDA exists: what the default run checks is the same everywhere."""
    monkeypatch.setenv(DEVICE_ENV, "cpu")


class Pair(NamedTuple):
    device: TaskWorlds
    host: TaskWorlds


_PAIRS: dict[str, Pair] = {}


@pytest.fixture(scope="module")
def pairs() -> Iterator[dict[str, Pair]]:
    """Two worlds of a task on each backend, made once per module (building compiles nothing, but
    the first step of a new model loads its kernels): every test starts them with :func:`_same_start`."""
    yield _PAIRS
    for pair in _PAIRS.values():
        pair.device.close()
        pair.host.close()
    _PAIRS.clear()


def _pair(pairs: dict[str, Pair], task: str) -> Pair:
    if task not in pairs:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(DEVICE_ENV, "cpu")
            pairs[task] = Pair(
                TaskWorlds(task, "mujoco_warp", 2, seed=3), TaskWorlds(task, "mujoco_batch", 2)
            )
    return pairs[task]


def _same_start(pair: Pair, seed: int = 3) -> None:
    """Reset the device's worlds (their own random draws) and copy them into the host backend."""
    device, host = pair
    ids = np.arange(host.num_envs)
    device.reseed(seed)
    device.reset_worlds(ids)
    host.reset_worlds(ids)
    sim = device.sim
    host.sim.mj_field("qpos")[:] = sim.host(sim.mj_field("qpos"))
    host.sim.mj_field("qvel")[:] = sim.host(sim.mj_field("qvel"))
    for key in host.state:
        host.state[key][:] = sim.host(device.state[key])
    host.sim.forward(ids)


def _first_true(flags: list[np.ndarray]) -> np.ndarray:
    """Per world, the first step a flag held (-1: never)."""
    stacked = np.asarray(flags)
    return np.where(stacked.any(axis=0), stacked.argmax(axis=0), -1)


def _compare(pair: Pair, tol: Tolerance, steps: int | None = None) -> dict[str, float]:
    """Step both backends under the same actions and hold the device to ``tol``; returns the largest
    differences seen, by the tolerance's fields (what the tolerances were set from)."""
    device, host = pair
    seen = dict.fromkeys(("pos", "vel", "other", "reward"), 0.0)
    _same_start(pair)
    cfg = host.cfg
    task = cfg.name
    units = {k: t.units for k, t in cfg.observations.items()}
    if cfg.expert is not None:
        expert = cfg.expert(cfg)
    else:  # seeded random actions
        rng, low, high = np.random.default_rng(0), np.asarray(cfg.action.low), np.asarray(cfg.action.high)
        expert = lambda obs: rng.uniform(low, high, (host.num_envs, len(low)))  # noqa: E731
    flags: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {
        k: ([], []) for k in ("success", "terminated", "truncated")
    }
    apart = np.zeros(host.num_envs, dtype=np.int64)  # steps a world's progress disagreed
    events = np.zeros(host.num_envs, dtype=np.int64)  # progress events on the host
    same = np.ones(host.num_envs, dtype=bool)  # the worlds' progress agrees (before the first step)
    for step in range(cfg.episode_length if steps is None else steps):  # ended worlds keep stepping
        action = expert(host.observe())
        before = [host.state[k].copy() for k in tol.progress]
        ref, got = host.advance(action), device.advance_numpy(action)
        where = f"{task} at step {step}"
        was_same, same = same, np.ones(host.num_envs, dtype=bool)
        for key, old in zip(tol.progress, before, strict=True):
            now = host.state[key]
            same &= (now == device.sim.host(device.state[key])).reshape(host.num_envs, -1).all(axis=1)
            events += (now != old).reshape(host.num_envs, -1).any(axis=1)
        apart += ~same
        obs_ref, obs_got = host.observe(), device.observe_numpy()
        for key, value in obs_ref.items():
            kind = {"m": "pos", "m/s": "vel"}.get(units[key], "other")
            np.testing.assert_allclose(
                obs_got[key][same], value[same], atol=getattr(tol, kind), err_msg=f"{key}, {where}"
            )
            seen[kind] = max(seen[kind], float(np.abs(obs_got[key][same] - value[same]).max(initial=0.0)))
        # A step's reward counts its progress: compared where the progress agreed before and after it.
        steady = same & was_same
        np.testing.assert_allclose(got.reward[steady], ref.reward[steady], atol=tol.reward, err_msg=where)
        seen["reward"] = max(
            seen["reward"], float(np.abs(got.reward[steady] - ref.reward[steady]).max(initial=0.0))
        )
        if tol.frame is not None:
            pos = device.sim.host(device.sim.frame_pos(tol.frame))
            np.testing.assert_allclose(pos, host.sim.frame_pos(tol.frame), atol=tol.pos, err_msg=where)
        for key, (refs, gots) in flags.items():
            refs.append(getattr(ref, key))
            gots.append(getattr(got, key))
    assert (apart <= tol.event_steps * events).all(), f"{task}: progress apart {apart} steps, {events} events"
    for key, (refs, gots) in flags.items():
        first_ref, first_got = _first_true(refs), _first_true(gots)
        assert ((first_ref < 0) == (first_got < 0)).all(), (
            f"{task}: {key} first at {first_ref} vs {first_got}"
        )
        assert (np.abs(first_ref - first_got) <= tol.event_steps).all(), (
            f"{task}: {key} {first_ref} {first_got}"
        )
    return seen


# -- the default run: a full episode of every task, the first steps of ant ----------------------
@pytest.mark.parametrize("task", list(TOLERANCES))
def test_full_episode_matches_mujoco_batch(pairs: dict[str, Pair], task: str) -> None:
    _compare(_pair(pairs, task), TOLERANCES[task])


def test_ant_first_steps_match_mujoco_batch(pairs: dict[str, Pair]) -> None:
    """Ant until a foot touches the floor (after that the trajectories part, see the module doc)."""
    _compare(_pair(pairs, "ant"), ANT_TOL, ANT_STEPS_BEFORE_CONTACT)


EXPERT_WORLDS = 20
"""Worlds of the expert check, one episode each."""
EXPERT_SUCCESSES = 19
"""Successes out of ``EXPERT_WORLDS`` episodes the expert must reach (95%)."""


@pytest.mark.parametrize("task", [t for t in WARP_TASKS if make_task_cfg(t).expert is not None])
def test_scripted_expert_succeeds(task: str, capfd: pytest.CaptureFixture[str]) -> None:
    """The scripted experts succeed at least 95% on MuJoCo Warp, through the Gymnasium env, and no
    contact or constraint buffer overflows on the way (MuJoCo Warp only prints that)."""
    cfg = make_task_cfg(task)
    assert cfg.expert is not None
    env = TaskEnv(task, "mujoco_warp", EXPERT_WORLDS, seed=0, render_mode=None)
    try:
        result = evaluate(env, cfg.expert(cfg), episodes=EXPERT_WORLDS)
    finally:
        env.close()
    assert sum(result.successes) >= EXPERT_SUCCESSES, result.summary()
    assert "overflow" not in capfd.readouterr().out


def test_ant_contact_forces_carry_its_weight(pairs: dict[str, Pair]) -> None:
    """The device computes ant's ``cfrc_ext`` (its contact-force observation; MuJoCo Warp skips it
    for the acceleration-stage user sensor that asks for it, unless the backend asks itself): in a
    state where the ant stands on the floor, the external forces on its bodies carry its weight."""
    device, host = pair = _pair(pairs, "ant")
    _same_start(pair)
    for _ in range(60):  # 3 s without torque on the CPU backend: it drops onto the floor and settles
        host.advance(np.zeros((2, 8)))
    sim = device.sim
    sim.mj_field("qpos")[:] = sim._tensor(host.sim.mj_field("qpos"))
    sim.mj_field("qvel")[:] = sim._tensor(host.sim.mj_field("qvel"))
    sim.forward(np.arange(2))
    lift = sim.host(sim.mj_field("cfrc_ext"))[:, :, 5].sum(axis=1)  # (worlds, bodies, torque and force)
    weight = sim.model.body_mass.sum() * -sim.model.opt.gravity[2]
    # 5%: the ant still rocks a little on its legs (the CPU backend's own sum strays by 1.3% over a
    # second); without the wrenches the sum would be zero.
    np.testing.assert_allclose(lift, host.sim.mj_field("cfrc_ext")[:, :, 5].sum(axis=1), rtol=0.05)
    np.testing.assert_allclose(lift, weight, rtol=0.05)
    assert (device.observe_numpy()["contact_forces"] != 0).any()


def test_rate_loop_integrates_as_mujoco() -> None:
    """The drone's rate loop (velocity actuators through a site on a lone free body) is integrated
    implicitly, as MuJoCo's implicitfast does: MuJoCo Warp's free-body shortcut would not."""
    import torch

    device = TaskWorlds("quadrotor_hover", "mujoco_warp", 1, seed=0)
    host = TaskWorlds("quadrotor_hover", "mujoco_batch", 1, seed=0)
    for worlds in (device, host):
        worlds.sim.reset_worlds(np.arange(1))
        qvel = worlds.sim.mj_field("qvel")
        qvel[:] = worlds.xp.asarray([[0.0, 0.0, 0.0, 1.0, 0.5, -0.3]], dtype=qvel.dtype)
        worlds.sim.forward(np.arange(1))
        worlds.sim.step(np.array([[0.27, 0.0, 0.0, 0.0]]), 1)  # one 2 ms substep, zero rate command
    got, ref = device.sim.host(device.sim.mj_field("qvel"))[0, 3:], host.sim.mj_field("qvel")[0, 3:]
    # Explicitly, the rates would fall by 8% (dt k / I = 0.08); implicitly by 7.4%.
    np.testing.assert_allclose(got, ref, rtol=1e-4)
    assert isinstance(device.sim.mj_field("qvel"), torch.Tensor)


def test_arrays_stay_on_the_device_and_subset_resets_leave_other_worlds() -> None:
    import torch

    worlds = TaskWorlds("panda_reach", "mujoco_warp", 3, seed=0, randomize=True)
    worlds.reset_worlds(np.arange(3))
    obs = worlds.observe()
    assert all(isinstance(v, torch.Tensor) and v.dtype == torch.float32 for v in obs.values())
    for _ in range(3):
        result = worlds.advance(torch.full((3, 4), 0.01))
    assert isinstance(result.reward, torch.Tensor) and worlds.step_count.tolist() == [3, 3, 3]
    qpos_before = worlds.sim.mj_field("qpos").clone()
    goal_before = worlds.state["goal"].clone()
    worlds.reset_worlds(torch.tensor([1]))  # indices on the device
    qpos_after = worlds.sim.mj_field("qpos")
    assert torch.equal(qpos_after[[0, 2]], qpos_before[[0, 2]])
    assert not torch.equal(qpos_after[1], qpos_before[1])
    assert torch.equal(worlds.state["goal"][[0, 2]], goal_before[[0, 2]])
    assert worlds.step_count.tolist() == [3, 0, 3]


@pytest.mark.parametrize("task", ["quadrotor_hover", "quadrotor_waypoints", "car_checkpoints", "ant"])
def test_task_state_and_term_memory_stay_on_the_device(pairs: dict[str, Pair], task: str) -> None:
    """Task state, stateful terms' memory, rewards and flags are tensors on the device; a reset
    draws its states there (no numpy on the hot path)."""
    import torch

    device = _pair(pairs, task).device
    device.reset_worlds(torch.arange(2))
    device.advance(torch.as_tensor(device.cfg.action.neutral).repeat(2, 1))
    tensors: list[Any] = [*device.state.values(), *device.observe().values()]
    result = device.advance(torch.as_tensor(device.cfg.action.neutral).repeat(2, 1))
    tensors += [result.reward, result.success, result.terminated, result.truncated]
    held = getattr(device.cfg.success.fn, "_held", None)  # quadrotor_hover's hold counter
    tensors += [held] if held is not None else []
    where = torch.device(device.device)
    assert all(isinstance(t, torch.Tensor) and t.device == where for t in tensors)


def test_domain_randomization_is_per_world() -> None:
    worlds = TaskWorlds("panda_reach", "mujoco_warp", 4, seed=1, randomize=True)
    worlds.reset_worlds(np.arange(4))
    sim = worlds.sim
    nominal = sim.model.body_mass
    mass = sim.host(sim._model_field("body_mass"))
    scale = mass[:, 1:].sum(axis=1) / nominal[1:].sum()
    lo, hi = worlds.cfg.randomization.mass_scale
    assert mass.shape == (4, len(nominal)) and len(set(np.round(scale, 6))) == 4
    assert ((scale >= lo - 1e-6) & (scale <= hi + 1e-6)).all()
    np.testing.assert_allclose(mass / nominal.clip(1e-12), scale[:, None] * (nominal > 0), rtol=1e-5)
    gains = sim.host(sim._model_field("actuator_gainprm"))[:, :, 0]
    assert len({tuple(np.round(g, 3)) for g in gains}) == 4
    # Friction (sliding, the first of three coefficients) and joint damping: one scale per world,
    # within the task's range, the same for every geom (joint) of a world.
    cfg = worlds.cfg.randomization
    for field, nominal, (lo, hi) in (
        ("geom_friction", sim.model.geom_friction[:, 0], cfg.friction_scale),
        ("dof_damping", sim.model.dof_damping, cfg.damping_scale),
    ):
        value = sim.host(sim._model_field(field))
        value = value[:, :, 0] if value.ndim == 3 else value
        some = nominal > 0
        scales = value[:, some] / nominal[some]
        assert some.sum() >= 2 and np.ptp(scales, axis=1).max() < 1e-5, field
        assert len(set(np.round(scales[:, 0], 5))) == 4, field
        assert ((scales >= lo - 1e-6) & (scales <= hi + 1e-6)).all(), field
        np.testing.assert_array_equal(value[:, ~some], 0.0)
    # The torsional and rolling coefficients are not randomized.
    np.testing.assert_allclose(
        sim.host(sim._model_field("geom_friction"))[:, :, 1:],
        np.broadcast_to(sim.model.geom_friction[:, 1:], (4, *sim.model.geom_friction[:, 1:].shape)),
        rtol=1e-6,
    )


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_replayed_graphs_step_as_direct_launches(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A control step and a forward pass replayed from their recorded graph (a CUDA graph on CUDA,
    Warp's CPU graph on the CPU) give the state launching every kernel gives, to the bit: through
    contacts (the cube), randomized worlds and resets of some worlds between steps."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    monkeypatch.setenv(DEVICE_ENV, device)
    replayed, direct = (TaskWorlds("panda_pick_cube", "mujoco_warp", 2, seed=5, randomize=True) for _ in "ab")
    direct.sim.graphs = False  # type: ignore[attr-defined]
    direct.sim._graphs.clear()  # type: ignore[attr-defined]  # the forward pass TaskWorlds made
    try:
        rng = np.random.default_rng(0)
        low, high = np.asarray(replayed.cfg.action.low), np.asarray(replayed.cfg.action.high)
        for worlds in (replayed, direct):
            worlds.reset_worlds(np.arange(2))
        for step in range(6):
            action = rng.uniform(low, high, (2, len(low)))
            for worlds in (replayed, direct):
                worlds.advance_numpy(action)
                if step == 3:  # a reset of one world: a forward pass, new randomized parameters
                    worlds.reset_worlds(np.array([1]))
            for field in ("qpos", "qvel", "xpos", "cfrc_ext"):
                a, b = (w.sim.host(w.sim.mj_field(field)) for w in (replayed, direct))
                np.testing.assert_array_equal(a, b, err_msg=f"{field} at step {step}")
        assert replayed.sim._graphs and not direct.sim._graphs  # type: ignore[attr-defined]
    finally:
        replayed.close()
        direct.close()


def test_non_finite_actions_are_rejected_on_the_device() -> None:
    worlds = TaskWorlds("panda_reach", "mujoco_warp", 2, seed=0)
    worlds.reset_worlds(np.arange(2))
    result = worlds.advance_numpy(np.array([[np.nan, 0, 0, 0.08], [0.01, 0, 0, 0.08]]))
    assert result.rejected.tolist() == [True, False]
    assert np.isfinite(worlds.observe_numpy()["ee_pos"]).all()


def test_robolearn_eval_runs_the_scripted_expert_on_warps_cpu_device() -> None:
    """``robolearn eval panda_reach --policy scripted --backend mujoco_warp``, the console command in
    its own process, on a machine without a GPU (the autouse fixture names Warp's CPU device)."""
    command = [str(Path(sys.executable).with_name("robolearn")), "eval", "panda_reach"]
    command += ["--policy", "scripted", "--backend", "mujoco_warp", "--episodes", "2", "--num-envs", "2"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["episodes"] == 2 and summary["success_rate"] == 1.0, summary
    assert summary["steps_per_second"] > 0


def test_a_task_that_cannot_run_on_it_says_so() -> None:
    from robolearn.tasks.core import TaskError

    assert {"quadrotor_hover", "quadrotor_waypoints", "car_checkpoints", "ant"} <= set(WARP_TASKS)
    with pytest.raises(TaskError, match="does not run on backend 'mujoco_warp'"):
        TaskWorlds("car_checkpoints_pixels", "mujoco_warp", 1)  # markers: host renderers only


def test_unknown_device_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from robolearn.sim.backend import SimError

    monkeypatch.setenv(DEVICE_ENV, "tpu:7")
    with pytest.raises(SimError, match="Warp device 'tpu:7' is not available"):
        make_backend("mujoco_warp", make_task_cfg("panda_reach").scene, 1)


def test_bench_sim_gpu_part_needs_cuda() -> None:
    """Without CUDA, ``robolearn bench sim --parts gpu`` says so in one line (exit 2 through the CLI)."""
    import torch

    from robolearn.bench.config import SimBenchCfg
    from robolearn.bench.sim import run_sim_bench
    from robolearn.errors import RobolearnError

    if torch.cuda.is_available():
        pytest.skip("CUDA is here: the gpu part would run")
    with pytest.raises(RobolearnError, match="needs a CUDA GPU") as err:
        run_sim_bench(SimBenchCfg(parts=("gpu",), seconds=0.1, rounds=1))
    assert "\n" not in str(err.value)


def test_bench_sim_gpu_part_runs_on_warps_cpu_device(cuda_strict_tensors: None) -> None:
    """``robolearn bench sim --parts gpu --gpu-device cpu`` at two worlds: robolearn's environment steps
    and raw MuJoCo Warp's (``mujoco_warp.step`` replayed from a graph) are both measured, positive, and
    the summary carries the issue's keys, the goal row and the Playground comparison as a named null.
    Tensors refuse implicit numpy conversion throughout, as on CUDA."""
    from robolearn.bench.config import SimBenchCfg
    from robolearn.bench.sim import run_sim_bench

    tasks = ("panda_pick_cube", "quadrotor_hover")
    cfg = SimBenchCfg(
        parts=("gpu",), seconds=0.2, rounds=1, gpu_device="cpu", gpu_worlds=(2,), gpu_tasks=tasks
    )
    rows, summary = run_sim_bench(cfg)
    summary = json.loads(json.dumps(summary))  # the last line of the command: JSON
    assert summary["gpu_device"] == "Warp CPU device" and summary["gpu_world_counts"] == [2]
    for key in ("gpu_env_steps_per_s", "gpu_raw_steps_per_s", "gpu_vs_raw_by_task", "gpu_setup_seconds"):
        assert set(summary[key]) == set(tasks) and all(v["2"] > 0 for v in summary[key].values()), key
    by_task = summary["gpu_vs_raw_by_task"]
    assert summary["gpu_vs_raw"] == min(v["2"] for v in by_task.values())
    assert summary["goals"]["gpu_vs_raw"]["goal"] == 0.8
    assert summary["goals"]["gpu_vs_raw"]["met"] == (summary["gpu_vs_raw"] >= 0.8)
    assert summary["playground_panda_steps_per_s"] is None and summary["playground_panda"]["note"]
    names = [f"{who} {t}" for t in tasks for who in ("robolearn", "raw mujoco_warp")]
    assert [(r["contender"], r["num_envs"]) for r in rows] == [(name, 2) for name in names]
    assert all(r["steps_per_s"] > 0 for r in rows)
    raw_rows = rows[1::2]
    assert [r["reference_ratio"] for r in raw_rows] == [by_task[t]["2"] for t in tasks]


@pytest.mark.gpu
def test_bench_sim_gpu_part_at_small_settings_on_cuda() -> None:
    """The gpu part on CUDA at 256 worlds of two tasks: both rates measured, the GPU named."""
    import torch

    from robolearn.bench.config import SimBenchCfg
    from robolearn.bench.sim import run_sim_bench

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    tasks = ("panda_pick_cube", "ant")
    cfg = SimBenchCfg(parts=("gpu",), seconds=0.5, gpu_worlds=(256,), gpu_tasks=tasks)
    rows, summary = run_sim_bench(cfg)
    assert summary["gpu_device"] == torch.cuda.get_device_name(0)
    assert all(r["steps_per_s"] > 0 for r in rows) and len(rows) == 4
    assert 0 < summary["gpu_vs_raw"] < 10


def test_bench_sim_gpu_options_are_checked() -> None:
    from robolearn.bench.config import SimBenchCfg
    from robolearn.bench.gpu import gpu_sim_part
    from robolearn.errors import ConfigError, RobolearnError

    with pytest.raises(ConfigError, match=r"^--gpu-device tpu: not a Warp device; use cuda, cuda:N or cpu$"):
        SimBenchCfg(gpu_device="tpu").check()
    with pytest.raises(ConfigError, match=r"^--gpu-worlds 0: must be in"):
        SimBenchCfg(gpu_worlds=(2, 0)).check()
    with pytest.raises(
        RobolearnError, match=r"^--gpu-tasks car_checkpoints_pixels: not tasks on mujoco_warp"
    ):
        gpu_sim_part(0.1, 0, device="cpu", world_counts=(1,), tasks=("car_checkpoints_pixels",))


# -- slow: ant's full episodes ------------------------------------------------------------------
@pytest.mark.slow
def test_ant_runs_a_full_episode(pairs: dict[str, Pair]) -> None:
    """Ant's 1000 steps under random actions on the device: finite, the observation's shapes and the
    CPU backend's termination rule (its trajectory parts from the CPU one at the first foot contact)."""
    device = _pair(pairs, "ant").device
    device.reset_worlds(np.arange(2))
    rng = np.random.default_rng(1)
    sizes = dict(device.observation_sizes)
    for _ in range(device.cfg.episode_length):
        result = device.advance_numpy(rng.uniform(-1.0, 1.0, (2, 8)))
        obs = device.observe_numpy()
        assert {k: v.shape[1] for k, v in obs.items()} == sizes
        assert all(np.isfinite(v).all() for v in obs.values()) and np.isfinite(result.reward).all()
        z = obs["qpos"][:, 0]
        np.testing.assert_array_equal(result.terminated, (z < 0.2) | (z > 1.0))
        assert not result.unstable.any()
        done = result.terminated | result.truncated
        if done.any():
            device.reset_worlds(np.flatnonzero(done))


ANT_WORLDS = 32
"""Independent ant episodes per backend in the distributional comparison."""
ANT_K_SE = 3.0
"""Per statistic, the two backends' means may differ by this many standard errors of the difference."""


def ant_episode_stats(pair: Pair, steps: int, seed: int = 0) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Run both backends of ``pair`` from the same resets under the same seeded Gaussian actions, each
    world for one episode (until it terminates or ``steps``), and return per statistic the per-episode
    values (device, host): return, mean forward velocity, length and mean contact-force magnitude."""
    _same_start(pair, seed=3)
    n = pair.host.num_envs
    rng = np.random.default_rng(seed)
    acc = {k: np.zeros((2, n)) for k in ("return", "forward_velocity", "length", "contact_force")}
    alive = np.ones((2, n), bool)
    for _ in range(steps):
        action = rng.normal(0.0, 0.5, (n, 8)).clip(-1.0, 1.0)
        for b, (worlds, result) in enumerate(
            ((pair.device, pair.device.advance_numpy(action)), (pair.host, pair.host.advance(action)))
        ):
            live = alive[b]
            obs = worlds.observe_numpy()
            acc["return"][b] += np.where(live, result.reward, 0.0)
            velocity = worlds.state["forward_velocity"]
            velocity = pair.device.sim.host(velocity) if worlds is pair.device else velocity
            acc["forward_velocity"][b] += np.where(live, velocity, 0.0)
            acc["contact_force"][b] += np.where(live, np.linalg.norm(obs["contact_forces"], axis=1), 0.0)
            acc["length"][b] += live
            alive[b] &= ~(result.terminated | result.truncated)
        if not alive.any():
            break
    for key in ("forward_velocity", "contact_force"):
        acc[key] /= acc["length"]
    return {k: (v[0], v[1]) for k, v in acc.items()}


def _means_differ_by(stats: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, float]:
    """Per statistic, the difference of the two backends' means in standard errors of the difference."""
    out = {}
    for key, (a, b) in stats.items():
        se = np.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
        out[key] = abs(a.mean() - b.mean()) / max(se, 1e-9)
    return out


@pytest.mark.slow
def test_ant_episode_statistics_match_mujoco_batch() -> None:
    """Ant's full episodes on the device and the CPU backend, from the same resets under the same
    seeded actions, give the same distribution of what a learner sees: per statistic, the means over
    ``ANT_WORLDS`` episodes are within ``ANT_K_SE`` standard errors (the trajectories themselves part
    at the first foot contact, see the module doc)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(DEVICE_ENV, "cpu")
        pair = Pair(
            TaskWorlds("ant", "mujoco_warp", ANT_WORLDS, seed=3),
            TaskWorlds("ant", "mujoco_batch", ANT_WORLDS),
        )
    try:
        stats = ant_episode_stats(pair, pair.host.cfg.episode_length)
    finally:
        pair.device.close()
        pair.host.close()
    differ = _means_differ_by(stats)
    assert max(differ.values()) < ANT_K_SE, differ
