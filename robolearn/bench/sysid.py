"""``robolearn bench sysid``: how well system identification recovers known perturbations (issue 19)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import numpy as np

from robolearn.bench.config import SysidBenchCfg
from robolearn.sim.scene import IdentifiedDynamics
from robolearn.sysid.excitation import joint_excitation
from robolearn.sysid.fit import identify, simulate
from robolearn.sysid.model import model_from_mjcf
from robolearn.sysid.recording import Recording

ARM = """<mujoco model="bench_arm">
  <compiler angle="radian"/>
  <option timestep="0.002" integrator="implicitfast"/>
  <worldbody>
    <body name="link1" pos="0 0 0.1">
      <inertial pos="0 0 0.1" mass="1.0" diaginertia="0.01 0.01 0.002"/>
      <joint name="joint1" type="hinge" axis="0 0 1" range="-2.5 2.5" armature="0.01" damping="0.3"
             frictionloss="0.1"/>
      <body name="link2" pos="0 0 0.2">
        <inertial pos="0.1 0 0" mass="0.8" diaginertia="0.002 0.008 0.008"/>
        <joint name="joint2" type="hinge" axis="0 1 0" range="-2.5 2.5" armature="0.01" damping="0.3"
               frictionloss="0.1"/>
        <body name="link3" pos="0.2 0 0">
          <inertial pos="0.08 0 0" mass="0.5" diaginertia="0.001 0.004 0.004"/>
          <joint name="joint3" type="hinge" axis="0 1 0" range="-2.5 2.5" armature="0.005" damping="0.2"
                 frictionloss="0.05"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position name="servo1" joint="joint1" kp="40" kv="2"/>
    <position name="servo2" joint="joint2" kp="40" kv="2"/>
    <position name="servo3" joint="joint3" kp="20" kv="1"/>
  </actuator>
</mujoco>"""
"""A small arm with position servos (the robot files of the tasks need longer fits)."""

CONTROL_DT = 0.01
"""Command and sample period of the recordings (s)."""


def run_sysid_bench(
    cfg: SysidBenchCfg, progress: Callable[[str], None]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Rows (one per parameter: true, identified, relative error) and the summary."""
    with TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench_arm.xml"
        path.write_text(ARM)
        arm = model_from_mjcf(path)
    truth = IdentifiedDynamics(
        joint_frictionloss={"joint1": 0.2, "joint2": 0.2, "joint3": 0.1},
        actuator_gain_scale=dict.fromkeys(arm.actuators, 0.8),
        mass_scale=1.3,
        command_delay=0.02,
    )
    true_values = {"joint1.frictionloss": 0.2, "joint2.frictionloss": 0.2, "joint3.frictionloss": 0.1}
    true_values |= {f"{a}.gain": 0.8 for a in arm.actuators} | {"mass_scale": 1.3}
    true_values |= {"joint1.armature": 0.01, "joint2.armature": 0.01, "joint3.armature": 0.005}
    true_values |= {"joint1.damping": 0.3, "joint2.damping": 0.3, "joint3.damping": 0.2}
    rng = np.random.default_rng(cfg.seed)
    recordings = []
    for ep in range(cfg.episodes):
        ctrl = joint_excitation(arm, cfg.seconds, CONTROL_DT, 0.8, seed=cfg.seed + ep)
        n, j = len(ctrl), len(arm.joints)
        blank = Recording(
            f"ep{ep}",
            np.arange(n, dtype=np.float64) * CONTROL_DT,
            arm.joints,
            np.zeros((n, j)),
            np.zeros((n, j)),
            arm.actuators,
            ctrl,
        )
        rec = simulate(arm, blank, truth)
        assert rec.effort is not None

        def noisy(x: np.ndarray) -> np.ndarray:
            return x + rng.normal(0.0, cfg.noise, x.shape) * max(float(np.std(x)), 1e-9) / 0.5

        recordings.append(
            Recording(
                rec.name,
                rec.times,
                rec.joints,
                rec.qpos + rng.normal(0, cfg.noise, rec.qpos.shape),
                noisy(rec.qvel),
                rec.actuators,
                rec.ctrl,
                noisy(rec.effort),
            )
        )
    progress(f"sysid: fitting {len(true_values) + 1} parameters to {cfg.episodes} episodes")
    start = time.perf_counter()
    fit = identify(arm, recordings, ("armature", "frictionloss", "damping", "gain", "mass", "delay"))
    seconds = time.perf_counter() - start
    rows: list[dict[str, Any]] = []
    for name, p in fit.params.params.items():
        if name == "command_delay":
            continue
        rel = abs(p.value - true_values[name]) / abs(true_values[name])
        rows.append(
            {
                "parameter": name,
                "true": true_values[name],
                "identified": p.value,
                "std": p.std,
                "relative_error": rel,
            }
        )
    delay = fit.params.params["command_delay"]
    summary = {
        "sysid_param_error_max": max(r["relative_error"] for r in rows),
        "sysid_delay_error_ms": abs(delay.value - 0.02) * 1e3,
        "sysid_control_period_ms": CONTROL_DT * 1e3,
        "sysid_fit_seconds": seconds,
        "sysid_parameters": len(rows) + 1,
    }
    return rows, summary


def format_sysid_table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'parameter':24s} {'true':>10s} {'identified':>12s} {'std':>10s} {'rel. error':>10s}"]
    lines += [
        f"{r['parameter']:24s} {r['true']:10.4g} {r['identified']:12.5g} {r['std']:10.3g} "
        f"{r['relative_error']:10.2e}"
        for r in rows
    ]
    return "\n".join(lines)
