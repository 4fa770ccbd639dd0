"""The whole-update graph (robolearn.rl.fused) is SAC's update: the same parameters, metrics and
optimizer state as the step-by-step path, and compiled it learns."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from robolearn.rl.config import SACConfig, config_from_json
from robolearn.rl.fused import AUTO_COMPILE_UPDATES, FusedUpdate, resolve_compile
from robolearn.rl.replay import DeviceBatch, LearnerBatch
from robolearn.rl.sac import SAC

OBS, ACT, BATCH = 6, 3, 32


def _batch(utd: int, seed: int = 1) -> LearnerBatch:
    g = torch.Generator().manual_seed(seed)
    n = BATCH * utd
    return LearnerBatch(
        torch.randn(n, OBS, generator=g),
        torch.rand(n, ACT, generator=g) * 2 - 1,
        torch.randn(n, generator=g),
        torch.randn(n, OBS, generator=g),
        (torch.rand(n, generator=g) < 0.2).float(),
        torch.full((n,), 0.97),
    )


def _pair(**options: Any) -> tuple[SAC, SAC]:
    """Two agents with the same initial weights; the second updates through the eager graph."""
    cfg = SACConfig(hidden=(24, 24), batch_size=BATCH, **options)
    torch.manual_seed(0)
    steps = SAC(OBS, ACT, cfg, torch.device("cpu"))
    torch.manual_seed(0)
    fused = SAC(OBS, ACT, cfg, torch.device("cpu"))
    fused._fused = FusedUpdate(fused, compile=False)
    return steps, fused


def _same_state(a: SAC, b: SAC, atol: float = 2e-6) -> None:
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        torch.testing.assert_close(p, q, atol=atol, rtol=1e-5, msg=name)
    for part, state in a.optimizer_state().items():
        other = b.optimizer_state()[part]["state"]
        assert state["state"].keys() == other.keys(), part
        for k, moments in state["state"].items():
            for key, value in moments.items():
                torch.testing.assert_close(
                    value, other[k][key], atol=atol, rtol=1e-4, msg=f"{part} {k} {key}"
                )


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"utd_ratio": 3, "actor_every": 2, "actor_starts": 4},
        {"critic_loss": "hl_gauss", "value_range": (-10.0, 10.0), "hl_gauss_bins": 21},
        {"critic_arch": "bro", "layer_norm": True},
        {"num_critics": 5, "critic_subsample": 2, "layer_norm": False, "backup_entropy": False},
    ],
    ids=["default", "utd3-delay-held", "hl_gauss", "bro", "redq-no-layernorm"],
)
def test_fused_update_equals_the_step_by_step_update(options: dict[str, Any]) -> None:
    steps, fused = _pair(**options)
    batch = _batch(steps.cfg.utd_ratio)
    for i in range(7):
        torch.manual_seed(10 + i)  # the same noise for both: the losses draw it in the same order
        expected = steps.update(batch)
        torch.manual_seed(10 + i)
        got = fused.update(batch)
        assert got == pytest.approx(expected, rel=1e-4, abs=1e-5), i
    assert fused.updates == steps.updates == 7 * steps.cfg.utd_ratio
    _same_state(steps, fused)


def test_fused_and_step_updates_share_one_optimizer_state() -> None:
    """Offline pretraining steps one way and online training the other: the Adam state (moments,
    step counts) carries over, and a saved optimizer state loads into either."""
    steps, fused = _pair()
    batch = _batch(1)
    graph = fused._fused
    for agent in (steps, fused):
        torch.manual_seed(3)
        agent._fused = None
        agent.update(batch)  # the step path first, as Cal-QL's pretraining
    fused._fused = graph
    for agent in (steps, fused):
        torch.manual_seed(4)
        agent.update(batch)
    _same_state(steps, fused)
    assert int(fused.optimizer_state()["critic"]["state"][0]["step"]) == 2
    # A saved state loaded into the fused agent replaces its tensors; the graph reads the new ones.
    # (A copy: torch's load_state_dict keeps tensors that need no cast, so the agents would share them.)
    fused.load_optimizer_state(copy.deepcopy(steps.optimizer_state()))
    torch.manual_seed(5)
    steps.update(batch)
    torch.manual_seed(5)
    fused.update(batch)
    _same_state(steps, fused)


def test_options_without_a_pure_update_keep_the_step_path() -> None:
    crossq = SACConfig(hidden=(8,), batch_size=8, critic_norm="batch_renorm", target_network=False)
    agent = SAC(OBS, ACT, crossq, torch.device("cpu"))
    assert agent._fused is None and "batch renormalization" in str(agent.fused_unavailable)
    assert SAC(OBS, ACT, SACConfig(hidden=(8,)), torch.device("cpu")).fused_unavailable is None


def test_compiled_update_equals_the_step_by_step_update() -> None:
    """Compiled (one graph, a C++ wrapper, torch's random numbers on the CPU) the update is the same
    arithmetic: parameters and Adam state as the step-by-step update's after a few updates, up to
    the rounding of fused kernels."""
    steps, fused = _pair()
    fused._fused = FusedUpdate(fused, compile=True)
    batch = _batch(1)
    for i in range(4):
        torch.manual_seed(20 + i)
        steps.update(batch)
        torch.manual_seed(20 + i)
        fused.update(batch)
    _same_state(steps, fused, atol=1e-5)


def test_compiled_update_learns_a_fixed_batch() -> None:
    """``--sac.compile on``: the compiled graph writes the module's parameters: the critics fit r(s)
    of terminal transitions and the temperature moves."""
    torch.manual_seed(3)
    cfg = SACConfig(hidden=(32, 32), batch_size=64, compile="on")
    agent = SAC(4, 2, cfg, torch.device("cpu"))
    assert agent._fused is not None
    obs, act = torch.randn(64, 4), torch.rand(64, 2) * 2 - 1
    rew, term = obs[:, 0].clone(), torch.ones(64)
    before = agent.critic.net[0].weight.detach().clone()
    batch = LearnerBatch.one_step(DeviceBatch(obs, act, rew, obs, term), cfg.gamma)
    first = agent.update(batch)
    for _ in range(300):
        last = agent.update(batch)
    assert last["critic_loss"] < 0.1 * first["critic_loss"]
    assert last["temperature"] != pytest.approx(first["temperature"])
    assert not torch.equal(before, agent.critic.net[0].weight)
    assert int(agent.optimizer_state()["actor"]["state"][0]["step"]) == 301


def test_auto_compiles_long_cpu_runs_of_one_graph_only(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    auto = SACConfig()
    assert auto.compile == "auto"
    assert resolve_compile(auto, AUTO_COMPILE_UPDATES, cpu, gripper=False).compile == "on"
    assert resolve_compile(auto, AUTO_COMPILE_UPDATES - 1, cpu, gripper=False).compile == "off"
    assert resolve_compile(auto, 10**6, cuda, gripper=False).compile == "off"
    assert resolve_compile(auto, 10**6, cpu, gripper=True).compile == "off"
    assert resolve_compile(auto, 10**6, cpu, gripper=False, robot=True).compile == "off"
    crossq = SACConfig(critic_norm="batch_renorm", target_network=False)
    assert resolve_compile(crossq, 10**6, cpu, gripper=False).compile == "off"
    # Asked for explicitly, either way, it stays as asked.
    assert resolve_compile(SACConfig(compile="on"), 1, cpu, gripper=False).compile == "on"
    assert resolve_compile(SACConfig(compile="off"), 10**6, cpu, gripper=False).compile == "off"
    monkeypatch.setenv("CXX", "no-such-compiler")
    monkeypatch.setenv("PATH", "")
    assert resolve_compile(auto, 10**6, cpu, gripper=False).compile == "off"


def test_a_config_saved_with_a_bool_compile_loads() -> None:
    """config.json of runs made before the auto mode hold ``"compile": false`` (``--resume``)."""
    assert config_from_json(SACConfig, {"compile": False}).compile == "off"
    assert config_from_json(SACConfig, {"compile": True}).compile == "on"
    assert SAC(OBS, ACT, SACConfig(hidden=(8,)), torch.device("cpu")).fused is False  # auto alone: off


def test_auto_falls_back_to_the_step_path_when_the_graph_does_not_compile(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``--sac.compile auto`` was not asked for: a compiler that fails costs speed, not the run. Asked
    for (``on``), the failure ends it with its traceback."""
    steps, fused = _pair()
    batch = _batch(1)

    def broken(*args: Any) -> Any:
        raise RuntimeError("C++ compile error: g++ not usable\nmore lines")

    assert fused._fused is not None
    fused._fused.graph = broken
    with pytest.raises(RuntimeError, match="C\\+\\+ compile error"):
        fused.update(batch)
    fused.eager_fallback = True
    # The compiled losses would meet the same compiler: the step path after the fall runs eagerly.
    fused._critic_loss_fn = fused._actor_loss_fn = broken
    for agent in (steps, fused):
        torch.manual_seed(6)
        agent.update(batch)
    assert not fused.fused
    assert "did not compile (C++ compile error: g++ not usable); updating step by step" in caplog.text
    _same_state(steps, fused)


def test_warm_up_compiles_ahead_and_changes_nothing_the_run_keeps() -> None:
    """A robot run compiles before its actor thread starts (SAC.warm_up): the call runs on copies,
    so parameters, Adam's state and the random generator are as before, and the first update then
    compiles nothing more."""
    from torch._dynamo.utils import counters

    torch.manual_seed(7)
    agent = SAC(OBS, ACT, SACConfig(hidden=(16, 16), batch_size=BATCH, compile="on"), torch.device("cpu"))
    params = {k: v.clone() for k, v in agent.state_dict().items()}
    rng = torch.get_rng_state()
    agent.warm_up()
    assert all(torch.equal(v, params[k]) for k, v in agent.state_dict().items())
    assert torch.equal(torch.get_rng_state(), rng)
    state = agent.optimizer_state()["critic"]["state"]
    assert all(int(s["step"]) == 0 and not s["exp_avg"].any() for s in state.values())
    compiled = counters["frames"]["ok"]
    agent.update(_batch(1))
    assert counters["frames"]["ok"] == compiled, "the first update compiled again"
    assert int(agent.optimizer_state()["critic"]["state"][0]["step"]) == 1
