"""Fitting a robot's dynamics to recordings with ``mujoco.sysid`` (issue 19): no optimiser of our own.

Each recording is replayed open loop from its first measured state through the model with its
commands; ``mujoco.sysid`` minimises the normalised difference between simulated and measured joint
positions and velocities over the chosen parameters (its Levenberg-Marquardt on finite
differences, rollouts in parallel threads), and its confidence intervals give each parameter's
standard deviation. The result is a :class:`~robolearn.tasks.sim_params.SimParams`.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from robolearn.sim.scene import IdentifiedDynamics
from robolearn.sysid.model import FIT_MAX_DELAY, SysidError, SysidModel
from robolearn.sysid.recording import Recording
from robolearn.tasks.sim_params import IdentifiedParam, SimParams

log = logging.getLogger(__name__)

Group = Literal["armature", "frictionloss", "damping", "gain", "mass", "payload", "delay"]
GROUPS: tuple[Group, ...] = ("armature", "frictionloss", "damping", "gain", "mass", "payload", "delay")
"""Parameter groups ``robolearn sysid --fit`` chooses from."""

_T_95 = 1.96
"""``mujoco.sysid.calculate_intervals`` gives 95 % half-widths; a standard deviation is this much less."""


def _sysid() -> Any:
    try:
        from mujoco import sysid
    except ImportError:
        sysid = None
    if sysid is None or not hasattr(sysid, "optimize"):
        raise SysidError("system identification needs MuJoCo's sysid extra: pip install 'mujoco[sysid]'")
    return sysid


@dataclass(frozen=True)
class FitResult:
    """What a fit found, with what is needed to report it."""

    params: SimParams
    """The identified parameters (the file ``robolearn sysid`` writes)."""
    initial_cost: float
    """Sum of squared normalised residuals with the nominal model."""
    final_cost: float
    """The same with the identified model."""
    problem: Any
    """``mujoco.sysid`` objects: models_sequences, initial and fitted ParameterDicts, residual_fn,
    opt_result (for its HTML report)."""


def _bounds(group: str, nominal: float) -> tuple[float, float]:
    """Where a parameter may go: wide around the description file's value, physical signs kept."""
    if group == "armature":
        return 0.0, max(5.0 * nominal, 0.5)
    if group == "damping":
        return 0.0, max(5.0 * nominal, 10.0)
    if group == "frictionloss":
        return 0.0, max(5.0 * nominal, 5.0)
    if group in ("gain", "mass"):
        return 0.3, 3.0
    if group == "payload":
        return 0.0, 5.0
    return 0.0, FIT_MAX_DELAY


def _param_names(model: SysidModel, groups: Sequence[str], payload_link: str) -> list[tuple[str, str, float]]:
    """(name, group, nominal) of every fitted parameter."""
    mj = model.spec.compile()
    out: list[tuple[str, str, float]] = []
    for joint in model.joints:
        j = mj.joint(joint)
        dof = int(j.dofadr[0])
        for group, value in (
            ("armature", mj.dof_armature[dof]),
            ("damping", mj.dof_damping[dof]),
            ("frictionloss", mj.dof_frictionloss[dof]),
        ):
            if group in groups:
                out.append((f"{joint}.{group}", group, float(value)))
    if "gain" in groups:
        out += [(f"{a}.gain", "gain", 1.0) for a in model.actuators]
    if "mass" in groups:
        out.append(("mass_scale", "mass", 1.0))
    if "payload" in groups:
        if not payload_link:
            raise SysidError("fitting a payload needs the link it hangs on (--payload-link)")
        if payload_link not in model.robot_bodies:
            raise SysidError(
                f"payload link {payload_link!r} is not a link of {model.robot}; "
                f"links: {sorted(model.robot_bodies)}"
            )
        out.append(("payload_mass", "payload", 0.0))
    if "delay" in groups:
        out.append(("command_delay", "delay", 0.0))
    return out


def _dynamics(
    values: dict[str, float], nominal: dict[str, float], robot: str, link: str
) -> IdentifiedDynamics:
    return SimParams(
        robot, {n: IdentifiedParam(v, 0.0, nominal[n]) for n, v in values.items()}, link
    ).dynamics()


def _physics_controls(rec: Recording, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """Commands on the physics time grid, each held until the next (what the controller does), each
    from the physics step nearest its time. Nearest, not the first at or after it: a recording's
    times are differences of epoch seconds, off by up to a few hundred ns (a float64's resolution
    there), and a command a hair after its step would act one physics step late."""
    times = np.arange(0.0, rec.times[-1], dt)
    held = np.searchsorted(rec.times, times + dt / 2, side="right") - 1
    return times, rec.ctrl[held]


def build_problem(
    model: SysidModel, recordings: Sequence[Recording], groups: Sequence[str], payload_link: str = ""
) -> dict[str, Any]:
    """The ``mujoco.sysid`` problem: parameters, sequences and the residual function."""
    sysid = _sysid()
    unknown = sorted(set(groups) - set(GROUPS))
    if unknown or not groups:
        raise SysidError(f"unknown parameter groups {unknown}; choose from {', '.join(GROUPS)}")
    specs = _param_names(model, groups, payload_link)
    nominal = {name: value for name, _, value in specs}
    params = sysid.ParameterDict()
    for name, group, value in specs:
        lo, hi = _bounds(group, value)
        params.add(sysid.Parameter(name, nominal=value, min_value=lo, max_value=hi))
    params.move_off_bounds()  # dry friction and delay start at 0, a bound the optimiser can stall in

    base = model.spec.copy()
    base_model = model.compile()
    dt = base_model.opt.timestep
    with_effort = all(r.effort is not None for r in recordings)
    if not with_effort and {"gain", "mass"} <= set(groups):
        log.warning(
            "the recordings have no joint efforts: gains and masses scaled together move the robot alike, "
            "so their fit is ambiguous; record efforts, or fit one of the two"
        )
    names = [*model.pos_sensors, *model.vel_sensors, *(model.effort_sensors if with_effort else [])]
    controls, sensors, states, seq_names = [], [], [], []
    for rec in (r.for_model(model) for r in recordings):
        t_ctrl, ctrl = _physics_controls(rec, dt)
        controls.append(sysid.TimeSeries(t_ctrl, ctrl))
        columns = [rec.qpos, rec.qvel] + ([rec.effort] if with_effort and rec.effort is not None else [])
        measured = np.concatenate(columns, axis=1)
        sensors.append(sysid.TimeSeries.from_names(rec.times, measured, base_model, names=names))
        states.append(model.initial_state(base_model, rec.qpos[0], rec.qvel[0], rec.ctrl[0]))
        seq_names.append(rec.name)
    # The measured signals are matched by name: a recording without efforts, or a task's model that
    # also carries its frame sensors, measures fewer than the model simulates.
    sequences = sysid.ModelSequences(
        model.robot, base, seq_names, states, controls, sensors, allow_missing_sensors=True
    )

    def build_model(p: Any, _spec: Any) -> Any:
        values = {name: float(p[name].value[0]) for name in nominal}
        return model.compile(_dynamics(values, nominal, model.robot, payload_link))

    # Every residual needs its signals on the same time axis: position and velocity each normalised
    # by their own spread (mujoco.sysid's normalize_residual), so radians and rad/s weigh alike.
    residual_fn = sysid.build_residual_fn(models_sequences=[sequences], build_model=build_model)
    return {
        "params": params,
        "sequences": [sequences],
        "residual_fn": residual_fn,
        "build_model": build_model,
        "nominal": nominal,
    }


def _cost(residual_fn: Any, x: np.ndarray, params: Any) -> float:
    residuals, _, _ = residual_fn(x, params)
    r = np.concatenate(residuals)
    return float(r @ r)


def _start_delay(params: Any, residual_fn: Any, step: float = 0.004) -> None:
    """Start the delay where a scan of it finds the lowest cost (the rest nominal).

    A delay shifts the phase of the whole response: from a start more than half a period of the
    fastest excitation away, Levenberg-Marquardt settles in a neighbouring minimum. The scan's
    candidates are rolled out as one batch, the same batched residual the finite differences use.
    """
    names = params.get_non_frozen_parameter_names()
    row = names.index("command_delay")
    grid = np.arange(0.0, FIT_MAX_DELAY + 1e-9, step)
    x = np.repeat(params.as_vector()[:, None], len(grid), axis=1)
    x[row] = grid
    residuals, _, _ = residual_fn(x, params)
    costs = sum((np.asarray(r) ** 2).sum(axis=0) for r in residuals)
    params["command_delay"].value[:] = grid[int(np.argmin(costs))]
    params.update_from_vector(params.as_vector())


def identify(
    model: SysidModel,
    recordings: Sequence[Recording],
    groups: Sequence[str] = ("armature", "frictionloss", "damping", "gain", "mass", "delay"),
    *,
    payload_link: str = "",
    max_iters: int = 50,
    source: dict[str, Any] | None = None,
) -> FitResult:
    """Fit ``groups`` of ``model``'s parameters to ``recordings``."""
    sysid = _sysid()
    problem = build_problem(model, recordings, groups, payload_link)
    params, residual_fn = problem["params"], problem["residual_fn"]
    initial_cost = _cost(residual_fn, params.as_vector(), params)
    quiet = io.StringIO()  # the optimiser's per-iteration table; the CLI owns the terminal

    def optimize(start: Any) -> tuple[Any, Any]:
        lo, hi = start.get_bounds()
        # Parameters differ by orders of magnitude (kg m^2, s, multipliers): steps are taken in
        # units of each one's plausible range.
        x_scale = np.maximum(np.abs(start.as_nominal_vector()), (hi - lo) / 20.0)
        return sysid.optimize(
            initial_params=start,
            residual_fn=residual_fn,
            optimizer="mujoco",
            verbose=False,
            max_iters=max_iters,
            x_scale=x_scale,
            output=quiet,
        )

    if "command_delay" in problem["nominal"]:
        _start_delay(params, residual_fn)
    fitted, opt_result = optimize(params)
    residuals, _, _ = residual_fn(opt_result.x, fitted)
    _, intervals = sysid.calculate_intervals(residuals, opt_result.jac)
    final_cost = _cost(residual_fn, opt_result.x, fitted)
    identified = {
        name: IdentifiedParam(
            float(fitted[name].value[0]), float(intervals[i]) / _T_95, problem["nominal"][name]
        )
        for i, name in enumerate(problem["nominal"])
    }
    log.info(
        "sysid %s: cost %.4g -> %.4g over %d recordings",
        model.robot,
        initial_cost,
        final_cost,
        len(recordings),
    )
    info = dict(source or {}) | {
        "initial_cost": initial_cost,
        "final_cost": final_cost,
        "recordings": len(recordings),
    }
    sim_params = SimParams(model.robot, identified, payload_link if "payload" in groups else "", info)
    problem |= {"fitted": fitted, "opt_result": opt_result}
    return FitResult(sim_params, initial_cost, final_cost, problem)


def simulate(model: SysidModel, rec: Recording, dyn: IdentifiedDynamics | None) -> Recording:
    """Open-loop replay of a recording's commands from its first state: the simulated recording
    (positions, velocities and efforts at the recording's sample times)."""
    import mujoco
    from mujoco import rollout

    rec = rec.for_model(model)
    mj = model.compile(dyn)
    dt = mj.opt.timestep
    t_ctrl, ctrl = _physics_controls(rec, dt)
    state0 = model.initial_state(mj, rec.qpos[0], rec.qvel[0], rec.ctrl[0])
    _, sensordata = rollout.rollout(mj, mujoco.MjData(mj), state0, ctrl)
    sens = np.asarray(sensordata)[0]
    # Sensor row k is the state after k+1 physics steps, at time (k+1) dt.
    t_sim = np.concatenate([[0.0], t_ctrl + dt])
    at = np.clip(rec.times, 0.0, t_sim[-1])

    def sampled(names: list[str], first: np.ndarray) -> np.ndarray:
        cols = np.vstack([first, sens[:, [int(mj.sensor(s).adr[0]) for s in names]]])
        return np.column_stack([np.interp(at, t_sim, cols[:, j]) for j in range(cols.shape[1])])

    effort0 = sens[:1, [int(mj.sensor(s).adr[0]) for s in model.effort_sensors]]
    return replace(
        rec,
        qpos=sampled(model.pos_sensors, rec.qpos[:1]),
        qvel=sampled(model.vel_sensors, rec.qvel[:1]),
        effort=sampled(model.effort_sensors, effort0),
    )
