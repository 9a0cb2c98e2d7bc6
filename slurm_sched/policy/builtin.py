"""Registers the built-in policies (imported once by the registry).

The baselines are listed first, in this order. Every other module of this package (and of its
sub-packages) that defines a module-level ``POLICIES`` list is then imported in name order and
each entry registered. A ``POLICIES`` entry is a ``Policy`` subclass (registered under its
``name``) or a ``(name, factory, summary)`` tuple for a variant with other parameters. So a new
paper's module registers itself by declaring ``POLICIES``; no shared list needs editing.
"""

from __future__ import annotations

import importlib
import pkgutil

import slurm_sched.policy as _pkg
from slurm_sched.policy.base import Policy
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

_SKIP = {"base", "builtin", "registry", "placement", "queue_based", "fifo", "sjf", "srtf",
         "tiresias"}


def _discover() -> None:
    mods = sorted(
        m.name for m in pkgutil.walk_packages(_pkg.__path__, prefix=_pkg.__name__ + ".")
        if m.name.rsplit(".", 1)[-1] not in _SKIP
    )
    for name in mods:
        mod = importlib.import_module(name)
        for entry in getattr(mod, "POLICIES", ()):
            if isinstance(entry, type) and issubclass(entry, Policy):
                register_class(entry)
            else:
                pname, factory, summary = entry
                base = factory()
                register(pname, factory, paper=base.paper, summary=summary,
                         clairvoyant=base.clairvoyant)


_discover()
