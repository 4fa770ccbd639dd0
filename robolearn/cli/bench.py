"""``robolearn bench``: benchmarks measured side by side in one run, printed as a table and JSON."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Annotated

import tyro

from robolearn.bench.config import (
    DeployBenchCfg,
    FinetuneBenchCfg,
    LearnBenchCfg,
    SimBenchCfg,
    SysidBenchCfg,
    TransferBenchCfg,
)


@dataclass(frozen=True)
class BenchCmd:
    """Benchmarks, measured side by side in one run; the last line is one JSON object."""

    what: tyro.conf.OmitSubcommandPrefixes[
        Annotated[SimBenchCfg, tyro.conf.subcommand("sim")]
        | Annotated[LearnBenchCfg, tyro.conf.subcommand("learn")]
        | Annotated[DeployBenchCfg, tyro.conf.subcommand("deploy")]
        | Annotated[TransferBenchCfg, tyro.conf.subcommand("transfer")]
        | Annotated[SysidBenchCfg, tyro.conf.subcommand("sysid")]
        | Annotated[FinetuneBenchCfg, tyro.conf.subcommand("finetune")]
    ]

    def check(self) -> None:
        """The chosen benchmark's option ranges."""
        self.what.check()


def _say(msg: str) -> None:
    print(msg, file=sys.stderr)


def run_bench(cmd: BenchCmd) -> None:
    """Run the chosen benchmark with progress on stderr; print its table, then its summary as JSON."""
    what = cmd.what
    if isinstance(what, SimBenchCfg):
        from robolearn.bench.report import format_table
        from robolearn.bench.sim import run_sim_bench

        rows, summary = run_sim_bench(what, progress=_say)
        print(format_table(rows))
    elif isinstance(what, LearnBenchCfg):
        from robolearn.bench.learn import format_learn_table, run_learn_bench

        rows, summary = run_learn_bench(what, progress=_say)
        print(format_learn_table(rows))
    elif isinstance(what, DeployBenchCfg):
        from robolearn.bench.deploy import format_deploy_table, run_deploy_bench

        rows, summary = run_deploy_bench(what, progress=_say)
        print(format_deploy_table(rows))
    elif isinstance(what, FinetuneBenchCfg):
        from robolearn.bench.finetune import format_finetune_table, run_finetune_bench

        rows, summary = run_finetune_bench(what, progress=_say)
        print(format_finetune_table(rows))
    elif isinstance(what, SysidBenchCfg):
        from robolearn.bench.sysid import format_sysid_table, run_sysid_bench

        rows, summary = run_sysid_bench(what, progress=_say)
        print(format_sysid_table(rows))
    else:
        from robolearn.bench.transfer import format_transfer_table, run_transfer_bench

        rows, summary = run_transfer_bench(what, progress=_say)
        print(format_transfer_table(rows))
    print(json.dumps(summary))
