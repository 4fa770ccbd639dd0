"""``robolearn dataset info | validate | merge``: inspect, check and merge demonstration datasets."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import tyro


@dataclass(frozen=True)
class DatasetInfoCmd:
    """Summarize a dataset: episodes, frames, tasks, features, successful episodes, interventions."""

    root: tyro.conf.Positional[Path]
    """Dataset folder (LeRobotDataset v3.0)."""


@dataclass(frozen=True)
class DatasetValidateCmd:
    """Check a dataset file by file; prints every problem and exits with code 2 if there is one."""

    root: tyro.conf.Positional[Path]
    """Dataset folder (LeRobotDataset v3.0)."""


@dataclass(frozen=True)
class DatasetMergeCmd:
    """Merge datasets with the same features and fps into a new one, re-indexing episodes and tasks."""

    sources: tyro.conf.Positional[tuple[Path, ...]]
    """Dataset folders, merged in this order."""
    out: Path
    """New dataset folder (must not exist or be empty)."""


@dataclass(frozen=True)
class DatasetCmd:
    """Inspect, check and merge demonstration datasets (LeRobotDataset v3.0 on disk)."""

    what: tyro.conf.OmitSubcommandPrefixes[
        Annotated[DatasetInfoCmd, tyro.conf.subcommand("info")]
        | Annotated[DatasetValidateCmd, tyro.conf.subcommand("validate")]
        | Annotated[DatasetMergeCmd, tyro.conf.subcommand("merge")]
    ]


def _print_summary(summary: Mapping[str, Any]) -> None:
    print(
        f"{summary['root']}: {summary['episodes']} episodes, {summary['frames']} frames "
        f"at {summary['fps']} Hz ({summary['robot_type']}), {len(summary['tasks'])} tasks, "
        f"{summary['bytes'] / 1e6:.1f} MB"
    )
    if "successful_episodes" in summary:
        print(f"    successful episodes: {summary['successful_episodes']} of {summary['episodes']}")
    if "intervention_frames" in summary:
        print(f"    frames a human drove: {summary['intervention_frames']}")
    features = ", ".join(f"{k}{v['shape']}" for k, v in summary["features"].items())
    print(f"    features: {features}")


def run_dataset(cmd: DatasetCmd) -> None:
    """``robolearn dataset info | validate | merge``; the last line printed is one JSON object."""
    # Imported here: ``robolearn --help`` must not import pyarrow.
    from robolearn.data.format import DatasetError
    from robolearn.data.merge import dataset_info, merge_datasets
    from robolearn.data.validate import check_dataset

    what = cmd.what
    if isinstance(what, DatasetInfoCmd):
        summary = dataset_info(what.root)
        _print_summary(summary)
        print(json.dumps(summary))
    elif isinstance(what, DatasetValidateCmd):
        found = check_dataset(what.root)
        for problem in found.problems:
            print(problem)
        for warning in found.warnings:
            print(f"warning: {warning}")
        if found.problems:
            raise DatasetError(f"{what.root}: {len(found.problems)} problem(s) found")
        summary = dataset_info(what.root)
        print(f"{what.root}: valid ({summary['episodes']} episodes, {summary['frames']} frames)")
        print(
            json.dumps(
                {
                    "root": str(what.root),
                    "valid": True,
                    "episodes": summary["episodes"],
                    "warnings": found.warnings,
                }
            )
        )
    else:
        out = merge_datasets(what.sources, what.out)
        summary = dataset_info(out)
        _print_summary(summary)
        print(json.dumps(summary))
