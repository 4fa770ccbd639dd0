"""Every task on every backend reproduces its recorded trajectories (issue 18).

The per-step path was rewritten for speed (names, indices and array views resolved once, shared
quantities computed once per step); these tests hold it to what the code did before. Each golden
file in ``tests/data/equivalence/`` was recorded by :func:`record` from the code before that
rewrite: seeded actions (some outside the bounds, one non-finite) stepped through
:class:`~robolearn.tasks.worlds.TaskWorlds`, with the worlds that ended reset as the environment's
autoreset does, plus one forced reset of world 0 midway, with and without domain randomization.

Tolerance: booleans (success, terminated, truncated, unstable, rejected) must match exactly;
floats within ``rtol=1e-6, atol=1e-6``. The physics is deterministic and the rewrite keeps every
arithmetic operation in its order, so on the machine that recorded the files the trajectories are
bit-identical; the margin admits another CPU's libm and SIMD paths in the float64 reward sums and
the float32 rounding of observations, while a changed term, a skipped check or a reordered state
write moves values by far more. Camera images (pixel tasks) are kept as the means of
``IMAGE_GRID`` x ``IMAGE_GRID`` blocks per channel, within ``IMAGE_ATOL`` intensity levels: a
renderer (Mesa's, PyBullet's) may round a few edge pixels differently on another machine, while a
moved camera, a missing object or swapped worlds change block means by tens of levels.

Record a task added since (existing files are kept): ``python tests/test_equivalence.py``; re-record
everything (only when behaviour changes on purpose, and say so in the change): add ``--all``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import mujoco
import numpy as np
import pytest

from robolearn.sim.backend import HOST_BACKENDS
from robolearn.tasks import make_task_cfg, task_names
from robolearn.tasks.worlds import TaskWorlds

DATA = Path(__file__).parent / "data" / "equivalence"
STEPS = {"ant": 15, "panda_pick_cube_pixels": 15, "car_checkpoints_pixels": 15}
"""Control steps per trajectory by task (default 30): ant's observation is large, its files stay
small; rendering makes the pixel tasks slow (PyBullet's renderer about 20 frames/s)."""
DEFAULT_STEPS = 30
COMPARED_STEPS = {("car_checkpoints", "pybullet"): 18}
"""Cases compared over the first steps of their recording only. The car's contacts on PyBullet
amplify a last-bit difference about tenfold per control step: on an AMD EPYC the recording made
elsewhere differs by 4e-16 at step 11, 7e-9 at step 17 and 0.2 at step 29, most likely from numpy's
CPU-dispatched (SIMD) transcendental functions in the per-substep control law. The first 18 steps
still cross the forced reset and the rejected action, with three orders of magnitude to spare."""
FORCED_RESET_STEP = 12
"""World 0 is reset after this step whatever happened, so every trajectory crosses a reset."""
NAN_STEP = 5
"""World 0's action has a non-finite component at this step: the neutral action must be applied."""
RTOL = ATOL = 1e-6
IMAGE_GRID = 8
"""Image recordings keep an 8 x 8 grid of block means per channel."""
IMAGE_ATOL = 2.0
FLAGS = ("success", "terminated", "truncated", "unstable", "rejected")
"""The boolean outputs of a step, in the order of the last axis of a recording's ``flags``."""


def _worlds_of(backend: str) -> int:
    return 1 if backend == "mujoco" else 2


def _cases() -> list[tuple[str, str]]:
    # Golden trajectories are bit-exact: host backends only (tests/test_mujoco_warp.py: the device's).
    return [(t, b) for t in task_names() for b in make_task_cfg(t).backends if b in HOST_BACKENDS]


def _flat(obs: dict[str, np.ndarray]) -> np.ndarray:
    """(n, K) every state observation term of every world, side by side in the task's key order."""
    return np.concatenate([v for v in obs.values() if v.ndim == 2], axis=1)


def _images(obs: dict[str, np.ndarray]) -> np.ndarray:
    """(n, C, IMAGE_GRID, IMAGE_GRID, channels) the block means of each camera image, in key order
    (empty for a task without cameras)."""
    n = len(next(iter(obs.values())))
    grids = []
    for image in (v for v in obs.values() if v.ndim == 4):
        _, h, w, c = image.shape
        grid = (IMAGE_GRID, h // IMAGE_GRID, IMAGE_GRID, w // IMAGE_GRID)
        blocks = image.astype(np.float64).reshape(n, *grid, c)
        grids.append(blocks.mean(axis=(2, 4)))
    return np.stack(grids, axis=1) if grids else np.zeros((n, 0))


def _trajectory(
    task: str, backend: str, randomize: bool, steps: int | None = None
) -> dict[str, np.ndarray]:
    """Step ``task`` on ``backend`` through seeded actions and return what it produced:
    ``first_obs`` (n, K); per step ``reward`` (T, n), ``flags`` (T, n, 5) in the order of
    ``FLAGS``, ``obs`` (T, n, K) right after the step; and ``reset_obs`` (m, K), the first
    observation of each world reset, in step then world order."""
    n = _worlds_of(backend)
    worlds = TaskWorlds(task, backend, n, seed=7, randomize=randomize)
    try:
        act = worlds.cfg.action
        low, high = np.asarray(act.low), np.asarray(act.high)
        span = high - low
        steps = steps or STEPS.get(task, DEFAULT_STEPS)
        # 10% beyond the bounds on either side, so clipping is exercised too.
        actions = np.random.default_rng(3).uniform(low - 0.1 * span, high + 0.1 * span, (steps, n, len(low)))
        actions[NAN_STEP, 0, 0] = np.nan
        rewards, flags, obs, images, reset_obs = [], [], [], [], []
        worlds.reset_worlds(np.arange(n))
        first = worlds.observe()
        first_obs, first_images = _flat(first), _images(first).astype(np.float32)
        for t in range(steps):
            result = worlds.advance(actions[t])
            rewards.append(result.reward.copy())
            flags.append(np.stack([getattr(result, f) for f in FLAGS], axis=1))
            seen = worlds.observe()
            obs.append(_flat(seen))
            images.append(_images(seen))
            done = result.terminated | result.truncated
            if t == FORCED_RESET_STEP:
                done[0] = True
            ids = np.flatnonzero(done)
            worlds.reset_worlds(ids)
            reset_obs.append(_flat(worlds.observe())[ids])
        recording = {
            "first_obs": first_obs,
            "reward": np.stack(rewards),
            "flags": np.stack(flags),
            "obs": np.stack(obs),
            "reset_obs": np.concatenate(reset_obs),
        }
        if worlds.image_specs:  # a pixel task: what its cameras saw, after every step
            recording |= {"first_images": first_images, "images": np.stack(images).astype(np.float32)}
        return recording
    finally:
        worlds.close()


def _golden_path(task: str, backend: str) -> Path:
    return DATA / f"{task}-{backend}.npz"


def record(overwrite: bool = False) -> None:
    """Write the golden files of the tasks that have none (every one with ``overwrite``) from the
    code as it is now."""
    DATA.mkdir(parents=True, exist_ok=True)
    for task, backend in _cases():
        if _golden_path(task, backend).is_file() and not overwrite:
            continue
        arrays = {}
        for randomize in (False, True):
            for key, value in _trajectory(task, backend, randomize).items():
                arrays[f"{'randomized' if randomize else 'nominal'}/{key}"] = value
        np.savez_compressed(_golden_path(task, backend), **arrays)


@pytest.mark.parametrize("randomize", [False, True], ids=["nominal", "randomized"])
@pytest.mark.parametrize(("task", "backend"), _cases(), ids=[f"{t}-{b}" for t, b in _cases()])
def test_trajectory_matches_recording(task: str, backend: str, randomize: bool) -> None:
    if backend == "pybullet":
        pytest.importorskip("pybullet")
    if not _golden_path(task, backend).is_file():  # a task added since: record it as it is now
        pytest.skip(f"no recording of {task} on {backend}: python tests/test_equivalence.py writes it")
    prefix = f"{'randomized' if randomize else 'nominal'}/"
    with np.load(_golden_path(task, backend)) as golden:
        expected = {k.removeprefix(prefix): golden[k] for k in golden.files if k.startswith(prefix)}
    steps = COMPARED_STEPS.get((task, backend))
    actual = _trajectory(task, backend, randomize, steps)
    assert set(actual) == set(expected)
    for key, want in expected.items():
        got = actual[key]
        if steps is not None and not key.startswith("first_"):
            want = want[: len(got)]  # the same seeded draws: a shorter run replays a prefix
        assert got.shape == want.shape and got.dtype == want.dtype, key
        if want.dtype == np.bool_:  # flags
            np.testing.assert_array_equal(got, want, err_msg=key)
        elif key.endswith("images"):
            np.testing.assert_allclose(got, want, rtol=0, atol=IMAGE_ATOL, err_msg=key)
        else:
            np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=key)


def test_the_recordings_cover_something() -> None:
    """The trajectories cross resets, rejections and clipping, or they would prove little."""
    with np.load(_golden_path("panda_pick_cube", "mujoco_batch")) as golden:
        rejected = golden["nominal/flags"][:, :, FLAGS.index("rejected")]
        assert rejected[NAN_STEP, 0] and rejected.sum() == 1
        assert len(golden["nominal/reset_obs"]) >= 1  # the forced reset at least
        assert golden["nominal/obs"].shape[:2] == (DEFAULT_STEPS, 2)


@pytest.mark.parametrize("diverge_at", [None, 4], ids=["steady", "diverged"])
def test_one_world_rk4_step_is_mj_step(diverge_at: int | None) -> None:
    """The one-world backend takes RK4's first substep by its parts (skipping the stages already
    current): the state must equal plain ``mj_step`` from the same state, also where MuJoCo resets
    a diverged state itself (a NaN velocity), which must be reported as unstable."""
    worlds = TaskWorlds("ant", "mujoco", 1, seed=0)
    sim = worlds.sim
    model, data = sim.model, sim.data  # type: ignore[attr-defined]
    reference = mujoco.MjData(model)
    worlds.reset_worlds(np.arange(1))
    actions = np.random.default_rng(0).uniform(-1, 1, (8, 1, 8))
    for t, action in enumerate(actions):
        if t == diverge_at:
            data.qvel[3] = np.nan
        mujoco.mj_copyData(reference, model, data)
        result = worlds.advance(action)
        reference.ctrl[:] = data.ctrl
        mujoco.mj_step(model, reference, nstep=worlds.cfg.substeps)
        mujoco.mj_forward(model, reference)
        for field in ("time", "qpos", "qvel", "act", "sensordata", "cfrc_ext"):
            np.testing.assert_array_equal(getattr(data, field), getattr(reference, field), err_msg=field)
        assert result.unstable[0] == (t == diverge_at)
    worlds.close()


def test_one_reduction_finiteness_checks_are_exact() -> None:
    """The per-step finiteness checks (issue 18: the action's on Python numbers, the one-world
    state's by MuJoCo's sums of qpos and qvel, exact where a sum overflows) must not reject a huge
    finite action or call a huge finite state unstable, and must catch every non-finite value."""
    worlds = TaskWorlds("panda_reach", "mujoco", 1, seed=0)
    try:
        worlds.reset_worlds(np.arange(1))
        width = len(worlds.cfg.action.names)
        big = np.full((1, width), np.finfo(np.float64).max)  # its sum overflows to inf
        neutral = np.asarray(worlds.cfg.action.neutral)[None]
        with np.errstate(over="ignore"):
            act, rejected = worlds.sanitize(big)
        assert not rejected[0] and np.isfinite(act).all()
        for bad in (np.inf, -np.inf, np.nan):
            action = big.copy()
            action[0, 1] = bad
            with np.errstate(over="ignore", invalid="ignore"):
                act, rejected = worlds.sanitize(action)
            assert rejected[0] and np.array_equal(act, neutral)
            assert action[0, 1] != action[0, 1] or np.isinf(action[0, 1])  # the caller's array is kept
        sim = worlds.sim
        assert sim._state_finite()  # type: ignore[attr-defined]
        sim.data.qvel[:2] = np.finfo(np.float64).max  # type: ignore[attr-defined]
        assert sim._state_finite()  # type: ignore[attr-defined]
        sim.data.qvel[1] = np.nan  # type: ignore[attr-defined]
        assert not sim._state_finite()  # type: ignore[attr-defined]
    finally:
        worlds.close()


@pytest.mark.parametrize("task", ["panda_pick_cube", "ant"])
def test_one_world_observation_is_the_vector_one(task: str) -> None:
    """TaskGymEnv's observation (one world's entries, without the (1, k) arrays in between) equals
    the batched observation's row, and later steps do not overwrite one already returned."""
    worlds = TaskWorlds(task, "mujoco", 1, seed=0)
    try:
        worlds.reset_worlds(np.arange(1))
        first = worlds.observe_world(0)
        kept = {k: v.copy() for k, v in first.items()}
        worlds.advance(np.asarray(worlds.cfg.action.high)[None])
        one, batched = worlds.observe_world(0), worlds.observe()
        assert list(one) == list(batched)
        for key, value in one.items():
            assert value.dtype == np.float32 and value.shape == batched[key].shape[1:]
            np.testing.assert_array_equal(value, batched[key][0])
            np.testing.assert_array_equal(first[key], kept[key])
    finally:
        worlds.close()


if __name__ == "__main__":
    record(overwrite="--all" in sys.argv[1:])
    sys.exit(0)
