"""Range checks for options, shared by every config's ``check()``.

Each check raises :class:`robolearn.errors.ConfigError` with one line that names the option, the
value given and what is allowed, so ``--sac.gamma inf`` or ``--num-envs 1000000000`` is refused
where it enters (issue 15) instead of failing deep inside training, or silently running.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from robolearn.errors import ConfigError, CorruptFileError

SEED_MAX = 2**32 - 1
"""Largest seed: NumPy's legacy and Gymnasium's seeding take 32-bit seeds."""
MAX_THREADS = 1_024
"""Most CPU threads an option may ask torch or a simulator for."""


def _num(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


def _interval(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    if high is None:
        assert low is not None
        return f"greater than {_num(low)}" if low_open else f"at least {_num(low)}"
    if low is None:
        return f"less than {_num(high)}" if high_open else f"at most {_num(high)}"
    return f"in {'(' if low_open else '['}{_num(low)}, {_num(high)}{')' if high_open else ']'}"


def check_range(
    option: str,
    value: float | None,
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
    allow_none: bool = False,
) -> None:
    """Refuse ``value`` unless it is finite and within [low, high] (ends open where asked)."""
    if value is None:
        if allow_none:
            return
        raise ConfigError(f"{option} needs a value, {_interval(low, high, low_open, high_open)}")
    allowed = _interval(low, high, low_open, high_open)
    if isinstance(value, bool) or not math.isfinite(value):
        raise ConfigError(f"{option} {value}: must be a finite number {allowed}")
    below = low is not None and (value <= low if low_open else value < low)
    above = high is not None and (value >= high if high_open else value > high)
    if below or above:
        raise ConfigError(f"{option} {value}: must be {allowed}")


def check_widths(option: str, widths: tuple[int, ...], high: int = 65_536) -> None:
    """Layer widths: at least one, each in [1, high]."""
    if not widths:
        raise ConfigError(f"{option}: give at least one layer width, each in [1, {high}]")
    for w in widths:
        if not 1 <= w <= high:
            raise ConfigError(f"{option} {' '.join(map(str, widths))}: every width must be in [1, {high}]")


def check_step_window(option: str, window: tuple[int, int] | None) -> None:
    """Refuse a window of control steps [start, stop) that is not two steps with 0 <= start < stop."""
    if window is not None and not 0 <= window[0] < window[1]:
        raise ConfigError(f"{option} {window[0]} {window[1]}: must be two steps with 0 <= start < stop")


def check_seed(option: str, seed: int) -> None:
    """A seed NumPy, torch and Gymnasium all accept."""
    check_range(option, seed, 0, SEED_MAX)


def check_threads(option: str, threads: int) -> None:
    """A thread count where 0 keeps the library's default."""
    check_range(option, threads, 0, MAX_THREADS)


def physical_memory() -> int:
    """Bytes of RAM this machine has (what an allocation is measured against)."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def check_memory(option: str, value: int, needed: int) -> None:
    """Refuse an option whose allocation (``needed`` bytes, a lower bound) exceeds this machine's RAM."""
    have = physical_memory()
    if needed > have:
        raise ConfigError(
            f"{option} {value}: needs at least {_bytes(needed)} of memory; this machine has {_bytes(have)}"
        )


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024:
            return f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:  # a name too long, for one: not there, and reported by name below
        return False


def check_output_dir(option: str, path: Path) -> None:
    """A folder to write into (it may exist): not a file, names the filesystem allows, writable.

    The probe writes and removes a temporary folder in the nearest existing ancestor, which tells the
    truth for read-only mounts and for root alike (``os.access`` does not).
    """
    path = Path(path)
    anchor = path.absolute()
    while not _exists(anchor) and anchor != anchor.parent:
        anchor = anchor.parent
    if not anchor.is_dir():
        what = "a file" if anchor == path.absolute() else f"under {anchor}, which is a file"
        raise ConfigError(f"{option} {path}: is {what}; give a folder")
    name_max = os.pathconf(anchor, "PC_NAME_MAX")
    path_max = os.pathconf(anchor, "PC_PATH_MAX")
    for part in path.absolute().parts:
        if len(os.fsencode(part)) > name_max:
            raise ConfigError(
                f"{option}: the name {part[:40]}... is {len(os.fsencode(part))} bytes; "
                f"this filesystem allows at most {name_max}"
            )
    if len(os.fsencode(str(path.absolute()))) >= path_max:
        raise ConfigError(f"{option}: the path is longer than this filesystem's {path_max} bytes")
    try:
        shutil.rmtree(tempfile.mkdtemp(prefix=".robolearn-write-check-", dir=anchor))
    except OSError as exc:
        raise ConfigError(f"{option} {path}: cannot write in {anchor} ({exc.strerror})") from None


def run_of(path: Path) -> Path:
    """The run folder of ``path``: ``path`` itself, or the run that holds it where ``path`` is one of
    its checkpoints (``RUN/checkpoints/ckpt-...``), whose settings are the run's."""
    path = Path(path)
    if not _exists(path / "config.json") and path.parent.name == "checkpoints":
        return path.parent.parent
    return path


def check_run_dir(
    option: str, path: Path, task: str | None = None, checkpoint_ok: bool = False
) -> dict[str, Any]:
    """The settings in a ``robolearn train`` run's folder (the one holding ``config.json`` and
    ``checkpoints/``), of ``task`` where given: the one reader of a run's ``config.json``, called
    before any work that would be wasted on a wrong path. With ``checkpoint_ok`` ``path`` may be one
    of the run's checkpoints (:func:`run_of`). A folder without one is a wrong path
    (:class:`ConfigError`); one that cannot be read as an object of settings is damaged
    (:class:`CorruptFileError`)."""
    run = run_of(path) if checkpoint_ok else Path(path)
    if run != Path(path) and not Path(path).is_dir():
        # As robolearn.rl.checkpoint.checkpoints lists them (that module loads torch; this one must not).
        held = sorted(p.name for p in Path(path).parent.glob("ckpt-*") if p.is_dir())
        raise ConfigError(f"{option} {path}: no such checkpoint; the run holds {', '.join(held) or 'none'}")
    config = run / "config.json"
    if not _exists(config):
        checkpoint = " (or one of its checkpoints, RUN/checkpoints/ckpt-...)" if checkpoint_ok else ""
        raise ConfigError(
            f"{option} {path}: not a training run's folder (no config.json in it); give the folder "
            f"robolearn train wrote, the one that holds config.json and checkpoints/{checkpoint}"
        )
    try:
        saved = json.loads(config.read_text())
    except (OSError, ValueError) as exc:  # ValueError: not JSON, or not UTF-8
        raise CorruptFileError(
            f"{option} {path}: config.json is unreadable ({type(exc).__name__}: {exc})"
        ) from None
    if not isinstance(saved, dict):
        raise CorruptFileError(f"{option} {path}: config.json holds no object of settings")
    if task is not None and saved.get("task") != task:
        raise ConfigError(f"{option} {path}: a run of task {saved.get('task')}, not {task}")
    return saved
