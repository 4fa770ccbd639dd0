"""Fine-tuning a simulation-trained policy on a robot over ROS 2 (issue 10): ``robolearn bench finetune``.

The sim-to-real proxy: the "real" robot is a PyBullet ``sim_robot_node`` with a deliberate gap: its
engine, observations ``obs_latency_ms`` late and noisy, and a ``robolearn sysid`` parameter file
with the physics changed (:func:`gap_params`; for the arm the cube 3x heavier with half its
friction and the controllers' gains 30 % lower, for the car half the tyres' friction, for the drone
30 % more mass on motors 20 % weaker). Three
policies meet it, each evaluated by ``policy_node`` against the gapped robot, success counted by
the robot:

1. zero-shot: a SAC policy trained in MuJoCo (given, or trained here with scripted demonstrations);
2. fine-tuned: that run continued on the robot for at most ``robot_minutes`` of real time with
   ``robolearn train --robot ros --init-from RUN`` (WSRL: a warm-up with the frozen pretrained
   policy, then updates on robot data only), a scripted person taking over every k-th episode.
   With ``early_stop`` the run ends once its last ``stop_episodes`` episodes that nobody drove
   reach the goal; the minutes it used are reported;
3. from scratch: the same robot budget, person and stop rule, without the pretrained policy.

``recipes`` puts more fine-tuning recipes side by side, each its own robot run and row
(:func:`recipe_options`): WSRL's (``wsrl``, the run ``finetuned``), the simulation buffer kept at
a share of every batch (``sim_share``), the pretrained actor under new critics that learn the
robot's values first (``fresh_critics``), and WSRL with the observation normalization kept as
pretrained (``frozen_norm``; WSRL's folds the robot's data into it). The first recipe is the one the
goal judges.

The last line of ``robolearn bench finetune`` is one JSON object with ``zero_shot_success``,
``finetuned_success``, ``scratch_success``, ``robot_minutes`` (the budget) and
``finetuned_minutes`` (used) for the arm, the same keys ending in ``_car`` for the car (``_drone``
for the drone), and ``goal_met`` for each: fine-tuned at least ``goal`` (0.95) within the budget
(20 robot minutes) where zero-shot is below ``zero_shot_below`` (0.6), and well above from-scratch
(:data:`WELL_ABOVE`). ``goal_met_at_minute`` is the earliest evaluated checkpoint's robot minute at
which the whole goal held, against the run from scratch's checkpoint of the same minute (null:
none): a policy that peaks before the budget ends shows there, its final policy in ``goal_met``.
``finetuned_minutes_to_own_80`` and ``scratch_minutes_to_own_80`` say how soon each run's policy
worked on its own: the robot minutes until 8 of 10 of its own training episodes (those nobody
drove) had succeeded, the first time (null: never).
``--calibrate 0.5 1.0`` measures only the zero-shot success at those gap strengths, to pick one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robolearn.bench.config import FinetuneBenchCfg, FinetuneRecipe, TransferBenchCfg, with_variant
from robolearn.bench.report import format_table, machine_info, versions
from robolearn.bench.transfer import ros_pybullet_success
from robolearn.errors import ConfigError
from robolearn.eval.plots import plot_success_by_minute
from robolearn.eval.stats import difference_of_proportions_ci, wilson_interval
from robolearn.rl.checkpoint import checkpoint_steps, checkpoints
from robolearn.rl.config import OfflineConfig, SACConfig, TrainCfg
from robolearn.tasks import make_task_cfg
from robolearn.tasks.sim_params import IdentifiedParam, SimParams, save_sim_params

if TYPE_CHECKING:
    from robolearn.rl.train import RunState

log = logging.getLogger(__name__)

GAPS: dict[str, dict[str, float]] = {
    # The cube 3x heavier (0.15 kg) and half as grippy (1.5 -> 0.75), the Cartesian impedance and
    # the fingers' servos 30 % weaker: a grasp tuned in MuJoCo slips or sags (issue 10's example).
    "arm": {
        "object_mass_scale": 3.0,
        "object_friction_scale": 0.5,
        **{f"ee_cart{a}.gain": 0.7 for a in range(6)},
        **{f"panda_finger_joint{k}_servo.gain": 0.7 for k in (1, 2)},
    },
    # Half the tyres' grip (a dusty floor): corners taken at simulation speed slide wide.
    "car": {"robot_friction_scale": 0.5},
    # A heavier drone (a bigger battery, a camera deck) on motors that lift less per command (worn
    # propellers, a sagging battery): the hover thrust learned in simulation no longer holds it up.
    "drone": {"mass_scale": 1.3, "thrust.gain": 0.8},
}
"""The built-in gap of each embodiment, as multipliers at gap strength 1."""
SUFFIX = {"arm": "", "drone": "_drone", "car": "_car"}
"""Summary keys of each embodiment end in this."""
WELL_ABOVE = 0.2
"""Fine-tuned beats from-scratch "well" when its success is at least this much higher and the 95 %
interval of the difference (Newcombe's) lies above 0."""


def gap_params(embodiment: str, task: str, strength: float) -> SimParams:
    """The built-in gap of ``embodiment`` scaled to ``strength`` (0 nominal, 1 the gap of :data:`GAPS`)."""
    robot = make_task_cfg(task).scene.robot.name
    params = {
        name: IdentifiedParam(1.0 + strength * (value - 1.0), 0.0, 1.0)
        for name, value in GAPS[embodiment].items()
    }
    return SimParams(robot, params, source={"what": f"robolearn bench finetune: gap strength {strength:g}"})


class _TrainProgress:
    """A ``train`` progress hook for the bench's long runs: a line at the first report, then one every
    ``every_s`` seconds (steps done of the total, recent episodes' success, critic updates per second)."""

    def __init__(self, label: str, total: int, say: Callable[[str], None], every_s: float = 30.0) -> None:
        self.label, self.total, self.say, self.every_s = label, total, say, every_s
        self.last = -math.inf

    def __call__(self, state: RunState, live: dict[str, float]) -> None:
        now = time.monotonic()
        if now - self.last < self.every_s:
            return
        self.last = now
        success = live.get("success", math.nan)
        self.say(
            f"{self.label}: {state.env_steps:,} of {self.total:,} steps, {state.episodes} episodes, "
            f"recent success {success:.0%}, {live['updates_per_s']:.0f} critic updates/s"
        )


def _gap(
    cfg: FinetuneBenchCfg, embodiment: str, folder: Path, strength: float | None = None
) -> dict[str, object]:
    """The robot's parameters that make the gap beyond latency and noise: a given file or the built-in
    gap written to ``folder``."""
    given = cfg.gap_params_of(embodiment)
    if given is not None and strength is None:
        return {"sim_params": str(given)}
    strength = cfg.gap_strength if strength is None else strength
    if strength == 0:
        return {}
    path = folder / f"gap-{embodiment}-{strength:g}.yaml"
    save_sim_params(gap_params(embodiment, cfg.task_of(embodiment), strength), path)
    return {"sim_params": str(path)}


def _robot_success(
    run_dir: Path, name: str, task: str, cfg: FinetuneBenchCfg, folder: Path, gap: dict[str, object]
) -> dict[str, Any]:
    """A run's policy, exported, deployed by policy_node to the gapped robot for ``cfg.episodes``."""
    from robolearn.policy.export import export_policy

    policy = export_policy(run_dir, folder / f"{name}-policy", force=True)
    transfer = TransferBenchCfg(
        episodes=cfg.episodes,
        obs_latency_ms=cfg.obs_latency_ms,
        obs_noise=cfg.obs_noise,
        seed=cfg.seed,
        policy_trigger=cfg.policy_trigger,
    )
    sub = folder / name
    sub.mkdir(parents=True, exist_ok=True)
    return ros_pybullet_success(str(policy), task, transfer, sub, robot_params=gap)


@contextlib.contextmanager
def _gapped_robot(
    cfg: FinetuneBenchCfg, task: str, gap: dict[str, object], folder: Path, name: str
) -> Iterator[None]:
    """The gapped robot for a training run, on a private ROS domain this process joins meanwhile."""
    from robolearn.hardware.ros.harness import node_env, private_domain, start_node, stop_node

    domain = private_domain()
    params: dict[str, object] = {
        "task": task,
        "backend": "pybullet",
        "obs_latency_ms": cfg.obs_latency_ms,
        "obs_noise": cfg.obs_noise,
        "seed": cfg.seed + 1,
        "self_reset": False,  # the trainer asks for every reset (docs/ros.md, "Resets")
        **gap,
    }
    saved = {k: os.environ.get(k) for k in node_env(domain) if k.startswith(("ROS_", "RMW_"))}
    with open(folder / f"{name}-robot.log", "w") as robot_log:
        robot = start_node("sim_robot_node", params, domain, log=robot_log)
        os.environ.update({k: v for k, v in node_env(domain).items() if k in saved})
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            stop_node(robot)


def run_name(recipe: FinetuneRecipe) -> str:
    """The robot run (row, folder) of a fine-tuning recipe: ``finetuned`` for WSRL, as before recipes."""
    return "finetuned" if recipe == "wsrl" else f"finetuned-{recipe.replace('_', '-')}"


def recipe_options(cfg: FinetuneBenchCfg, recipe: FinetuneRecipe) -> dict[str, Any]:
    """``robolearn train`` options of a fine-tuning recipe (beside ``--init-from``)."""
    if recipe == "sim_share":
        return {"init_sim_share": cfg.sim_share}
    if recipe == "fresh_critics":
        return {"init_critics": "fresh", "init_actor_hold": cfg.actor_hold}
    if recipe == "frozen_norm":
        return {"init_norm": "frozen"}
    return {}


def _train_on_robot(
    cfg: FinetuneBenchCfg,
    task: str,
    gap: dict[str, object],
    folder: Path,
    name: str,
    init_from: Path | None,
    recipe: FinetuneRecipe | None,
    learner_of: Path,
    progress: Callable[[str], None],
) -> tuple[Path, dict[str, Any]]:
    """``robolearn train --robot ros`` for at most the robot budget, from ``init_from`` by ``recipe``
    or from scratch (None); the run folder and its summary. Both train with ``learner_of``'s learner
    (the pretrained run's ``--sac.*``, the variant's training settings over it): a run from scratch
    with another learner (one-step returns against the pretraining's three) compares learners, not
    starts."""
    from robolearn.rl.train import init_run_learner, train

    task_cfg = make_task_cfg(task)
    steps = max(1, round(cfg.robot_minutes * 60 / task_cfg.control_dt))
    # The final checkpoint is always written; the earlier ones only where they are evaluated.
    every = (
        steps
        if cfg.evaluate_checkpoints == 1
        else max(1, round(cfg.checkpoint_minutes * 60 / task_cfg.control_dt))
    )
    variant = with_variant(SACConfig(), cfg.learner_variant)
    named: tuple[str, ...] = ()  # given even where equal to the default (0.5 over a run with another)
    if cfg.intervention_share is not None:
        variant = dataclasses.replace(variant, demo_fraction=cfg.intervention_share)
        named = ("demo_fraction",)
    run = TrainCfg(
        task=task,
        num_envs=1,
        steps=steps,
        seed=cfg.seed,
        out=folder,
        name=name,
        robot="ros",
        robot_trigger=cfg.policy_trigger,  # trained as it is evaluated
        hil=True,
        device="scripted",
        intervene_every=cfg.intervene_every,
        intervene_steps=cfg.intervene_steps,
        intervene_on_disagreement=cfg.intervene_on_disagreement,
        intervene_patience=cfg.intervene_patience,
        intervene_hold=cfg.intervene_hold,
        init_from=init_from,
        sim_params=Path(str(gap["sim_params"])) if cfg.person_knows_robot and "sim_params" in gap else None,
        # --init-from merges the variant's training settings into its run's learner itself.
        sac=variant if init_from is not None else init_run_learner(learner_of, variant, task, named),
        sac_given=named,
        offline_cfg=OfflineConfig(warmup_steps=cfg.warmup_steps),
        # The early stop is judged after every episode on the last stop_episodes nobody drove.
        eval_every=task_cfg.episode_length if cfg.early_stop else steps,
        eval_episodes=cfg.stop_episodes,
        stop_at_success=cfg.goal if cfg.early_stop else None,
        checkpoint_every=every,
        keep_checkpoints=cfg.evaluate_checkpoints,
        video=False,
        **({} if recipe is None else recipe_options(cfg, recipe)),
    )
    with _gapped_robot(cfg, task, gap, folder, name):
        summary = train(run, _TrainProgress(name, steps, progress))
    return Path(summary["run_dir"]), summary


def check_latency(cfg: FinetuneBenchCfg, embodiment: str) -> None:
    """Refuse an observation latency the robot's training cannot run under: the training environment
    pauses on observations older than the robot's watchdog, and they arrive up to the latency plus a
    publishing period old (with 80 ms against the arm's 100 ms every episode ended after a few steps).
    One more control period is kept for the transport's jitter."""
    from robolearn.hardware.registry import load_safety_config, safety_robot

    task = make_task_cfg(cfg.task_of(embodiment))
    safety = load_safety_config(safety_robot(task))
    allowed = (safety.watchdog_timeout - 2 * task.control_dt) * 1000
    if cfg.obs_latency_ms > allowed + 1e-6:  # (0.1 - 0.04) * 1000 is not exactly 60
        raise ConfigError(
            f"--obs-latency-ms {cfg.obs_latency_ms:g}: the {embodiment}'s observations would arrive older "
            f"than its watchdog_timeout of {safety.watchdog_timeout * 1000:g} ms ({safety.source}) allows "
            f"for training on it; give at most {max(allowed, 0):g} ms (the watchdog less two control "
            f"periods of {task.control_dt * 1000:g} ms)"
        )


def _pretrained(
    cfg: FinetuneBenchCfg, embodiment: str, task: str, folder: Path, progress: Callable[[str], None]
) -> tuple[Path, float | None]:
    """The MuJoCo run: given, or trained here; its run folder and simulation success (if known)."""
    given = cfg.pretrained_of(embodiment)
    if given is not None:
        return given, None
    from robolearn.rl.train import train

    progress(f"{embodiment}: pretraining {task} in MuJoCo, {cfg.pretrain_steps:,} steps")
    summary = train(
        TrainCfg(
            task=task,
            backend="mujoco_batch",
            num_envs=4,
            steps=cfg.pretrain_steps,
            seed=cfg.seed,
            scripted_demos=cfg.pretrain_demos,
            rate_limits=cfg.pretrain_rate_limits,
            sac=with_variant(SACConfig(), cfg.learner_variant),
            out=folder,
            name=f"pretrained-{embodiment}",
            eval_every=cfg.pretrain_steps,
            checkpoint_every=cfg.pretrain_steps,
            video=False,
        ),
        _TrainProgress(f"pretrained-{embodiment}", cfg.pretrain_steps, progress),
    )
    return Path(summary["run_dir"]), summary["success_rate"]


def _warn_if_unfit(
    cfg: FinetuneBenchCfg, embodiment: str, sim_success: float | None, progress: Callable[[str], None]
) -> None:
    """Say so when the MuJoCo run is poor in simulation itself: its robot figures then measure
    learning on the robot from a poor start, not the gap (the car reached 0 % in 20,000 steps)."""
    if sim_success is None or sim_success >= cfg.zero_shot_below:
        return
    option = cfg.pretrained_option(embodiment)
    progress(
        f"{embodiment}: warning: the MuJoCo run succeeds in {sim_success:.0%} of its evaluation episodes "
        f"in simulation, below --zero-shot-below {cfg.zero_shot_below:g}: the robot figures will not "
        f"measure the gap; give --pretrain-steps more or {option} a better run"
    )


def _robot_minutes(steps: float, task: str) -> float:
    """Robot minutes of ``steps`` at the task's control period (pauses not counted)."""
    return float(steps) * make_task_cfg(task).control_dt / 60


def _count(evaluated: dict[str, Any]) -> tuple[int, int]:
    """Successes and episodes of an evaluation on the robot."""
    n = int(evaluated["episodes"])
    return round(float(evaluated["success_rate"]) * n), n


def goal_check(
    cfg: FinetuneBenchCfg, results: dict[str, dict[str, Any]], minutes: float, finetuned: str = "finetuned"
) -> dict[str, bool | None]:
    """The issue's goal, part by part: the gap matters, fine-tuning (the run ``finetuned``) reaches the
    goal within the budget, and it is well above training from scratch (None without a run from
    scratch, and then the goal is not met)."""
    zero, fine, scratch = results["zero-shot"], results[finetuned], results.get("scratch")
    parts: dict[str, bool | None] = {
        "gap_matters": zero["success_rate"] < cfg.zero_shot_below,
        "finetuned_reaches_goal": fine["success_rate"] >= cfg.goal and minutes <= cfg.robot_minutes + 1e-9,
        "well_above_scratch": None
        if scratch is None
        else fine["success_rate"] - scratch["success_rate"] >= WELL_ABOVE
        and difference_of_proportions_ci(*_count(fine), *_count(scratch))[0] > 0,
    }
    return parts | {"goal_met": all(v is True for v in parts.values())}


def first_goal_minute(
    cfg: FinetuneBenchCfg,
    zero_shot: dict[str, Any],
    by_checkpoint: dict[str, dict[str, dict[str, Any]]],
    finetuned: str = "finetuned",
) -> float | None:
    """The earliest robot minute within the budget at which the run ``finetuned``'s evaluated
    checkpoint met the whole goal against the run from scratch's checkpoint at the same minute (None
    when none did). The earliest of several evaluations favours a lucky one, so the bench reports it
    beside the final policy's ``goal_met``, never in its place. :func:`goal_check` holds the budget."""
    scratch = by_checkpoint.get("scratch", {})
    for minute in sorted(by_checkpoint[finetuned], key=float):
        if minute not in scratch:
            continue
        at = {"zero-shot": zero_shot, finetuned: by_checkpoint[finetuned][minute], "scratch": scratch[minute]}
        if goal_check(cfg, at, float(minute), finetuned)["goal_met"]:
            return float(minute)
    return None


def _embodiment(
    cfg: FinetuneBenchCfg, embodiment: str, folder: Path, progress: Callable[[str], None]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One embodiment's three policies on its gapped robot: table rows and suffixed summary keys."""
    task = cfg.task_of(embodiment)
    sub = folder / embodiment
    sub.mkdir(parents=True, exist_ok=True)
    gap = _gap(cfg, embodiment, sub)
    pretrained, sim_success = _pretrained(cfg, embodiment, task, sub, progress)
    _warn_if_unfit(cfg, embodiment, sim_success, progress)
    progress(f"{embodiment}: zero-shot, {cfg.episodes} episodes on the gapped robot")
    results = {"zero-shot": _robot_success(pretrained, "zero-shot", task, cfg, sub, gap)}
    rows = [_row(embodiment, "zero-shot", results["zero-shot"], None, 0.0)]
    minutes: dict[str, float] = {}
    by_checkpoint: dict[str, dict[str, dict[str, Any]]] = {}
    runs: list[tuple[str, Path | None, FinetuneRecipe | None]] = [
        (run_name(recipe), pretrained, recipe) for recipe in cfg.recipes
    ]
    if cfg.scratch:
        runs.append(("scratch", None, None))
    for name, init, recipe in runs:
        progress(f"{embodiment}: {name}, at most {cfg.robot_minutes:g} robot minutes of training over ROS 2")
        started = time.monotonic()
        run_dir, trained = _train_on_robot(cfg, task, gap, sub, name, init, recipe, pretrained, progress)
        wall = (time.monotonic() - started) / 60
        minutes[name] = _robot_minutes(trained["env_steps"], task)
        progress(f"{embodiment}: {name} stopped after {minutes[name]:.1f} robot minutes; evaluating")
        results[name] = _robot_success(run_dir, name, task, cfg, sub, gap)
        earlier, evaluated = _earlier_checkpoints(cfg, embodiment, run_dir, name, task, sub, gap, progress)
        rows += [*earlier, _row(embodiment, name, results[name], trained, wall, task)]
        by_checkpoint[name] = evaluated | {f"{minutes[name]:.1f}": results[name]}
    x = SUFFIX[embodiment]
    first = run_name(cfg.recipes[0])
    goal = goal_check(cfg, results, minutes[first], first)
    scratch = results.get("scratch")
    to_own = {row["policy"]: row["own_minutes_to_80"] for row in rows}
    summary = {
        f"task{x}": task,
        f"sim_success{x}": sim_success,
        f"zero_shot_success{x}": results["zero-shot"]["success_rate"],
        f"finetuned_success{x}": results[first]["success_rate"],
        f"finetune_recipe{x}": cfg.recipes[0],
        f"finetuned_success_by_recipe{x}": {r: results[run_name(r)]["success_rate"] for r in cfg.recipes},
        f"scratch_success{x}": None if scratch is None else scratch["success_rate"],
        f"robot_minutes{x}": cfg.robot_minutes,
        f"finetuned_minutes{x}": minutes[first],
        f"scratch_minutes{x}": minutes.get("scratch"),
        # How soon each run's policy worked on its own (8 of 10 of its own training episodes).
        f"finetuned_minutes_to_own_80{x}": to_own[first],
        f"scratch_minutes_to_own_80{x}": to_own.get("scratch"),
        f"gap{x}": {"backend": "pybullet", "obs_latency_ms": cfg.obs_latency_ms, "obs_noise": cfg.obs_noise}
        | {"strength": cfg.gap_strength}
        | gap,
        f"overruns{x}": {r["policy"]: r["overruns"] for r in rows if r["overruns"] is not None},
        f"success_interval{x}": {r["policy"]: list(r["interval"]) for r in rows},
        # Each robot run's last checkpoints on the robot, by robot minute (the final one last).
        f"success_by_checkpoint{x}": {
            name: {minute: e["success_rate"] for minute, e in evaluated.items()}
            for name, evaluated in by_checkpoint.items()
        },
        f"success_plot{x}": _plot(cfg, embodiment, results["zero-shot"], by_checkpoint, sub),
    }
    summary |= {f"{k}{x}": v for k, v in goal.items()}
    summary[f"goal_met_at_minute{x}"] = first_goal_minute(cfg, results["zero-shot"], by_checkpoint, first)
    return rows, summary


def _plot(
    cfg: FinetuneBenchCfg,
    embodiment: str,
    zero_shot: dict[str, Any],
    by_checkpoint: dict[str, dict[str, dict[str, Any]]],
    folder: Path,
) -> str | None:
    """Each robot run's success on the gapped robot by robot minute, as a PNG in the work folder
    (None when the bench works in a temporary one, which is removed)."""
    if cfg.work_dir is None:
        return None

    def point(e: dict[str, Any]) -> tuple[float, float, float]:
        low, high = wilson_interval(*_count(e))
        return float(e["success_rate"]), low, high

    runs = {name: {m: point(e) for m, e in evaluated.items()} for name, evaluated in by_checkpoint.items()}
    title = f"{embodiment} on the gapped robot ({cfg.episodes} episodes each)"
    png = folder / "success_by_minute.png"
    return str(plot_success_by_minute(runs, float(zero_shot["success_rate"]), png, title))


def _earlier_checkpoints(
    cfg: FinetuneBenchCfg,
    embodiment: str,
    run_dir: Path,
    name: str,
    task: str,
    folder: Path,
    gap: dict[str, object],
    progress: Callable[[str], None],
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The run's checkpoints before its final one (``cfg.evaluate_checkpoints`` in all), each
    evaluated on the gapped robot: their rows and their evaluations by robot minute."""
    kept = checkpoints(run_dir / "checkpoints")[-cfg.evaluate_checkpoints : -1]
    rows: list[dict[str, Any]] = []
    success: dict[str, dict[str, Any]] = {}
    for ckpt in kept:
        steps = checkpoint_steps(ckpt)
        minute = _robot_minutes(steps, task)
        progress(f"{name}: its checkpoint at {minute:.1f} robot minutes on the gapped robot")
        evaluated = _robot_success(ckpt, f"{name}-{steps}", task, cfg, folder, gap)
        rows.append(
            _row(embodiment, f"{name} @ {minute:.1f} min", evaluated, None, 0.0) | {"robot_steps": steps}
        )
        success[f"{minute:.1f}"] = evaluated
    return rows, success


def _calibrate(
    cfg: FinetuneBenchCfg, embodiment: str, folder: Path, progress: Callable[[str], None]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Zero-shot success at each gap strength of ``cfg.calibrate`` (no robot training)."""
    task = cfg.task_of(embodiment)
    sub = folder / embodiment
    sub.mkdir(parents=True, exist_ok=True)
    pretrained, sim_success = _pretrained(cfg, embodiment, task, sub, progress)
    rows, curve = [], {}
    for strength in cfg.calibrate:
        progress(f"{embodiment}: zero-shot at gap strength {strength:g}, {cfg.episodes} episodes")
        gap = _gap(cfg, embodiment, sub, strength)
        evaluated = _robot_success(pretrained, f"zero-shot-{strength:g}", task, cfg, sub, gap)
        rows.append(_row(embodiment, f"zero-shot @ gap {strength:g}", evaluated, None, 0.0))
        curve[f"{strength:g}"] = evaluated["success_rate"]
    x = SUFFIX[embodiment]
    return rows, {f"task{x}": task, f"sim_success{x}": sim_success, f"zero_shot_by_gap{x}": curve}


def run_finetune_bench(
    cfg: FinetuneBenchCfg, progress: Callable[[str], None] = log.info
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every embodiment's policies on its gapped robot; the table rows and the summary (the JSON
    printed last). With ``cfg.calibrate``: zero-shot success at each gap strength only."""
    cfg.check()
    if not cfg.calibrate:  # calibration trains nothing on the robot
        for embodiment in cfg.embodiments:
            check_latency(cfg, embodiment)
    info = machine_info()
    rows: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    measure = _calibrate if cfg.calibrate else _embodiment
    with contextlib.ExitStack() as stack:
        folder = cfg.work_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-ft-")))
        folder.mkdir(parents=True, exist_ok=True)
        for embodiment in cfg.embodiments:
            more_rows, more = measure(cfg, embodiment, folder, progress)
            rows += more_rows
            summary |= more
    summary |= {
        "episodes": cfg.episodes,
        "early_stop": cfg.early_stop,
        "goal": cfg.goal,
        "learner_variant": cfg.learner_variant or "default",
        "recipes": list(cfg.recipes),
        "sim_share": cfg.sim_share,
        "intervention_share": cfg.intervention_share,
        "actor_hold": cfg.actor_hold,
        "warmup_steps": cfg.warmup_steps,
        "policy_trigger": cfg.policy_trigger,
        "intervene_every": cfg.intervene_every,
        "intervene_steps": list(cfg.intervene_steps),
        "intervene_on_disagreement": cfg.intervene_on_disagreement,
        "intervene_patience": cfg.intervene_patience,
        "intervene_hold": cfg.intervene_hold,
        "person_knows_robot": cfg.person_knows_robot,
        "machine": info,
        "versions": versions(["mujoco", "pybullet", "ros-rclpy", "torch"]),
    }
    return rows, summary


def _row(
    embodiment: str,
    name: str,
    evaluated: dict[str, Any],
    trained: dict[str, Any] | None,
    wall: float,
    task: str | None = None,
) -> dict[str, Any]:
    """A policy's row; ``trained`` is its robot run's summary on ``task`` (None: not trained on the
    robot)."""
    robot = None if trained is None else trained.get("robot")
    human = None if trained is None else trained.get("interventions")
    steps = 0 if trained is None else trained["env_steps"]
    to_own = None if human is None else human.get("steps_to_own_success_80")
    return {
        "embodiment": embodiment,
        "policy": name,
        "success": evaluated["success_rate"],
        # Wilson's 95 % interval: the robot's evaluations scatter between runs (docs/ros.md).
        "interval": wilson_interval(*_count(evaluated)),
        "episodes": evaluated["episodes"],
        "robot_steps": steps,
        # The person's share of the robot's steps: what the policy was taught by, beside its own tries.
        "person_share": None if human is None or not steps else human["transitions"] / steps,
        # How the person's episodes and the policy's own went, over the whole run: a person who
        # cannot drive the robot teaches a fresh learner little (docs/ros.md, the car's person).
        "person_success": None if human is None else human.get("success_rate_intervened"),
        "own_success": None if human is None else human.get("success_rate_own"),
        # Robot minutes until 8 of 10 of the policy's own training episodes succeeded (None: never).
        "own_minutes_to_80": None if to_own is None or task is None else _robot_minutes(to_own, task),
        "wall_minutes": wall,
        "overruns": None if robot is None else robot["overruns"],
    }


COLUMNS = (
    ("embodiment", "embodiment"),
    ("policy", "policy"),
    ("success", "success on the gapped robot"),
    ("interval", "95 % interval"),
    ("episodes", "episodes"),
    ("robot_steps", "robot steps trained"),
    ("person_share", "person's share of them"),
    ("person_success", "person's episodes succeeded"),
    ("own_success", "own episodes succeeded"),
    ("own_minutes_to_80", "robot minutes to 8 of 10 own"),
    ("wall_minutes", "wall minutes"),
    ("overruns", "control-period overruns"),
)


def _cell(key: str, value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, tuple):
        return "-".join(f"{v:.2f}" for v in value)
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def format_finetune_table(rows: list[dict[str, Any]]) -> str:
    """The rows as aligned columns under a header."""
    return format_table(rows, COLUMNS, _cell)
