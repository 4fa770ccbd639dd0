"""The ``robolearn`` command: one entry point, one module per subcommand, dispatched from one table.

Options come from typed dataclasses; each field's docstring is its ``--help`` text. Only the module
of the subcommand being run is imported (``robolearn --help`` reads every subcommand's options, so
those modules import neither torch nor pyarrow at the top; their run functions import what they
need). Bad input, a :class:`robolearn.errors.RobolearnError` or an OS error about the user's paths,
ends in one line on stderr and exit code 2; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import importlib
import io
import logging
import re
import sys
from collections.abc import Callable, Sequence
from typing import Annotated, Any, NamedTuple, NoReturn, Union

import tyro

from robolearn.errors import RobolearnError


class Subcommand(NamedTuple):
    """Where a subcommand lives: its module, its options dataclass and its run function."""

    module: str
    cmd: str
    run: str


COMMANDS: dict[str, Subcommand] = {
    "train": Subcommand("robolearn.cli.train", "TrainCfg", "run_train"),
    "tasks": Subcommand("robolearn.cli.tasks", "TasksCmd", "run_tasks"),
    "robots": Subcommand("robolearn.cli.robots", "RobotsCmd", "run_robots"),
    "eval": Subcommand("robolearn.cli.eval", "EvalCmd", "run_eval"),
    "bench": Subcommand("robolearn.cli.bench", "BenchCmd", "run_bench"),
    "distill": Subcommand("robolearn.cli.distill", "DistillCmd", "run_distill"),
    "export": Subcommand("robolearn.cli.export", "ExportCmd", "run_export"),
    "dataset": Subcommand("robolearn.cli.dataset", "DatasetCmd", "run_dataset"),
    "launch": Subcommand("robolearn.cli.launch", "LaunchCmd", "run_launch"),
    "record": Subcommand("robolearn.cli.record", "RecordCmd", "run_record"),
    "reward": Subcommand("robolearn.cli.reward", "RewardCmd", "run_reward"),
    "sysid": Subcommand("robolearn.cli.sysid", "SysidCmd", "run_sysid"),
}
"""Every subcommand, in the order ``robolearn --help`` lists them."""

USER_ERRNOS = frozenset(
    {
        errno.ENOSPC,
        errno.EDQUOT,
        errno.EFBIG,
        errno.EROFS,
        errno.EACCES,
        errno.EPERM,
        errno.ENAMETOOLONG,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.EEXIST,
        errno.ENOENT,
        errno.ENOTEMPTY,
        errno.ELOOP,
    }
)
"""OS errors that describe the user's paths or disk (full, read-only, missing, a file where a folder
belongs), not the program: reported in one line naming the path, exit 2 (issue 15)."""

log = logging.getLogger("robolearn")


def _load(name: str) -> tuple[type[Any], Callable[[Any], int | None]]:
    entry = COMMANDS[name]
    module = importlib.import_module(entry.module)
    return getattr(module, entry.cmd), getattr(module, entry.run)


def _one_line(text: str) -> str:
    """Condense tyro's boxed error report to its message."""
    lines = []
    for raw in text.splitlines():
        line = re.sub(r"[│╭╮╰╯─┃━┏┓┗┛]+", " ", raw).strip()
        if line.startswith("Argument helptext:"):  # the option's help follows: not part of the error
            break
        if line and not line.startswith("For full helptext") and not re.fullmatch(r"[\w ]+", line):
            lines.append(line)
    return " ".join(lines) or text.strip()


def _fail(message: str) -> NoReturn:
    print(f"robolearn: error: {' '.join(message.split())}", file=sys.stderr)
    raise SystemExit(2)


def _parse(spec: Any, prog: str, args: Sequence[str]) -> Any:
    """tyro's parse; a usage error becomes one line and exit 2, ``--help`` passes through."""
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            return tyro.cli(spec, prog=prog, args=args, config=(tyro.conf.OmitSubcommandPrefixes,))
    except SystemExit as exc:
        if exc.code not in (0, None):
            _fail(_one_line(captured.getvalue()))
        sys.stderr.write(captured.getvalue())
        raise


def _all_commands() -> Any:
    """The union of every subcommand, for the top-level help and usage errors."""
    options = tuple(Annotated[_load(name)[0], tyro.conf.subcommand(name)] for name in COMMANDS)
    return Union[options]  # noqa: UP007 (a union built at run time)


def _os_error(exc: OSError, cmd: Any) -> str:
    """One line naming the path of an OS error (the command's output folder when the OS names none)."""
    paths = [str(p) for p in (exc.filename, exc.filename2) if p is not None]
    if not paths and getattr(cmd, "out", None) is not None:
        paths = [f"while writing under {cmd.out}"]
    reason = exc.strerror or str(exc)
    return f"{reason}: {' -> '.join(paths)}" if paths else reason


def _named(cmd: Any, group: str, args: Sequence[str]) -> tuple[str, ...]:
    """The fields of ``cmd``'s option group ``group`` named in ``args`` (``--sac.demo-fraction 0.5``,
    ``--sac.no-layer-norm``): which settings the command line gave, whatever their values."""
    fields = {f.name for f in dataclasses.fields(getattr(cmd, group))}
    named = []
    for arg in args:
        if arg.startswith(f"--{group}."):
            name = arg[len(group) + 3 :].split("=", 1)[0].replace("-", "_")
            named.append(name[3:] if name not in fields and name.startswith("no_") else name)
    return tuple(n for n in dict.fromkeys(named) if n in fields)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``robolearn`` console command."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in COMMANDS:
        spec, run = _load(args[0])
        cmd = _parse(spec, f"robolearn {args[0]}", args[1:])
    else:  # the top-level help, or a usage error: tyro needs every subcommand's options
        cmd = _parse(_all_commands(), "robolearn", args)
        run = next(fn for spec, fn in map(_load, COMMANDS) if isinstance(cmd, spec))
    if hasattr(cmd, "sac_given"):  # robolearn train --init-from takes the --sac.* settings named here
        cmd = dataclasses.replace(cmd, sac_given=_named(cmd, "sac", args))
    try:
        check = getattr(cmd, "check", None)
        if check is not None:
            check()  # every option checked where it enters, before anything runs
        code = run(cmd)
    except RobolearnError as exc:
        _fail(str(exc))
    except OSError as exc:
        if exc.errno not in USER_ERRNOS:
            raise
        _fail(_os_error(exc, cmd))
    if code:
        raise SystemExit(code)
