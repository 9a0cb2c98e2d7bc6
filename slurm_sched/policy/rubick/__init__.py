"""Rubick (Zhang et al., MLSys'25 as Morphling): reconfigurable execution plans and resources
chosen by the slopes of model-predicted sensitivity curves.

:class:`Rubick` is the policy (:mod:`.policy`, with the algorithm's description); its parts:
:mod:`.candidates` (configurations and a job's curve model), :mod:`.curves` (building the
curves), :mod:`.allocations` (the pass's tentative state and undo journal), :mod:`.embedding`
(placing a shape on nodes), :mod:`.plans` (GET_BEST_PLAN).
"""

from slurm_sched.policy.rubick.policy import Rubick

__all__ = ["Rubick"]
