"""Registers the built-in policies (imported once by the registry)."""

from __future__ import annotations

from slurm_sched.policy.fifo import Fifo
from slurm_sched.policy.registry import register, register_class
from slurm_sched.policy.sjf import Sjf
from slurm_sched.policy.srtf import Srtf
from slurm_sched.policy.tiresias import TIRESIAS_SIM_THRESHOLDS_GPU_S, Tiresias

register_class(Fifo)
register_class(Sjf)
register_class(Srtf)
register_class(Tiresias)
register(
    "tiresias-3q",
    lambda: Tiresias(TIRESIAS_SIM_THRESHOLDS_GPU_S),
    paper=Tiresias.paper,
    summary="Tiresias with its own simulator's 3 queues (3,250 / 7,200 GPU-s), as in Muri",
)
