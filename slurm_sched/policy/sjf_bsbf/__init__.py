"""SJF-BSBF (Luo et al.): shortest job first with best sharing benefit first.

:class:`SjfBsbf` is the policy (:mod:`.policy`, with the algorithm's description and the
readings of the spec); :mod:`.pair` is Theorem 1's share-now-or-never rule and :mod:`.pass_state`
what a pass knows of the running jobs, the sharing candidates and the GPU slots.
"""

from slurm_sched.policy.sjf_bsbf.policy import SjfBsbf

__all__ = ["SjfBsbf"]
