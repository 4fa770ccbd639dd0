"""Process supervision: start a launch's processes, prefix their output, stop them all in stages."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any, TextIO

from robolearn.hardware.ros.launch.plan import LaunchError, LaunchProcess

LINE_BYTES = 64 * 1024
"""Longest piece of a process's output line copied at once: a process that writes without newlines
costs the launcher this much memory, not all it wrote; a longer line comes out in pieces, each
prefixed, the continued ones marked."""


def _pump(stream: IO[bytes], label: str, out: TextIO, lock: threading.Lock) -> None:
    """Copy a process's output line by line, each prefixed with its label."""
    continued = False
    for raw in iter(lambda: stream.readline(LINE_BYTES), b""):
        line = raw.decode(errors="replace").rstrip("\n")
        with lock:
            out.write(f"[{label}] {'... ' if continued else ''}{line}\n")
            out.flush()
        continued = not raw.endswith(b"\n")
    stream.close()


def _exit_code(returncode: int) -> int:
    """A shell's convention for a process ended by a signal: 128 + the signal number."""
    return 128 - returncode if returncode < 0 else returncode


def run_processes(
    processes: Sequence[LaunchProcess],
    *,
    sigterm_timeout: float = 5.0,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Start the processes and wait. Stops them all on SIGINT/SIGTERM or when a process marked
    ``shutdown_on_exit`` exits: SIGINT first (rclpy nodes shut down cleanly on it), SIGTERM after
    ``sigterm_timeout`` seconds, SIGKILL as long again after that; a second signal escalates at
    once. Returns the exit code of the process that ended the launch, 128 + the signal's number
    when a signal did, otherwise the first non-zero exit code (0 when every process succeeded)."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    lock = threading.Lock()
    running: list[tuple[LaunchProcess, subprocess.Popen[bytes]]] = []
    pumps: list[threading.Thread] = []
    signals: list[int] = []

    def say(message: str) -> None:
        with lock:
            err.write(f"[launch] {message}\n")
            err.flush()

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, lambda signum, frame: signals.append(signum))
    try:
        for spec in processes:
            try:
                # Own session: a terminal's Ctrl-C reaches the launcher only, which stops the nodes in order.
                proc = subprocess.Popen(
                    spec.cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env={**spec.env, "PYTHONUNBUFFERED": "1"},
                    cwd=spec.cwd,
                    start_new_session=True,
                )
            except OSError as exc:
                _supervise(running, signals, sigterm_timeout, say, stop=True)
                raise LaunchError(f"cannot start {spec.label} ({spec.cmd[0]}): {exc.strerror}") from None
            running.append((spec, proc))
            say(f"{spec.label} started, pid {proc.pid}")
            for stream, sink in ((proc.stdout, out), (proc.stderr, err)):
                assert stream is not None
                pump = threading.Thread(target=_pump, args=(stream, spec.label, sink, lock), daemon=True)
                pump.start()
                pumps.append(pump)
        return _supervise(running, signals, sigterm_timeout, say)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        for pump in pumps:
            pump.join(timeout=2.0)


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)


def _supervise(
    running: Sequence[tuple[LaunchProcess, subprocess.Popen[bytes]]],
    signals: list[int],
    sigterm_timeout: float,
    say: Callable[[str], None],
    *,
    stop: bool = False,
) -> int:
    """Wait for the processes; stop them all in stages once asked to (see ``run_processes``)."""
    result: int | None = None
    first_failure = 0
    exited: set[int] = set()
    stage = 0
    next_stage_at = float("inf")
    seen_signals = 0

    def escalate() -> None:
        nonlocal stage, next_stage_at
        sig = _STOP_SIGNALS[min(stage, len(_STOP_SIGNALS) - 1)]
        stage += 1
        next_stage_at = time.monotonic() + sigterm_timeout
        for _, proc in running:
            if proc.pid not in exited:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, sig)

    if stop:
        escalate()
    while True:
        for spec, proc in running:
            code = proc.poll()
            if code is None or proc.pid in exited:
                continue
            exited.add(proc.pid)
            say(f"{spec.label} exited with code {_exit_code(code)}")
            if stage == 0:
                first_failure = first_failure or _exit_code(code)
                if spec.shutdown_on_exit:
                    say(f"{spec.label} has on_exit=shutdown: stopping the others")
                    result = _exit_code(code)
                    escalate()
        if len(exited) == len(running):
            break
        if len(signals) > seen_signals:
            seen_signals = len(signals)
            if result is None:
                result = 128 + signals[-1]
            escalate()
        elif stage and time.monotonic() >= next_stage_at:
            escalate()
        time.sleep(0.02)
    return result if result is not None else first_failure
