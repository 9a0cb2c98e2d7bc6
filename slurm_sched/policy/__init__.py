"""Scheduling policies: one module per paper or baseline, all behind :class:`Policy`.

Find a policy by name with :func:`slurm_sched.policy.registry.create`.
"""

from slurm_sched.policy.base import Policy

__all__ = ["Policy"]
