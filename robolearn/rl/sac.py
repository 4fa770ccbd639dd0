"""Soft actor-critic with the RLPD recipe, in PyTorch, and the critic options of issue 11.

Haarnoja et al., "Soft Actor-Critic Algorithms and Applications" (2018): tanh-Gaussian actor,
automatic temperature. Ball et al., "Efficient Online Reinforcement Learning with Offline Data"
(RLPD, ICML 2023), the recipe SERL and HIL-SERL train with: LayerNorm in the critics, a critic
ensemble whose target takes the minimum over a random subset (REDQ, Chen et al. 2021), a high
update-to-data ratio and symmetric sampling of demonstrations (see :mod:`robolearn.rl.replay`).

Critic options (``SACConfig.critic_loss``, ``critic_norm``, ``target_network``, ``n_step``):

- HL-Gauss classification critic: Farebrother et al., "Stop Regressing: Training Value Functions
  via Classification for Scalable Deep RL" (ICML 2024). The critic outputs logits over bins of
  the value range; the target is a Gaussian of width 0.75 bin widths around the TD target,
  integrated over the bins, and the loss is the cross-entropy.
- CrossQ: Bhatt et al., "CrossQ: Batch Normalization in Deep Reinforcement Learning for Greater
  Sample Efficiency and Simplicity" (ICLR 2024). Batch renormalization (Ioffe, 2017) in the
  critic, no target network: (s, a) and (s', a') go through the critic in one batch, so both
  see the same normalization statistics.
- BRO's residual critic (``critic_arch="bro"``): Nauman et al., "Bigger, Regularized, Optimistic:
  scaling for compute and sample-efficient continuous control" (NeurIPS 2024). BroNet: a dense
  layer, LayerNorm and ReLU, then ``critic_blocks`` residual blocks x + LN(W2 ReLU(LN(W1 x))) at one
  width, orthogonally initialized; the skip connections are what let the critic grow (the paper's
  width 512 and two blocks; wider and deeper plain MLPs learn worse).
- Reward scaling by running return statistics (``reward_scale``): SimbaV2, Lee et al.,
  "Hyperspherical Normalization for Scalable Deep Reinforcement Learning" (ICML 2025); the learner
  divides rewards as it samples them (:mod:`robolearn.rl.reward_scale`).
- n-step returns: the target bootstraps after n rewards (Sutton and Barto, ch. 7); the replay
  sampler sums the rewards and passes the discount ``gamma ** k`` of each transition.
- HIL-SERL's discrete gripper critic and gripper-change penalty (Luo et al. 2024): with a
  ``gripper`` spec, actor and critics cover the other action components and a double-DQN critic
  over close, stay and open commands the gripper (:mod:`robolearn.rl.gripper`).

The ensemble is one set of stacked weights: every layer of every critic is one batched matmul.
The update is written as two loss functions of tensors (critic, actor) so that ``torch.compile``
and bfloat16 autocast (``SACConfig.compile``, ``SACConfig.precision``) apply to them unchanged.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from robolearn.policy.network import Actor
from robolearn.rl.config import SACConfig
from robolearn.rl.fused import ActorMode, FusedUpdate, fusable
from robolearn.rl.gripper import GripperCritic, GripperSpec
from robolearn.rl.replay import LearnerBatch
from robolearn.rl.reward_scale import ReturnScale

log = logging.getLogger(__name__)


class EnsembleLinear(nn.Module):
    """``num`` independent linear layers applied as one batched matmul: (E, B, in) -> (E, B, out)."""

    def __init__(
        self, num: int, in_features: int, out_features: int, orthogonal: float | None = None
    ) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(in_features)  # nn.Linear's default initialization, per member
        self.weight = nn.Parameter(torch.empty(num, in_features, out_features).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(num, 1, out_features).uniform_(-bound, bound))
        if orthogonal is not None:  # BRO's initialization: orthogonal weights of this gain, zero bias
            with torch.no_grad():
                for member in self.weight:
                    nn.init.orthogonal_(member, gain=orthogonal)
                self.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.baddbmm(self.bias, x, self.weight)


class EnsembleLayerNorm(nn.Module):
    """LayerNorm with a separate affine transform per ensemble member."""

    def __init__(self, num: int, features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(num, 1, features))
        self.bias = nn.Parameter(torch.zeros(num, 1, features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # addcmul: the affine transform as one kernel (forward) instead of a product and a sum.
        return torch.addcmul(self.bias, F.layer_norm(x, x.shape[-1:]), self.weight)


class EnsembleBatchRenorm(nn.Module):
    """Batch renormalization (Ioffe, "Batch Renormalization", NeurIPS 2017) per ensemble member.

    Training normalizes with the batch's statistics, corrected towards the running ones by
    ``r = clip(sigma_B / sigma, 1/r_max, r_max)`` and ``d = clip((mu_B - mu) / sigma, -d_max, d_max)``
    (no gradient through r, d). During the first ``warmup`` training calls r = 1, d = 0 (plain batch
    normalization), as CrossQ does while the running statistics settle. Evaluation uses the running
    statistics. Input (E, B, F); statistics over B.
    """

    running_mean: torch.Tensor
    running_var: torch.Tensor
    steps: torch.Tensor

    def __init__(
        self,
        num: int,
        features: int,
        momentum: float = 0.01,
        r_max: float = 3.0,
        d_max: float = 5.0,
        warmup: int = 10_000,
        eps: float = 1e-3,
    ) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(num, 1, features))
        self.bias = nn.Parameter(torch.zeros(num, 1, features))
        self.register_buffer("running_mean", torch.zeros(num, 1, features))
        self.register_buffer("running_var", torch.ones(num, 1, features))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
        self.momentum, self.r_max, self.d_max, self.warmup, self.eps = momentum, r_max, d_max, warmup, eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            x_hat = (x - self.running_mean) * torch.rsqrt(self.running_var + self.eps)
            return torch.addcmul(self.bias, x_hat, self.weight)
        mean = x.mean(dim=1, keepdim=True)
        var = x.var(dim=1, keepdim=True, unbiased=False)
        std = torch.sqrt(var + self.eps)
        x_hat = (x - mean) / std
        with torch.no_grad():
            if int(self.steps) >= self.warmup:
                running_std = torch.sqrt(self.running_var + self.eps)
                r = (std / running_std).clamp(1.0 / self.r_max, self.r_max)
                d = ((mean - self.running_mean) / running_std).clamp(-self.d_max, self.d_max)
                x_hat = x_hat * r + d
            self.running_mean.lerp_(mean, self.momentum)
            self.running_var.lerp_(var, self.momentum)
            self.steps += 1
        return torch.addcmul(self.bias, x_hat, self.weight)


BRO_GAIN = math.sqrt(2.0)
"""Gain of BroNet's orthogonal initialization of its ReLU layers (the output layer's is 1)."""


class EnsembleResidualBlock(nn.Module):
    """BRO's residual block per ensemble member: x + LN(W2 ReLU(LN(W1 x))), one width throughout."""

    def __init__(self, num: int, width: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            EnsembleLinear(num, width, width, orthogonal=BRO_GAIN),
            EnsembleLayerNorm(num, width),
            nn.ReLU(inplace=True),  # in place: LayerNorm's affine output is fresh and not saved
            EnsembleLinear(num, width, width, orthogonal=BRO_GAIN),
            EnsembleLayerNorm(num, width),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


class CriticEnsemble(nn.Module):
    """N Q-functions Q(s, a) with stacked weights; returns (N, B), or (N, B, outputs) with ``outputs > 1``."""

    def __init__(
        self,
        num: int,
        obs_dim: int,
        action_dim: int,
        hidden: tuple[int, ...],
        layer_norm: bool,
        *,
        norm: str | None = None,
        outputs: int = 1,
        arch: str = "mlp",
        blocks: int = 1,
    ) -> None:
        super().__init__()
        self.num = num
        self.outputs = outputs
        width = obs_dim + action_dim
        if arch == "bro":  # BroNet (see the module's docstring): LayerNorm is part of the design
            h = hidden[0]
            self.net = nn.Sequential(
                EnsembleLinear(num, width, h, orthogonal=BRO_GAIN),
                EnsembleLayerNorm(num, h),
                nn.ReLU(inplace=True),
                *(EnsembleResidualBlock(num, h) for _ in range(blocks)),
                EnsembleLinear(num, h, outputs, orthogonal=1.0),
            )
            return
        norm = norm if norm is not None else ("layer" if layer_norm else "none")
        layers: list[nn.Module] = []
        if norm == "batch_renorm":  # CrossQ normalizes the input too
            layers.append(EnsembleBatchRenorm(num, width))
        for h in hidden:
            layers.append(EnsembleLinear(num, width, h))
            if norm == "layer":
                layers.append(EnsembleLayerNorm(num, h))
            elif norm == "batch_renorm":
                layers.append(EnsembleBatchRenorm(num, h))
            layers.append(nn.ReLU(inplace=True))  # in place: its input is a fresh tensor, never saved
            width = h
        layers.append(EnsembleLinear(num, width, outputs))
        self.net = nn.Sequential(*layers)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        x = torch.cat([obs, action], dim=-1).unsqueeze(0).expand(self.num, -1, -1)
        out = self.net(x)
        return out.squeeze(-1) if self.outputs == 1 else out


class HLGauss(nn.Module):
    """HL-Gauss targets and values over fixed bins (Farebrother et al., ICML 2024).

    ``bins`` bins of equal width cover [v_min, v_max]; sigma = 0.75 bin widths, the ratio the paper
    found robust across tasks.
    """

    edges: torch.Tensor
    centers: torch.Tensor

    def __init__(self, v_min: float, v_max: float, bins: int, sigma_ratio: float = 0.75) -> None:
        super().__init__()
        edges = torch.linspace(v_min, v_max, bins + 1)
        self.register_buffer("edges", edges)
        self.register_buffer("centers", 0.5 * (edges[1:] + edges[:-1]))
        self.sigma = sigma_ratio * (v_max - v_min) / bins

    def value(self, logits: torch.Tensor) -> torch.Tensor:
        """Expected value of the categorical distribution: (..., bins) -> (...)."""
        return torch.softmax(logits, dim=-1) @ self.centers

    def target(self, value: torch.Tensor) -> torch.Tensor:
        """Each bin's probability under N(value, sigma^2), renormalized to the range: (...) -> (..., bins)."""
        value = value.clamp(self.edges[0], self.edges[-1])
        cdf = torch.special.ndtr((self.edges - value.unsqueeze(-1)) / self.sigma)
        mass = cdf[..., 1:] - cdf[..., :-1]
        return mass / (cdf[..., -1:] - cdf[..., :1]).clamp_min(1e-6)

    def loss(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Cross-entropy of (E, B, bins) logits against the HL-Gauss targets of (B,) values, summed over E."""
        probs = self.target(target).unsqueeze(0)
        return -(probs * F.log_softmax(logits, dim=-1)).sum(-1).mean(dim=1).sum()


class SAC(nn.Module):
    """Actor, critic ensemble, target critics, temperature and their optimizers."""

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        cfg: SACConfig,
        device: torch.device,
        gripper: GripperSpec | None = None,
    ) -> None:
        super().__init__()
        cfg.check()
        if cfg.gripper_critic and gripper is None:
            raise ValueError("SACConfig.gripper_critic needs the task's GripperSpec")
        self.cfg = cfg
        self.device = device
        self.obs_dim, self.action_dim = obs_dim, action_dim
        self.gripper_index = gripper.action_index if gripper is not None and cfg.gripper_critic else None
        # With the discrete gripper, actor and critics see the other action components only.
        action_dim = action_dim - (self.gripper_index is not None)
        self.actor = Actor(obs_dim, action_dim, cfg.hidden)
        if gripper is not None and self.gripper_index is not None:
            # The policy's widths: the head deploys with the actor, rebuilt from its hidden sizes.
            self.actor.gripper = gripper.head(obs_dim, cfg.hidden)
        self.hl_gauss = (
            HLGauss(cfg.value_range[0], cfg.value_range[1], cfg.hl_gauss_bins)
            if cfg.critic_loss == "hl_gauss"
            else None
        )
        outputs = cfg.hl_gauss_bins if self.hl_gauss is not None else 1

        def critic() -> CriticEnsemble:
            return CriticEnsemble(
                cfg.num_critics,
                obs_dim,
                action_dim,
                cfg.critic_hidden or cfg.hidden,
                cfg.layer_norm,
                norm=cfg.critic_norm_used,
                outputs=outputs,
                arch=cfg.critic_arch,
                blocks=cfg.critic_blocks,
            )

        self.critic = critic()
        # Without a target network (CrossQ) this copy is never read; it keeps checkpoints one shape.
        self.target_critic = critic()
        self.target_critic.load_state_dict(self.critic.state_dict())
        self.target_critic.requires_grad_(False)
        self.log_alpha = nn.Parameter(torch.tensor(math.log(cfg.init_temperature)))
        scale = 1.0 if cfg.target_entropy == "action_dim" else 0.5
        self.target_entropy = -scale * action_dim
        self.to(device)
        # Parameter lists fetched once: the update loops over them every step. The gripper head
        # rides in the actor (it is part of the policy) but learns as a critic.
        self._actor_params: list[torch.Tensor] = [
            p for name, p in self.actor.named_parameters() if not name.startswith("gripper.")
        ]
        self._critic_params: list[torch.Tensor] = list(self.critic.parameters())
        self._target_params: list[torch.Tensor] = list(self.target_critic.parameters())
        # Fused Adam: one kernel per step instead of several per parameter; the same algorithm, rounded
        # slightly differently. Fused kernels exist for CPU and CUDA.
        fused = True if device.type in ("cpu", "cuda") else None
        betas = (cfg.adam_beta1, 0.999)
        self.actor_opt = torch.optim.Adam(self._actor_params, lr=cfg.actor_lr, betas=betas, fused=fused)
        self.critic_opt = torch.optim.Adam(self._critic_params, lr=cfg.critic_lr, betas=betas, fused=fused)
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=cfg.temperature_lr, fused=fused)
        self.gripper: GripperCritic | None = None
        if self.actor.gripper is not None:
            self.gripper = GripperCritic(
                self.actor.gripper, cfg.critic_lr, cfg.tau, cfg.gripper_penalty, fused
            )
        self.reward_scale = (
            ReturnScale(cfg.gamma, max(abs(v) for v in cfg.value_range))
            if cfg.reward_scale == "returns"
            else None
        )
        """Running return statistics the learner divides rewards by (``reward_scale returns``);
        the learner feeds them, checkpoints carry them."""
        # Observation statistics the learner normalizes with (set_obs_normalization): the gripper
        # critic reads the measured gripper back in raw units.
        self._obs_mean: torch.Tensor | None = None
        self._obs_std: torch.Tensor | None = None
        self.updates = 0
        self._update_calls = 0
        """Updates made by this object (:meth:`scheduled_actor_step`'s count; not checkpointed)."""
        self._actor_metrics: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
        self._critic_loss_fn: Callable[..., tuple[torch.Tensor, torch.Tensor]] = self.critic_loss
        self._actor_loss_fn: Callable[..., tuple[torch.Tensor, ...]] = self.actor_loss
        if cfg.compile == "on":  # auto is decided by the run (fused.resolve_compile); alone, off
            # Inductor fuses the small elementwise operations between the matmuls; compiling takes
            # tens of seconds on two cores, so it is an option (see bench learn's throughput part).
            # The losses compiled alone serve the steps outside update_on_device (Cal-QL's, DrQ's).
            self._critic_loss_fn = torch.compile(self.critic_loss, dynamic=False)
            self._actor_loss_fn = torch.compile(self.actor_loss, dynamic=False)
        # The whole update as one graph (robolearn.rl.fused) where the options allow; compiled with
        # ``compile``, else run eagerly only by tests that check it against the steps below.
        self.fused_unavailable = fusable(cfg, self.gripper is not None)
        on = cfg.compile == "on" and not self.fused_unavailable
        self._fused = FusedUpdate(self, compile=True) if on else None
        self.eager_fallback = False
        """Where compiling was not asked for (``--sac.compile auto``): a graph that fails to compile at
        the first update (no working C++ compiler, say) is logged and the step-by-step update takes
        over, instead of ending the run."""
        self._fused_ran: set[ActorMode] = set()
        """Actor modes whose graph has run (each compiles at its first call)."""

    @property
    def fused(self) -> bool:
        """Whether updates run as one compiled graph (:mod:`robolearn.rl.fused`)."""
        return self._fused is not None

    @property
    def gripper_target(self) -> nn.Module | None:
        """The gripper critic's target network (checkpoints carry it), None without one."""
        return self.gripper.target if self.gripper is not None else None

    def optimizer_state(self) -> dict[str, dict[str, object]]:
        state = {
            "actor": self.actor_opt.state_dict(),
            "critic": self.critic_opt.state_dict(),
            "alpha": self.alpha_opt.state_dict(),
        }
        if self.gripper is not None:
            state["gripper"] = self.gripper.opt.state_dict()
        return state

    def load_optimizer_state(self, state: dict[str, dict[str, object]], critics: bool = True) -> None:
        """Every optimizer's state, or without ``critics`` all but the continuous critics' (the gripper's
        critic is the gripper's policy: it stays with the actor)."""
        if (self.gripper is not None) != ("gripper" in state):
            raise KeyError("gripper critic optimizer state (saved with and loaded without it, or back)")
        self.actor_opt.load_state_dict(state["actor"])
        self.alpha_opt.load_state_dict(state["alpha"])
        if critics:
            self.critic_opt.load_state_dict(state["critic"])
        if self.gripper is not None:
            self.gripper.opt.load_state_dict(state["gripper"])

    def set_obs_normalization(self, mean: torch.Tensor, std: torch.Tensor) -> None:
        """The statistics observations are normalized with (the gripper critic reads raw values)."""
        self._obs_mean, self._obs_std = mean, std

    def _measured_gripper(self, obs: torch.Tensor) -> torch.Tensor:
        """The measured gripper (B,) in raw units, from normalized observations."""
        assert self.actor.gripper is not None
        i = self.actor.gripper.obs_index
        x = obs[:, i]
        if self._obs_mean is None or self._obs_std is None:
            return x
        return x * self._obs_std[i] + self._obs_mean[i]

    def _split_action(self, act: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The continuous components (what actor and critics see) and the gripper command, if any."""
        i = self.gripper_index
        if i is None:
            return act, None
        return torch.cat([act[:, :i], act[:, i + 1 :]], dim=1), act[:, i]

    @contextlib.contextmanager
    def autocast(self) -> Iterator[None]:
        """bfloat16 matmuls where ``precision`` asks for them (AMX on x86 CPUs, tensor cores on CUDA)."""
        enabled = self.cfg.precision == "bfloat16"
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=enabled):
            yield

    # -- values ------------------------------------------------------------------------------
    def q_values(self, critic: CriticEnsemble, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        """Q(s, a) of every member, (E, B): the critic's output, or its expectation over HL-Gauss bins."""
        out = critic(obs, act)
        return self.hl_gauss.value(out.float()) if self.hl_gauss is not None else out.float()

    def _td_loss(self, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Per-member TD loss, summed over members: squared error or HL-Gauss cross-entropy."""
        if self.hl_gauss is not None:
            return self.hl_gauss.loss(out.float(), target)
        q = out.float()
        return (q - target.unsqueeze(0)).square().mean(dim=1).sum()

    def _pessimistic(self, q_next: torch.Tensor) -> torch.Tensor:
        """Minimum over the ensemble, or over a random subset of it (REDQ)."""
        cfg = self.cfg
        if cfg.critic_subsample is not None and cfg.critic_subsample < cfg.num_critics:
            pick = torch.randperm(cfg.num_critics, device=q_next.device)[: cfg.critic_subsample]
            q_next = q_next[pick]
        return q_next.min(dim=0).values

    # -- losses ------------------------------------------------------------------------------
    def forward(self, loss: str, *args: Any) -> tuple[torch.Tensor, ...]:
        """A loss by name (``critic`` or ``actor``): the entry ``torch.func.functional_call`` calls
        with substituted parameters (:mod:`robolearn.rl.fused`)."""
        return self.critic_loss(*args) if loss == "critic" else self.actor_loss(*args)

    def critic_loss(self, t: LearnerBatch, alpha: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The TD loss of the critic ensemble and Q(s, a) (mean over members, detached)."""
        cfg = self.cfg
        obs, act, next_obs = t.obs, t.action, t.next_obs
        with torch.no_grad():
            next_act, next_logp = self.actor.sample(next_obs)
        if cfg.target_network:
            with torch.no_grad():
                q_next = self.q_values(self.target_critic, next_obs, next_act)
            out = self.critic(obs, act)
        else:
            # CrossQ: one forward of [(s, a); (s', a')] so batch statistics cover both halves.
            both = self.critic(torch.cat([obs, next_obs]), torch.cat([act, next_act]))
            n = obs.shape[0]
            out = both[:, :n]
            with torch.no_grad():
                q_next = both[:, n:].float()
                q_next = self.hl_gauss.value(q_next) if self.hl_gauss is not None else q_next
        with torch.no_grad():
            v_next = self._pessimistic(q_next)
            if cfg.backup_entropy:
                v_next = v_next - alpha * next_logp
            target = t.reward + t.discount * (1.0 - t.terminated) * v_next
        loss = self._td_loss(out, target)
        q = out.detach().float()
        q = self.hl_gauss.value(q) if self.hl_gauss is not None else q
        return loss, q.mean(dim=0)

    def actor_loss(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """SAC's actor loss, the temperature loss (they share no parameters) and the log-probabilities."""
        alpha = self.log_alpha.exp()
        act, logp = self.actor.sample(obs)
        q = self.q_values(self.critic, obs, act).mean(dim=0)
        actor_loss = (alpha.detach() * logp - q).mean()
        alpha_loss = -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()
        return actor_loss, alpha_loss, logp.detach()

    # -- steps -------------------------------------------------------------------------------
    def critic_step(
        self, t: LearnerBatch, extra: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None
    ) -> torch.Tensor:
        """One gradient step of the critics (plus ``extra(obs, act)``, a regularizer such as Cal-QL's)."""
        alpha = self.log_alpha.exp().detach()
        with self.autocast():
            loss, _ = self._critic_loss_fn(t, alpha)
            if extra is not None:
                loss = loss + extra(t.obs, t.action)
        self.critic_opt.zero_grad(set_to_none=True)
        loss.backward()
        self.critic_opt.step()
        if self.cfg.target_network:
            with torch.no_grad():
                torch._foreach_lerp_(self._target_params, self._critic_params, self.cfg.tau)
        return loss.detach()

    def actor_step(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One gradient step of the actor and the temperature; returns (actor loss, temperature, entropy)."""
        crossq = not self.cfg.target_network
        if crossq:
            self.critic.eval()  # the actor's Q uses the running statistics, as CrossQ's does
        with self.autocast():
            actor_loss, alpha_loss, logp = self._actor_loss_fn(obs)
        if crossq:
            self.critic.train()
        self.actor_opt.zero_grad(set_to_none=True)
        self.alpha_opt.zero_grad(set_to_none=True)
        # One backward pass for both losses, which share no parameters (the actor's sees the temperature
        # detached), into the actor and the temperature only: autograd skips the critics' weight gradients.
        (actor_loss + alpha_loss).backward(inputs=[*self._actor_params, self.log_alpha])
        self.actor_opt.step()
        self.alpha_opt.step()
        return actor_loss.detach(), self.log_alpha.detach().exp(), -logp.mean()

    def scheduled_actor_step(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """An update's actor step: :meth:`actor_step` at every ``actor_every``-th update (the policy
        delay), else the last one's metrics; none before ``actor_starts`` critic steps."""
        mode = self._actor_schedule()
        if mode == "measure":  # the actor held: its loss for the log only
            with torch.no_grad(), self.autocast():
                actor_loss, _, logp = self._actor_loss_fn(obs)
            return actor_loss, self.log_alpha.detach().exp(), -logp.mean()
        if mode == "step":
            self._actor_metrics = self.actor_step(obs)
        self._update_calls += 1
        assert self._actor_metrics is not None
        return self._actor_metrics

    def _actor_schedule(self) -> ActorMode:
        """This update's actor: held before ``actor_starts`` critic steps, stepped at every
        ``actor_every``-th update, else the last step's metrics reused."""
        if self.updates < self.cfg.actor_starts:
            return "measure"
        if self._actor_metrics is None or self._update_calls % self.cfg.actor_every == 0:
            return "step"
        return "reuse"

    def update(self, t: LearnerBatch) -> dict[str, float]:
        """``utd_ratio`` critic steps on interleaved slices of the batch (every ``utd_ratio``-th
        transition), then one actor step on the last of them (at every ``actor_every``-th update).

        ``t`` holds ``utd_ratio * batch_size`` transitions, already normalized, with each one's
        bootstrap discount (``gamma ** n`` for n-step returns).
        """
        return read_metrics(self.update_on_device(t))

    def update_on_device(self, t: LearnerBatch) -> dict[str, torch.Tensor]:
        """:meth:`update` with its metrics left on the device (0-d tensors): no host synchronization,
        so a loop on a GPU reads them (:func:`read_metrics`) only when it logs (issue 14)."""
        b = self.cfg.batch_size
        if self._fused is not None:
            return self._fused_update(t, self._fused)
        act, command = self._split_action(t.action)
        t = t._replace(action=act)
        critic_losses, gripper_losses = [], []
        utd = self.cfg.utd_ratio
        # Interleaved, not consecutive: a sampler puts the demonstrations first and the online data
        # after, so consecutive slices would give some critic steps (and the actor) only one of them.
        for k in range(utd):
            s = slice(k, utd * b, utd)
            part = t.rows(s)
            critic_losses.append(self.critic_step(part))
            if self.gripper is not None and command is not None:
                measured = self._measured_gripper(part.obs)
                gripper_losses.append(self.gripper.step(part, measured, command[s]))
        actor_loss, alpha, entropy = self.scheduled_actor_step(part.obs)  # the last critic step's slice
        self.updates += self.cfg.utd_ratio
        extra = {"gripper_loss": torch.stack(gripper_losses).mean()} if gripper_losses else {}
        names = ("critic_loss", "actor_loss", "temperature", "entropy", *extra)
        values = (torch.stack(critic_losses).mean(), actor_loss, alpha, entropy, *extra.values())
        return {k: v.detach() for k, v in zip(names, values, strict=True)}

    def warm_up(self) -> None:
        """Compile the update's graph before the first update (:meth:`FusedUpdate.warm_up`), for
        each actor schedule this run will use; nothing without one."""
        if self._fused is None:
            return
        cfg = self.cfg
        n, obs_dim, device = cfg.batch_size * cfg.utd_ratio, self.obs_dim, self.device
        # Distinct tensors, as a sampled batch's: inputs that alias would be a graph of their own.
        batch = LearnerBatch(
            torch.zeros(n, obs_dim, device=device),
            torch.zeros(n, self.action_dim, device=device),
            torch.zeros(n, device=device),
            torch.zeros(n, obs_dim, device=device),
            torch.zeros(n, device=device),
            torch.full((n,), cfg.gamma, device=device),
        )
        modes: list[ActorMode] = ["step"]
        if self.updates < cfg.actor_starts:
            modes.append("measure")
        if cfg.actor_every > 1:
            modes.append("reuse")
        self._fused.warm_up(batch, tuple(modes))

    def _fused_update(self, batch: LearnerBatch, fused: FusedUpdate) -> dict[str, torch.Tensor]:
        """:meth:`update_on_device` as one graph (:mod:`robolearn.rl.fused`), the same schedule."""
        mode = self._actor_schedule()
        try:
            critic_loss, *actor = fused(batch, mode)
        except Exception as exc:
            # A mode's graph compiles at its first call, before any of its kernels steps a parameter.
            if mode in self._fused_ran or not self.eager_fallback:
                raise
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            log.warning("--sac.compile auto: the update did not compile (%s); updating step by step", first)
            # Eagerly: the compiled losses would meet the same compiler.
            self._fused, self._critic_loss_fn, self._actor_loss_fn = None, self.critic_loss, self.actor_loss
            return self.update_on_device(batch)
        self._fused_ran.add(mode)
        if mode == "step":
            self._actor_metrics = (actor[0], actor[1], actor[2])
        if mode != "measure":
            self._update_calls += 1
            assert self._actor_metrics is not None
            actor = list(self._actor_metrics)
        self.updates += self.cfg.utd_ratio
        names = ("critic_loss", "actor_loss", "temperature", "entropy")
        return {k: v.detach() for k, v in zip(names, (critic_loss, *actor), strict=True)}

    @staticmethod
    def metrics(
        critic_loss: Any, actor_loss: Any, alpha: Any, entropy: Any, **extra: Any
    ) -> dict[str, float]:
        names = ("critic_loss", "actor_loss", "temperature", "entropy", *extra)
        values = (critic_loss, actor_loss, alpha, entropy, *extra.values())
        return read_metrics(dict(zip(names, values, strict=True)))


def read_metrics(metrics: dict[str, torch.Tensor]) -> dict[str, float]:
    """0-d metric tensors as floats: one device-to-host copy for all (one synchronization on a GPU)."""
    values = torch.stack([torch.as_tensor(v, dtype=torch.float32) for v in metrics.values()]).tolist()
    return dict(zip(metrics, values, strict=True))
