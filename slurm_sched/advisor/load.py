"""The accounting reader the ``advise`` command uses: ``slurm_sched.traces.sacct``."""

from __future__ import annotations

from slurm_sched.advisor.sources import Reader
from slurm_sched.traces.sacct import (  # type: ignore[import-not-found, unused-ignore]
    read_sacct,
    sacct_argv,
)

READER = Reader(read=read_sacct, argv=sacct_argv)
