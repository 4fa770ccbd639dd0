"""``robolearn export``: write a run's policy to a self-contained folder and say what it holds."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import tyro


@dataclass(frozen=True)
class ExportCmd:
    """Export a trained policy to a self-contained folder: TorchScript (and optionally ONNX) plus metadata.

    The folder loads with ``robolearn.policy.export.load_exported`` without the learner or a simulator.
    """

    run: tyro.conf.Positional[Annotated[Path, tyro.conf.arg(metavar="RUN")]]
    """Run folder (or checkpoint) of a trained or distilled policy."""
    out: Path | None = None
    """Policy folder to write (default: ``policy`` inside the run folder)."""
    onnx: bool = False
    """Also write ``policy.onnx`` (needs the onnx package)."""
    force: bool = False
    """Replace an existing policy folder."""


def run_export(cmd: ExportCmd) -> None:
    """The ``export`` subcommand: write the folder, print what it holds (last line JSON)."""
    # torch: only when exporting
    from robolearn.policy.export import export_policy
    from robolearn.policy.meta import brackets, read_meta
    from robolearn.policy.pixel_export import PIXEL_POLICY_CONFIG

    if (cmd.run / PIXEL_POLICY_CONFIG).is_file():  # a DrQ run of a task with cameras (issue 13)
        out = export_pixel_run(cmd)
    else:
        out = export_policy(cmd.run, cmd.out or cmd.run / "policy", onnx=cmd.onnx, force=cmd.force)
    meta = read_meta(out)
    obs = ", ".join(f"{t.name}{brackets(t.shape)} {t.units}" for t in meta.obs)
    print(f"{meta.task} [{meta.embodiment}] policy from {cmd.run} -> {out}")
    print(f"    observation: {obs}")
    for c in meta.cameras:
        print(f"    camera:      {c.name} ({c.camera}) {c.height}x{c.width} {c.encoding}")
    print(f"    action:      {', '.join(meta.action_names)} at {meta.control_hz:g} Hz")
    for name, digest in meta.files.items():
        print(f"    {name}  sha256 {digest}")
    print(json.dumps({"policy": str(out), "task": meta.task, "files": dict(meta.files)}))


def export_pixel_run(cmd: ExportCmd) -> Path:
    """Export a pixel training run again (its ``pixel_policy.safetensors``), ONNX included with --onnx."""
    from robolearn.policy.pixel_export import export_pixel_policy, load_pixel_policy

    policy, task_cfg = load_pixel_policy(cmd.run)
    out = cmd.out or cmd.run / "policy"
    return export_pixel_policy(policy, task_cfg, out, onnx=cmd.onnx, source=str(cmd.run), force=cmd.force)
