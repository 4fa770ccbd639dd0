"""Folders whose files are listed, with size and SHA-256, in a manifest: checkpoints and policy exports.

A manifest must cover every file a loader reads: :func:`verify_manifest` takes the names the loader
needs and refuses a manifest that leaves one out (an empty ``{}`` verifies nothing, so it proves
nothing), an entry that is malformed, and any file that leaves the folder (``..``, an absolute path,
or a symlink elsewhere). Hashes prove only that nothing changed since the files were written; what
a loader may do with them is the loader's business (see ``docs/trust.md``).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from robolearn.data.files import ErrorType, inside, json_object, read_json
from robolearn.errors import CorruptFileError


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, read in chunks (replay buffers run to gigabytes)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_manifest(folder: Path, name: str) -> dict[str, Any]:
    """List every file of ``folder`` with its size and SHA-256 in ``folder/name``, fsync all; returns it."""
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.name != name)
    manifest = {p.name: {"sha256": file_sha256(p), "bytes": p.stat().st_size} for p in files}
    (folder / name).write_text(json.dumps(manifest, indent=1))
    for p in [*files, folder / name]:
        fsync_file(p)
    return manifest


def verify_manifest(
    folder: Path, name: str, required: Iterable[str], what: str, error: ErrorType = CorruptFileError
) -> dict[str, dict[str, Any]]:
    """Check ``folder/name`` covers ``required`` and every listed file matches it; returns the manifest.

    ``what`` names the folder's kind in messages (``checkpoint``)."""
    path = inside(folder, name, error)
    expected = "a manifest: an object of file name to {sha256, bytes}"
    manifest = json_object(read_json(path, expected, error), path)
    missing = [r for r in required if r not in manifest]
    if missing:
        raise error(
            f"{path}: lists no {', '.join(missing)}; a manifest must cover every file that is read "
            f"(it lists {', '.join(manifest) or 'nothing'})"
        )
    for file, entry in manifest.items():
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("sha256"), str)
            and isinstance(entry.get("bytes"), int)
            and not isinstance(entry.get("bytes"), bool)
        ):
            raise error(f"{path}: entry {file!r} should be {{\"sha256\": string, \"bytes\": integer}}")
        member = inside(folder, file, error)
        if member.is_symlink():
            raise error(f"{member}: is a symbolic link; files of {folder} are read only as plain files")
        if not member.is_file():
            raise error(f"{member}: missing (listed in {path.name})")
        if member.stat().st_size != entry["bytes"] or file_sha256(member) != entry["sha256"]:
            raise error(f"{what} {folder}: {file} does not match its manifest (truncated or modified)")
    return manifest
