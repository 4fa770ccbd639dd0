"""A task definition executed on a backend: ``num_envs`` worlds stepped together.

:class:`TaskWorlds` is what the task's terms see as their :class:`~robolearn.tasks.core.TaskEnvView`:
it seeds the task's random streams, evaluates its terms, resets a subset of worlds (with domain
randomization), turns actions into controls (non-finite actions rejected, per-world latency) and
steps the physics, then evaluates rewards, successes and terminations. It knows nothing of
Gymnasium: :class:`~robolearn.envs.task_env.TaskEnv` adds the vector-environment interface
(spaces, autoreset, info dicts) on top, and the simulated robots of :mod:`robolearn.hardware`
run one world of it directly. Every per-world computation is an array operation over worlds.

On a device backend (``mujoco_warp``, issue 14) the same code runs on torch tensors on the device
through ``xp``, the backend's array API namespace: task state, counters, actions, observations,
rewards and the random streams all live there; :meth:`TaskWorlds.observe_numpy` and
:meth:`TaskWorlds.advance_numpy` copy to the host for callers that want numpy (Gymnasium's API).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from robolearn.sim import host_xp
from robolearn.sim.backend import BoolArray, FloatArray, IntArray, PhysicsParams, make_backend
from robolearn.tasks import make_task_cfg, one_world
from robolearn.tasks.core import Observation, TaskCfg, TaskError, TermConstants
from robolearn.tasks.sim_params import apply_sim_params, load_sim_params

if TYPE_CHECKING:
    from robolearn.tasks.cameras import ImageSpec

log = logging.getLogger(__name__)


class StepResult(NamedTuple):
    """What the task made of one control step, per world."""

    reward: FloatArray
    """(num_envs,) the weighted sum of the reward terms."""
    success: BoolArray
    """(num_envs,) the success condition holds."""
    terminated: BoolArray
    """(num_envs,) a terminal state: success (if it ends episodes) or a terminating condition."""
    truncated: BoolArray
    """(num_envs,) a time limit or an unstable simulation, and not terminated."""
    unstable: BoolArray
    """(num_envs,) the physics diverged in this step."""
    rejected: BoolArray
    """(num_envs,) the action sent had a non-finite component; the neutral action was applied."""


class TaskWorlds(TermConstants):
    """``num_envs`` worlds of one task on one backend (see the module doc).

    Episodes are the caller's business: :meth:`advance` never resets a world, it reports which
    ended; :meth:`reset_worlds` starts new episodes in the worlds given.
    """

    def __init__(
        self,
        task: str | TaskCfg,
        backend: str = "mujoco_batch",
        num_envs: int = 1,
        *,
        seed: int | None = None,
        randomize: bool = False,
        nthread: int = 0,
        sim_params: str | Path | None = None,
        compile_terms: bool = True,
    ) -> None:
        """``sim_params``: a parameter file from ``robolearn sysid``, the identified robot made nominal.
        ``compile_terms``: one world on the host runs its terms as compiled Python on floats
        (:mod:`robolearn.tasks.one_world`); False keeps them on arrays (the same values)."""
        # A private copy: terms with memory (small classes) must not be shared between worlds' owners.
        self.cfg = make_task_cfg(task) if isinstance(task, str) else copy.deepcopy(task)
        if sim_params is not None:
            self.cfg = apply_sim_params(self.cfg, load_sim_params(sim_params))
        if backend not in self.cfg.backends:
            raise TaskError(
                f"task {self.cfg.name} does not run on backend {backend!r}; "
                f"it runs on {', '.join(self.cfg.backends)}"
            )
        self.num_envs = num_envs
        self.randomize = randomize
        # The task's cameras go into the scene: a device renderer finds them in the compiled model.
        scene = dataclasses.replace(self.cfg.scene, cameras=tuple(self.cfg.cameras.items()))
        self.sim = make_backend(backend, scene, num_envs, nthread=nthread)
        self.name, self.backend_name = self.cfg.name, self.sim.name
        # The arrays' namespace, device and float type: numpy in float64 on the host backends (the
        # golden trajectories, bit for bit), torch tensors in float32 on a device backend.
        self.on_host = self.sim.xp is np
        xp = self.xp = host_xp if self.on_host else self.sim.xp
        self.device: Any = getattr(self.sim, "device", None) if not self.on_host else None
        self.float_dtype: Any = np.float64 if self.on_host else xp.float32

        act = self.cfg.action
        self._act_low = np.asarray(act.low, dtype=np.float64)
        self._act_high = np.asarray(act.high, dtype=np.float64)
        self._neutral = np.asarray(act.neutral, dtype=np.float64)
        # The same bounds where the worlds are (the numpy ones themselves on the host).
        self._act_low_x, self._act_high_x, self._neutral_x = (
            xp.asarray(a, dtype=self.float_dtype, device=self.device)
            for a in (self._act_low, self._act_high, self._neutral)
        )
        # The bounds once per world for the host's clip: numpy broadcasting a row over (num_envs, A)
        # costs more than the comparison itself on one world (0.8 us against 0.35; issue 18).
        self._act_low_rows, self._act_high_rows = (
            np.tile(a, (num_envs, 1)) for a in (self._act_low, self._act_high)
        )
        # The rejection flags of a step in which every action was finite: one array, read-only, so
        # the common step allocates none and no caller can write to the shared one.
        self._none_rejected = np.zeros(num_envs, dtype=bool)
        self._none_rejected.flags.writeable = False

        n = num_envs
        self.state = {k: self._zeros((n, *shape)) for k, shape in self.cfg.state.items()}
        self.step_count = xp.zeros(n, dtype=xp.int64, device=self.device)
        # Python numbers in array arithmetic cost numpy a conversion every time (about as much as the
        # operation on a few values): the step's integer operands as 0-d arrays, made once.
        self._one = xp.asarray(1, dtype=xp.int64, device=self.device)
        self._episode_length = xp.asarray(self.cfg.episode_length, dtype=xp.int64, device=self.device)
        # The command sent in the last step, as a robot's policy knows it (policy_node's state view
        # holds the same): the observation and reward terms read it. Under action latency the
        # physics acts on an older one, ``delayed_action``, which a robot does not report.
        self.action = xp.tile(self._neutral_x, (n, 1))
        self.prev_action = xp.asarray(self.action, copy=True)
        self.delayed_action = self.action
        # A robot's rate limits (ActionCfg.max_rate): each command moves at most this far from the
        # last one, as the robot's safety layer lets it; the limit acts on commands, before latency.
        self._max_step = (
            None
            if act.max_rate is None
            else xp.asarray(
                np.asarray(act.max_rate) * self.cfg.control_dt, dtype=self.float_dtype, device=self.device
            )
        )
        self.episode_return = self._zeros(n)
        self.episode_success = xp.zeros(n, dtype=xp.bool, device=self.device)
        # An identified command delay (robolearn sysid) is the nominal latency, in whole control periods.
        identified = self.cfg.scene.robot.identified
        self._base_latency = round(identified.command_delay / self.cfg.control_dt) if identified else 0
        max_extra = self.cfg.randomization.action_latency_steps[1] if randomize else 0
        max_latency = self._base_latency + max_extra
        self._action_history = xp.tile(self._neutral_x, (max_latency + 1, n, 1))
        self._latency = xp.full(n, self._base_latency, dtype=xp.int64, device=self.device)
        self._world_ids = xp.arange(n, device=self.device)
        self._substeps = self.cfg.substeps
        self.step_success = xp.zeros(n, dtype=xp.bool, device=self.device)
        """(num_envs,) the success condition in the last step; rewards may read it."""
        self.step_terminations = {
            k: xp.zeros(n, dtype=xp.bool, device=self.device) for k in self.cfg.terminations
        }
        """Each termination term's value in the last step; rewards may read them."""
        # What a task that does not end on success starts its terminations from: never written
        # (terminations are combined into new arrays), so shared by every step.
        self._none_terminated = xp.zeros(n, dtype=xp.bool, device=self.device)
        if self.on_host:
            self._none_terminated.flags.writeable = False
        self._stateful_terms = [
            t.fn
            for group in (self.cfg.observations, self.cfg.rewards, self.cfg.terminations)
            for t in group.values()
            if hasattr(t.fn, "reset")
        ] + ([self.cfg.success.fn] if hasattr(self.cfg.success.fn, "reset") else [])
        # One world's groups of terms as Python on floats, each compiled at its first use (None: it
        # stays on arrays). Not with terms that keep their own state: the recording could not see it.
        compile_here = compile_terms and self.on_host and num_envs == 1 and not self._stateful_terms
        self._compiled = one_world.CompiledGroups(self, compile_here, f"task {self.cfg.name}")
        self._run_compiled = self._compiled.run
        self.reseed(seed)
        # The reward terms as the step calls them, looked up once (issue 18): the function, its
        # parameters, the weight, and the weight as a cached 0-d array (None where it is 1.0).
        self._reward_terms = [
            (t.fn, t.params, t.weight, None if t.weight == 1.0 else self.constant(t.weight))
            for t in self.cfg.rewards.values()
        ]

        # Observation sizes come from the terms themselves, evaluated on the nominal state (without
        # observe(), whose sensor noise would draw from the noise stream).
        all_ids = xp.arange(n, device=self.device)
        self.sim.reset_worlds(all_ids)
        self.sim.forward(all_ids)
        self.observation_sizes = {
            k: int(xp.reshape(xp.asarray(t.fn(self, **t.params)), (n, -1)).shape[1])
            for k, t in self.cfg.observations.items()
        }
        """Observation key to the number of values of one world's entry (state terms)."""
        # On the host, every step's state terms land in one float32 block, each through a view of it
        # made here (one converting copy per term instead of reshape, asarray and astype each), and
        # the block is copied once for the caller (issue 18).
        bounds = np.cumsum([0, *self.observation_sizes.values()])
        self._obs_block = np.empty((n, int(bounds[-1])), dtype=np.float32)
        self._obs_columns = [
            (key, term, self._obs_block[:, int(a) : int(b)], slice(int(a), int(b)))
            for (key, term), a, b in zip(self.cfg.observations.items(), bounds[:-1], bounds[1:], strict=True)
        ]
        self.image_specs: dict[str, ImageSpec] = {}
        """Image observation key to its camera, shape and type, after the state terms."""
        self._render: Callable[[TaskWorlds], Observation] | None = None
        if self.cfg.cameras:  # imported only here: loading a state policy's task stays lean
            from robolearn.tasks.cameras import image_specs, render_cameras

            self.image_specs, self._render = image_specs(self.cfg), render_cameras

    # -- seeding -----------------------------------------------------------------------------
    def reseed(self, seed: int | list[int] | None) -> None:
        """Restart the random streams from ``seed`` (a list: its ints together; None: fresh entropy)."""
        # Separate streams, so turning sensor noise on does not change the reset distribution.
        reset_seq, dr_seq, noise_seq = np.random.SeedSequence(seed).spawn(3)
        if self.on_host:
            self.rng = np.random.default_rng(reset_seq)
            self._dr_rng = np.random.default_rng(dr_seq)
            self._noise_rng = np.random.default_rng(noise_seq)
        else:  # drawn where the worlds are: resets need no host round trip
            from robolearn.tasks.device_rng import DeviceGenerator

            # numpy Generator's interface (what terms call), drawing on the device.
            seqs = (reset_seq, dr_seq, noise_seq)
            streams: list[Any] = [DeviceGenerator(s, self.device, self.float_dtype) for s in seqs]
            self.rng, self._dr_rng, self._noise_rng = streams

    def _zeros(self, shape: int | tuple[int, ...]) -> Any:
        """Zeros of the task's float type where the worlds are."""
        return self.xp.zeros(shape, dtype=self.float_dtype, device=self.device)

    # -- terms -------------------------------------------------------------------------------
    def observe(self) -> Observation:
        """The task's observation of every world (float32, (num_envs, k) per state term, with
        sensor noise under randomization), then each camera's images (:mod:`robolearn.tasks.cameras`)."""
        noise = self.randomize and self.cfg.randomization.sensor_noise
        obs = self._observe_host(noise) if self.on_host else self._observe_device(noise)
        if self._render is not None:
            obs.update(self._render(self))
        return obs

    def _observe_host(self, noise: bool, world: int | None = None) -> Observation:
        """The state terms into the block, then a copy of it (of row ``world`` only, if given)
        split by key: (num_envs, k) entries, or (k,) ones of that world."""
        compiled = None if noise else self._run_compiled("observation", self._record_observation)
        if compiled is not None:  # one world: its row, in float32 as the block would round it
            row = np.array(compiled[0], dtype=np.float32)
            block = row.reshape(1, -1)
        else:
            n = self.num_envs
            for _, term, out, _ in self._obs_columns:
                value = term.fn(self, **term.params)
                if not isinstance(value, np.ndarray) or value.ndim != 2:
                    value = np.reshape(np.asarray(value), (n, -1))
                if noise and term.noise_std > 0:
                    value = value + self._noise_rng.normal(0.0, term.noise_std, value.shape)
                out[...] = value  # the float32 rounding of astype, without its temporary
            if world is None:
                block = self._obs_block.copy()
            else:
                row = self._obs_block[world].copy()
        if world is None:
            return {key: block[:, columns] for key, _, _, columns in self._obs_columns}
        return {key: row[columns] for key, _, _, columns in self._obs_columns}

    def _record_observation(self, view: Any, _: Any) -> list[Any]:
        """The state terms of one world, flattened and concatenated (the block's row)."""
        xp = view.xp
        values = [
            xp.reshape(xp.asarray(t.fn(view, **t.params)), (-1,)) for t in self.cfg.observations.values()
        ]
        if [v.shape[0] for v in values] != list(self.observation_sizes.values()):
            raise one_world.Untraceable("an observation term changed its size")
        return [xp.concat(values)]

    def _observe_device(self, noise: bool) -> Observation:
        obs: Observation = {}
        n, xp = self.num_envs, self.xp
        for key, term in self.cfg.observations.items():
            value = xp.reshape(xp.asarray(term.fn(self, **term.params)), (n, -1))
            if noise and term.noise_std > 0:
                value = value + self._noise_rng.normal(0.0, term.noise_std, value.shape)
            obs[key] = xp.astype(value, xp.float32)
        return obs

    # -- resets ------------------------------------------------------------------------------
    def reset_worlds(self, ids: IntArray) -> None:
        """Start a new episode in worlds ``ids``: the task's reset distribution, fresh counters."""
        if not self.on_host:  # indices from the host (Gymnasium's API) or already on the device
            ids = self.xp.asarray(ids, dtype=self.xp.int64, device=self.device)
        if self.randomize:  # first: recomputing derived model constants may overwrite the state
            self._randomize(ids)
        self.sim.reset_worlds(ids)
        self.step_count[ids] = 0
        self.action[ids] = self._neutral_x
        self.prev_action[ids] = self._neutral_x
        self.delayed_action[ids] = self._neutral_x
        self._action_history[:, ids] = self._neutral_x
        self.episode_return[ids] = 0.0
        self.episode_success[ids] = False
        for key in self.state:
            self.state[key][ids] = 0
        for event in self.cfg.reset_events.values():
            event.fn(self, ids, **event.params)
        for term in self._stateful_terms:
            term.reset(self, ids)
        self.sim.forward(ids)

    def _randomize(self, ids: IntArray) -> None:
        dr, k = self.cfg.randomization, len(ids)
        params = PhysicsParams(
            mass_scale=self._dr_rng.uniform(*dr.mass_scale, size=k),
            friction_scale=self._dr_rng.uniform(*dr.friction_scale, size=k),
            damping_scale=self._dr_rng.uniform(*dr.damping_scale, size=k),
            actuator_gain_scale=self._dr_rng.uniform(*dr.actuator_gain_scale, size=k),
        )
        self.sim.set_physics_params(ids, params)
        lo, hi = dr.action_latency_steps
        drawn = self._base_latency + self._dr_rng.integers(lo, hi + 1, size=k)
        self._latency[ids] = self.xp.clip(drawn, min=0)

    # -- stepping ----------------------------------------------------------------------------
    def sanitize(self, action: Any) -> tuple[FloatArray, BoolArray]:
        """(num_envs, A) actions clipped to the task's bounds, non-finite ones replaced by the
        neutral action, and which were replaced; raises :class:`TaskError` for a wrong shape."""
        if not self.on_host:
            return self._sanitize_on_device(action)
        act = np.asarray(action)
        # float32 (a policy's) is clipped as it is: maximum against the float64 bounds gives the
        # float64 values a converted copy would, without making that copy (issue 18).
        if act.dtype != np.float64 and act.dtype != np.float32:
            act = act.astype(np.float64)
        shape = (self.num_envs, len(self._neutral))
        if act.shape != shape:
            if act.size != shape[0] * shape[1]:
                raise TaskError(
                    f"task {self.cfg.name}: action has shape {act.shape}, expected {shape} "
                    f"({', '.join(self.cfg.action.names)})"
                )
            act = act.reshape(shape)
        # A non-finite action never reaches the physics: that world holds the neutral action.
        if host_xp.all_finite(act):  # the common case, in one check over every world
            rejected = self._none_rejected
            # float64 exactly as the clip would convert float32 (a compiled group reads float64 alone).
            exact = act if act.dtype == np.float64 or not self._compiled.enabled else act.astype(np.float64)
            compiled = self._run_compiled("bounds", self._record_bounds, exact)
            if compiled is not None:
                return np.array(compiled[0], dtype=np.float64).reshape(shape), rejected
        else:
            rejected = np.logical_not(np.isfinite(act).all(axis=1))
            if rejected.any():
                act = act.astype(np.float64)  # a copy: the caller's array is not written
                act[rejected] = self._neutral
                log.warning("rejected non-finite actions in worlds %s", np.flatnonzero(rejected).tolist())
        return host_xp.clip(act, self._act_low_rows, self._act_high_rows), rejected

    def _record_bounds(self, view: Any, act: Any) -> list[Any]:
        return [view.xp.clip(act, self._act_low_rows, self._act_high_rows)]

    def _sanitize_on_device(self, action: Any) -> tuple[Any, Any]:
        """:meth:`sanitize` without a branch on the values: a branch would wait for the device."""
        xp = self.xp
        act = xp.asarray(action, dtype=self.float_dtype, device=self.device)
        shape = (self.num_envs, len(self._neutral))
        if tuple(act.shape) != shape:
            if math.prod(act.shape) != shape[0] * shape[1]:
                raise TaskError(
                    f"task {self.cfg.name}: action has shape {tuple(act.shape)}, expected {shape} "
                    f"({', '.join(self.cfg.action.names)})"
                )
            act = xp.reshape(act, shape)
        rejected = ~xp.all(xp.isfinite(act), axis=1)
        act = xp.where(rejected[:, None], self._neutral_x, act)
        return xp.clip(act, self._act_low_x, self._act_high_x), rejected

    def advance(self, actions: Any) -> StepResult:
        """Apply one action per world for a control period and evaluate the task's terms.

        Ended episodes are reported, not reset (see :meth:`reset_worlds`).
        """
        act, rejected = self.sanitize(actions)
        if self._max_step is not None:
            act = self._rate_limited(act)
        if len(self._action_history) == 1:
            applied = act  # no latency possible: the history would only echo the action
        else:
            # Action latency: world i acts on the action it was sent latency[i] steps ago.
            older = self._action_history[:-1]  # torch cannot copy between overlapping views
            self._action_history[1:] = older if self.on_host else self.xp.asarray(older, copy=True)
            self._action_history[0] = act
            applied = self._action_history[self._latency, self._world_ids]
        self.prev_action = self.action
        self.action = act
        self.delayed_action = applied
        cfg = self.cfg
        compiled = self._run_compiled("action", self._record_action, applied)
        if compiled is None:
            ctrl = cfg.action.to_controls(self, applied, **cfg.action.params)
        else:
            program = self._compiled.programs["action"]
            assert program is not None  # it just ran
            ctrl = np.array(compiled[0], dtype=program.dtypes[0]).reshape(program.shapes[0])
        self.sim.step(ctrl, self._substeps)
        on_host = self.on_host
        # The counters are replaced, not written in place: on the host numpy's in-place operations
        # cost twice the plain ones on a few values (0.85 us against 0.35; issue 18), and every
        # reader takes them from this object at each use.
        self.step_count = self.step_count + self._one
        # A fresh array each step that the backend never writes again (the Backend protocol): no copy.
        unstable = self.sim.unstable_worlds()
        success, reward, terminated, truncated = self._evaluate(unstable)
        if on_host and host_xp.any_true(unstable):  # on a device, a branch would wait for it
            log.warning("worlds %s became unstable and are reset", np.flatnonzero(unstable).tolist())
        self.episode_return = self.episode_return + reward
        self.episode_success = self.episode_success | success
        return StepResult(reward, success, terminated, truncated, unstable, rejected)

    def _rate_limited(self, act: Any) -> Any:
        """``act`` moved at most ``max_rate * control_dt`` from each world's last command (a new array)."""
        return self.xp.clip(act, self.action - self._max_step, self.action + self._max_step)

    def _record_action(self, view: Any, applied: Any) -> list[Any]:
        return [self.cfg.action.to_controls(view, applied, **self.cfg.action.params)]

    def _evaluate(self, unstable: BoolArray) -> tuple[Any, Any, Any, Any]:
        """Run the step's terms: the updates, then success and the terminations (in
        ``step_success`` and ``step_terminations``), then the rewards; return success, reward,
        terminated and truncated, each a fresh array.

        Conditions before rewards (Isaac Lab's order): a reward that is a condition's value, such as
        an alive bonus, reads it from step_success or step_terminations instead of recomputing it.
        A term may return an array it keeps (task state): each value is copied once."""
        cfg = self.cfg
        compiled = self._run_compiled("step", self._record_step, unstable)
        if compiled is not None:  # one world: the outputs as fresh arrays (callers may write to them)
            success = self.step_success = np.array(compiled[0], dtype=bool)
            for key, hit in zip(cfg.terminations, compiled[1:-3], strict=True):
                self.step_terminations[key] = np.array(hit, dtype=bool)
            reward, terminated, truncated = compiled[-3:]
            return (
                success,
                np.array(reward, dtype=self.float_dtype),
                np.array(terminated, dtype=bool),
                np.array(truncated, dtype=bool),
            )
        success = self._conditions(self)
        terminated, truncated = self._ends(self, success, unstable)
        # Returned as it is, terminated would be success itself or (on a device, where no tensor is
        # read-only) the shared zeros: a caller writing to it would change what it must not.
        if terminated is success or (terminated is self._none_terminated and not self.on_host):
            terminated = self.xp.asarray(terminated, copy=True)
        return success, self._reward_sum(self), terminated, truncated

    def _record_step(self, view: Any, unstable: Any) -> list[Any]:
        """:meth:`_evaluate`'s terms on a recording view of one world."""
        success = self._conditions(view)
        outputs = [success, *(view.step_terminations[key] for key in self.cfg.terminations)]
        outputs += [self._reward_sum(view), *self._ends(view, success, unstable)]
        if any(math.prod(o.shape) != 1 for o in outputs):
            raise one_world.Untraceable("a condition or the reward is not one value per world")
        return outputs

    def _ends(self, env: Any, success: Any, unstable: Any) -> tuple[Any, Any]:
        """Terminated and truncated of the step from its conditions (in ``env.step_terminations``),
        the time limit and the physics' stability; terminated may be ``success`` itself."""
        terminated = success if self.cfg.end_on_success else self._none_terminated
        truncated = (env.step_count >= self._episode_length) | unstable
        for key, done_term in self.cfg.terminations.items():
            if done_term.time_out:
                truncated = truncated | env.step_terminations[key]
            else:
                terminated = terminated | env.step_terminations[key]
        return terminated, truncated & ~terminated

    def _conditions(self, env: Any) -> Any:
        """The step's updates, then its success and termination terms on ``env`` (these worlds, or
        a recording view of one) into ``env.step_success`` and ``env.step_terminations``, each a
        fresh boolean array; returns the success."""
        cfg = self.cfg
        for update in cfg.updates.values():
            update.fn(env, **update.params)
        env.step_success = self._condition(env, cfg.success)
        for key, done_term in cfg.terminations.items():
            env.step_terminations[key] = self._condition(env, done_term)
        return env.step_success

    @staticmethod
    def _condition(env: Any, term: Any) -> Any:
        """A success or termination term's value as a fresh boolean array."""
        return env.xp.asarray(term.fn(env, **term.params), dtype=env.xp.bool, copy=True)

    def _reward_sum(self, env: Any) -> Any:
        """The weighted sum of the reward terms on ``env`` (these worlds, or a recording view of
        one), in their order, as a fresh array of ``float_dtype``."""
        reward, xp, float_dtype = None, env.xp, self.float_dtype
        for fn, params, weight, weight_x in self._reward_terms:
            value = xp.asarray(fn(env, **params))
            # x * 1.0 == x: one operation less. The weight as a cached 0-d array (see _one) where the
            # value has the task's float type: with another (float32 on the host) a Python float keeps
            # numpy's type promotion as it was.
            if weight_x is None:
                weighted = value
            elif value.dtype == float_dtype:
                weighted = weight_x * value
            else:
                weighted = weight * value
            if reward is not None:
                # float64 on the host, the widest type there: a new sum keeps it and is cheaper (see
                # advance); on a device, in place in the sum's own array, which keeps float_dtype.
                if self.on_host:
                    reward = reward + weighted
                else:
                    reward += weighted
            elif weighted is not value and weighted.dtype == float_dtype:
                reward = weighted  # the first term starts the sum (0 + x == x, but for a zero's sign)
            else:  # the term's own array (it may keep it) or another type: a converted copy
                reward = xp.asarray(weighted, dtype=float_dtype, copy=True)
        return self._zeros(self.num_envs) if reward is None else reward

    # -- the host side, for numpy callers -----------------------------------------------------
    def observe_numpy(self) -> Observation:
        """:meth:`observe` as numpy arrays (a copy from the device on a device backend)."""
        obs = self.observe()
        return obs if self.on_host else {k: _numpy(v) for k, v in obs.items()}

    def observe_world(self, world: int) -> Observation:
        """:meth:`observe_numpy`'s entries of one world, (k,) per state term (images without the
        world axis): what a one-world environment returns, without the (1, k) arrays in between."""
        noise = self.randomize and self.cfg.randomization.sensor_noise
        if not self.on_host or self._render is not None:
            return {k: v[world] for k, v in self.observe_numpy().items()}
        return self._observe_host(noise, world)

    def advance_numpy(self, actions: Any) -> StepResult:
        """:meth:`advance` with the result as numpy arrays (a copy from the device on a device backend)."""
        result = self.advance(actions)
        return result if self.on_host else StepResult(*(_numpy(v) for v in result))

    def close(self) -> None:
        """Release the backend."""
        self.sim.close()


def _numpy(value: Any) -> Any:
    """A host numpy copy of a device tensor."""
    return value.detach().cpu().numpy()
