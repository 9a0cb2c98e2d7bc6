"""The one interface both worlds implement: the simulated cluster and the live Slurm cluster.

Contract (checked by ``tests/contract/``, run against both implementations):

- ``snapshot()`` returns a frozen :class:`ClusterSnapshot` of every unfinished job the backend
  manages. It is consistent with every action applied before the call returned (the simulator is
  exact; Slurm is eventually consistent and may lag by one query).
- ``apply(actions)`` applies the actions in order. It is idempotent per ``request_id``: an action
  whose request id was applied before returns the earlier result and changes nothing. Expected
  failures (a GPU already taken, a job that finished meanwhile) come back as
  ``ActionResult(ok=False, error=...)``; ``apply`` raises only
  :class:`~slurm_sched.errors.BackendUnavailableError` when the backend itself is unreachable.
- ``finished()`` says whether there is nothing left to do (the simulator: every trace job has
  completed; Slurm: never, unless a test bounded the run).
- ``completed()`` returns the records of jobs that finished, for metrics.

Inside ``apply`` a backend refuses an action by raising :class:`ActionRejected` (``require``, the
shared placement checks of :mod:`~slurm_sched.backend.placement_check`); the shared ``apply``
template (:func:`~slurm_sched.backend.idempotent_apply.apply_idempotent`) turns it into
``ActionResult(ok=False, error=str(exc))``.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

from slurm_sched.model import (
    Action,
    ActionResult,
    ClusterSnapshot,
    CompletedJob,
    JobState,
    JobView,
)


class ActionRejected(Exception):
    """An action the backend cannot apply now; ``apply`` returns it as
    ``ActionResult(ok=False, error=str(exc))``, never raises it."""


def require(view: JobView, state: JobState, kind: str) -> None:
    """Reject a ``kind`` action unless the job is in ``state``."""
    if view.state is not state:
        raise ActionRejected(f"cannot {kind} job {view.job_id} in state {view.state}")


class ClusterBackend(abc.ABC):
    """A cluster the controller can observe and act on (contract: see the module docstring)."""

    @abc.abstractmethod
    def snapshot(self) -> ClusterSnapshot:
        """Current state of the cluster and every unfinished managed job."""

    @abc.abstractmethod
    def apply(self, actions: Sequence[Action]) -> list[ActionResult]:
        """Apply actions in order; one result per action, in the same order."""

    @abc.abstractmethod
    def finished(self) -> bool:
        """True when no managed job is left and none will arrive."""

    @abc.abstractmethod
    def completed(self) -> list[CompletedJob]:
        """Records of every job that finished so far, in finishing order."""
