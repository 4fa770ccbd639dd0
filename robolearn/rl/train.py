"""``robolearn train``: SAC with the RLPD recipe on a task, from seeding to a run folder.

Reads top to bottom: configuration, seeding, environments, networks, buffers, then one loop in
which the actor role collects and the learner role updates (alternating in one thread by
default, so a seed repeats a run; or the actor in its own thread). A run folder holds the
configuration, TensorBoard logs, checkpoints, the learning curve, an evaluation video and a
summary.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import torch

from robolearn.data.episodes import EpisodeWriter
from robolearn.envs.gym_adapter import GymVectorTask, gym_env_id
from robolearn.envs.task_env import TaskEnv
from robolearn.errors import ConfigError, CorruptFileError
from robolearn.eval.evaluation import evaluate
from robolearn.hil.interventions import Interventions
from robolearn.options import check_run_dir
from robolearn.policy.loading import LATEST
from robolearn.policy.meta import run_policy_record
from robolearn.policy.network import policy_from_weights
from robolearn.policy.normalization import ActionScaler, ObsLayout, RunningNorm
from robolearn.rl.actor_learner import (
    ActorRole,
    EpisodeStats,
    Exchange,
    LearnerRole,
    LocalExchange,
    PolicyFactory,
    Weights,
)
from robolearn.rl.checkpoint import load_checkpoint, restore_agent, rng_state, save_checkpoint, set_rng_state
from robolearn.rl.config import SACConfig, TrainCfg, config_from_json
from robolearn.rl.demos import collect_scripted_demos
from robolearn.rl.fused import resolve_compile
from robolearn.rl.gripper import train_gripper
from robolearn.rl.replay import ReplayBuffer
from robolearn.rl.sac import SAC
from robolearn.tasks import make_task_cfg
from robolearn.tasks.core import TaskCfg, TaskError
from robolearn.tasks.sim_params import apply_sim_params, load_sim_params

log = logging.getLogger(__name__)

UPDATES_PER_INGEST = 1
"""With an actor thread: learner steps between two intakes of its transitions. One: a learner step
takes up to a second (20 critic updates of a 256x256 SAC on a CPU core), while the exchange's queue
fills in 1.3 s at 50 Hz."""
LEARNER_BACKLOG = 64
"""Learner steps owed at most: beyond, a simulated actor thread waits for the learner (the exchange
fills); a robot's actor does not, and the learner skips the updates beyond it (``updates_skipped`` in
the summary's ``robot`` entry)."""


def resolve_device(name: str) -> torch.device:
    """The torch device for ``auto``, ``cpu`` or ``cuda``; a missing CUDA device is a clear error."""
    if name == "cuda" and not torch.cuda.is_available():
        raise TaskError("CUDA was asked for but no CUDA device is available; use cpu or auto")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def make_train_env(cfg: TrainCfg, num_envs: int, seed: int, render: bool = False) -> Any:
    """The environment for a task name or a ``gym:`` id, or (``--robot ros``) the robot."""
    if cfg.robot == "ros":
        from robolearn.envs.ros_env import RosRobotCfg, RosRobotEnv

        robot = RosRobotCfg(
            safety=cfg.robot_safety,
            connect_timeout=cfg.robot_timeout,
            stale_timeout=cfg.robot_timeout,
            reset_timeout=cfg.reset_timeout,
            trigger=cfg.robot_trigger,
        )
        return RosRobotEnv(cfg.task, robot, seed=seed)
    env_id = gym_env_id(cfg.task)
    if env_id is not None:
        return GymVectorTask(env_id, num_envs, render=render)
    # The one-world MuJoCo reference cannot hold an evaluation batch; its batched twin can.
    backend = "mujoco_batch" if cfg.backend == "mujoco" and num_envs > 1 else cfg.backend
    return TaskEnv(
        sim_task(cfg),
        backend,
        num_envs,
        seed=seed,
        randomize=cfg.randomize and not render,
        sim_params=cfg.sim_params,
    )


def sim_task(cfg: TrainCfg) -> TaskCfg:
    """The task as the run simulates it: with ``--rate-limits``, under the robot's rate limits."""
    task = make_task_cfg(cfg.task)
    if not cfg.rate_limits:
        return task
    from robolearn.hardware.registry import rate_limited_task

    return rate_limited_task(task, cfg.robot_safety)


@dataclass
class RunState:
    """Counters that a checkpoint carries besides weights and buffers."""

    env_steps: int = 0
    updates: int = 0
    offline_updates: int = 0
    """Of ``updates``, those of ``--offline`` pretraining, which ``wall_seconds`` does not time."""
    episodes: int = 0
    wall_seconds: float = 0.0
    evals: list[dict[str, Any]] = field(default_factory=list)
    actors: dict[str, Any] | None = None
    """With ``--exchange ray``: actor processes, their restarts and why they died."""
    robot: dict[str, Any] | None = None
    """With ``--robot ros``: steps, resets, control-period overruns, pauses, safety interventions."""


class Learner(Protocol):
    """What evaluation and a run's summary read of a learner: :class:`LearnerRole`, or the device
    loop's (:mod:`robolearn.rl.device_loop`)."""

    @property
    def episodes(self) -> EpisodeStats: ...

    @property
    def intervened_transitions(self) -> int: ...

    def weights(self) -> Weights: ...


def open_run(cfg: TrainCfg) -> tuple[Path, bool]:
    """The run folder, and whether the run resumes from a checkpoint there."""
    run_dir = _run_dir(cfg)
    resuming = cfg.resume is not None and (run_dir / "checkpoints" / LATEST).is_file()
    if cfg.resume is not None and not resuming:
        log.warning("%s has no complete checkpoint (killed writing its first?): starting over", run_dir)
    return run_dir, resuming


def start_run(cfg: TrainCfg, run_dir: Path) -> None:
    """Make the folder of a run that starts, with its ``config.json``."""
    # A run killed before its first checkpoint was complete is resumed from the beginning: it holds
    # its config and nothing else of value.
    run_dir.mkdir(parents=True, exist_ok=cfg.resume is not None)
    (run_dir / "config.json").write_text(json.dumps(dataclasses.asdict(cfg), default=str, indent=1))


def _run_dir(cfg: TrainCfg) -> Path:
    if cfg.resume is not None:
        return cfg.resume
    name = (
        cfg.name
        or f"{cfg.task.replace(':', '-').replace('/', '-')}-s{cfg.seed}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    return cfg.out / name


def _load_run_cfg(
    run_dir: Path,
    steps: int | None,
    option: str = "--resume",
    task: str | None = None,
    checkpoint_ok: bool = False,
) -> TrainCfg:
    """The settings ``run_dir`` was trained with (``option`` names where the folder came from), of
    ``task`` where given; with ``checkpoint_ok`` ``run_dir`` may be one of the run's checkpoints."""
    saved = check_run_dir(option, run_dir, task, checkpoint_ok)
    saved["resume"] = str(run_dir)
    if steps is not None:
        saved["steps"] = steps
    try:
        cfg: TrainCfg = config_from_json(TrainCfg, saved)
    except ConfigError as exc:  # written by another robolearn version, or edited
        raise CorruptFileError(f"{option} {run_dir}: config.json: {exc}") from None
    return cfg


def policy_record(cfg: TrainCfg, env: Any) -> dict[str, Any]:
    """What :func:`robolearn.policy.loading.load_policy` needs to rebuild the policy without the learner."""
    act = env.single_action_space
    shapes = {k: s.shape for k, s in env.single_observation_space.items()}
    return run_policy_record(cfg.task, shapes, act.low, act.high, cfg.sac.hidden, cfg.rate_limits)


def resolved_cfg(cfg: TrainCfg) -> TrainCfg:
    """The settings a run started with ``cfg`` trains with: a resumed run's own (``--steps`` where
    given), an ``--init-from`` run's learner, ``--parallel``'s preset where no option was given. It
    reads the runs' folders, so a wrong one is refused before anything starts; resolving twice
    changes nothing."""
    if cfg.resume is not None:
        cfg = _load_run_cfg(cfg.resume, cfg.steps if cfg.steps != TrainCfg.steps else None)
    elif cfg.init_from is not None:
        cfg = _with_init_run(cfg)
    return cfg.with_preset()


def train(
    cfg: TrainCfg, progress: Callable[[RunState, dict[str, float]], None] | None = None
) -> dict[str, Any]:
    """Run (or resume) training; returns the summary also written to ``summary.json``."""
    cfg = resolved_cfg(cfg)
    cfg.check()  # ranges and consistency, before anything is allocated or written
    if cfg.hil and cfg.device == "keyboard" and _hil_display(cfg) != "window":
        raise TaskError(
            "--hil --device keyboard reads keys from the simulation window, which needs a display"
        )
    reward_fn = _reward_fn(cfg)
    if cfg.demos or cfg.offline:
        from robolearn.data.reader import read_dataset

        for root in (*cfg.demos, *cfg.offline):
            read_dataset(root)  # a missing or malformed dataset fails here, before anything is written
    if cfg.device_loop:  # issue 14: simulation, replay buffer and learner on one device
        from robolearn.rl.device_loop import train_on_device

        return train_on_device(cfg, progress)
    run_dir, resuming = open_run(cfg)
    device = resolve_device(cfg.torch_device)

    if cfg.torch_threads > 0:
        torch.set_num_threads(cfg.torch_threads)
    # Seeding: one seed, separate streams.
    torch.manual_seed(cfg.seed)
    seeds = np.random.SeedSequence(cfg.seed).generate_state(4)

    # Environments. A robot on Ray is driven by its own actor process: the learner's copy of the task
    # in simulation only gives the spaces.
    robot_remote = cfg.robot == "ros" and cfg.exchange == "ray"
    env = make_train_env(
        dataclasses.replace(cfg, robot="sim") if robot_remote else cfg, cfg.num_envs, int(seeds[0])
    )
    # On a robot, evaluation is its training episodes (a second robot to evaluate on there is not).
    eval_env = None if cfg.robot == "ros" else make_train_env(cfg, min(cfg.eval_episodes, 10), int(seeds[1]))
    obs_shapes = {k: tuple(s.shape) for k, s in env.single_observation_space.items()}
    layout = ObsLayout(obs_shapes)
    scaler = ActionScaler(env.single_action_space.low, env.single_action_space.high)
    action_dim = len(scaler.low)

    # Networks and buffers.
    gripper = train_gripper(cfg.sac, cfg.task, layout, scaler)
    planned = cfg.learner_steps(max(0, cfg.total_steps - cfg.learning_starts)) + cfg.offline_steps
    wants_gripper = gripper is not None and cfg.sac.gripper_critic
    sac_cfg = resolve_compile(cfg.sac, planned, device, wants_gripper, robot=cfg.robot == "ros")
    agent = SAC(layout.dim, action_dim, sac_cfg, device, gripper)
    agent.eager_fallback = cfg.sac.compile == "auto"  # a compiler that fails costs speed, not the run
    obs_norm = RunningNorm(layout.dim)
    online = ReplayBuffer(cfg.replay_capacity, obs_shapes, action_dim)
    demos: ReplayBuffer | None = None
    state = RunState()
    exchange: Exchange = LocalExchange() if cfg.exchange == "local" else _ray_exchange(cfg, run_dir)
    learner_seed = int(seeds[2])

    if resuming:
        loaded = load_checkpoint(run_dir)
        restore_agent(agent, obs_norm, loaded)
        online = loaded.replay("online") or online
        demos = loaded.replay("demos")
        saved = loaded.state
        state = RunState(**saved["run"])
        agent.updates = state.updates
        log.info("resumed %s at %d env steps", loaded.path, state.env_steps)
    else:
        start_run(cfg, run_dir)
        demos = _demo_buffer(cfg, scaler, obs_shapes, int(seeds[3]))
        if demos is not None:
            obs_norm.update(layout.flatten(demos.obs)[: len(demos)])
            if reward_fn is not None:  # one reward for all data: the classifier's, as SERL relabels
                n = len(demos)
                demos.reward[:n] = reward_fn({k: v[:n] for k, v in demos.next_obs.items()})
                demos.terminated[:n] = np.maximum(demos.terminated[:n], demos.reward[:n] > 0.5)
        if cfg.init_from is not None:
            demos = _init_from(cfg, agent, obs_norm, demos)
        if cfg.offline:
            offline = _pretrain(
                cfg, agent, layout, obs_shapes, scaler, obs_norm, state, int(seeds[3]), progress
            )
            if cfg.online_mode == "rlpd":  # RLPD keeps the offline data as half of every batch
                demos = offline if demos is None else _joined(demos, offline)

    learner = LearnerRole(agent, layout, online, demos, obs_norm, exchange, seed=learner_seed)
    learner.env_steps = state.env_steps
    # The pretrained networks expect the offline data's statistics: online data must not shift them
    # (WSRL's warm-up would otherwise act with a changing policy); --init-from keeps them if asked.
    learner.freeze_norm = bool(cfg.offline) or (cfg.init_from is not None and cfg.init_norm == "frozen")
    pretrained = bool(cfg.offline) or cfg.init_from is not None
    if pretrained and not resuming and cfg.total_steps > 0:  # success after 0 online steps (zero-shot)
        result = _evaluate(learner, layout, scaler, cfg, eval_env, cfg.eval_episodes)
        state.evals.append(result | {"env_steps": 0, "minutes": 0.0, "offline_updates": agent.updates})
    if resuming:
        set_rng_state(learner.rng, loaded.state["learner_rng"])

    # On Ray the person and the dataset are at the robot's actor (build_actor).
    interventions, recorder = (
        (None, None)
        if robot_remote
        else _human_in_the_loop(cfg, env, run_dir, int(seeds[3]) + state.env_steps)
    )
    actor: ActorRole | None = None
    remote = None
    if cfg.exchange == "local":
        actor = ActorRole(
            env,
            exchange,
            _policy_factory(cfg, layout, scaler),
            scaler,
            seed=int(seeds[0]) + state.env_steps,
            # After pretraining the pretrained policy acts from the first step (WSRL's warm-up).
            random_steps=0 if pretrained else max(0, cfg.random_steps - state.env_steps),
            random_episode_steps=cfg.random_episode_steps,
            interventions=interventions,
            reward_fn=reward_fn,
            recorder=recorder,
            gripper=train_gripper(cfg.sac, cfg.task, layout, scaler),
        )
    if state.env_steps > 0 or pretrained:
        learner.publish()
    if cfg.robot == "ros":
        # Compiled now, before any actor starts (the robot's actor thread here, or its Ray process,
        # which shares this machine's cores on one computer), not at the first update: compiling
        # holds Python's lock and a core for tens of seconds that the actor needs every control period.
        agent.warm_up()
    if cfg.exchange == "ray":
        try:
            remote = _ray_actors(
                cfg, run_dir, int(seeds[0]) + state.env_steps, cfg.total_steps - state.env_steps
            )
        except BaseException:
            exchange.shutdown()  # type: ignore[attr-defined]
            raise

    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(run_dir / "tb"))
    started = time.perf_counter() - state.wall_seconds
    next_eval = (state.env_steps // cfg.eval_every + 1) * cfg.eval_every
    next_ckpt = (state.env_steps // cfg.checkpoint_every + 1) * cfg.checkpoint_every
    stop = threading.Event()
    thread = None
    if interventions is not None:
        interventions.connect()  # before an actor thread reads the devices
        _operator_resets(cfg, env, interventions)
    actor_failed: list[BaseException] = []
    # On a robot the actor keeps the control period in its own thread while the learner trains.
    if (cfg.threaded or cfg.robot == "ros") and actor is not None:
        thread = threading.Thread(
            target=_run_actor,
            args=(actor, stop, cfg.total_steps - state.env_steps, actor_failed),
            daemon=True,
        )
        thread.start()
    logged_at = state.updates
    # WSRL: the frozen pretrained policy collects the warm-up steps; no update changes it until then.
    wsrl = pretrained and cfg.online_mode == "wsrl"
    learning_starts = cfg.offline_cfg.warmup_steps if wsrl else cfg.learning_starts
    metrics: dict[str, float] = {}
    owed = skipped = 0  # learner steps due for transitions taken in; dropped on a robot
    try:
        while state.env_steps < cfg.total_steps and not _succeeded(cfg, state):
            if actor is not None and actor.quit_requested:
                break
            if actor_failed:  # the actor's thread ended on an error: the learner would wait forever
                raise actor_failed[0]
            if actor is not None and thread is None:
                actor.step()
            if remote is not None:
                remote.supervise()  # restarts an actor process that died
                if remote.all_finished and exchange.stats()["pending"] == 0:  # type: ignore[attr-defined]
                    break  # every actor spent its budget and nothing is pending
            # An actor thread is never left waiting on a full exchange while the learner works off
            # what it owes: it takes in transitions every UPDATES_PER_INGEST learner steps. A simulated
            # actor is held back (back-pressure) once LEARNER_BACKLOG steps are owed; a robot's never
            # (it cannot wait: blocked, it went on with its last command, measured in bench
            # finetune), so what the learner cannot keep up with is skipped and reported.
            realtime = cfg.robot == "ros" and thread is not None
            arrived = 0
            if thread is None or realtime or owed < LEARNER_BACKLOG:
                wait = (actor is None or thread is not None) and owed == 0  # nothing else to do
                arrived = learner.ingest(block=wait, timeout=1.0)
            state.env_steps = learner.env_steps
            if len(online) >= learning_starts:
                # Keep the update-to-data ratio: one learner step (utd critic updates) per transition,
                # or --updates-per-step per step of all worlds.
                owed += cfg.learner_steps(arrived)
                if realtime and owed > LEARNER_BACKLOG:
                    skipped += owed - LEARNER_BACKLOG
                    owed = LEARNER_BACKLOG
                due = owed if thread is None else min(owed, UPDATES_PER_INGEST)
                for _ in range(due):
                    metrics = learner.update()
                owed -= due
                if due or thread is None:
                    learner.publish()
                if agent.updates - logged_at >= 500:
                    logged_at = agent.updates
                    for k, v in metrics.items():
                        writer.add_scalar(f"train/{k}", v, state.env_steps)
            state.updates = agent.updates
            state.episodes = len(learner.episodes.returns)
            if state.env_steps >= next_eval or state.env_steps >= cfg.total_steps:
                next_eval += cfg.eval_every
                result = _evaluate(learner, layout, scaler, cfg, eval_env, cfg.eval_episodes)
                result |= {"env_steps": state.env_steps, "minutes": (time.perf_counter() - started) / 60}
                state.evals.append(result)
                if result["success_defined"]:
                    writer.add_scalar("eval/success_rate", result["success_rate"], state.env_steps)
                writer.add_scalar("eval/return", result["return_mean"], state.env_steps)
                recent = learner.episodes
                if recent.returns:
                    writer.add_scalar("rollout/return", float(np.mean(recent.returns[-20:])), state.env_steps)
                if recent.interventions.rates:
                    rate = float(np.mean(recent.interventions.rates[-20:]))
                    writer.add_scalar("hil/intervention_rate", rate, state.env_steps)
            if state.env_steps >= next_ckpt:
                next_ckpt += cfg.checkpoint_every
                state.wall_seconds = time.perf_counter() - started
                _checkpoint(
                    run_dir, state, agent, obs_norm, online, learner.demos, rng_state(learner.rng), cfg, env
                )
            if progress is not None:
                reports_success = actor.stats.reports_success if actor is not None else True
                progress(state, _live(learner, state, started, reports_success))
    finally:
        stop.set()
        if thread is not None:
            thread.join()
        if remote is not None:
            remote.stop()
            state.actors = remote.report() | {"received": exchange.stats()["received"]}  # type: ignore[attr-defined]
            exchange.shutdown()  # type: ignore[attr-defined]
            if robot_remote and remote.reports.get(0) is not None:
                state.robot = remote.reports[0] | {"dataset": str(run_dir / "episodes")}
        writer.close()
        if interventions is not None:
            interventions.disconnect()
        if recorder is not None:
            recorder.close()
    state.wall_seconds = time.perf_counter() - started
    if cfg.robot == "ros" and not robot_remote:
        state.robot = env.report() | {"dataset": str(run_dir / "episodes"), "updates_skipped": skipped}
    _checkpoint(run_dir, state, agent, obs_norm, online, learner.demos, rng_state(learner.rng), cfg, env)
    env.close()
    return _finish(cfg, run_dir, state, learner, layout, scaler, eval_env)


def _run_actor(actor: ActorRole, stop: threading.Event, steps: int, failed: list[BaseException]) -> None:
    """The actor thread's body: an error it ends on is handed to the learner's loop to raise."""
    try:
        actor.run(stop, steps)
    except BaseException as exc:
        failed.append(exc)


def _policy_factory(cfg: TrainCfg, layout: ObsLayout, scaler: ActionScaler) -> PolicyFactory:
    """How an actor turns published weights into its policy (obs, explore) -> physical actions."""

    built: list[Any] = []  # the actor's one policy network, built from the first weights

    def make_actor_policy(weights: Weights) -> Callable[[Any, bool], Any]:
        # Newer weights are copied into the network built first: building a network for every
        # publication (each env step with one world) took about 2 ms of a 25 ms Walker2d step.
        if not built:
            built.append(policy_from_weights(weights, layout, scaler.low, scaler.high, cfg.sac.hidden))
            built[0].gripper_epsilon = cfg.sac.gripper_epsilon  # exploration of a gripper head, if any
            return built[0].act
        policy = built[0]
        with torch.no_grad():
            for k, v in policy.actor.state_dict().items():
                v.copy_(torch.from_numpy(weights[f"actor.{k}"]))
            policy.obs_mean.copy_(torch.from_numpy(weights["obs_mean"]))
            policy.obs_std.copy_(torch.from_numpy(weights["obs_std"]))
        return policy.act

    return make_actor_policy


def build_actor(cfg: TrainCfg, exchange: Exchange, seed: int, run_dir: Path | None = None) -> ActorRole:
    """An actor on its own ``--num-envs`` worlds seeded ``seed`` (run in each Ray actor process). The
    robot's actor (``--robot ros``, on the robot's machine) also has the person's device and writes
    the run's dataset under ``run_dir``."""
    torch.set_num_threads(max(cfg.torch_threads, 1))
    env = make_train_env(cfg, cfg.num_envs, seed)
    obs_shapes = {k: tuple(s.shape) for k, s in env.single_observation_space.items()}
    layout = ObsLayout(obs_shapes)
    scaler = ActionScaler(env.single_action_space.low, env.single_action_space.high)
    pretrained = bool(cfg.offline) or cfg.init_from is not None
    actors = cfg.actors + cfg.sim_actors
    random_steps = 0 if pretrained else -(-cfg.random_steps // actors)  # the warm-up, shared
    interventions, recorder = None, None
    if cfg.robot == "ros" and run_dir is not None:
        interventions, recorder = _human_in_the_loop(cfg, env, run_dir, seed)
        if interventions is not None:
            interventions.connect()
    role = ActorRole(
        env,
        exchange,
        _policy_factory(cfg, layout, scaler),
        scaler,
        seed=seed,
        random_steps=random_steps,
        random_episode_steps=cfg.random_episode_steps,
        interventions=interventions,
        reward_fn=_reward_fn(cfg),
        recorder=recorder,
        gripper=train_gripper(cfg.sac, cfg.task, layout, scaler),
    )
    if interventions is not None:  # after the role's first reset, as in the learner's process
        _operator_resets(cfg, env, interventions)
    return role


def _operator_resets(cfg: TrainCfg, env: Any, interventions: Interventions) -> None:
    """``--robot-reset operator``: the person at the robot's device confirms every scene reset after
    the first (the scene the operator set up before the run), HIL-SERL's reset on a real robot."""
    if cfg.robot != "ros" or cfg.robot_reset != "operator":
        return
    from robolearn.teleop import SceneResetConfirmation

    watched = interventions.devices[0]
    assert watched is not None  # --hil watches world 0, the robot
    env.operator = SceneResetConfirmation(watched)


def _ray_exchange(cfg: TrainCfg, run_dir: Path) -> Exchange:
    """The learner's end of a Ray exchange named after the run (found again by ``--resume``)."""
    from robolearn.rl.ray_exchange import RayExchange, connect

    connect(_ray_settings(cfg))
    return RayExchange(_hub_name(run_dir), _ray_settings(cfg), create=True)


def _ray_actors(cfg: TrainCfg, run_dir: Path, seed: int, max_env_steps: int) -> Any:
    """``--actors`` actor processes feeding the run's exchange, each its own step budget share."""
    import functools

    from robolearn.rl.ray_exchange import RayActors

    if cfg.robot == "ros":  # the robot's actor, and --sim-actors in simulation beside it
        share = -(-max_env_steps // (1 + cfg.sim_actors))
        sim = dataclasses.replace(cfg, robot="sim", hil=False, robot_reset="robot")
        return RayActors(
            functools.partial(build_actor, sim),
            cfg.sim_actors,
            _hub_name(run_dir),
            _ray_settings(cfg),
            seed=seed,
            max_env_steps=share,
            robot=functools.partial(build_actor, cfg, run_dir=run_dir),
        )
    share = -(-max_env_steps // cfg.actors)
    factory = functools.partial(build_actor, cfg)
    return RayActors(
        factory, cfg.actors, _hub_name(run_dir), _ray_settings(cfg), seed=seed, max_env_steps=share
    )


def _ray_settings(cfg: TrainCfg) -> Any:
    from robolearn.rl.ray_exchange import RaySettings

    return RaySettings(
        address=cfg.ray_address,
        call_timeout=cfg.ray_timeout,
        actor_resource=cfg.ray_actor_resource,
        robot_resource=cfg.ray_robot_resource if cfg.robot == "ros" else None,
    )


def _hub_name(run_dir: Path) -> str:
    """The exchange's name in the cluster: the run folder's, so a resumed run finds its own."""
    return f"exchange/{run_dir.resolve().name}"


def _succeeded(cfg: TrainCfg, state: RunState) -> bool:
    """Whether the latest evaluation reached ``stop_at_success``."""
    target = cfg.stop_at_success
    if target is None or not state.evals:
        return False
    last = state.evals[-1]
    # On a robot the rate comes from training episodes: judge it on a full evaluation's worth of them.
    enough = cfg.robot == "sim" or last["episodes"] >= cfg.eval_episodes
    return enough and bool(last["success_rate"] >= target)


def _live(learner: LearnerRole, state: RunState, started: float, reports_success: bool) -> dict[str, float]:
    """Rates and recent episodes' outcomes; ``success`` only where the task reports success (a
    Gymnasium env may not: then there is no rate to show, not a rate of 0)."""
    ep = learner.episodes
    elapsed = max(time.perf_counter() - started, 1e-9)
    live = {
        "steps_per_s": state.env_steps / elapsed,
        "updates_per_s": (state.updates - state.offline_updates) / elapsed,
        "return": float(np.mean(ep.returns[-20:])) if ep.returns else float("nan"),
    }
    if reports_success or ep.successes:
        live["success"] = float(np.mean(ep.successes[-20:])) if ep.successes else float("nan")
    return live


def _demo_buffer(
    cfg: TrainCfg, scaler: ActionScaler, obs_shapes: dict[str, tuple[int, ...]], seed: int
) -> ReplayBuffer | None:
    """The demonstration buffer: scripted-expert episodes and recorded datasets, or None."""
    if cfg.scripted_demos <= 0 and not cfg.demos:
        return None
    buffer = ReplayBuffer(cfg.replay_capacity, obs_shapes, len(scaler.low))
    if cfg.scripted_demos > 0:
        task = sim_task(cfg)
        if task.expert is None:
            raise TaskError(f"--scripted-demos: task {cfg.task} has no scripted expert")
        n = 8 if cfg.backend in ("mujoco_batch", "mujoco_warp") else 1
        env = TaskEnv(task, cfg.backend, n, seed=seed, sim_params=cfg.sim_params)
        # The expert of the robot simulated: with --sim-params, the identified one (env.cfg).
        expert = task.expert(env.cfg)
        scripted, attempts = collect_scripted_demos(
            env, expert, cfg.scripted_demos, scaler, cfg.replay_capacity, seed
        )
        env.close()
        buffer.add(scripted.take(np.arange(len(scripted))))
        log.info("scripted demonstrations: %d successful of %d episodes", cfg.scripted_demos, attempts)
    if cfg.demos:
        from robolearn.rl.demos import load_demo_buffer

        for root in cfg.demos:
            recorded = load_demo_buffer(root, scaler, obs_shapes, cfg.replay_capacity)
            buffer.add(recorded.take(np.arange(len(recorded))))
            log.info("demonstrations from %s: %d transitions", root, len(recorded))
    return buffer


def _offline_data(
    cfg: TrainCfg, scaler: ActionScaler, obs_shapes: dict[str, tuple[int, ...]]
) -> tuple[ReplayBuffer, npt.NDArray[np.float32]]:
    """The ``--offline`` datasets as one buffer, with each transition's Monte-Carlo return-to-go."""
    from robolearn.rl.demos import load_demo_buffer
    from robolearn.rl.offline import returns_to_go

    parts = [load_demo_buffer(root, scaler, obs_shapes, cfg.replay_capacity) for root in cfg.offline]
    total = sum(len(p) for p in parts)
    if total == 0:
        raise TaskError(f"--offline {' '.join(map(str, cfg.offline))}: the datasets hold no transitions")
    buffer = ReplayBuffer(total, obs_shapes, len(scaler.low))
    returns = []
    for part in parts:
        n = len(part)
        buffer.add(part.take(np.arange(n)))
        returns.append(returns_to_go(part.reward[:n], part.episode_end[:n], cfg.sac.gamma))
    return buffer, np.concatenate(returns)


def _pretrain(
    cfg: TrainCfg,
    agent: SAC,
    layout: ObsLayout,
    obs_shapes: dict[str, tuple[int, ...]],
    scaler: ActionScaler,
    obs_norm: RunningNorm,
    state: RunState,
    seed: int,
    progress: Callable[[RunState, dict[str, float]], None] | None = None,
) -> ReplayBuffer:
    """Offline pretraining on ``--offline`` (Cal-QL or IQL) for ``--offline-steps`` gradient steps.

    ``progress`` hears of it every 100 updates, its ``live`` dict with ``offline_updates`` and
    ``offline_total`` (no environment steps yet: ``steps_per_s`` 0, ``return`` NaN)."""
    from robolearn.rl.offline import make_offline_algorithm

    rng = np.random.default_rng(seed)
    data, mc_return = _offline_data(cfg, scaler, obs_shapes)
    obs_norm.update(layout.flatten(data.obs)[: len(data)])
    algo = make_offline_algorithm(cfg.offline_algo, agent, layout.dim, cfg.offline_cfg)
    exchange = LocalExchange()
    sampler = LearnerRole(agent, layout, data, None, obs_norm, exchange, seed=int(rng.integers(2**31)))
    started = time.perf_counter()
    metrics: dict[str, float] = {}
    b = cfg.sac.batch_size
    for step in range(cfg.offline_steps):
        idx = rng.integers(0, len(data), b)
        batch = sampler.tensors(data.take(idx), np.full(b, cfg.sac.gamma))
        metrics = algo.update(batch, torch.as_tensor(mc_return[idx], device=agent.device))
        if progress is not None and ((step + 1) % 100 == 0 or step + 1 == cfg.offline_steps):
            state.updates = agent.updates
            rate = (step + 1) / max(time.perf_counter() - started, 1e-9)
            live = {"steps_per_s": 0.0, "updates_per_s": rate, "return": float("nan")}
            progress(state, live | {"offline_updates": step + 1, "offline_total": cfg.offline_steps})
        if (step + 1) % 1_000 == 0:
            log.info("offline %s: %d/%d updates %s", cfg.offline_algo, step + 1, cfg.offline_steps, metrics)
    log.info(
        "offline pretraining (%s): %d updates on %d transitions in %.1f s",
        cfg.offline_algo,
        cfg.offline_steps,
        len(data),
        time.perf_counter() - started,
    )
    state.updates = state.offline_updates = agent.updates
    return data


FINETUNE_SAC_OPTIONS = (
    "batch_size",
    "actor_lr",
    "critic_lr",
    "temperature_lr",
    "actor_every",
    "utd_ratio",
    "tau",
    "n_step",
    "compile",
    "demo_fraction",
)
"""``--sac.*`` settings a run started ``--init-from`` may set for itself: how its learner trains, not
the shapes, targets or precision of what it loads (WSRL fine-tunes at a higher update-to-data ratio
than it pretrains). Given, named in ``--sac.*`` on the command line or away from ``SACConfig``'s
default, each replaces the run's own."""


def _sac_given(sac: SACConfig, named: Collection[str], name: str) -> bool:
    """Whether the setting ``name`` of ``sac`` was given: named on the command line, or away from the
    default (set in code, or a run made before the command line's names were kept)."""
    return name in named or getattr(sac, name) != getattr(SACConfig, name)


def init_run_learner(init_from: Path, sac: SACConfig, task: str, named: Collection[str] = ()) -> SACConfig:
    """The learner a run started ``--init-from`` trains with: ``init_from``'s ``--sac.*`` settings (its
    networks' shapes, targets, n-step returns), the ``FINETUNE_SAC_OPTIONS`` given in ``sac`` (``named``
    on the command line, or away from the default) replacing its own. A run from scratch compared
    with it takes the same."""
    init = _load_run_cfg(init_from, None, "--init-from", task, checkpoint_ok=True)
    given = {name: getattr(sac, name) for name in FINETUNE_SAC_OPTIONS if _sac_given(sac, named, name)}
    return dataclasses.replace(init.sac, **given)


def _with_init_run(cfg: TrainCfg) -> TrainCfg:
    """``cfg`` with the ``--init-from`` run's learner (:func:`init_run_learner`), its buffer's share of
    every batch as the demonstration fraction, and with fresh critics the actor held until they have
    learned."""
    assert cfg.init_from is not None
    share_given = _sac_given(cfg.sac, cfg.sac_given, "demo_fraction")
    if cfg.init_sim_share > 0 and share_given and cfg.sac.demo_fraction != cfg.init_sim_share:
        raise ConfigError(
            f"--sac.demo-fraction {cfg.sac.demo_fraction:g} and --init-sim-share {cfg.init_sim_share:g}: "
            "both set the share of every batch from the second buffer (the simulation's, which the "
            "interventions join); give one"
        )
    sac = init_run_learner(cfg.init_from, cfg.sac, cfg.task, cfg.sac_given)
    if cfg.init_sim_share > 0:
        sac = dataclasses.replace(sac, demo_fraction=cfg.init_sim_share)
    if cfg.init_critics == "fresh":
        sac = dataclasses.replace(sac, actor_starts=cfg.init_actor_hold)
    return dataclasses.replace(cfg, sac=sac)


def _init_from(
    cfg: TrainCfg, agent: SAC, obs_norm: RunningNorm, demos: ReplayBuffer | None
) -> ReplayBuffer | None:
    """Load the ``--init-from`` run's actor, critics and normalizer; returns the demonstration buffer:
    that run's replay buffer with ``--init-sim-share``, else ``demos`` unchanged."""
    assert cfg.init_from is not None
    loaded = load_checkpoint(cfg.init_from)
    restore_agent(agent, obs_norm, loaded, critics=cfg.init_critics == "pretrained")
    torch.manual_seed(cfg.seed)  # this run's own random stream, not the pretrained run's
    recipe = "WSRL" if cfg.init_sim_share == 0 else "with its buffer"
    if cfg.init_critics == "fresh":
        recipe += f", fresh critics, the actor held for {cfg.init_actor_hold:,} critic steps"
    log.info("starting from %s (%s)", loaded.path, recipe)
    if cfg.init_sim_share == 0:
        return demos
    sim = loaded.replay("online")
    if sim is None or len(sim) == 0:
        raise ConfigError(f"--init-sim-share: {loaded.path} holds no replay buffer to keep")
    return sim


def _joined(a: ReplayBuffer, b: ReplayBuffer) -> ReplayBuffer:
    """One buffer holding the transitions of both."""
    out = ReplayBuffer(len(a) + len(b), a.obs_shapes, a.action_dim)
    out.add(a.take(np.arange(len(a))))
    out.add(b.take(np.arange(len(b))))
    return out


def _reward_fn(cfg: TrainCfg) -> Callable[[Any], Any] | None:
    """The learned reward for ``--reward classifier:PATH`` (None for the task's own reward)."""
    if cfg.reward == "task":
        return None
    path = cfg.reward.partition(":")[2]  # TrainCfg.check() refused any other form
    from robolearn.hil.reward_classifier import load_reward_classifier

    classifier = load_reward_classifier(Path(path), threshold=cfg.reward_threshold)
    if classifier.needs_images:
        raise TaskError(
            f"--reward {cfg.reward}: the classifier sees camera images, which training observations "
            "lack; retrain it with --no-images"
        )
    return classifier.reward


def _human_in_the_loop(
    cfg: TrainCfg, env: Any, run_dir: Path, seed: int
) -> tuple[Interventions | None, EpisodeWriter | None]:
    """The devices watching the worlds, and the dataset every training episode is written to."""
    if not cfg.hil and cfg.robot == "sim":
        return None, None
    from robolearn.data.writer import DatasetWriter
    from robolearn.teleop import HAND_DEVICES, make_device

    task = make_task_cfg(cfg.task)
    if cfg.sim_params is not None:
        # The person knows the robot: a scripted one is the expert of the identified robot (the
        # car's drives within its tyres' grip), on a robot as in simulation.
        task = apply_sim_params(task, load_sim_params(cfg.sim_params))
    watched = env.num_envs if cfg.hil_worlds == "all" else 1

    def options(world: int) -> dict[str, Any]:
        if cfg.device != "scripted":
            return {}
        from robolearn.teleop.scripted import InterventionSchedule

        schedule = InterventionSchedule(
            steps=cfg.intervene_steps,
            every=cfg.intervene_every,
            probability=cfg.intervene_probability,
            seed=seed + world,
            disagree=cfg.intervene_on_disagreement,
            patience=cfg.intervene_patience,
            hold=cfg.intervene_hold,
        )
        return {"schedule": schedule}

    root = run_dir / "episodes"
    shapes = {k: tuple(s.shape) for k, s in env.single_observation_space.items()}
    writer = (
        DatasetWriter.open(root)
        if root.exists()
        else DatasetWriter.for_task(root, task, shapes, repo_id=f"robolearn/{run_dir.name}")
    )
    recorder = EpisodeWriter(writer, task.description, env.num_envs)
    if not cfg.hil:  # a robot run without a person: every episode still goes to the dataset
        return None, recorder
    devices = [
        make_device(cfg.device, task, **options(i)) if i < watched else None for i in range(env.num_envs)
    ]
    # A person at a robot watches the robot itself; in simulation, world 0 on the screen.
    watch = cfg.device in HAND_DEVICES and cfg.robot == "sim"
    view, period = _human_view(cfg, env, run_dir) if watch else (None, 0.0)
    interventions = Interventions(devices, view=view, period=period)
    return interventions, recorder


def _hil_display(cfg: TrainCfg) -> Literal["window", "png"]:
    """How a person watches: ``--hil-display``, or a window where there is a display."""
    from robolearn.teleop.device import display_available

    if cfg.hil_display != "auto":
        return cfg.hil_display
    return "window" if display_available() else "png"


def _human_view(cfg: TrainCfg, env: Any, run_dir: Path) -> tuple[Callable[[], None], float]:
    """A person watches world 0 in real time: a window where there is a display, else PNG frames."""
    from robolearn.hil.record import Viewer

    viewer = Viewer(_hil_display(cfg), run_dir / "preview", 2.0)
    viewer.open(f"robolearn train --hil {cfg.task}", env.render_size)

    def view() -> None:
        if viewer.due():
            viewer.show(env.render(), f"{cfg.task}: world 0 (hold the intervene button to take over)")

    return view, env.cfg.control_dt


def _evaluate(
    learner: Learner, layout: ObsLayout, scaler: ActionScaler, cfg: TrainCfg, env: Any, episodes: int
) -> dict[str, Any]:
    if env is None:
        return _robot_episodes(learner, episodes)
    policy = policy_from_weights(learner.weights(), layout, scaler.low, scaler.high, cfg.sac.hidden)
    summary: dict[str, Any] = evaluate(env, policy.act, episodes, seed=cfg.seed + 1).summary()
    return summary


def _robot_episodes(learner: Learner, episodes: int) -> dict[str, Any]:
    """On a robot: the outcomes of its last ``episodes`` training episodes (with exploration) that
    no person drove: an intervened episode's success is the person's, not the policy's."""
    ep = learner.episodes
    rates = ep.interventions.rates
    # One robot, one device: an intervention rate per ended episode, in the order they ended.
    own = [k for k in range(len(ep.returns)) if len(rates) != len(ep.returns) or rates[k] == 0.0]
    own = own[-episodes:]
    returns = [ep.returns[k] for k in own]
    successes = [ep.successes[k] for k in own if k < len(ep.successes)]
    rate = float(np.mean(successes)) if successes else 0.0
    half = 1.96 * float(np.sqrt(rate * (1 - rate) / max(len(successes), 1)))
    return {
        "success_defined": bool(successes),
        "success_rate": rate,
        "success_rate_ci95": [max(rate - half, 0.0), min(rate + half, 1.0)],
        "return_mean": float(np.mean(returns)) if returns else float("nan"),
        "episodes": len(returns),
        "source": "robot training episodes without interventions",
    }


def _success_by_intervention(ep: EpisodeStats) -> dict[str, float | None]:
    """Success over the run of the training episodes a person stepped into and of those nobody
    drove: a person who cannot do the task teaches little (None where unknown: a task without
    success, episodes without one intervention rate each, or no such episode)."""
    rates, successes = ep.interventions.rates, ep.successes
    aligned = bool(successes) and len(rates) == len(successes)

    def rate(person: bool) -> float | None:
        flags = [s for s, r in zip(successes, rates, strict=True) if (r > 0) == person] if aligned else []
        return float(np.mean(flags)) if flags else None

    return {
        "success_rate_intervened": rate(True),
        "success_rate_own": rate(False),
        "steps_to_own_success_80": steps_to_own_success(ep)
        if aligned and len(ep.lengths) == len(rates)
        else None,
    }


def steps_to_own_success(ep: EpisodeStats, window: int = 10, good: int = 8) -> int | None:
    """Environment steps (the lengths of all ended episodes, a person's included, summed: on one
    robot, its steps) by which ``good`` of the last ``window`` episodes nobody drove had succeeded,
    the first time; None where that never happened. How soon a policy works on its own, the figure
    that tells a pretrained run from a fresh one when a person carries both (docs/ros.md)."""
    steps, recent = 0, collections.deque[bool](maxlen=window)
    for length, success, rate in zip(ep.lengths, ep.successes, ep.interventions.rates, strict=True):
        steps += length
        if rate == 0.0:
            recent.append(success)
            if len(recent) == window and sum(recent) >= good:
                return steps
    return None


def _checkpoint(
    run_dir: Path,
    state: RunState,
    agent: SAC,
    obs_norm: RunningNorm,
    online: ReplayBuffer,
    demos: ReplayBuffer | None,
    learner_rng: dict[str, Any],
    cfg: TrainCfg,
    env: Any,
) -> Path:
    return save_checkpoint(
        run_dir / "checkpoints",
        state.env_steps,
        agent=agent,
        obs_norm=obs_norm,
        online=online,
        demos=demos,
        state={
            "run": dataclasses.asdict(state),
            "learner_rng": learner_rng,
            "policy": policy_record(cfg, env),
        },
        keep=cfg.keep_checkpoints,
    )


def _finish(
    cfg: TrainCfg,
    run_dir: Path,
    state: RunState,
    learner: Learner,
    layout: ObsLayout,
    scaler: ActionScaler,
    eval_env: Any,
) -> dict[str, Any]:
    final = _evaluate(learner, layout, scaler, cfg, eval_env, cfg.final_eval_episodes)
    if eval_env is not None:
        eval_env.close()
    summary: dict[str, Any] = {
        "task": cfg.task,
        "run_dir": str(run_dir),
        "env_steps": state.env_steps,
        "updates": state.updates,
        "wall_minutes": state.wall_seconds / 60,
        # None where the task has no notion of success (a Gymnasium env without is_success).
        "success_rate": final["success_rate"] if final["success_defined"] else None,
        "success_rate_ci95": final["success_rate_ci95"] if final["success_defined"] else None,
        "return_mean": final["return_mean"],
        "evals": state.evals,
        "checkpoint": str(run_dir / "checkpoints"),
    }
    if state.actors is not None:
        summary["actors"] = state.actors
    if state.robot is not None:
        summary["robot"] = state.robot
    from robolearn.eval.plots import plot_learning_curve

    summary["learning_curve"] = str(
        plot_learning_curve(state.evals, run_dir / "learning_curve.png", cfg.task)
    )
    human = learner.episodes.interventions
    if cfg.hil:
        from robolearn.eval.plots import plot_intervention_rate

        summary["interventions"] = {
            "episodes": len(human.rates),
            "episodes_intervened": sum(r > 0 for r in human.rates),
            "mean_rate": float(np.mean(human.rates)) if human.rates else 0.0,
            "transitions": learner.intervened_transitions,
            "marked_success": human.labels.count("success"),
            "marked_failure": human.labels.count("failure"),
            **_success_by_intervention(learner.episodes),
            "dataset": str(run_dir / "episodes"),
            "plot": str(plot_intervention_rate(human.rates, run_dir / "interventions.png", cfg.task)),
        }
    if cfg.video and cfg.robot == "sim":
        from robolearn.data.video import write_mp4

        policy = policy_from_weights(learner.weights(), layout, scaler.low, scaler.high, cfg.sac.hidden)
        video_env = make_train_env(cfg, 1, cfg.seed + 2, render=True)
        try:
            frames = evaluate(video_env, policy.act, 2, seed=cfg.seed + 2, record_episodes=2).frames
            summary["video"] = str(write_mp4(run_dir / "eval.mp4", frames, video_env.metadata["render_fps"]))
        except gym.error.DependencyNotInstalled as exc:  # a Gymnasium env whose renderer is not installed
            log.warning("no evaluation video: %s", exc)
        video_env.close()
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary
