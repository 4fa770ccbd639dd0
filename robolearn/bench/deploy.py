"""Deployment timing over ROS 2: how late a policy node's commands come, and how evenly.

``policy_node`` runs as its own process with an exported MLP policy (256x256 by default); this
process stands in for the robot. It publishes the task's state messages (those
``sim_robot_node`` publishes, from a reset world, over Fast DDS on loopback, on a ROS domain of the
run's own) and receives the commands.

- ``latency``: the node acts on every complete sample (``trigger: observation``). Each sample is
  stamped when published; its latency is the time until its command arrives here: transport both
  ways, rebuilding the observation with the task's terms, the network, the safety layer and
  encoding. The next sample goes out on the next 10 ms boundary after the command arrives, so every
  command belongs to the last sample. ``policy_ms`` times the network alone in this process, back
  to back; ``policy_after_idle_ms`` the same after a control period asleep before each call, the
  node's situation: what a core's cold caches and predictors add to every stage of a step.
- ``jitter``: the node acts on its own timer (``trigger: timer``) at 100 Hz for the arm and 50 Hz
  for the drone and the car, while the robot publishes at the same rate; jitter is the deviation of
  each interval between command arrivals from the period.

Both processes run SCHED_FIFO (``priority``), each on CPUs of its own (``pin``): policy_node on the
last CPU, this process on the others.

The latency run also times each stage inside policy_node (its ``profile_path``, see
:data:`robolearn.hardware.ros.policy_node.STAGES`): the summary has p50 and p99 of each, and the
remainder of the latency (the command's way back to the robot) as ``stage_return_p50_ms``.

- ``pixels``: the latency run again for a pixel policy (issue 13) of ``panda_pick_cube_pixels``
  (its wrist and scene cameras and proprioception; an untrained network of the size
  ``train_pixels`` makes, unless one is given), the robot's cameras sent with each sample, once
  raw (``sensor_msgs/Image``) and once JPEG-compressed (``image_transport`` compressed, quality 95),
  at the policy's resolution or ``camera_size`` (policy_node then resizes). Samples go out every
  control period of the task (20 ms). Summary keys ``pixels_<raw|compressed>_latency_p50_ms``,
  ``..._p99_ms``, ``..._stage_<stage>_p50_ms`` (the ``images`` stage: decoding, converting and
  resizing the frames), ``..._image_bytes`` (one camera's image as sent) and ``pixels_policy_ms_p50``.

Goals (issue 18): latency p99 at most 1 ms, jitter p99 at most 0.5 ms. What the machine offers for
them (a real-time kernel, isolated CPUs, SCHED_FIFO granted) is in the summary's ``realtime``;
figures from a shared machine are noisy, and its load average at the start is in the summary too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import logging
import os
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from robolearn.bench.config import DeployBenchCfg
from robolearn.bench.report import format_table, machine_info, versions
from robolearn.envs.task_env import TaskEnv
from robolearn.policy.encoders import ObservationEncoder
from robolearn.policy.export import export_policy
from robolearn.policy.meta import read_meta
from robolearn.policy.network import Actor
from robolearn.policy.pixel_export import export_pixel_policy
from robolearn.policy.pixel_network import PixelPolicy
from robolearn.policy.runtime import ExportedPolicy, load_exported
from robolearn.tasks import make_task_cfg
from robolearn.tasks.core import TaskCfg

log = logging.getLogger(__name__)

GOALS = {"latency_p99_ms": 1.0, "jitter_p99_ms": 0.5}
"""Upper bounds to reach (issue 18: ros2_control's loop runs at 1 kHz, a policy node adding
milliseconds of its own eats a robot's control budget)."""
JITTER_RUNS = (("panda_reach", 100.0), ("quadrotor_hover", 50.0), ("car_checkpoints", 50.0))
"""Task (embodiment) and control rate of each jitter run."""
STAGE_NOTES = {
    "arrival": "stamp to callback: publishing, DDS, deserialization, executor wake-up",
    "read": "the sample's last message into the view",
    "images": "camera frames: decode, convert, resize (summed)",
    "observe": "observation terms and robot state",
    "policy": "normalization and network",
    "safety": "safety layer",
    "publish": "encode and publish the command",
    "step": "observe to publish",
}
"""What each row of the stage breakdown times (see policy_node's ``STAGES``)."""
LATENCY_TASK = "panda_reach"
LATENCY_PERIOD = 0.01
"""Seconds between samples of the latency run."""
WATCHDOG_OFF_S = 3600.0
"""policy_node's watchdog timeout in the latency runs (s): longer than any run."""
PIXEL_TASK = "panda_pick_cube_pixels"
"""Task of the pixel-policy runs (its samples go out every control period)."""
PIXEL_TRANSPORTS = ("raw", "compressed")


# -- policies ------------------------------------------------------------------------------------
def make_mlp_policy(task: str, hidden: tuple[int, ...], folder: Path) -> Path:
    """An exported MLP for ``task``: a few DAgger updates on the scripted expert (timing only needs
    the network's size), exported to ``folder/<task>-policy``."""
    from robolearn.rl.distill import DistillCmd, distill

    cmd = DistillCmd(
        task,
        num_envs=2,
        randomize=False,
        iterations=1,
        steps_per_iteration=64,
        updates_per_iteration=20,
        hidden=hidden,
        eval_episodes=1,
        final_eval_episodes=1,
        out=folder,
        name=f"{task}-distill",
    )
    summary = distill(cmd)
    onnx = importlib.util.find_spec("onnx") is not None
    return export_policy(Path(summary["run_dir"]), folder / f"{task}-policy", onnx=onnx)


def make_pixel_policy(task: str, hidden: tuple[int, ...], folder: Path) -> Path:
    """An untrained pixel policy for ``task`` of the size ``train_pixels`` makes (a DrQ encoder of 50
    features per camera, the state terms, an actor of ``hidden``), exported to
    ``folder/<task>-policy``: timing needs the network's size, not its skill."""
    env = TaskEnv(make_task_cfg(task), "mujoco", 1, seed=0)
    images = {k: spec.shape for k, spec in env.image_specs.items()}
    encoder = ObservationEncoder(images, dict(env.observation_sizes))
    torch.manual_seed(0)
    actor = Actor(encoder.feature_dim, len(env.cfg.action.names), hidden)
    policy = PixelPolicy(encoder, actor, env.cfg.action.low, env.cfg.action.high)
    onnx = importlib.util.find_spec("onnx") is not None
    out = export_pixel_policy(policy, env.cfg, folder / f"{task}-policy", onnx=onnx, source="untrained")
    env.close()
    return out


def _policies(cfg: DeployBenchCfg, folder: Path, progress: Callable[[str], None]) -> dict[str, Path]:
    given = {read_meta(p).task: p for p in cfg.policies}
    out = {}
    pixels = [PIXEL_TASK] if cfg.pixel_samples else []
    for task in dict.fromkeys([LATENCY_TASK, *(t for t, _ in JITTER_RUNS), *pixels]):
        made = folder / f"{task}-policy"
        if task in given:
            out[task] = given[task]
        elif (made / "policy.json").is_file():  # made by an earlier run in the same --work-dir
            out[task] = made
        elif task == PIXEL_TASK:
            progress(f"making an untrained pixel policy for {task} (actor {'x'.join(map(str, cfg.hidden))})")
            out[task] = make_pixel_policy(task, cfg.hidden, folder)
        else:
            progress(f"making a {'x'.join(map(str, cfg.hidden))} MLP policy for {task}")
            out[task] = make_mlp_policy(task, cfg.hidden, folder)
    return out


# -- the robot's side ----------------------------------------------------------------------------
class StandInRobot:
    """Publishes one reset world's state messages with fresh stamps and records command arrivals.

    The messages are those ``sim_robot_node`` publishes, serialized once: each sample only writes
    its stamp into the bytes and publishes them, as a robot's C++ driver costs little per message
    (rclpy takes about 0.08 ms to convert and serialize an ``Odometry``, all of it before the next
    message of the sample can go out). A task's cameras go out on ``image_transport`` only (raw or
    compressed, JPEG); ``cameras`` false leaves them out (a camera that went silent). Commands are
    heard as ``command_type`` ("": the embodiment's default).
    """

    def __init__(self, node: Any, cfg: TaskCfg, image_transport: str = "raw", command_type: str = "") -> None:
        from robolearn.hardware.ros._rclpy import command_qos, sensor_qos
        from robolearn.hardware.ros.images import TRANSPORTS, camera_topic
        from robolearn.hardware.ros.messages import make_codec
        from robolearn.hardware.ros.sim_robot_node import RobotReport

        env = TaskEnv(cfg, "mujoco", 1, seed=0)
        env.reset(seed=0)
        report = RobotReport(cfg)
        other = {camera_topic(c, t) for c in cfg.cameras for t in TRANSPORTS if t != image_transport}
        messages = {t: m for t, m in report.messages(env, STAMP_MARK).items() if t not in other}
        env.close()
        self.camera_topics = [camera_topic(c, image_transport) for c in cfg.cameras]
        self.sizes = {t: len(messages[t].data) for t in self.camera_topics}
        """Bytes of each camera's image."""
        self.cameras = True
        self.serialized = {t: _StampedBytes(m) for t, m in messages.items()}
        topics = report.topics()
        self.pubs = {t: node.create_publisher(topics[t], t, sensor_qos()) for t in messages}
        self.arrivals: list[float] = []
        self.arrived = threading.Event()
        command = make_codec(cfg, command_type).roles()["command"]
        self.sub = node.create_subscription(command, "command", self._on_command, command_qos())

    def _on_command(self, m: Any) -> None:
        self.arrivals.append(time.time())
        self.arrived.set()

    def publish(self) -> float:
        """Publish the state stamped now; returns the stamp."""
        t = time.time()
        for topic, pub in self.pubs.items():
            if self.cameras or topic not in self.camera_topics:
                pub.publish(self.serialized[topic].stamped(t))
        return t


STAMP_MARK = 1_234_567_890.123_456_7
"""The stamp the stand-in's messages are built with, to find where the stamp sits in their bytes."""


class _StampedBytes:
    """One message serialized (CDR, little endian), with the place of its stamp: a header's
    ``builtin_interfaces/Time``, or ``task_state``'s first value (see :mod:`.messages`)."""

    def __init__(self, m: Any) -> None:
        from rclpy.serialization import serialize_message

        from robolearn.hardware.ros._rclpy import msg

        self.buf = bytearray(serialize_message(m))
        if hasattr(m, "header"):
            self.time = msg("builtin_interfaces", "Time")()
            self.pack: Callable[[float], bytes] = self._pack_time
        else:
            self.pack = struct.Struct("<d").pack
        mark = self.pack(STAMP_MARK)
        self.at = self.buf.find(mark)
        if self.at < 0 or self.buf.find(mark, self.at + 1) >= 0:
            raise RuntimeError(f"cannot place the stamp in a serialized {type(m).__name__}")

    def _pack_time(self, t: float) -> bytes:
        from robolearn.hardware.ros.messages import set_stamp

        set_stamp(self.time, t)
        return _TIME.pack(self.time.sec, self.time.nanosec)

    def stamped(self, t: float) -> bytes:
        """The message stamped ``t`` (s since the epoch)."""
        value = self.pack(t)
        self.buf[self.at : self.at + len(value)] = value
        return bytes(self.buf)


_TIME = struct.Struct("<iI")


def _sleep_until(deadline: float) -> None:
    delay = deadline - time.monotonic()
    if delay > 0:
        time.sleep(delay)


@contextlib.contextmanager
def _policy_node(policy: Path, params: dict[str, Any], domain: int, log_path: Path) -> Iterator[None]:
    from robolearn.hardware.ros.harness import start_node, stop_node

    with open(log_path, "w") as out:
        proc = start_node("policy_node", {"policy": str(policy), **params}, domain, log=out)
        try:
            yield
        finally:
            stop_node(proc)


def _wait_for_commands(robot: StandInRobot, period: float, timeout: float = 120.0) -> None:
    """Publish until the node answers (it loads the policy and discovers this node first)."""
    deadline = time.monotonic() + timeout
    while not robot.arrivals:
        if time.monotonic() > deadline:
            raise RuntimeError(f"policy_node sent no command within {timeout:.0f} s")
        robot.publish()
        time.sleep(period)


def realtime_setup() -> dict[str, Any]:
    """What this machine offers a control loop: a PREEMPT_RT kernel, isolated CPUs (``isolcpus``,
    ``nohz_full``), whether SCHED_FIFO may be used, and the CPU idle-state latency request file."""

    def read(path: str) -> str:
        try:
            return Path(path).read_text().strip()
        except OSError:
            return ""

    cmdline = read("/proc/cmdline").split()
    try:
        fifo = os.sched_get_priority_max(os.SCHED_FIFO) > 0 and _may_use_fifo()
    except OSError:
        fifo = False
    return {
        "preempt_rt": read("/sys/kernel/realtime") == "1" or "PREEMPT_RT" in os.uname().version,
        "kernel": os.uname().release,
        "isolated_cpus": read("/sys/devices/system/cpu/isolated"),
        "nohz_full": read("/sys/devices/system/cpu/nohz_full").replace("(null)", ""),
        "kernel_args": [
            a for a in cmdline if a.split("=")[0] in ("isolcpus", "nohz_full", "rcu_nocbs", "irqaffinity")
        ],
        "sched_fifo_allowed": fifo,
        "cpu_dma_latency": os.access("/dev/cpu_dma_latency", os.W_OK),
    }


def _may_use_fifo() -> bool:
    """Whether this process may switch a thread to SCHED_FIFO (tried on a short-lived thread)."""
    result: list[bool] = []

    def probe() -> None:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
            result.append(True)
        except PermissionError:
            result.append(False)

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return bool(result and result[0])


def stage_breakdown(profile: Path, last: int, latency_p50_ms: float) -> dict[str, float]:
    """p50 and p99 (ms) of each stage policy_node timed over its ``last`` steps (the measured ones,
    after the warm-up), and the latency's remainder at p50: the command's way back."""
    from robolearn.hardware.ros.policy_node import STAGES

    times = json.loads(profile.read_text())
    out: dict[str, float] = {}
    for stage in STAGES:
        v = np.asarray(times[stage][-last:])
        out[f"stage_{stage}_p50_ms"] = float(np.percentile(v, 50))
        out[f"stage_{stage}_p99_ms"] = float(np.percentile(v, 99))
    inside = out["stage_arrival_p50_ms"] + out["stage_read_p50_ms"] + out["stage_step_p50_ms"]
    out["stage_return_p50_ms"] = latency_p50_ms - inside
    return out


def _percentiles(values_ms: list[float]) -> dict[str, float]:
    v = np.asarray(values_ms)
    return {"p50": float(np.percentile(v, 50)), "p99": float(np.percentile(v, 99)), "max": float(v.max())}


def measure_latency(
    robot: StandInRobot, samples: int, warmup: int = 50, period: float = LATENCY_PERIOD
) -> tuple[list[float], int]:
    """Latencies (ms) of ``samples`` samples, and how many samples got no command within a period."""
    latencies, missed = [], 0
    next_tick = time.monotonic()
    for i in range(warmup + samples):
        robot.arrived.clear()
        count = len(robot.arrivals)
        stamp = robot.publish()
        if robot.arrived.wait(period) and len(robot.arrivals) > count:
            if i >= warmup:
                latencies.append((robot.arrivals[count] - stamp) * 1e3)
        elif i >= warmup:
            missed += 1
        next_tick = max(next_tick + period, time.monotonic())
        _sleep_until(next_tick)
    return latencies, missed


def measure_jitter(robot: StandInRobot, rate_hz: float, seconds: float) -> list[float]:
    """Deviations (ms) of command inter-arrival times from the period, the robot publishing at the rate."""
    period = 1.0 / rate_hz
    _wait_for_commands(robot, period)
    time.sleep(1.0)  # settle
    start = len(robot.arrivals)
    next_tick = time.monotonic()
    end = next_tick + seconds
    while next_tick < end:
        robot.publish()
        next_tick += period
        _sleep_until(next_tick)
    arrivals = np.asarray(robot.arrivals[start:])
    return (np.abs(np.diff(arrivals) - period) * 1e3).tolist()


def policy_compute_ms(
    policy: ExportedPolicy, task: str, calls: int = 1000, idle_s: float = 0.0
) -> dict[str, float]:
    """The exported network's time for one observation in this process (1 torch thread), called
    back to back (warm caches), or with ``idle_s`` of sleep before each call, as in the node, where a
    control period passes between calls and the core's caches and predictors go cold."""
    torch.set_num_threads(1)
    env = TaskEnv(make_task_cfg(task), "mujoco", 1, seed=0)
    obs, _ = env.reset(seed=0)
    env.close()
    one = {k: v[0] for k, v in obs.items()}
    times = []
    with torch.inference_mode():
        for _ in range(calls):
            if idle_s:
                time.sleep(idle_s)
            t = time.perf_counter()
            policy(one)
            times.append((time.perf_counter() - t) * 1e3)
    return _percentiles(times)


@contextlib.contextmanager
def _pinned(pin: bool) -> Iterator[str]:
    """With ``pin`` and at least two usable CPUs, keep this process off the last one until the block
    ends; yields the ``cpus`` parameter that puts policy_node on it ("" for no pinning)."""
    from robolearn.hardware.ros.policy_node import pin_to_cpus

    usable = os.sched_getaffinity(0)
    if not pin or len(usable) < 2:
        yield ""
        return
    pin_to_cpus(usable - {max(usable)})
    try:
        yield str(max(usable))
    finally:
        pin_to_cpus(usable)


class LatencyRun:
    """Latency runs of one policy (``trigger: observation``): policy_node started with
    ``node_params`` for each, a stand-in robot publishing a sample every period."""

    def __init__(self, policy: Path, node_params: dict[str, Any], domain: int, folder: Path) -> None:
        self.policy, self.node_params, self.domain, self.folder = policy, node_params, domain, folder

    def measure(
        self, part: str, task_cfg: TaskCfg, samples: int, period: float, image_transport: str = "raw"
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The summary's latency and stage keys (unprefixed) and the table rows: the latency, then
        each stage (a state policy has no ``images`` row) and the way back."""
        from robolearn.hardware.ros.harness import local_node
        from robolearn.hardware.ros.policy_node import STAGES

        name = part.replace(" ", "-")
        profile = self.folder / f"{name}-stages.json"
        # The watchdog's stop commands must not pass for answers: a sample the node never completes
        # (a lost image) stays unanswered, rather than answered by a stop at the next tick.
        params = {"trigger": "observation", "rate_hz": 1 / period, "profile_path": str(profile),
                  "image_transport": image_transport, "watchdog_timeout": WATCHDOG_OFF_S,
                  **self.node_params}  # fmt: skip
        with (
            local_node("bench_robot", self.domain) as node,
            _policy_node(self.policy, params, self.domain, self.folder / f"{name}-policy_node.log"),
        ):
            robot = StandInRobot(node, task_cfg, image_transport)
            sizes = list(robot.sizes.values())
            try:
                _wait_for_commands(robot, period)
                latencies, missed = measure_latency(robot, samples, period=period)
            except RuntimeError:
                if not task_cfg.cameras:
                    raise
                latencies, missed = [], samples
        task = task_cfg.name
        if not latencies and task_cfg.cameras:
            # Large frames over best-effort DDS can all lose a fragment: a figure in itself.
            note = "no sample answered: every one lost an image on the way (see docs/ros.md)"
            empty = {
                "latency_p50_ms": None,
                "latency_p99_ms": None,
                "latency_max_ms": None,
                "latency_samples": 0,
                "latency_unanswered": samples,
                "image_bytes": float(np.mean(sizes)),
            }
            return empty, [{"part": part, "task": task, "rate_hz": 1 / period, "samples": 0, "note": note}]
        if not latencies:
            raise RuntimeError(f"{part}: no command answered a sample within {period * 1e3:g} ms")
        lat = _percentiles(latencies)
        note = f"{missed} samples unanswered within {period * 1e3:g} ms"
        rows = [{"part": part, "task": task, "rate_hz": 1 / period, **lat, "samples": len(latencies),
                 "note": note}]  # fmt: skip
        stages = stage_breakdown(profile, samples, lat["p50"])
        for stage in STAGES:
            if stage != "images" or task_cfg.cameras:
                rows.append({"part": f"  {stage}", "task": task, "p50": stages[f"stage_{stage}_p50_ms"],
                             "p99": stages[f"stage_{stage}_p99_ms"], "note": STAGE_NOTES[stage]})  # fmt: skip
        rows.append({"part": "  return", "task": task, "p50": stages["stage_return_p50_ms"],
                     "note": "latency p50 less the stages' p50: the command's way back"})  # fmt: skip
        step_ms = np.asarray(json.loads(profile.read_text())["step"][-samples:])
        summary = stages | {
            "latency_deadline_misses": int((step_ms > period * 1e3).sum()),
            "latency_p50_ms": lat["p50"],
            "latency_p99_ms": lat["p99"],
            "latency_max_ms": lat["max"],
            "latency_samples": len(latencies),
            "latency_unanswered": missed,
        }
        if sizes:
            summary["image_bytes"] = float(np.mean(sizes))  # of one camera's image, as sent
        return summary, rows


def camera_sized(task_cfg: TaskCfg, size: tuple[int, int] | None) -> TaskCfg:
    """``task_cfg`` with every camera rendering ``size`` (width, height) pixels; None: as it is."""
    if size is None:
        return task_cfg
    w, h = size
    cameras = {n: dataclasses.replace(c, width=w, height=h) for n, c in task_cfg.cameras.items()}
    return dataclasses.replace(task_cfg, cameras=cameras)


def _pixel_runs(
    cfg: DeployBenchCfg,
    policy: Path,
    node_params: dict[str, Any],
    domain: int,
    folder: Path,
    progress: Callable[[str], None],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The pixel policy's latency with raw and with JPEG-compressed camera images (see the module doc)."""
    meta = read_meta(policy)
    robot_cfg = camera_sized(make_task_cfg(meta.task), cfg.camera_size)
    period = robot_cfg.control_dt
    sizes = sorted({f"{c.width}x{c.height}" for c in robot_cfg.cameras.values()})
    summary: dict[str, Any] = {"pixels_task": meta.task, "pixels_cameras": [c.camera for c in meta.cameras],
                               "pixels_camera_size": sizes, "pixels_period_ms": period * 1e3}  # fmt: skip
    compute = policy_compute_ms(load_exported(policy, cfg.runtime), meta.task, calls=200)
    rows = [{"part": "pixel policy alone", "task": meta.task, **compute, "samples": 200,
             "note": "the network in this process, back to back"}]  # fmt: skip
    summary |= {"pixels_policy_ms_p50": compute["p50"], "pixels_policy_ms_p99": compute["p99"]}
    run = LatencyRun(policy, node_params, domain, folder)
    for transport in PIXEL_TRANSPORTS:
        progress(f"pixels: {cfg.pixel_samples} samples of {meta.task}, cameras {' '.join(sizes)} {transport}")
        lat, part_rows = run.measure(f"pixels {transport}", robot_cfg, cfg.pixel_samples, period, transport)
        part_rows[0]["note"] += f"; {len(meta.cameras)} cameras {' '.join(sizes)} {transport}"
        rows += part_rows
        summary |= {f"pixels_{transport}_{k}": v for k, v in lat.items()}
    return rows, summary


# -- the run -------------------------------------------------------------------------------------
def run_deploy_bench(
    cfg: DeployBenchCfg, progress: Callable[[str], None] = log.info
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run the parts; the table rows and the summary (the JSON the command prints last)."""
    from robolearn.hardware.ros.harness import local_node, private_domain
    from robolearn.hardware.ros.policy_node import set_realtime_priority

    cfg.check()
    info = machine_info()
    if cfg.priority:
        set_realtime_priority(cfg.priority)  # before any thread starts, so that all inherit it
    with contextlib.ExitStack() as stack:
        folder = cfg.work_dir or Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-deploy-"))
        )
        folder.mkdir(parents=True, exist_ok=True)
        policies = _policies(cfg, folder, progress)
        domain = private_domain()
        node_cpus = stack.enter_context(_pinned(cfg.pin))
        rows: list[dict[str, Any]] = []
        summary: dict[str, Any] = {}

        progress(f"latency: {cfg.latency_samples} samples of {LATENCY_TASK}")
        latency_policy = load_exported(policies[LATENCY_TASK], cfg.runtime)
        compute = policy_compute_ms(latency_policy, LATENCY_TASK)
        node_params = {"runtime": cfg.runtime, "priority": cfg.priority, "cpus": node_cpus}
        run = LatencyRun(policies[LATENCY_TASK], node_params, domain, folder)
        lat, part_rows = run.measure(
            "latency", make_task_cfg(LATENCY_TASK), cfg.latency_samples, LATENCY_PERIOD
        )
        rows += part_rows[:1]
        rows.append({"part": "policy alone", "task": LATENCY_TASK, **compute, "samples": 1000,
                     "note": "the network in this process, back to back"})  # fmt: skip
        idle = policy_compute_ms(latency_policy, LATENCY_TASK, calls=300, idle_s=LATENCY_PERIOD)
        asleep = f"the same, each call after {LATENCY_PERIOD * 1e3:g} ms asleep (cold caches)"
        rows.append({"part": "policy after idle", "task": LATENCY_TASK, **idle, "samples": 300,
                     "note": asleep})  # fmt: skip
        rows += part_rows[1:]
        summary |= lat
        summary |= {"policy_ms_p50": compute["p50"], "policy_ms_p99": compute["p99"]}
        summary |= {"policy_after_idle_ms_p50": idle["p50"], "policy_after_idle_ms_p99": idle["p99"]}

        if cfg.pixel_samples:
            pixel_rows, pixel_summary = _pixel_runs(
                cfg, policies[PIXEL_TASK], node_params, domain, folder, progress
            )
            rows += pixel_rows
            summary |= pixel_summary

        jitter_p99 = []
        for task, rate in JITTER_RUNS:
            progress(f"jitter: {task} at {rate:g} Hz for {cfg.jitter_seconds:g} s")
            params = {"trigger": "timer", "rate_hz": rate, **node_params}
            with (
                local_node("bench_robot", domain) as node,
                _policy_node(policies[task], params, domain, folder / f"jitter-{task}-policy_node.log"),
            ):
                robot = StandInRobot(node, make_task_cfg(task))
                deviations = measure_jitter(robot, rate, cfg.jitter_seconds)
            jit = _percentiles(deviations)
            embodiment = make_task_cfg(task).embodiment
            rows.append({"part": "jitter", "task": task, "rate_hz": rate, **jit, "samples": len(deviations),
                         "note": "|command interval - period|"})  # fmt: skip
            summary[f"jitter_{embodiment}_{rate:g}hz_p50_ms"] = jit["p50"]
            summary[f"jitter_{embodiment}_{rate:g}hz_p99_ms"] = jit["p99"]
            jitter_p99.append(jit["p99"])
        summary["jitter_p99_ms"] = max(jitter_p99)
    summary |= {
        "goals": GOALS,
        "meets_goals": {k: summary[k] <= v for k, v in GOALS.items()},
        "hidden": list(cfg.hidden),
        "runtime": latency_policy.runtime,
        "policy_node_cpus": node_cpus,
        "machine": info,
        "realtime": realtime_setup(),
        "versions": versions(["ros-rclpy", "ros-rmw-fastrtps-cpp", "ros-fastdds", "torch", "numpy"]),
    }
    return rows, summary


COLUMNS = (
    ("part", "part"),
    ("task", "task"),
    ("rate_hz", "Hz"),
    ("p50", "p50 ms"),
    ("p99", "p99 ms"),
    ("max", "max ms"),
    ("samples", "samples"),
    ("note", "note"),
)


def _cell(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key in ("p50", "p99", "max"):
        return f"{value:.3f}"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def format_deploy_table(rows: list[dict[str, Any]]) -> str:
    """The rows as aligned columns under a header."""
    return format_table(rows, COLUMNS, _cell)
