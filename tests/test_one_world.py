"""One world's terms compiled to Python on floats (issue 18) give the array path's values.

Each operation the recorder follows is checked against ``host_xp`` (what the terms compute with on
the host) on values that include NaN, infinities, signed zeros and overflows; every task that
compiles is checked to step identically with and without compilation; what the recorder cannot
follow is refused, so that group stays on arrays.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from robolearn.sim import host_xp
from robolearn.tasks import make_task_cfg, task_names
from robolearn.tasks.core import TermConstants
from robolearn.tasks.one_world import StaleProgram, Untraceable, compile_group
from robolearn.tasks.worlds import TaskWorlds

SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e308, -1e308, 5e-324, 1.0, -1.0]


class _Worlds(TermConstants):
    """What the recorder reads of the worlds, for operations on two state entries alone."""

    xp, device, float_dtype, cfg, sim = host_xp, None, np.float64, None, None

    def __init__(self, **state: np.ndarray) -> None:
        self.state = state
        self.step_terminations: dict[str, Any] = {}


def _row(k: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=k) * 10.0 ** rng.integers(-6, 6, size=k)
    special = rng.random(k) < 0.3
    x[special] = rng.choice(SPECIAL, size=int(special.sum()))
    return x[None]


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal values, NaN where NaN, and the same signs of zeros (a NaN's sign means nothing)."""
    return (
        a.dtype == b.dtype
        and a.shape == b.shape
        and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
        and (a.dtype.kind != "f" or np.array_equal(np.signbit(a) & (a == a), np.signbit(b) & (b == b)))
    )


def _compiled(fn: Any, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    worlds = _Worlds(x=x, y=y)
    program = compile_group(worlds, "test", lambda view, _: [fn(view.xp, view.state["x"], view.state["y"])])
    (values,) = program.fn(worlds, None)
    return np.array(values, dtype=program.dtypes[0]).reshape(program.shapes[0])


OPERATIONS = {
    "add": lambda xp, x, y: x + y,
    "subtract": lambda xp, x, y: x - y,
    "multiply": lambda xp, x, y: x * y,
    "divide": lambda xp, x, y: x / y,
    "divide_by_constant": lambda xp, x, y: x / 3.0,
    "constant_over": lambda xp, x, y: 2.0 / x,
    "negative_abs": lambda xp, x, y: -xp.abs(x),
    "square": lambda xp, x, y: xp.square(x) + x**2,
    "sqrt": lambda xp, x, y: xp.sqrt(x),
    # Below overflow: host_xp hands a whole row to numpy when one value overflows (then the others
    # are numpy's SIMD values, within two ulps), where compiled code takes numpy's for that value alone.
    "exp": lambda xp, x, y: xp.exp(xp.clip(x, -800.0, 700.0)),
    "exp_overflow": lambda xp, x, y: xp.exp(xp.where(x > 700.0, x, 0.0)),
    "tanh": lambda xp, x, y: xp.tanh(x),
    "tan": lambda xp, x, y: xp.tan(xp.where(xp.isfinite(x), x, 0.0)),  # the same: math refuses inf
    "sin_cos": lambda xp, x, y: xp.sin(x) * xp.cos(y),
    "arctan2": lambda xp, x, y: xp.arctan2(x, y),
    "compare": lambda xp, x, y: (x < y) | (x >= 0.5) & ~(y == x),
    "where": lambda xp, x, y: xp.where(x > y, x, y),
    "where_constant": lambda xp, x, y: xp.where(x > 0, 0.0, y),
    "clip": lambda xp, x, y: xp.clip(x, -1.0, 1.0),
    "clip_arrays": lambda xp, x, y: xp.clip(x, y - 1.0, y + 1.0),
    "clip_one_sided": lambda xp, x, y: xp.clip(x, min=0.0) + xp.clip(y, max=0.0),
    "maximum_minimum": lambda xp, x, y: xp.maximum(x, y) - xp.minimum(y, x),
    "isfinite": lambda xp, x, y: xp.isfinite(x) & ~xp.isnan(y),
    "sum": lambda xp, x, y: xp.sum(x, axis=1),
    "sum_keepdims": lambda xp, x, y: xp.sum(x * y, axis=1, keepdims=True),
    "sum_all": lambda xp, x, y: xp.sum(x),
    "all_any": lambda xp, x, y: xp.all(x > 0, axis=1) | xp.any(y < 0, axis=1),
    "norm": lambda xp, x, y: xp.linalg.vector_norm(x, axis=1),
    "bool_to_float": lambda xp, x, y: xp.astype(x > y, xp.float64) * 2.5,
    "reshape_concat": lambda xp, x, y: xp.concat([xp.reshape(x, (-1,)), xp.reshape(y[:, ::-1], (-1,))]),
    "stack": lambda xp, x, y: xp.stack([x[:, 0], y[:, 0]], axis=-1),
    "zeros_written": lambda xp, x, y: _written(xp, x),
    # numpy's functions called as numpy's (its kernels' values), not host_xp's math ones
    "numpy_functions": lambda xp, x, y: (
        np.tan(np.where(np.isfinite(x), x, 0.0)) + np.sin(x) * np.arctan2(x, y) - np.hypot(x, y)
    ),
    "int_remainder": lambda xp, x, y: xp.astype(x, xp.int64) % 3 + xp.astype(x > 0, xp.int64),
    "gather": lambda xp, x, y: x[xp.arange(x.shape[0]), _index(xp, y, x.shape[1])],
    "gather_rows": lambda xp, x, y: xp.stack([x, y * 2.0], axis=1)[xp.arange(1), _index(xp, y, 2) - 2],
    "constant_row": lambda xp, x, y: xp.ones(x.shape[0], dtype=xp.float64) * -1.0,
}


def _index(xp: Any, y: Any, n: int) -> Any:
    """A recorded integer index in [0, n) from y's first value."""
    finite = xp.where(xp.isfinite(y[:, 0]), xp.abs(y[:, 0]), 0.0)
    return xp.astype(xp.clip(finite, max=1e6), xp.int64) % n


def _written(xp: Any, x: Any) -> Any:
    out = xp.zeros((1, 3), dtype=xp.float64)
    out[:, 1:] = x[:, :2] * 2.0
    return out


@pytest.mark.parametrize("name", OPERATIONS)
def test_each_operation_gives_host_xp_values(name: str) -> None:
    fn = OPERATIONS[name]
    for k in (1, 2, 3, 7, 8, 9, 16, 17, 25):
        for seed in range(4):
            x, y = _row(k, seed), _row(k, seed + 100)
            with np.errstate(all="ignore"):
                want = np.asarray(fn(host_xp, x, y))
            assert _same(_compiled(fn, x, y), want), (name, k, seed, x, y)


def _refused(fn: Any) -> str:
    worlds = _Worlds(x=np.ones((1, 3)), y=np.ones((1, 3)))
    with pytest.raises(Untraceable) as info:
        compile_group(worlds, "test", lambda view, _: [fn(view, view.xp, view.state["x"])])
    return str(info.value)


def test_what_the_recorder_cannot_follow_is_refused() -> None:
    assert "branch" in _refused(lambda env, xp, x: x if xp.all(x > 0) else -x)
    assert "random" in _refused(lambda env, xp, x: x + env.rng.normal())
    assert "float32" in _refused(lambda env, xp, x: xp.astype(x, np.float32))
    assert "recorder" in _refused(lambda env, xp, x: np.einsum("ij,ij->i", x, x))
    assert "recorder" in _refused(lambda env, xp, x: np.linalg.norm(x, axis=1))
    assert "floats" in _refused(lambda env, xp, x: x % 2.0)


def test_a_write_to_task_state_is_kept_and_a_changed_size_is_caught() -> None:
    def record(view: Any, _: Any) -> list[Any]:
        view.state["y"][:, 0] = view.state["x"][:, 1] * 2.0
        return [view.state["y"] + 1.0]

    worlds = _Worlds(x=np.array([[1.0, 2.0, 3.0]]), y=np.zeros((1, 2)))
    program = compile_group(worlds, "test", record)
    assert program.fn(worlds, None) == ([5.0, 1.0],)
    np.testing.assert_array_equal(worlds.state["y"], [[4.0, 0.0]])
    worlds.state["x"] = np.ones((1, 4))
    with pytest.raises(StaleProgram):
        program.fn(worlds, None)
    np.testing.assert_array_equal(worlds.state["y"], [[4.0, 0.0]])  # nothing written


def _one_world_cases() -> list[tuple[str, str]]:
    return [
        (task, backend)
        for task in task_names()
        for backend in ("mujoco", "pybullet")
        if backend in make_task_cfg(task).backends and not make_task_cfg(task).cameras
    ]


ALL_GROUPS = {"bounds", "action", "step", "observation"}
COMPILED = {
    "panda_reach": ALL_GROUPS,
    "panda_pick_cube": ALL_GROUPS,
    "car_checkpoints": ALL_GROUPS,
    "quadrotor_waypoints": {"bounds", "observation"},
    "ant": {"bounds", "step"},
}
"""The groups of terms that run compiled, by task (a change that loses one fails here): ant's action
is the action itself and its observation a clip of 78 contact forces, one numpy call each."""


@pytest.mark.parametrize(("task", "backend"), _one_world_cases())
def test_one_world_steps_identically_compiled_or_on_arrays(task: str, backend: str) -> None:
    worlds = [TaskWorlds(task, backend, 1, seed=3, compile_terms=c) for c in (True, False)]
    cfg, rng = worlds[0].cfg, np.random.default_rng(0)
    low, high = np.asarray(cfg.action.low), np.asarray(cfg.action.high)
    for w in worlds:
        w.reset_worlds(np.arange(1))
    for step in range(40):
        action = rng.uniform(low - 0.2 * (high - low), high + 0.2 * (high - low))[None]
        if step == 5:
            action[0, 0] = np.nan
        results = [w.advance(action) for w in worlds]
        for a, b in zip(*results, strict=True):
            assert _same(a, b), (task, backend, step)
        # Fresh arrays, as on arrays: a caller may write to them (HIL forces a success in place).
        assert all(x.flags.writeable for x in results[0][:4])
        observations = [w.observe_world(0) for w in worlds]
        for key in observations[1]:
            assert _same(observations[0][key], observations[1][key]), (task, backend, step, key)
        for key in worlds[1].state:
            assert _same(worlds[0].state[key], worlds[1].state[key])
        if results[0].terminated[0] or results[0].truncated[0] or step == 20:
            for w in worlds:
                w.reset_worlds(np.arange(1))
    compiled = {group for group, program in worlds[0]._compiled.programs.items() if program is not None}
    assert compiled == COMPILED.get(task, compiled)


VIEW_COMPILED = {
    "panda_reach",
    "panda_pick_cube",
    "quadrotor_hover",
    "quadrotor_waypoints",
    "car_checkpoints",
}
"""Tasks whose observation compiles in policy_node's view of a robot (the hover drone's stateful
terms are rewards, which that view's observation does not run)."""


# ant reads MjData fields, which a robot's messages do not carry.
@pytest.mark.parametrize("task", [t for t in task_names() if not make_task_cfg(t).cameras and t != "ant"])
def test_a_robot_view_observes_identically_compiled_or_on_arrays(task: str) -> None:
    """policy_node's view of a robot (filled from messages) compiles its observation terms too."""
    from robolearn.hardware.ros.state_view import RemoteStateView, tracked_frames, tracked_joints

    cfg = make_task_cfg(task)
    views = [RemoteStateView(cfg, tracked_frames(cfg), tracked_joints(cfg)) for _ in range(2)]
    views[1]._compiled.enabled = False
    rng = np.random.default_rng(1)
    for step in range(5):
        quat = rng.normal(size=4)
        values = {
            "pos": rng.normal(size=(1, 3)),
            "quat": (quat / np.linalg.norm(quat))[None],
            "linvel": rng.normal(size=(1, 3)),
            "angvel": rng.normal(size=(1, 3)),
        }
        jpos, jvel = rng.normal(size=len(views[0].sim.jpos)), rng.normal(size=len(views[0].sim.jvel))
        for view in views:  # in place, as the messages fill them
            for field, value in values.items():
                for array in getattr(view.sim, field).values():
                    array[...] = value
            view.sim.jpos[:], view.sim.jvel[:] = jpos, jvel
            for key in view.state:
                view.state[key][...] = np.arange(view.state[key].size).reshape(view.state[key].shape) * 0.1
            view.step_count[:] = step
        observations = [view.observe() for view in views]
        assert list(observations[0]) == list(observations[1])
        for key in observations[1]:
            assert _same(observations[0][key], observations[1][key]), (task, step, key)
    compiled = views[0]._compiled.programs.get("observation") is not None
    assert compiled == (task in VIEW_COMPILED)
