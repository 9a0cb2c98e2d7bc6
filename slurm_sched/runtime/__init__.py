"""The job side of the scheduler: what a PyTorch training job on a Slurm node runs.

- :class:`~slurm_sched.runtime.session.TrainingSession` (needs torch): applies the scheduler's
  settings (gradient accumulation, execution plan, Muri interleaving), checkpoints on the
  preemption signal and resumes at the same step, reports progress;
- ``python -m slurm_sched.runtime.launch -- <script> <args>``: starts one worker per GPU of the
  node (gloo on CPU) and forwards the preemption signals;
- ``python -m slurm_sched.runtime.train``: the example training job of ``sbatch_templates``;
- ``slurm-sched profile`` (:mod:`~slurm_sched.runtime.profile_cli`): measures iteration time,
  memory and interference; :mod:`~slurm_sched.runtime.profile` reads the file it writes.

See ``docs/runtime.md``. Importing this package does not import torch; the torch-based names
below are loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["EXIT_PREEMPTED", "JobContext", "JobPreempted", "TrainingSession", "load_job_context"]

_LAZY = {
    "TrainingSession": "slurm_sched.runtime.session",
    "JobPreempted": "slurm_sched.runtime.session",
    "EXIT_PREEMPTED": "slurm_sched.runtime.session",
    "JobContext": "slurm_sched.runtime.job",
    "load_job_context": "slurm_sched.runtime.job",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
