"""Options of training and distillation: typed configs whose field docstrings are the CLI's help.

This module imports neither torch nor the simulators, so ``robolearn --help`` stays fast (issue 9).
Every numeric option has a stated valid range, checked in its config's ``check()`` before anything
is allocated or written (issue 15).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Hashable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import tyro

from robolearn.envs.gym_adapter import gym_env_id
from robolearn.errors import ConfigError
from robolearn.hardware.ros import Trigger
from robolearn.options import (
    check_memory,
    check_output_dir,
    check_range,
    check_seed,
    check_step_window,
    check_threads,
    check_widths,
)
from robolearn.sim.backend import BackendName
from robolearn.tasks import DEFAULT_TASK, make_task_cfg
from robolearn.tasks.core import TaskCfg, TaskError
from robolearn.tasks.sim_params import apply_sim_params, load_sim_params
from robolearn.tasks.teacher import teacher_task

MAX_WORLDS = 65_536
"""Most parallel worlds one actor steps; far beyond what one machine simulates in real time."""


def check_intervention_gate(disagree: float | None, patience: int, hold: int) -> None:
    """Refuse a scripted person's disagreement gate (``--intervene-on-disagreement``,
    ``--intervene-patience``, ``--intervene-hold``) out of range, naming the option."""
    check_range("--intervene-on-disagreement", disagree, 0, 2, low_open=True, allow_none=True)
    check_range("--intervene-patience", patience, 1)
    check_range("--intervene-hold", hold, 1)


ParallelMode = Literal["off", "small", "medium", "large"]


@dataclass(frozen=True)
class ParallelPreset:
    """The massively parallel mode's settings (``--parallel``), after FastTD3 and FastSAC (Seo et al.,
    2025): many worlds, large batches and several learner steps per environment step, so the learner
    keeps up with a GPU simulator instead of making one update per transition."""

    num_envs: int
    batch_size: int
    updates_per_step: int
    replay_capacity: int

    def options(self) -> dict[str, int]:
        """The TrainCfg options it sets; the warm-up, evaluation and checkpoint periods scale with the
        worlds, so that they come every so many steps of all worlds (FastSAC starts learning after
        10 steps of its worlds)."""
        n = self.num_envs
        return {
            "num_envs": n,
            "updates_per_step": self.updates_per_step,
            "replay_capacity": self.replay_capacity,
            "random_steps": 10 * n,
            "learning_starts": 10 * n,
            "eval_every": 100 * n,
            "checkpoint_every": 1_000 * n,
        }


PARALLEL_PRESETS: dict[str, ParallelPreset] = {
    # FastSAC's HumanoidBench world count; fits Warp's CPU device or a laptop GPU.
    "small": ParallelPreset(num_envs=128, batch_size=4_096, updates_per_step=4, replay_capacity=1_000_000),
    # FastSAC's MuJoCo Playground world count and its manipulation setting (8 updates per step,
    # "higher UTD works better for manipulation" on Isaac Lab's Franka lift-cube).
    "medium": ParallelPreset(
        num_envs=1_024, batch_size=16_384, updates_per_step=8, replay_capacity=2_000_000
    ),
    # FastSAC's Isaac Lab world count and batch size.
    "large": ParallelPreset(num_envs=4_096, batch_size=32_768, updates_per_step=8, replay_capacity=4_000_000),
}
"""Presets of ``--parallel``; an option given beside it (a value other than its default) wins."""


@dataclass(frozen=True)
class SACConfig:
    """Learner hyperparameters; defaults follow SERL and RLPD."""

    hidden: tuple[int, ...] = (256, 256)
    """Hidden layer widths of actor and critics."""
    batch_size: int = 256
    """Transitions per gradient step."""
    actor_lr: float = 3e-4
    """Actor learning rate."""
    critic_lr: float = 3e-4
    """Critic learning rate."""
    temperature_lr: float = 3e-4
    """Learning rate of the entropy temperature."""
    adam_beta1: float = 0.9
    """Adam's first-moment decay in the actor's and the critics' optimizers (Adam's 0.9; CrossQ's
    recipe: 0.5, with learning rates of 1e-3)."""
    actor_every: int = 1
    """Updates per actor and temperature step: the policy delay (TD3's 2, CrossQ's 3). An update is
    ``utd_ratio`` critic steps, so with utd_ratio 1 the actor learns at every k-th critic step."""
    actor_starts: int = 0
    """Critic steps before the actor's (and the temperature's) first step: a fresh critic under a
    pretrained actor (``robolearn train --init-critics fresh``) would turn the actor by an untrained
    critic's gradients."""
    gamma: float = 0.99
    """Discount."""
    tau: float = 0.005
    """Polyak rate of the target critics."""
    num_critics: int = 2
    """Critic ensemble size N (RLPD uses 10)."""
    critic_subsample: int | None = None
    """Size M of the random subset whose minimum forms the target (REDQ); None takes all N."""
    layer_norm: bool = True
    """LayerNorm after every hidden layer of the critics (RLPD)."""
    utd_ratio: int = 1
    """Critic updates per transition collected (update-to-data ratio)."""
    init_temperature: float = 0.01
    """Initial entropy temperature: SERL's 1e-2 (RLPD's 1.0 comes with 20 critic updates per
    transition; at 1 or 2 the temperature takes over 10,000 steps to fall, and pick-cube stayed at 0%
    that long: docs/learner.md)."""
    target_entropy: Literal["action_dim", "half_action_dim"] = "action_dim"
    """Target entropy: -|A| (SAC), or -|A|/2 (RLPD's option)."""
    backup_entropy: bool = True
    """Include the entropy term in the critic's target (RLPD turns it off)."""
    demo_fraction: float = 0.5
    """Share of every batch drawn from the demonstration buffer (RLPD's symmetric sampling), once it
    holds any: the scripted or recorded demonstrations and, with ``--hil``, the interventions (which
    also join the online buffer; 0 samples them only there, in proportion to their number)."""
    critic_loss: Literal["mse", "hl_gauss"] = "mse"
    """Critic objective: squared TD error, or HL-Gauss classification over value bins (Farebrother et
    al., "Stop Regressing", ICML 2024)."""
    hl_gauss_bins: int = 101
    """Bins of the HL-Gauss critic."""
    value_range: tuple[float, float] = (-100.0, 100.0)
    """Values the HL-Gauss bins cover (returns beyond are clipped to the ends); with ``reward_scale
    returns``, in the scaled rewards' units (SimbaV2's (-5, 5))."""
    reward_scale: Literal["none", "returns"] = "none"
    """Rewards as the task gives them, or divided by running return statistics (SimbaV2, Lee et al.
    2025; :mod:`robolearn.rl.reward_scale`): by the discounted return's standard deviation, and at
    least enough that every return lies within the larger end of ``value_range``, so one HL-Gauss
    range serves tasks of any reward units."""
    critic_norm: Literal["auto", "layer", "batch_renorm", "none"] = "auto"
    """Normalization in the critics: auto follows ``layer_norm``; batch_renorm is CrossQ's (Bhatt et
    al., ICLR 2024), meant with ``--sac.no-target-network``."""
    target_network: bool = True
    """Bootstrap from Polyak-averaged target critics; off: from the critics themselves, with (s, a) and
    (s', a') in one batch (CrossQ)."""
    critic_hidden: tuple[int, ...] | None = None
    """Hidden widths of the critics (None: ``hidden``); CrossQ and BRO-style critics are wider."""
    critic_arch: Literal["mlp", "bro"] = "mlp"
    """Critic network: mlp (linear, normalization, ReLU per hidden width) or bro, BRO's residual
    BroNet (Nauman et al., NeurIPS 2024) at the one width ``--sac.critic-hidden`` gives (the paper: 512)."""
    critic_blocks: int = 1
    """Residual blocks of the bro critic (the paper's 2; each adds two layers of the width)."""
    n_step: int = 1
    """Rewards summed before bootstrapping (n-step returns); 1 is SAC's one-step target."""
    legacy_values: ClassVar[dict[str, dict[Any, Any]]] = {"compile": {False: "off", True: "on"}}
    """Values runs saved before a field changed type, as they read now (config.json, ``--resume``)."""
    compile: Literal["auto", "on", "off"] = "auto"
    """torch.compile the whole update as one graph (robolearn.rl.fused; the losses alone where an
    option keeps the update outside one graph). auto: on for a CPU learner with a C++ compiler whose
    run makes at least 10,000 learner steps (``robolearn train``; elsewhere off, and off on a robot,
    whose actor thread it cost control periods), where the 20-30 s of compilation are repaid.
    Measured on 2 cores (docs/learner.md): 1.6x the eager update in float32, 2.3x with ``precision
    bfloat16`` on a CPU with AMX."""
    precision: Literal["float32", "bfloat16"] = "float32"
    """Matmul precision of the losses (autocast; weights and optimizer stay float32). bfloat16 is fast
    on CPUs with AMX and on CUDA tensor cores."""
    gripper_critic: Annotated[bool, tyro.conf.arg(name="gripper-critic", prefix_name=False)] = False
    """HIL-SERL's discrete gripper (Luo et al. 2024): a double-DQN critic over close, stay and open
    commands the gripper of an arm task (panda_pick_cube), the actor the other components."""
    gripper_penalty: Annotated[float, tyro.conf.arg(name="gripper-penalty", prefix_name=False)] = 0.0
    """With --gripper-critic: reward subtracted, in the gripper critic's target only, for each step
    that changes the gripper's measured state (HIL-SERL's gripper penalty)."""
    gripper_epsilon: Annotated[float, tyro.conf.arg(name="gripper-epsilon", prefix_name=False)] = 0.02
    """With --gripper-critic: chance per step that exploration takes a random gripper action
    (epsilon-greedy); small, since one random opening drops a carried cube."""

    @property
    def critic_norm_used(self) -> str:
        """The critics' normalization: ``critic_norm``, its auto resolved by ``layer_norm``."""
        if self.critic_norm != "auto":
            return self.critic_norm
        return "layer" if self.layer_norm else "none"

    def check(self) -> None:
        """Refuse settings outside their ranges, naming the option, the value and the range."""
        check_widths("--sac.hidden", self.hidden)
        check_range("--sac.batch-size", self.batch_size, 1)
        for name, lr in (
            ("--sac.actor-lr", self.actor_lr),
            ("--sac.critic-lr", self.critic_lr),
            ("--sac.temperature-lr", self.temperature_lr),
        ):
            check_range(name, lr, 0, 1, low_open=True)
        # gamma = 1 would make the bootstrapped value of a time-out unbounded.
        check_range("--sac.gamma", self.gamma, 0, 1, high_open=True)
        check_range("--sac.tau", self.tau, 0, 1, low_open=True)
        check_range("--sac.num-critics", self.num_critics, 1)
        check_range("--sac.critic-subsample", self.critic_subsample, 1, self.num_critics, allow_none=True)
        check_range("--sac.utd-ratio", self.utd_ratio, 1)
        check_range("--sac.adam-beta1", self.adam_beta1, 0, 1, high_open=True)
        check_range("--sac.actor-every", self.actor_every, 1, 1_000)
        check_range("--sac.actor-starts", self.actor_starts, 0)
        check_range("--sac.init-temperature", self.init_temperature, 0, low_open=True)
        check_range("--sac.demo-fraction", self.demo_fraction, 0, 1, high_open=True)
        check_range("--sac.hl-gauss-bins", self.hl_gauss_bins, 2, 10_000)
        low, high = self.value_range
        check_range("--sac.value-range", low, -1e9, 1e9)
        check_range("--sac.value-range", high, low, 1e9, low_open=True)
        if self.critic_hidden is not None:
            check_widths("--sac.critic-hidden", self.critic_hidden)
        check_range("--sac.n-step", self.n_step, 1, 1_000)
        check_range("--sac.critic-blocks", self.critic_blocks, 1, 64)
        if self.critic_arch == "bro":
            widths = self.critic_hidden or self.hidden
            if len(set(widths)) != 1:
                raise ConfigError(
                    f"--sac.critic-arch bro: its blocks share one width, got widths {list(widths)} "
                    "(give one with --sac.critic-hidden W)"
                )
            norm = self.critic_norm_used
            if norm != "layer":
                raise ConfigError(
                    f"--sac.critic-arch bro normalizes with LayerNorm, not {norm} (drop "
                    "--sac.critic-norm and --sac.no-layer-norm, or use --sac.critic-arch mlp)"
                )
        check_range("--gripper-penalty", self.gripper_penalty, 0, 1e3)
        check_range("--gripper-epsilon", self.gripper_epsilon, 0, 1)
        if self.gripper_penalty > 0 and not self.gripper_critic:
            raise ConfigError("--gripper-penalty is the gripper critic's: it needs --gripper-critic")


@dataclass(frozen=True)
class OfflineConfig:
    """Hyperparameters of offline pretraining (``--offline``) and of the online phase after it."""

    cql_alpha: float = 5.0
    """Cal-QL: weight of the conservative regularizer (Nakamoto et al. 2023 use 5 on AntMaze)."""
    cql_samples: int = 10
    """Cal-QL: random and policy actions per state in the regularizer's log-sum-exp."""
    expectile: float = 0.7
    """IQL: expectile of the value regression (Kostrikov et al. 2021: 0.7 locomotion, 0.9 AntMaze)."""
    awr_temperature: float = 3.0
    """IQL: inverse temperature beta of advantage-weighted regression (3 locomotion, 10 AntMaze)."""
    warmup_steps: int = 5_000
    """WSRL: environment steps collected with the frozen pretrained policy before online updates start
    (Zhou et al. 2025 use 5,000)."""

    def check(self) -> None:
        check_range("--offline-cfg.cql-alpha", self.cql_alpha, 0, 1e6)
        check_range("--offline-cfg.cql-samples", self.cql_samples, 1, 1_000)
        check_range("--offline-cfg.expectile", self.expectile, 0, 1, low_open=True, high_open=True)
        check_range("--offline-cfg.awr-temperature", self.awr_temperature, 0, 1e3)
        check_range("--offline-cfg.warmup-steps", self.warmup_steps, 0)


@dataclass(frozen=True)
class TrainCfg:
    """Train a policy with SAC and the RLPD recipe."""

    task: tyro.conf.Positional[str] = DEFAULT_TASK
    """Task name, or a Gymnasium id as ``gym:Pendulum-v1``."""
    backend: BackendName = "mujoco_batch"
    """Simulator for robolearn tasks."""
    num_envs: int = 4
    """Parallel worlds the actor steps."""
    steps: int = 20_000
    """Environment steps to train for (all worlds together)."""
    seed: int = 0
    """Seed of everything random in the run."""
    out: Path = Path("runs")
    """Folder in which the run folder is made."""
    name: str | None = None
    """Run folder name (default: task, seed and time)."""
    resume: Path | None = None
    """Continue the run in this folder from its latest checkpoint (other options come from the run)."""
    scripted_demos: int = 0
    """Successful episodes of the task's scripted expert put in the demonstration buffer."""
    demos: tuple[Path, ...] = ()
    """LeRobot-format datasets (e.g. from ``robolearn record``) put in the demonstration buffer."""
    hil: bool = False
    """Human in the loop: a person may take over world 0 at any step through ``--device``."""
    device: Literal["keyboard", "gamepad", "spacemouse", "scripted"] = "keyboard"
    """Teleoperation device for ``--hil``; ``scripted`` lets the task's expert play the human."""
    intervene_every: int = 1
    """Scripted human: take over in every k-th episode of a world."""
    intervene_steps: tuple[int, int] = (0, 1_000_000)
    """Scripted human: take over during these control steps [start, stop) of such an episode."""
    intervene_probability: float = 1.0
    """Scripted human: chance that such an episode is taken over."""
    intervene_on_disagreement: float | None = None
    """Scripted human: within those steps, take over only when the policy goes wrong: its action
    strays from the expert's by more than this (mean absolute difference per component, in units of
    the half-range, 0 to 2) for ``intervene_patience`` steps in a row; then drive at least
    ``intervene_hold`` steps and hand back once the policy agrees again for ``intervene_patience``
    steps in a row (HG-DAgger). None: take over throughout those steps."""
    intervene_patience: int = 3
    """Scripted human, ``--intervene-on-disagreement``: steps in a row of straying before it takes over."""
    intervene_hold: int = 10
    """Scripted human, ``--intervene-on-disagreement``: steps it drives at least each time it takes over."""
    hil_display: Literal["auto", "window", "png"] = "auto"
    """How a person watches world 0: a window (needs a display; the keyboard reads its keys there),
    or PNG frames in the run folder's ``preview/``; auto: a window where there is a display."""
    hil_worlds: Literal["first", "all"] = "first"
    """Which worlds a human watches: world 0 (a person at one robot) or all (scripted stand-ins)."""
    reward: str = "task"
    """Reward source: ``task`` (the simulator's reward terms) or ``classifier:PATH`` (a success
    classifier from ``robolearn reward train``; its success also ends the episode)."""
    reward_threshold: float | None = None
    """Success probability above which the classifier gives reward 1 (None: the one it was saved with)."""
    random_steps: int = 1_000
    """Environment steps of uniform random actions before the policy acts."""
    random_episode_steps: int = 0
    """End the random steps' episodes after this many steps each, as truncations (the values still
    bootstrap); 0: at the task's own length. An episode as long as the whole random phase
    (HalfCheetah's 1,000 steps) gives the first updates one trajectory, which flips onto its back
    for some seeds and stays there (docs/learner.md); shorter ones give them several starts."""
    learning_starts: int = 1_000
    """Transitions to collect before the first update."""
    replay_capacity: int = 200_000
    """Transitions the online buffer holds."""
    replay_budget_mb: float = 1_024.0
    """A task with cameras: memory (MiB) its frame replay may take; the capacity in steps follows from
    the frame sizes (summary.json reports both and the bytes per transition)."""
    pretrained_encoder: Path | None = None
    """A task with cameras: a local safetensors file of camera encoder weights (a pixel run's
    ``encoder.safetensors``, or ``robolearn reward train --encoder drq``'s), loaded and frozen."""
    randomize: bool = False
    """Train under the task's domain randomization."""
    sim_params: Path | None = None
    """A parameter file from ``robolearn sysid``: the identified robot becomes the task's nominal one,
    and randomization is centred on it (robolearn tasks on the MuJoCo backends). The scripted person
    (``--hil --device scripted``) and scripted demonstrations are the expert of that robot, in
    simulation and with ``--robot ros`` alike (the car's drives within its tyres' identified grip)."""
    rate_limits: bool = False
    """Rate-limit actions in simulation as the robot's safety layer will on the robot (``max_rate`` of
    the safety configuration of ``--robot-safety``, "" the task's robot's): each command moves at most
    that far per control period from the last, in training, evaluation and scripted demonstrations."""
    eval_every: int = 2_000
    """Environment steps between evaluations."""
    eval_episodes: int = 20
    """Episodes per evaluation (deterministic policy, nominal task)."""
    final_eval_episodes: int = 50
    """Episodes of the final evaluation."""
    stop_at_success: float | None = None
    """Stop early once an evaluation's success rate reaches this (e.g. 0.9); None trains for all steps."""
    checkpoint_every: int = 5_000
    """Environment steps between checkpoints."""
    keep_checkpoints: int = 2
    """Checkpoints kept in the run folder, the newest; older ones are removed (each holds the replay
    buffers). More keep a run's last policies to compare or export (``RUN/checkpoints/ckpt-N``)."""
    video: bool = True
    """Write an evaluation video of the final policy."""
    torch_device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where the learner runs: CUDA when present (auto), or as named."""
    torch_threads: int = 1
    """CPU threads for torch; 0 keeps torch's default. One avoids spinning against the simulator's
    thread pool: measured on 2 busy cores, 2 threads gave 1.5 updates/s where 1 gave 33."""
    threaded: bool = False
    """Run the actor in its own thread (faster; not bit-for-bit repeatable)."""
    updates_per_step: int | None = None
    """Learner steps (each ``--sac.utd-ratio`` critic updates and one actor update on
    ``--sac.batch-size`` transitions) per environment step of all worlds; None: one per transition
    collected, the sample-efficient default."""
    parallel: ParallelMode = "off"
    """The massively parallel mode (FastTD3/FastSAC): small (128 worlds, batch 4,096, 4 learner steps
    per step), medium (1,024 worlds, batch 16,384, 8) or large (4,096 worlds, batch 32,768, 8); meant
    for ``--backend mujoco_warp`` on a GPU (docs/backends.md, "Training on the device")."""
    exchange: Literal["local", "ray"] = "local"
    """How actors and learner meet: in this process, or as Ray processes (``pip install robolearn[ray]``;
    see docs/distributed.md)."""
    actors: int = 1
    """Actor processes with ``--exchange ray``, each stepping ``--num-envs`` worlds with its own seed."""
    ray_address: str | None = None
    """Ray head to join (``host:port`` or ``auto``); None starts a local Ray cluster for the run."""
    ray_timeout: float = 30.0
    """Seconds any remote call between actors and learner may take before it counts as failed."""
    ray_actor_resource: str | None = None
    """A custom Ray resource every actor process needs (``ray start --resources '{"robot": 1}'`` on the
    robot computer gives ``robot``): pins the actors to the machines that have it."""
    ray_robot_resource: str = "robot"
    """With ``--robot ros --exchange ray``: the custom Ray resource of the machine the robot is attached
    to (``ray start --resources '{"robot": 1}'`` there); the robot's actor runs only where it is. A
    local cluster started for the run offers it (the robot is attached to this machine)."""
    sim_actors: int = 0
    """With ``--robot ros --exchange ray``: simulated actor processes beside the robot's, each on the
    task in simulation with its own seed stream, feeding the same learner."""
    robot: Literal["sim", "ros"] = "sim"
    """Where the actor acts: in simulation, or on a robot over ROS 2 in real time (the topics of
    docs/ros.md; resets by its protocol; one world; the actor in its own thread)."""
    robot_safety: str = ""
    """With ``--robot ros`` or ``--rate-limits``: safety configuration, a robot name or a YAML path ("" is
    the task's robot's)."""
    robot_timeout: float = 10.0
    """With ``--robot ros``: seconds for the robot's topics to arrive, and that they may stay stale (a
    reported pause) before the run ends with an error."""
    reset_timeout: float = 30.0
    """With ``--robot ros``: seconds for the robot to answer a reset request (docs/ros.md, "Resets")."""
    robot_trigger: Trigger = "timer"
    """With ``--robot ros``: when each step's observation is taken, at the next tick of the actor's own
    clock at the control rate (its phase against the robot's clock is whatever the start gave), or
    as soon as the robot's next complete sample arrives (``policy_node``'s ``trigger``, docs/ros.md)."""
    robot_reset: Literal["robot", "operator"] = "robot"
    """With ``--robot ros``: an episode starts when the robot reports it is ready (a robot or stand-in
    that resets its scene itself), or then also when the operator confirms on the ``--hil`` device
    that the scene is reset (HIL-SERL's reset on a real robot; docs/ros.md, "Resets")."""
    sac: SACConfig = field(default_factory=SACConfig)
    """Learner hyperparameters."""
    offline: tuple[Path, ...] = ()
    """LeRobot-format datasets to pretrain on offline (``robolearn record``, a run's ``episodes/``)."""
    offline_steps: int = 0
    """Gradient steps of offline pretraining on ``--offline`` before acting."""
    offline_algo: Literal["calql", "iql"] = "calql"
    """Offline algorithm: Cal-QL (Nakamoto et al. 2023) or IQL (Kostrikov et al. 2021)."""
    online_mode: Literal["wsrl", "rlpd"] = "wsrl"
    """After pretraining: WSRL (warm-up with the frozen pretrained policy, offline data dropped) or
    RLPD (offline data kept as half of every batch)."""
    online_steps: int | None = None
    """Environment steps after offline pretraining (None: ``--steps``); 0 is pure offline RL."""
    offline_cfg: OfflineConfig = field(default_factory=OfflineConfig)
    """Offline pretraining hyperparameters."""
    init_from: Path | None = None
    """Start from this run's latest checkpoint, or from the checkpoint given (``RUN/checkpoints/ckpt-...``,
    one a run kept: ``--keep-checkpoints``): its actor, critics and observation normalization (to
    fine-tune a simulation-trained policy on a robot); ``--sac.*`` then come from that run, but for how
    its learner trains (update-to-data ratio, batch size, learning rates, policy delay, tau, n-step,
    compile, and ``--sac.demo-fraction``, the interventions' share of every batch), where given here.
    WSRL (Zhou et al. 2025): ``--offline-cfg.warmup-steps`` steps with the frozen pretrained policy,
    then online updates on the new data only."""
    sac_given: Annotated[tuple[str, ...], tyro.conf.Suppress] = ()
    """The ``--sac.*`` settings given on the command line (field names; the CLI fills it): a run
    started ``--init-from`` takes these even where equal to ``SACConfig``'s default, so that
    ``--sac.demo-fraction 0.5`` brings back 0.5 over a run that had another share."""
    init_sim_share: float = 0.0
    """With ``--init-from``: share of every batch drawn from that run's replay buffer (its simulation
    data); 0 is WSRL's recipe, the new data only."""
    init_critics: Literal["pretrained", "fresh"] = "pretrained"
    """With ``--init-from``: take that run's critics (WSRL), or only its actor, temperature and
    normalization with new critics, which learn the robot's values alone for ``init_actor_hold`` critic
    steps before the actor trains again (critics fitted to the simulation may value what fails on the
    robot)."""
    init_actor_hold: int = 3_000
    """With ``--init-critics fresh``: critic steps on robot data before the actor's first step."""
    init_norm: Literal["running", "frozen"] = "running"
    """With ``--init-from``: fold the new data into that run's observation normalization, or keep it as
    the networks were trained on it (as after ``--offline``). Running statistics move every network
    input while it fine-tunes (on the gapped drone the last thrust's mean moved 0.86 of its standard
    deviation in 20 robot minutes); on that drone neither fine-tuned better (docs/ros.md)."""

    @property
    def device_loop(self) -> bool:
        """Whether the run trains in the device loop (:mod:`robolearn.rl.device_loop`, issue 14): a
        robolearn task in simulation on a device backend."""
        return self.backend == "mujoco_warp" and self.robot == "sim" and gym_env_id(self.task) is None

    def with_preset(self) -> TrainCfg:
        """This configuration with the ``--parallel`` preset applied to the options left at their defaults."""
        if self.parallel == "off":
            return self
        preset = PARALLEL_PRESETS[self.parallel]
        defaults = {f.name: f.default for f in fields(TrainCfg)}
        changes: dict[str, Any] = {
            k: v for k, v in preset.options().items() if getattr(self, k) == defaults[k]
        }
        if self.sac.batch_size == SACConfig.batch_size:
            changes["sac"] = replace(self.sac, batch_size=preset.batch_size)
        return replace(self, **changes)

    def learner_steps(self, transitions: int) -> int:
        """Learner steps owed for ``transitions`` newly collected: one each, or ``updates_per_step`` per
        step of all worlds."""
        if self.updates_per_step is None:
            return transitions
        return self.updates_per_step * transitions // self.num_envs

    @property
    def total_steps(self) -> int:
        """Environment steps of the run: ``--online-steps`` where given, else ``--steps``."""
        return self.steps if self.online_steps is None else self.online_steps

    def check(self) -> None:
        """Refuse options outside their ranges or that contradict each other, before anything runs."""
        resolved = self.with_preset()
        if resolved != self:  # --parallel: the options the run will have are the ones checked
            resolved.check()
            return
        self.sac.check()
        self.offline_cfg.check()
        check_range("--offline-steps", self.offline_steps, 0)
        check_range("--online-steps", self.online_steps, 0, allow_none=True)
        if self.offline_steps > 0 and not self.offline:
            raise ConfigError("--offline-steps needs --offline DATASET... to pretrain on")
        if self.online_steps is not None and not self.offline:
            raise ConfigError("--online-steps is the online phase after --offline pretraining; use --steps")
        check_range("--num-envs", self.num_envs, 1, MAX_WORLDS)
        check_range("--steps", self.steps, 1)
        check_seed("--seed", self.seed)
        check_range("--scripted-demos", self.scripted_demos, 0)
        check_range("--intervene-every", self.intervene_every, 1)
        check_step_window("--intervene-steps", self.intervene_steps)
        check_range("--intervene-probability", self.intervene_probability, 0, 1)
        check_intervention_gate(self.intervene_on_disagreement, self.intervene_patience, self.intervene_hold)
        check_range("--reward-threshold", self.reward_threshold, 0, 1, allow_none=True)
        check_range("--random-steps", self.random_steps, 0)
        check_range("--random-episode-steps", self.random_episode_steps, 0)
        check_range("--learning-starts", self.learning_starts, 0)
        check_range("--replay-capacity", self.replay_capacity, 1)
        check_range("--replay-budget-mb", self.replay_budget_mb, 0, low_open=True)
        check_range("--eval-every", self.eval_every, 1)
        check_range("--eval-episodes", self.eval_episodes, 1)
        check_range("--final-eval-episodes", self.final_eval_episodes, 1)
        check_range("--stop-at-success", self.stop_at_success, 0, 1, low_open=True, allow_none=True)
        check_range("--checkpoint-every", self.checkpoint_every, 1)
        check_range("--keep-checkpoints", self.keep_checkpoints, 1, 1_000)
        check_threads("--torch-threads", self.torch_threads)
        self._check_exchange()
        self._check_robot()
        self._check_device_loop()
        self._check_gripper()
        check_range("--init-sim-share", self.init_sim_share, 0, 1, high_open=True)
        if self.init_from is not None and self.offline:
            raise ConfigError(
                "--init-from and --offline are two ways to start from a pretrained policy; use one"
            )
        self._check_reward_scale()
        check_range("--init-actor-hold", self.init_actor_hold, 0)
        if self.init_critics == "fresh" and self.init_from is None:
            raise ConfigError(
                "--init-critics fresh takes the actor of a pretrained run: it needs --init-from RUN"
            )
        if self.init_norm == "frozen" and self.init_from is None:
            raise ConfigError(
                "--init-norm frozen keeps the --init-from run's normalization: it needs --init-from RUN"
            )
        if self.init_sim_share > 0 and self.init_from is None:
            raise ConfigError("--init-sim-share keeps the --init-from run's buffer: it needs --init-from RUN")
        if self.init_sim_share > 0 and (self.scripted_demos or self.demos):
            raise ConfigError("--init-sim-share takes the demonstration half of each batch; drop the demos")
        kind, _, path = self.reward.partition(":")
        if self.reward != "task" and (kind != "classifier" or not path):
            raise ConfigError(f"--reward must be 'task' or 'classifier:PATH', got {self.reward!r}")
        if gym_env_id(self.task) is None:
            task = make_task_cfg(self.task)  # an unknown task fails here, before anything is written
            obs_terms, action_dim = len(task.observations), len(task.action.names)
            if self.sim_params is not None:  # so does a bad parameter file, or one of another robot
                apply_sim_params(task, load_sim_params(self.sim_params))
            if self.rate_limits:
                if self.robot == "ros":
                    raise ConfigError(
                        "--rate-limits simulates the robot's safety layer; with --robot ros that layer "
                        "itself limits the commands: drop --rate-limits"
                    )
                from robolearn.hardware.registry import rate_limited_task

                rate_limited_task(task, self.robot_safety)  # an unknown robot, or one without these actions
        elif self.sim_params is not None or self.rate_limits:
            raise ConfigError(f"--sim-params and --rate-limits need a robolearn task, not {self.task}")
        elif self.hil or self.reward != "task":
            raise ConfigError(f"--hil and --reward classifier need a robolearn task, not {self.task}")
        else:
            obs_terms, action_dim = 1, 1  # a Gymnasium space's size is known only once it is made
        if self.hil and self.hil_worlds == "all" and self.device != "scripted":
            raise ConfigError("--hil-worlds all needs --device scripted: one person watches one world")
        # A lower bound (every term at least one float32; observation and next observation, action,
        # reward, terminal flag), for the online buffer and the demonstration buffer if there is one.
        buffers = 2 if self.scripted_demos or self.demos else 1
        per_transition = 4 * (2 * obs_terms + action_dim + 2)
        needed = buffers * per_transition * self.replay_capacity
        check_memory("--replay-capacity", self.replay_capacity, needed)
        if self.resume is None:
            check_output_dir("--name" if self.name else "--out", self.out / (self.name or ""))

    def _check_reward_scale(self) -> None:
        """``--sac.reward-scale returns`` follows each world's return through the steps as they arrive:
        from one actor, online."""
        if self.sac.reward_scale == "none":
            return
        if self.offline:
            raise ConfigError(
                "--sac.reward-scale returns: offline pretraining (--offline) trains on the datasets' "
                "rewards as they are; use --sac.reward-scale none"
            )
        if self.exchange != "local" and (self.actors > 1 or self.sim_actors > 0):
            raise ConfigError(
                f"--sac.reward-scale returns follows one actor's worlds; --exchange ray has "
                f"{self.actors + self.sim_actors} actors here (use --actors 1, or --sac.reward-scale none)"
            )
        if self.sac.gripper_critic:
            raise ConfigError(
                "--sac.reward-scale returns: the gripper critic's --gripper-penalty is in the task's reward "
                "units; use --sac.reward-scale none with --gripper-critic"
            )

    def _check_robot(self) -> None:
        """Options of ``--robot ros``."""
        check_range("--robot-timeout", self.robot_timeout, 0.1, 3_600)
        check_range("--reset-timeout", self.reset_timeout, 0.1, 3_600)
        if self.robot == "sim":
            if self.robot_reset != "robot":
                raise ConfigError("--robot-reset operator needs --robot ros")
            if self.robot_trigger != "timer":
                raise ConfigError(f"--robot-trigger {self.robot_trigger} needs --robot ros")
            return
        if self.robot_reset == "operator" and not self.hil:
            raise ConfigError("--robot-reset operator: the operator confirms on the --hil device; add --hil")
        if gym_env_id(self.task) is not None:
            raise ConfigError(f"--robot ros needs a robolearn task, not {self.task}")
        if self.num_envs != 1:
            raise ConfigError(f"--robot ros drives one robot: --num-envs must be 1, got {self.num_envs}")
        if self.exchange == "ray" and self.actors != 1:
            raise ConfigError(
                f"--robot ros --exchange ray: the robot has one actor (--actors {self.actors}); add "
                "simulated actors beside it with --sim-actors N"
            )
        if self.hil and self.device == "keyboard":
            raise ConfigError(
                "--robot ros: --device keyboard reads keys from a simulation window; use gamepad, "
                "spacemouse or scripted"
            )

    def _check_device_loop(self) -> None:
        """Options the device loop does not take (``--backend mujoco_warp`` in simulation, issue 14)."""
        check_range("--updates-per-step", self.updates_per_step, 1, 1_000, allow_none=True)
        if not self.device_loop:
            return
        refused = {
            "--hil": self.hil,
            "--exchange ray": self.exchange != "local",
            "--threaded": self.threaded,
            "--reward classifier": self.reward != "task",
            "--offline": bool(self.offline),
            "--init-from": self.init_from is not None,
            "--sac.n-step above 1": self.sac.n_step > 1,
            "--sac.reward-scale returns": self.sac.reward_scale != "none",
        }
        for option, given in refused.items():
            if given:
                raise ConfigError(
                    f"{option} is not available in the device loop of --backend mujoco_warp; "
                    "use --backend mujoco_batch for it"
                )

    def _check_gripper(self) -> None:
        """``--gripper-critic`` needs an arm task whose action has a gripper, learnt by the SAC loop."""
        if not self.sac.gripper_critic:
            return
        task = make_task_cfg(self.task) if gym_env_id(self.task) is None else None
        if task is None or task.action.gripper is None:
            raise ConfigError(
                f"--gripper-critic: {self.task} has no gripper in its action; it applies to arm tasks "
                "with one (panda_pick_cube)"
            )
        if task.action.gripper.observation not in task.observations:
            raise ConfigError(
                f"--gripper-critic: task {self.task} does not observe its gripper "
                f"({task.action.gripper.observation!r}); it observes {', '.join(task.observations)}"
            )
        if task.cameras:
            raise ConfigError(
                f"--gripper-critic: {self.task} trains from pixels (DrQ), which has no gripper critic"
            )
        if self.offline or self.init_from is not None or self.device_loop:
            raise ConfigError(
                "--gripper-critic trains with the SAC loop of --backend mujoco_batch or pybullet; "
                "it does not combine with --offline, --init-from or --backend mujoco_warp"
            )

    def _check_exchange(self) -> None:
        """Options of ``--exchange ray``; refused where they mean nothing or cannot work there."""
        check_range("--actors", self.actors, 1, 1_024)
        check_range("--sim-actors", self.sim_actors, 0, 1_024)
        check_range("--ray-timeout", self.ray_timeout, 0.1, 3_600)
        if self.sim_actors and (self.robot != "ros" or self.exchange != "ray"):
            raise ConfigError(
                "--sim-actors adds simulated actors beside a robot's: it needs --robot ros --exchange ray"
            )
        if not self.ray_robot_resource:
            raise ConfigError("--ray-robot-resource must name a Ray resource (e.g. robot)")
        if self.exchange == "local":
            if self.actors != 1 or self.ray_address is not None or self.ray_actor_resource is not None:
                raise ConfigError("--actors, --ray-address and --ray-actor-resource need --exchange ray")
            return
        if self.hil and self.robot != "ros":  # on a robot the person is at the robot's actor
            raise ConfigError("--hil needs the person at the learner's actor: use --exchange local")
        if self.sac.n_step > 1:
            # Actors' transitions interleave in the online buffer: a world's successor is not a
            # fixed number of slots on.
            raise ConfigError("--sac.n-step above 1 needs --exchange local")


@dataclass(frozen=True)
class DistillCmd:
    """Distill a task's scripted expert into a network policy with DAgger, under domain randomization.

    Writes a run folder that ``robolearn eval`` and ``robolearn export`` accept; the last line
    printed is one JSON object with the final success rates (nominal and randomized).
    """

    task: tyro.conf.Positional[Annotated[str, tyro.conf.arg(metavar="TASK")]]
    """Task name (see ``robolearn tasks``); it needs a scripted expert."""
    backend: BackendName = "mujoco_batch"
    """Simulator of the rollouts and evaluations."""
    num_envs: int = 16
    """Parallel worlds rolled out."""
    randomize: bool = True
    """Roll out (and evaluate during training) under the task's domain randomization."""
    iterations: int = 10
    """DAgger rounds: roll out, label, aggregate, fit."""
    steps_per_iteration: int = 8_000
    """Environment steps (all worlds together) rolled out per round."""
    beta_decay: float = 0.5
    """The expert acts with probability ``beta_decay ** round`` (1 in the first round, as in Ross et al.)."""
    updates_per_iteration: int = 1_500
    """Gradient steps of the fit after each round (warm-started from the previous round's student)."""
    batch_size: int = 256
    """Labelled observations per gradient step."""
    lr: float = 1e-3
    """Adam learning rate of the fit."""
    hidden: tuple[int, ...] = (256, 256)
    """Hidden layer widths of the student (SAC's actor network)."""
    encoder_channels: int = 32
    """A task with cameras: convolution channels of the student's camera encoders (DrQ's 32; 16
    costs a quarter of the arithmetic, for training on a CPU)."""
    expert_task: str | None = None
    """A task with cameras: the state task whose expert labels it (default: its name without
    ``_pixels``)."""
    sim_params: Path | None = None
    """A parameter file from ``robolearn sysid``: distill on the robot it identifies (the nominal
    dynamics replaced, randomization centred on the identified values)."""
    eval_episodes: int = 32
    """Episodes of the student alone after every round (the learning curve)."""
    final_eval_episodes: int = 100
    """Episodes of each final evaluation, on the nominal and on the randomized task."""
    stop_at_success: float | None = None
    """Stop after a round whose evaluation reaches this success rate (e.g. 0.95); None runs every round."""
    seed: int = 0
    """Seed of everything random in the run."""
    out: Path = Path("runs")
    """Folder in which the run folder is made."""
    name: str | None = None
    """Run folder name (default: task, ``distill``, seed and time)."""
    torch_threads: int = 1
    """CPU threads for torch; 0 keeps torch's default (one avoids spinning against the simulator)."""

    def check(self) -> TaskCfg:
        """Refuse settings that cannot run, naming them; returns the task's definition."""
        task = make_task_cfg(self.task)
        if task.cameras:  # labelled by its state task's expert (robolearn.tasks.teacher)
            teacher_task(task, self.expert_task)
        elif task.expert is None:
            raise TaskError(f"task {self.task} has no scripted expert to distill")
        if self.sim_params is not None:  # a bad parameter file, or one of another robot, fails here
            task = apply_sim_params(task, load_sim_params(self.sim_params))
        check_range("--num-envs", self.num_envs, 1, MAX_WORLDS)
        check_range("--encoder-channels", self.encoder_channels, 1, 256)
        for name, value in (
            ("--iterations", self.iterations),
            ("--steps-per-iteration", self.steps_per_iteration),
            ("--updates-per-iteration", self.updates_per_iteration),
            ("--batch-size", self.batch_size),
            ("--eval-episodes", self.eval_episodes),
            ("--final-eval-episodes", self.final_eval_episodes),
        ):
            check_range(name, value, 1)
        if self.steps_per_iteration < self.num_envs:
            raise ConfigError(
                f"--steps-per-iteration {self.steps_per_iteration} is less than one step of "
                f"{self.num_envs} worlds"
            )
        check_range("--beta-decay", self.beta_decay, 0, 1)
        check_range("--lr", self.lr, 0, 1, low_open=True)
        check_widths("--hidden", self.hidden)
        check_threads("--torch-threads", self.torch_threads)
        check_range("--stop-at-success", self.stop_at_success, 0, 1, low_open=True, allow_none=True)
        check_seed("--seed", self.seed)
        check_output_dir("--name" if self.name else "--out", self.out / (self.name or ""))
        return task


def _revive(hint: Any, value: Any) -> Any:
    """A value read back from JSON as its field's type: paths, tuples and nested configs; a choice
    (a Literal) must be one of its values, since code compares it and would take any other as a default."""
    if value is None:
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        return _revive(args[0], value)
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{value!r} is not one of {list(args)}")
        return value
    if origin in (typing.Union, types.UnionType):
        kinds = [a for a in args if a is not type(None)]
        return _revive(kinds[0], value) if len(kinds) == 1 else value
    if hint is Path and isinstance(value, str):
        return Path(value)
    if origin is tuple and isinstance(value, list):
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_revive(args[0], v) for v in value)
        return tuple(_revive(a, v) for a, v in zip(args, value, strict=False)) if args else tuple(value)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type) and isinstance(value, dict):
        return config_from_json(hint, value)
    return value


def config_from_json(cls: type[Any], data: dict[str, Any]) -> Any:
    """A config dataclass from its JSON form (``config.json``): every path field a Path again, every
    tuple a tuple, nested configs rebuilt, so a resumed run's config is the one that was saved."""
    hints = typing.get_type_hints(cls, include_extras=True)
    unknown = sorted(set(data) - {f.name for f in fields(cls)})
    if unknown:
        raise ConfigError(f"{cls.__name__} has no fields {unknown}")
    values = {}
    legacy: dict[str, dict[Any, Any]] = getattr(cls, "legacy_values", {})
    for k, v in data.items():
        if k in legacy and isinstance(v, Hashable) and v in legacy[k]:
            v = legacy[k][v]
        try:
            values[k] = _revive(hints[k], v)
        except ConfigError as exc:
            raise ConfigError(f"{cls.__name__}.{k}: {exc}") from None
    return cls(**values)
