"""``slurm-backfill``: Slurm's priority/multifactor + sched/backfill as a policy.

:class:`SlurmBackfill` is the policy (:mod:`.policy`: the main scheduler, the backfill pass and
what differs from Slurm); :mod:`.priority` the multifactor priority and the classic fair share;
:mod:`.backfill` the running jobs' ends and the reservation of a blocked job; :mod:`.config`
reads ``scontrol show config`` into the policy's options.
"""

from slurm_sched.policy.slurm_backfill.config import slurm_backfill_options_from_config
from slurm_sched.policy.slurm_backfill.policy import SlurmBackfill

__all__ = ["SlurmBackfill", "slurm_backfill_options_from_config"]
