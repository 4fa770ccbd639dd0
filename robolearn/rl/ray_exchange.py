"""Actors and learner as Ray processes: the :class:`~robolearn.rl.actor_learner.Exchange` over a cluster.

Ray is the engine people already run on clusters (``ray start --head`` on the GPU workstation, the
robot computer joins with ``ray start --address``); see ``docs/distributed.md``. Three pieces:

- :class:`ExchangeHub`, one named, detached Ray actor per run that holds the pending transitions (a
  bounded queue) and the newest weights. Named by the run, so a learner restarted with ``--resume``
  finds the hub, and the actors that feed it, again.
- :class:`RayExchange`, both ends' view of the hub. Every remote call has a timeout (LeRobot's gRPC
  actor/learner hangs forever on a call without one, their issue 3979). A full queue refuses a
  send, and the actor waits and retries: back-pressure, so a fast actor cannot flood the learner.
  An actor that loses the hub (the learner's machine restarted) looks it up again by name.
- :class:`RayActors`, the learner's supervisor of N actor processes (``--actors N``), each with its
  own batched worlds and seed stream. An actor process that dies is restarted with a fresh seed
  stream; the episode it was in is dropped (transitions it already sent stay), and the restart is
  reported in the run's summary. Training on a robot (``--robot ros --exchange ray``), actor 0 is
  the robot's, pinned by a custom resource to the machine the robot is attached to, with the
  person's device and the run's dataset there; ``--sim-actors`` simulated actors may feed the same
  learner beside it.

Ray is an optional extra (``pip install robolearn[ray]``); the default exchange is in-process.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robolearn.errors import RobolearnError
from robolearn.rl.actor_learner import ActorRole, Transitions, Weights

log = logging.getLogger(__name__)

NAMESPACE = "robolearn"
"""Ray namespace of the hub and actors: a learner and actors started apart find each other in it."""

WORKER_NICENESS = {"worker_niceness": 0}
"""Ray's system setting for the processes it starts. Ray's default, 15, leaves an actor next to any
busy process of ordinary priority (the learner, the robot's drivers) about 3 % of a core: measured
on a loaded 2-core machine, a run's exchange took 67 s to start, where a robot's actor has a control
period to keep. A cluster started with ``ray start`` takes the same from ``RAY_worker_niceness=0`` in
its environment."""


class RayError(RobolearnError):
    """Ray is missing, its head cannot be reached, or a remote call did not answer in time."""


def import_ray() -> Any:
    """The ``ray`` module, or a clear error naming the extra to install."""
    try:
        import ray
    except ImportError:
        raise RayError(
            "--exchange ray needs Ray: install robolearn[ray] (pip install 'robolearn[ray]')"
        ) from None
    return ray


@dataclass(frozen=True)
class RaySettings:
    """Where the cluster is and how long a remote call may take."""

    address: str | None = None
    """``host:port`` of a running head (``ray start --head``), ``auto`` for the one on this machine, or
    None to start a local cluster for this run."""
    call_timeout: float = 30.0
    """Seconds any remote call may take before it counts as failed."""
    max_pending: int = 64
    """Transition messages the hub holds before it refuses more (back-pressure)."""
    send_every: int = 4
    """Actor steps an actor sends in one remote call."""
    connect_timeout: float = 5.0
    """Seconds to reach the head before giving up."""
    actor_resource: str | None = None
    """A custom resource each actor process needs, pinning actors to the machines that offer it."""
    robot_resource: str | None = None
    """The custom resource of the machine a robot is attached to, which the robot's actor needs; a
    local cluster started for the run offers one (the robot is attached to this machine)."""


def _check_head(address: str, timeout: float) -> None:
    """Fail fast on a head that is not there: Ray itself retries a missing head for a minute or more."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise RayError(f"--ray-address {address!r}: must be host:port (e.g. 192.168.1.10:6379) or auto")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as exc:
        raise RayError(
            f"Ray head {address} is unreachable ({exc.strerror or exc}): start it with "
            "`ray start --head --port PORT` on the learner's machine, or check --ray-address"
        ) from None


def connect(settings: RaySettings) -> Any:
    """Join the cluster at ``settings.address`` (or start a local one); returns the ``ray`` module."""
    ray = import_ray()
    if ray.is_initialized():
        return ray
    if settings.address not in (None, "auto"):
        _check_head(settings.address, settings.connect_timeout)
    try:
        if settings.address is None:
            resources = {settings.robot_resource: 1} if settings.robot_resource else None
            ray.init(
                namespace=NAMESPACE,
                include_dashboard=False,
                log_to_driver=False,
                resources=resources,
                _system_config=WORKER_NICENESS,
            )
        else:
            ray.init(address=settings.address, namespace=NAMESPACE, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RayError(f"cannot join the Ray cluster at {settings.address}: {first}") from None
    return ray


class ExchangeHub:
    """The state both ends share: pending transitions and the newest weights (a Ray actor's body).

    Weight versions are the hub's own, increasing across learner restarts, so an actor never takes
    a restarted learner's weights for old ones.
    """

    def __init__(self, max_pending: int) -> None:
        self.max_pending = max_pending
        self.pending: deque[Transitions] = deque()
        self.weights: tuple[int, Weights] | None = None
        self.version = 0
        self.incarnation = time.time_ns()
        self.refused = 0
        self.received: dict[str, int] = {}

    def offer(self, sender: str, items: list[Transitions]) -> bool:
        """Take ``items`` if the queue has room (always when it is empty); False asks to retry later."""
        if self.pending and len(self.pending) + len(items) > self.max_pending:
            self.refused += 1
            return False
        self.pending.extend(items)
        self.received[sender] = self.received.get(sender, 0) + sum(len(i.batch.reward) for i in items)
        return True

    def take(self, max_items: int) -> list[Transitions]:
        n = min(max_items, len(self.pending))
        return [self.pending.popleft() for _ in range(n)]

    def publish(self, weights: Weights) -> int:
        self.version += 1
        self.weights = (self.version, weights)
        return self.version

    def latest(self, incarnation: int, newer_than: int) -> tuple[int, int, Weights] | None:
        """The newest weights unless the caller has them (same hub, version not newer)."""
        if self.weights is None or (incarnation == self.incarnation and self.weights[0] <= newer_than):
            return None
        return self.incarnation, *self.weights

    def stats(self) -> dict[str, Any]:
        """Pending messages, refused sends, the weights' version and transitions received per sender."""
        return {
            "pending": len(self.pending),
            "refused_sends": self.refused,
            "version": self.version,
            "received": dict(self.received),
        }


class RayExchange:
    """The exchange through a hub named ``name``: a learner's or an actor's end (see the module doc)."""

    def __init__(self, name: str, settings: RaySettings, *, create: bool = False, sender: str = "") -> None:
        self.name = name
        self.sender = sender
        self.settings = settings
        self._create = create
        self._outbox: list[Transitions] = []
        self._seen = (0, 0)  # (hub incarnation, version) of the weights this end has
        self.blocked_seconds = 0.0
        """Time an actor spent waiting for room in the hub (back-pressure)."""
        self.stop_requested: Callable[[], bool] = lambda: False
        """Polled while waiting, so a waiting actor can still be stopped."""
        self._hub = self._find_hub()

    # -- finding the hub ----------------------------------------------------------------------
    def _find_hub(self) -> Any:
        ray = import_ray()
        if self._create:
            hub_cls = ray.remote(num_cpus=0, max_restarts=0)(ExchangeHub)
            return hub_cls.options(
                name=self.name, namespace=NAMESPACE, lifetime="detached", get_if_exists=True
            ).remote(self.settings.max_pending)
        deadline = time.monotonic() + self.settings.call_timeout
        while True:
            try:
                return ray.get_actor(self.name, namespace=NAMESPACE)
            except ValueError:
                if time.monotonic() > deadline or self.stop_requested():
                    raise RayError(
                        f"no learner's exchange {self.name!r} in the Ray cluster after "
                        f"{self.settings.call_timeout:.0f} s: is the learner running?"
                    ) from None
                time.sleep(0.2)

    def _call(self, method: str, *args: Any) -> Any:
        """One remote call with a timeout; a lost hub is looked up again (a learner restarted)."""
        ray = import_ray()
        from ray.exceptions import GetTimeoutError, RayActorError

        deadline = time.monotonic() + self.settings.call_timeout
        while True:
            try:
                ref = getattr(self._hub, method).remote(*args)
                return ray.get(ref, timeout=max(deadline - time.monotonic(), 0.1))
            except GetTimeoutError:
                raise RayError(
                    f"the exchange {self.name!r} did not answer {method} within "
                    f"{self.settings.call_timeout:.0f} s (--ray-timeout)"
                ) from None
            except RayActorError:
                if time.monotonic() > deadline:
                    raise RayError(f"the exchange {self.name!r} is gone and did not come back") from None
                log.warning("the exchange %s is gone; looking for it again", self.name)
                time.sleep(0.5)
                self._hub = self._find_hub()

    # -- the Exchange protocol ----------------------------------------------------------------
    def send_transitions(self, item: Transitions) -> None:
        self._outbox.append(item)
        if len(self._outbox) >= self.settings.send_every:
            self.flush()

    def flush(self) -> None:
        """Send what the actor holds, waiting (polling ``stop_requested``) while the hub is full."""
        delay = 0.01
        started = reported = time.monotonic()
        while self._outbox and not self._call("offer", self.sender, self._outbox):
            if self.stop_requested():
                break
            if time.monotonic() - reported > self.settings.call_timeout:
                # A learner that takes nothing (gone, to come back with --resume): wait, and say so.
                reported = time.monotonic()
                log.warning(
                    "%s: the learner has taken nothing for %.0f s; waiting", self.sender, reported - started
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.2)
        if delay > 0.01:  # it had to wait
            self.blocked_seconds += time.monotonic() - started
        self._outbox = []

    def receive_transitions(self, block: bool = False, timeout: float | None = None) -> list[Transitions]:
        deadline = time.monotonic() + (timeout if timeout is not None else self.settings.call_timeout)
        while True:
            items: list[Transitions] = self._call("take", 4 * self.settings.max_pending)
            if items or not block or time.monotonic() >= deadline:
                return items
            time.sleep(0.01)

    def publish_weights(self, version: int, weights: Weights) -> None:
        self._call("publish", weights)

    def latest_weights(self, newer_than: int) -> tuple[int, Weights] | None:
        got = self._call("latest", *self._seen)
        if got is None:
            return None
        incarnation, version, weights = got
        self._seen = (incarnation, version)
        return version, weights

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = self._call("stats")
        return out

    def shutdown(self) -> None:
        """End the hub (at the end of a run; a crashed learner leaves it for ``--resume``)."""
        import_ray().kill(self._hub)


ActorFactory = Callable[[RayExchange, int], ActorRole]
"""Builds, in an actor process, the actor role on its own environment from the exchange and a seed."""


class ActorProcess:
    """One actor process (a Ray actor's body): builds its role, then steps until told to stop."""

    def __init__(
        self,
        factory: ActorFactory,
        hub: str,
        settings: RaySettings,
        sender: str,
        seed: int,
        max_env_steps: int,
    ) -> None:
        self.exchange = RayExchange(hub, settings, sender=sender)
        self.role = factory(self.exchange, seed)
        self.max_env_steps = max_env_steps
        self.stopped = False
        self.running = False

    def run(self) -> int:
        """Act until stopped or the step budget is spent; returns the env steps taken. A second call
        (a restarted learner finding this actor) waits for the first instead of stepping twice."""
        if self.running:
            while self.running:
                time.sleep(0.1)
            return int(self.role.env_steps)
        self.running = True
        try:
            self.exchange.stop_requested = lambda: self.stopped
            while not self.stopped and self.role.env_steps < self.max_env_steps:
                self.role.step()
            self.exchange.flush()
        finally:
            self.running = False
        return int(self.role.env_steps)

    def stop(self) -> None:
        self.stopped = True

    def finish(self) -> dict[str, Any] | None:
        """Close the role's devices, dataset and environment (a robot's is held and left); returns the
        environment's report where it has one (a robot's: resets, overruns, pauses)."""
        role = self.role
        report: dict[str, Any] | None = role.env.report() if hasattr(role.env, "report") else None
        if role.interventions is not None:
            role.interventions.disconnect()
        if role.recorder is not None:
            role.recorder.close()
        role.env.close()
        return report

    def pid(self) -> int:
        return os.getpid()

    def niceness(self) -> int:
        return os.getpriority(os.PRIO_PROCESS, 0)


@dataclass
class ActorSlot:
    """The learner's record of one actor process."""

    index: int
    robot: bool = False
    """The robot's actor (pinned to the robot's machine) rather than a simulated one."""
    handle: Any = None
    run_ref: Any = None
    restarts: int = 0
    finished: bool = False
    env_steps: int = 0
    deaths: list[str] = field(default_factory=list)
    niceness: int | None = None
    """The process's niceness, once it has answered (see :data:`WORKER_NICENESS`)."""
    niceness_ref: Any = None


class RayActors:
    """N actor processes fed by ``factory``, supervised by the learner (see the module doc)."""

    def __init__(
        self,
        factory: ActorFactory,
        count: int,
        hub: str,
        settings: RaySettings,
        *,
        seed: int,
        max_env_steps: int,
        max_restarts: int = 10,
        robot: ActorFactory | None = None,
    ) -> None:
        """``count`` actors from ``factory``; with ``robot``, actor 0 is the robot's (built by it, on
        the machine with ``settings.robot_resource``) and the ``count`` others follow it."""
        self.ray = import_ray()
        self.factory, self.robot_factory, self.hub, self.settings = factory, robot, hub, settings
        self.seed, self.max_env_steps, self.max_restarts = seed, max_env_steps, max_restarts
        first = [ActorSlot(0, robot=True)] if robot is not None else []
        self.slots = first + [ActorSlot(len(first) + i) for i in range(count)]
        self.reports: dict[int, dict[str, Any] | None] = {}
        """What each actor's environment reported when the run ended (a robot's report)."""
        for slot in self.slots:  # before any is started
            resource = self._resource(slot)
            if resource and self.ray.cluster_resources().get(resource, 0) < 1:
                # Ray would keep the actor pending until such a machine joins: the run would wait forever.
                who = "the robot's actor" if slot.robot else "every actor"
                raise RayError(
                    f"no machine in the Ray cluster offers the resource {resource!r} that {who} needs: "
                    f"start Ray there with `ray start --address HEAD --resources '{{\"{resource}\": 1}}'`"
                )
        # All actors are started before any is waited for: their start-up (imports, environments)
        # overlaps.
        for slot in self.slots:
            self._start(slot, reuse=True)

    def _resource(self, slot: ActorSlot) -> str | None:
        """The custom resource pinning ``slot``'s process to its machines (None: anywhere)."""
        return self.settings.robot_resource if slot.robot else self.settings.actor_resource

    def _seed(self, slot: ActorSlot) -> int:
        """Each actor, and each restart of it, its own seed stream."""
        return int(np.random.SeedSequence([self.seed, slot.index, slot.restarts]).generate_state(1)[0])

    def _start(self, slot: ActorSlot, reuse: bool) -> None:
        cls = self.ray.remote(num_cpus=0, max_restarts=0)(ActorProcess)
        # Named and detached: a learner restarted with --resume finds its actors still running
        # (get_if_exists), instead of starting a second set.
        name = f"{self.hub}/actor-{slot.index}"
        resource = self._resource(slot)
        options = cls.options(
            name=name,
            namespace=NAMESPACE,
            lifetime="detached",
            get_if_exists=reuse,
            max_concurrency=2,  # stop() is answered while run() steps
            resources={resource: 1} if resource else None,
        )
        args = (
            self.robot_factory if slot.robot else self.factory,
            self.hub,
            self.settings,
            f"actor-{slot.index}",
            self._seed(slot),
            self.max_env_steps,
        )
        deadline = time.monotonic() + self.settings.call_timeout
        while True:
            try:
                slot.handle = options.remote(*args)
                break
            except ValueError:  # the dead actor's name is not released yet
                if time.monotonic() > deadline:
                    raise RayError(
                        f"cannot restart actor {slot.index}: its name {name} stays taken"
                    ) from None
                time.sleep(0.2)
        slot.run_ref = slot.handle.run.remote()
        # Answered once the process is built, beside run() (max_concurrency=2); read by supervise().
        slot.niceness_ref = slot.handle.niceness.remote()

    def _check_niceness(self, slot: ActorSlot) -> None:
        """Read ``slot``'s niceness once it has answered; say so here, where the person running the
        learner sees it, when Ray runs the process at a high one."""
        if slot.niceness_ref is None or not self.ray.wait([slot.niceness_ref], timeout=0)[0]:
            return
        from ray.exceptions import GetTimeoutError, RayActorError

        ref, slot.niceness_ref = slot.niceness_ref, None
        try:
            slot.niceness = int(self.ray.get(ref, timeout=self.settings.call_timeout))
        except (GetTimeoutError, RayActorError):  # died meanwhile: supervise() restarts and reports it
            return
        if slot.niceness > 0:
            who = "the robot's actor" if slot.robot else f"actor {slot.index}"
            log.warning(
                "%s runs at niceness %d (Ray's default for its workers): it loses the CPU to any busy "
                "process beside it; start Ray there with RAY_worker_niceness=0 (docs/distributed.md)",
                who,
                slot.niceness,
            )

    def supervise(self) -> list[int]:
        """Restart the actors whose process died; returns their indices (logged and counted). Also
        reads each new process's niceness (:meth:`_check_niceness`)."""
        from ray.exceptions import RayActorError, RayTaskError

        for slot in self.slots:
            self._check_niceness(slot)
        live = [s for s in self.slots if not s.finished]
        if not live:
            return []
        ready, _ = self.ray.wait([s.run_ref for s in live], num_returns=len(live), timeout=0)
        restarted = []
        for slot in live:
            if not any(r == slot.run_ref for r in ready):
                continue
            try:
                slot.env_steps += self.ray.get(slot.run_ref, timeout=self.settings.call_timeout)
                slot.finished = True
            except (RayActorError, RayTaskError) as exc:
                reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                slot.deaths.append(reason[:200])
                if isinstance(exc, RayTaskError) and not isinstance(exc, RayActorError):
                    # The actor's code failed: restarting would fail the same way.
                    cause = getattr(exc, "cause", None)
                    if isinstance(cause, RobolearnError):
                        raise RayError(f"actor {slot.index}: {cause}") from None
                    raise
                if slot.restarts >= self.max_restarts:
                    raise RayError(
                        f"actor {slot.index} died {slot.restarts + 1} times; last: {reason}"
                    ) from None
                slot.restarts += 1
                log.warning("actor %d died (%s): restarting it, its episode dropped", slot.index, reason)
                self._start(slot, reuse=False)
                restarted.append(slot.index)
        return restarted

    @property
    def all_finished(self) -> bool:
        return all(s.finished for s in self.slots)

    def handles(self) -> list[Any]:
        return [s.handle for s in self.slots]

    def report(self) -> dict[str, Any]:
        """For the run's summary: restarts per actor and why they died."""
        return {
            "actors": len(self.slots),
            "restarts": sum(s.restarts for s in self.slots),
            "per_actor": [
                {
                    "index": s.index,
                    "robot": s.robot,
                    "restarts": s.restarts,
                    "deaths": s.deaths,
                    "niceness": s.niceness,
                }
                for s in self.slots
            ],
        }

    def stop(self) -> None:
        """Ask every actor to stop and to close its devices, dataset and environment (collecting a
        robot's report), each within the call timeout, then end the processes."""
        from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

        refs = []
        for slot in self.slots:
            try:
                refs.append(slot.handle.stop.remote())
            except Exception:  # an actor already gone has nothing to stop
                log.debug("actor %d already gone", slot.index)
        if refs:
            self.ray.wait(refs, num_returns=len(refs), timeout=self.settings.call_timeout)
        for slot in self.slots:
            try:
                # run() returns once stopped: finish() then has the role to itself.
                self.ray.wait([slot.run_ref], timeout=self.settings.call_timeout)
                self.reports[slot.index] = self.ray.get(
                    slot.handle.finish.remote(), timeout=self.settings.call_timeout
                )
            except (GetTimeoutError, RayActorError, RayTaskError) as exc:
                log.warning("actor %d did not close cleanly: %s", slot.index, str(exc).splitlines()[0][:200])
            self.ray.kill(slot.handle)
