"""The fail-open lease of the Slurm backend's pending jobs, and releasing held ones.

Contract (the lease itself: ``slurm_sched/slurm/lease.py``): :meth:`Leases.renew_leases` pushes
``StartTime=now+lease_s`` on jobs in one batch and records each success in ``renewed_at`` (a
failure is counted and logged, never raised); :meth:`Leases.release_held` puts held jobs under a
fresh lease, then releases them, so that Slurm does not start them before the scheduler decides.
Both return the error per job (None = done) and raise only
:class:`~slurm_sched.errors.BackendUnavailableError`. :meth:`Leases.held_jobs` and
:meth:`Leases.pending_jobs` say, as of the last snapshot, which managed jobs need which.
In dry-run mode the commands are only recorded (by the runner) and nothing counts as renewed.
"""

from __future__ import annotations

from collections.abc import Iterable

from slurm_sched.slurm.execute import Executor
from slurm_sched.slurm.shared import PENDING_STATES, BackendState, log
from slurm_sched.slurm.translate import Cmd, Stage


class Leases:
    """Lease renewals and releases of held jobs (see the module docstring)."""

    def __init__(self, state: BackendState, executor: Executor) -> None:
        self.state = state
        self.executor = executor

    def held_jobs(self) -> list[str]:
        """Managed jobs this backend schedules that Slurm shows held (priority 0) and that it
        may release: an older plugin's submit hold, a ``requeuehold``, a failed launch. Never
        an operator's ``scontrol hold`` (``JobHeldAdmin``). As of the last snapshot."""
        return [
            jid
            for jid, job in self.state.slurm.items()
            if jid in self.state.ledgers
            and jid not in self.state.done
            and job.held
            and not job.admin_held
        ]

    def pending_jobs(self) -> list[str]:
        """Managed jobs this backend schedules that Slurm shows pending and not held, with no
        work of this backend in flight. As of the last snapshot."""
        return [
            jid
            for jid, job in self.state.slurm.items()
            if jid in self.state.ledgers
            and jid not in self.state.done
            and jid not in self.state.intents
            and job.state in PENDING_STATES
            and not job.held
        ]

    def renew_leases(self, job_ids: Iterable[str]) -> dict[str, str | None]:
        """Give each job a fresh lease now (``StartTime=now+lease_s``), in one batch; returns
        the error per job (None = renewed). Raises only BackendUnavailableError."""
        if self.state.lease is None:
            raise ValueError("this backend has no lease (lease_s=None)")
        ids = list(job_ids)
        errors = self.executor.execute(
            [
                (k, ((Cmd(("scontrol", *self.state.lease.renew_argv(j))),),))
                for k, j in enumerate(ids)
            ]
        )
        out = {jid: errors.get(k) for k, jid in enumerate(ids)}
        self._count_renewals(out)
        return out

    def release_held(self, job_ids: Iterable[str]) -> dict[str, str | None]:
        """Release held jobs under a fresh lease (``StartTime=now+lease_s``, then ``release``),
        so that Slurm does not start them before the scheduler decides; returns the error per
        job (None = released). Raises only BackendUnavailableError."""
        ids = list(job_ids)
        items: list[tuple[int, tuple[Stage, ...]]] = []
        for k, jid in enumerate(ids):
            stages: list[Stage] = []
            if self.state.lease is not None:
                stages.append((Cmd(("scontrol", *self.state.lease.renew_argv(jid))),))
            stages.append((Cmd(("scontrol", "release", jid)),))
            items.append((k, tuple(stages)))
        errors = self.executor.execute(items)
        out = {jid: errors.get(k) for k, jid in enumerate(ids)}
        self.state.stats.released_held += sum(1 for e in out.values() if e is None)
        self.state.jobs_cache = None  # read Slurm again: these jobs changed state
        return out

    def _count_renewals(self, errors: dict[str, str | None]) -> None:
        if self.state.dry_run:
            return  # nothing was renewed
        now = self.state.clock()
        for jid, err in errors.items():
            if err is None:
                self.state.stats.lease_renewals += 1
                self.state.renewed_at[jid] = now
            else:
                self.state.stats.lease_failures += 1
                log.warning("job %s: lease renewal failed: %s", jid, err)
