"""slurm_sched: research scheduling policies for deep-learning jobs on Slurm, plus a simulator.

The package is organised around one pure policy API (:mod:`slurm_sched.policy.base`) and two
backends behind one interface (:mod:`slurm_sched.backend`): the trace-driven simulator
(:mod:`slurm_sched.sim`) and the live Slurm cluster (:mod:`slurm_sched.slurm`).
"""

from slurm_sched import native as _native

__version__ = "0.1.0"

# compiled hot modules, when an up-to-date build is there (see slurm_sched.native)
_native.install()
