"""``robolearn record``: episodes driven from a device into a LeRobot dataset, with a live progress line."""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING

from robolearn.hil.config import RecordCmd

if TYPE_CHECKING:
    from robolearn.hil.record import Progress

__all__ = ["RecordCmd", "run_record"]


def run_record(cmd: RecordCmd) -> None:
    """``robolearn record``: a live progress line, then a summary line and one JSON object."""
    from tqdm import tqdm

    from robolearn.hil.record import record  # pyarrow: only when recording

    bar = tqdm(total=cmd.episodes, desc=f"record {cmd.task}", unit="ep", file=sys.stderr, dynamic_ncols=True)
    last = [0.0]

    def show(p: Progress) -> None:
        now = time.monotonic()
        if now - last[0] < 0.25 and p.saved == bar.n:
            return
        last[0] = now
        bar.update(p.saved - bar.n)
        bar.set_postfix(
            success=p.successes, step=f"{p.step}/{p.max_steps}", human="yes" if p.intervening else "no"
        )

    try:
        summary = record(cmd, show)
    finally:
        bar.close()
    print(
        f"{summary['task']}: {summary['episodes_saved']} episodes saved to {summary['out']} "
        f"({summary['successes']} successful, {summary['intervention_frames']} of {summary['frames']} "
        f"frames driven by the {summary['device']} device)" + (", stopped by quit" if summary["quit"] else "")
    )
    print(json.dumps(summary))
