"""The whole SAC update as one compiled graph (issue 11's learner speed).

``torch.compile`` of the two loss functions leaves autograd's backward passes, the optimizers' steps
and the target update outside the graph: per update several hundred small operations dispatched
from Python, most of an update's time on a CPU at batch 256. Here an update is one pure function:
the gradients come from ``torch.func.grad_and_value`` over the same loss methods of :class:`SAC`
(``torch.func.functional_call`` puts the parameters in), Adam is written out on the optimizers' own
state tensors, and ``torch.compile(fullgraph=True)`` turns critic steps, target update, actor and
temperature steps into one graph. On a CPU its wrapper is generated C++ (Inductor's
``cpp_wrapper``), so no Python runs between the kernels.

The algorithm is :meth:`SAC.update_on_device`'s: the same losses, the same interleaved slices,
Adam as ``torch.optim.Adam`` computes it, on the optimizers' state (checkpoints and
:meth:`SAC.load_optimizer_state` see one state whichever path stepped). Options whose update is not
a pure function of tensors keep the other path (:func:`fusable`): CrossQ's batch renormalization
(running statistics and a Python step count) and the discrete gripper critic.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

import torch
from torch.func import functional_call, grad_and_value

if TYPE_CHECKING:
    from robolearn.rl.config import SACConfig
    from robolearn.rl.replay import LearnerBatch
    from robolearn.rl.sac import SAC

ActorMode = Literal["step", "measure", "reuse"]
"""What an update does with the actor: a gradient step, its loss without a step (before
``actor_starts``), or nothing (between ``actor_every`` steps)."""

Tensors = dict[str, torch.Tensor]


AUTO_COMPILE_UPDATES = 10_000
"""Learner steps from which ``--sac.compile auto`` compiles: at 1.6x an eager update's rate, 20-30 s
of compilation are repaid after about 7,000 updates on 2 cores (3.5 ms saved an update)."""


def resolve_compile(
    cfg: SACConfig, updates: int, device: torch.device, gripper: bool, robot: bool = False
) -> SACConfig:
    """``cfg`` with ``compile`` auto decided for a run of ``updates`` learner steps on ``device``: on
    for a CPU learner with a C++ compiler (Inductor builds its kernels with it) whose update is one
    graph (:func:`fusable`) and whose run is long enough; otherwise off. CUDA stays off: the graph
    has not been measured there (docs/learner.md). So does a run on a robot: even compiled before the
    actor thread starts (:meth:`SAC.warm_up`), the compiled update cost that thread control periods
    (docs/learner.md)."""
    if cfg.compile != "auto":
        return cfg
    compiler = shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++") or shutil.which("clang++")
    on = (
        device.type == "cpu"
        and not robot
        and compiler is not None
        and fusable(cfg, gripper) is None
        and updates >= AUTO_COMPILE_UPDATES
    )
    return replace(cfg, compile="on" if on else "off")


def fusable(cfg: SACConfig, gripper: bool) -> str | None:
    """Why the update cannot be one graph with these options, or None where it can."""
    if cfg.critic_norm_used == "batch_renorm":
        return "batch renormalization keeps running statistics and a step count outside the graph"
    if not cfg.target_network:
        return "without a target network the critic runs in train and eval mode within one update"
    if gripper:
        return "the discrete gripper critic steps its own networks between the critic steps"
    return None


class _Adam:
    """One ``torch.optim.Adam``'s hyperparameters and state, as lists of tensors for the graph."""

    def __init__(self, opt: torch.optim.Adam) -> None:
        self.opt = opt
        # The optimizer's own parameters: its state is keyed by them, not by views of them.
        self.params: list[torch.Tensor] = [p for group in opt.param_groups for p in group["params"]]

    def state(self) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
        """First and second moments of every parameter and the step count, created as
        ``torch.optim.Adam`` creates them where it has not stepped yet (read at every call: loading
        an optimizer state replaces the tensors)."""
        state = self.opt.state
        for p in self.params:
            if not state[p]:
                # The fused optimizer's layout: a float32 step count on the parameter's device.
                state[p]["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
                state[p]["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state[p]["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        first = [state[p]["exp_avg"] for p in self.params]
        second = [state[p]["exp_avg_sq"] for p in self.params]
        return first, second, [state[p]["step"] for p in self.params]

    def hyper(self) -> tuple[float, float, float, float]:
        group = self.opt.param_groups[0]
        beta1, beta2 = group["betas"]
        return float(group["lr"]), float(beta1), float(beta2), float(group["eps"])


def adam_step(
    params: list[torch.Tensor],
    grads: list[torch.Tensor],
    first: list[torch.Tensor],
    second: list[torch.Tensor],
    steps: list[torch.Tensor],
    hyper: tuple[float, float, float, float],
) -> None:
    """Adam (Kingma and Ba, 2015) in place, as ``torch.optim.Adam`` without weight decay or AMSGrad
    computes it (each parameter's step count is the same; the first one's gives the corrections)."""
    lr, beta1, beta2, eps = hyper
    torch._foreach_add_(steps, 1.0)
    t = steps[0]
    torch._foreach_lerp_(first, grads, 1.0 - beta1)
    torch._foreach_mul_(second, beta2)
    torch._foreach_addcmul_(second, grads, grads, 1.0 - beta2)
    denom = torch._foreach_sqrt(second)
    torch._foreach_div_(denom, torch.sqrt(1.0 - beta2**t))
    torch._foreach_add_(denom, eps)
    update = torch._foreach_div(first, denom)
    torch._foreach_mul_(update, -lr / (1.0 - beta1**t))
    torch._foreach_add_(params, update)


class FusedUpdate:
    """:meth:`SAC.update_on_device` as one function of tensors, compiled whole where ``compile``."""

    def __init__(self, sac: SAC, compile: bool) -> None:
        self.sac = sac
        # Views of the parameters without autograd: the graph differentiates through torch.func, and
        # its in-place steps write the module's parameters (loading a checkpoint copies into them).
        named = dict(sac.named_parameters())
        self.views = {name: p.detach() for name, p in named.items()}
        self.critic_names = [f"critic.{n}" for n, _ in sac.critic.named_parameters()]
        self.actor_names = [f"actor.{n}" for n, _ in sac.actor.named_parameters()]
        self.target_names = [f"target_critic.{n}" for n, _ in sac.target_critic.named_parameters()]
        # In the order the graph unpacks their states: critics, actor, temperature.
        self.adams = (_Adam(sac.critic_opt), _Adam(sac.actor_opt), _Adam(sac.alpha_opt))
        for adam, names in zip(self.adams, (self.critic_names, self.actor_names, ["log_alpha"]), strict=True):
            # The graph steps the views in the optimizer's order.
            assert all(p is named[n] for p, n in zip(adam.params, names, strict=True))
        self.graph: Callable[..., tuple[torch.Tensor, ...]] = self.update
        if compile:
            # On a CPU: generated C++ between the kernels, and torch's own random numbers (Inductor's
            # CPU generator was the slower: 7-9% of an update, docs/learner.md), which also makes the
            # graph draw the noise the step-by-step update draws. On CUDA Inductor's defaults.
            options: dict[str, str | int | bool | Callable[..., Any]] | None = None
            if sac.device.type == "cpu":
                options = {"cpp_wrapper": True, "fallback_random": True}
            self.graph = torch.compile(self.update, fullgraph=True, dynamic=False, options=options)

    def __call__(self, batch: LearnerBatch, actor: ActorMode) -> tuple[torch.Tensor, ...]:
        """The mean critic loss, and unless ``actor`` is ``reuse`` the actor loss, the temperature
        and the policy's entropy."""
        states = [a.state() for a in self.adams]
        return self.graph(self.views, states, tuple(a.hyper() for a in self.adams), batch, actor)

    def warm_up(self, batch: LearnerBatch, modes: tuple[ActorMode, ...]) -> None:
        """Compile the graph of each actor mode now, by a call on copies of the parameters and the
        optimizer state (and with the random generator's state restored): nothing the run keeps
        changes. For a run whose actor thread must not wait for a compilation (on a robot)."""
        views = {k: v.clone() for k, v in self.views.items()}
        states = [tuple([t.clone() for t in part] for part in a.state()) for a in self.adams]
        hypers = tuple(a.hyper() for a in self.adams)
        devices = [self.sac.device] if self.sac.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            for mode in modes:
                self.graph(views, states, hypers, batch, mode)

    def update(
        self,
        views: Tensors,
        states: list[tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]],
        hypers: tuple[tuple[float, float, float, float], ...],
        batch: LearnerBatch,
        actor: ActorMode,
    ) -> tuple[torch.Tensor, ...]:
        sac, cfg = self.sac, self.sac.cfg
        (c_first, c_second, c_steps), (a_first, a_second, a_steps), (t_first, t_second, t_steps) = states
        critic = [views[n] for n in self.critic_names]
        target = [views[n] for n in self.target_names]
        utd, b = cfg.utd_ratio, cfg.batch_size

        def loss(params: Tensors, *args: object) -> tuple[torch.Tensor, ...]:
            with sac.autocast():
                out: tuple[torch.Tensor, ...] = functional_call(sac, {**views, **params}, args)
            return out

        losses = []
        alpha = views["log_alpha"].exp()
        for k in range(utd):  # interleaved slices, as update_on_device's
            s = slice(k, utd * b, utd)
            params = {n: views[n] for n in self.critic_names}
            # The critic loss returns (TD loss, Q): the second rides along as grad_and_value's aux.
            grads, (td, _) = grad_and_value(loss, has_aux=True)(
                params, "critic", batch.rows(s), alpha
            )
            adam_step(critic, [grads[n] for n in self.critic_names], c_first, c_second, c_steps, hypers[0])
            torch._foreach_lerp_(target, critic, cfg.tau)
            losses.append(td)
        critic_loss = torch.stack(losses).mean()
        if actor == "reuse":
            return (critic_loss,)
        last = batch.obs[slice(utd - 1, utd * b, utd)]
        if actor == "measure":
            with torch.no_grad():
                actor_loss, _, logp = loss({}, "actor", last)
            return critic_loss, actor_loss, alpha, -logp.mean()

        def actor_objective(params: Tensors) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
            # One gradient for both losses, which share no parameters (SAC.actor_step's reasoning).
            actor_loss, alpha_loss, logp = loss(params, "actor", last)
            return actor_loss + alpha_loss, (actor_loss, logp)

        params = {n: views[n] for n in [*self.actor_names, "log_alpha"]}
        grads, (_, (actor_loss, logp)) = grad_and_value(actor_objective, has_aux=True)(params)
        actor_params = [views[n] for n in self.actor_names]
        adam_step(actor_params, [grads[n] for n in self.actor_names], a_first, a_second, a_steps, hypers[1])
        log_alpha = [views["log_alpha"]]
        adam_step(log_alpha, [grads["log_alpha"]], t_first, t_second, t_steps, hypers[2])
        return critic_loss, actor_loss, views["log_alpha"].exp(), -logp.mean()
