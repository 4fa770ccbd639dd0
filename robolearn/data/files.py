"""Files that survive crashes and say when they are damaged: atomic writes, SHA-256, checked reads.

Generic on purpose (datasets, checkpoints and policy exports use it): nothing here knows what a
dataset is. Every reader raises ``error`` (a :class:`~robolearn.errors.CorruptFileError` subclass
the caller picks) with a one-line message that starts with the file's path.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from robolearn.errors import CorruptFileError

ErrorType = type[CorruptFileError]

_PICKLE_PROTOCOL = 0x80
"""First byte of a pickle (protocol 2 and later)."""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def atomic_write(path: Path, data: bytes) -> str:
    """Write bytes under a temporary name, fsync, rename into place; returns their SHA-256.

    A reader sees the old file or the new one, never half of one, whenever the writer dies.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return sha256(data)


def json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, indent=4, ensure_ascii=False).encode()


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (or its type), for one-line reports."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def inside(root: Path, relative: str | Path, error: ErrorType = CorruptFileError) -> Path:
    """``root / relative``, refused unless it stays inside ``root`` once resolved.

    A path taken from a file (a template, a pointer, a manifest entry) must not reach outside the
    folder it belongs to: absolute paths, ``..`` and symlinks that lead elsewhere are refused.
    """
    rel = Path(relative)
    if rel.is_absolute() or not str(relative):
        raise error(f"{root}: path {str(relative)!r} must be relative to this folder")
    path = Path(root) / rel
    base = Path(root).resolve()
    resolved = path.resolve()
    if resolved != base and not resolved.is_relative_to(base):
        raise error(f"{path}: leads outside {root} (to {resolved}); only files inside it are read or written")
    return path


def check_bytes(
    path: Path, data: bytes, expected: Mapping[str, Any] | None, error: ErrorType = CorruptFileError
) -> None:
    """Compare a file's bytes with the size and SHA-256 recorded when it was written."""
    if expected is None:
        return
    if len(data) != expected["bytes"]:
        raise error(f"{path}: {len(data)} bytes where {expected['bytes']} were written (truncated?)")
    if sha256(data) != expected["sha256"]:
        raise error(f"{path}: contents do not match the SHA-256 recorded when it was written")


def read_bytes(
    path: Path, expected: Mapping[str, Any] | None = None, error: ErrorType = CorruptFileError
) -> bytes:
    """A file's bytes, checked against its recorded hash and size when there is one."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise error(f"{path}: missing") from None
    except OSError as exc:
        raise error(f"{path}: cannot be read ({exc.strerror or exc})") from None
    check_bytes(path, data, expected, error)
    return data


def read_json(path: Path, what: str = "a JSON document", error: ErrorType = CorruptFileError) -> Any:
    """A JSON file; ``what`` says what it should hold, for the message when it does not.

    Never unpickles: a pickle (or any other binary) is reported as such, naming the file.
    """
    data = read_bytes(path, None, error)
    if data[:1] == bytes([_PICKLE_PROTOCOL]):
        raise error(f"{path}: is a Python pickle, not JSON; it should be {what} (pickles are never loaded)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise error(f"{path}: is binary, not UTF-8 JSON text; it should be {what}") from None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise error(f"{path}: not readable JSON ({first_line(exc)}); it should be {what}") from None


def json_object(
    value: Any, path: Path, where: str = "", error: ErrorType = CorruptFileError
) -> dict[str, Any]:
    """``value`` if it is a JSON object, else a one-line error naming the file and where in it."""
    if not isinstance(value, dict):
        at = f" {where}" if where else ""
        raise error(f"{path}:{at} is a JSON {_json_type(value)} where an object was expected")
    return value


def json_field(
    obj: Mapping[str, Any],
    key: str,
    kind: type | tuple[type, ...],
    path: Path,
    where: str = "",
    error: ErrorType = CorruptFileError,
) -> Any:
    """``obj[key]`` if present and of type ``kind`` (bool is not a number here), else a one-line error."""
    at = f"{where}." if where else ""
    if key not in obj:
        raise error(f"{path}: {at}{key} is missing")
    value = obj[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        allowed = " or ".join(_json_type_name(k) for k in kinds)
        raise error(f"{path}: {at}{key} is a JSON {_json_type(value)}; it should be {allowed}")
    return value


_TYPE_NAMES = {dict: "object", list: "array", str: "string", int: "integer", float: "number", bool: "boolean"}


def _json_type_name(kind: type) -> str:
    return _TYPE_NAMES.get(kind, kind.__name__)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return _TYPE_NAMES.get(type(value), type(value).__name__)
