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
    if cmd.excitation:  # system identification's recording, under record's name (issue 19)
        from robolearn.cli.sysid import SysidCmd, run_sysid

        cmd.check()
        amplitude = cmd.amplitude if cmd.amplitude is not None else (0.04 if cmd.ros else 0.8)
        excite = SysidCmd(
            cmd.task, record=cmd.dataset, ros=cmd.ros, episodes=cmd.episodes, amplitude=amplitude
        )
        excite.check()
        run_sysid(excite)
        return
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
