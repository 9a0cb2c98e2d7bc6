"""Gandiva_fair (Chaudhary et al., EuroSys 2020): ticket-based fair share of cluster-wide GPU time
across GPU generations.

:class:`GandivaFair` is the policy (:mod:`.policy`, with the algorithm's description and its
deviations, and ``decide()`` composing the parts); its parts: :mod:`.sync` (job memory and the
cycle's held jobs), :mod:`.tickets` (tickets, entitlements and time shares), :mod:`.placement`
(admission and GPU choice), :mod:`.migration` (rebalancing: moves and swaps),
:mod:`.scheduling` (split stride, adoption and Suspend/Resume), :mod:`.job_state` (what it
keeps of a job), :mod:`.admission` (the caches and server indexes of admission), :mod:`.cycle`
(the working state of one ``decide()``).
"""

from slurm_sched.policy.gandiva_fair.policy import GandivaFair

__all__ = ["GandivaFair"]
