"""Gandiva_fair (Chaudhary et al., EuroSys 2020): ticket-based fair share of cluster-wide GPU time
across GPU generations.

:class:`GandivaFair` is the policy (:mod:`.policy`, with the algorithm's description and its
deviations); its parts: :mod:`.job_state` (what it keeps of a job), :mod:`.admission` (the caches
and server indexes of admission), :mod:`.cycle` (the working state of one ``decide()``).
"""

from slurm_sched.policy.gandiva_fair.policy import GandivaFair

__all__ = ["GandivaFair"]
