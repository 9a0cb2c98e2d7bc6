"""Start-up reconciliation: take over a cluster that ran without this daemon (or with a dead one).

A new daemon owns no decision yet, so everything a previous instance left half done is undone
into a state the policy can decide from, and no job is left waiting for a scheduler that is gone:

- **adopt** running and suspended managed jobs: the first snapshot shows them with their real
  placement (the backend reads its per-job ledgers, so their history survives);
- **resume** every suspended managed job: it was suspended by a decision that died with the old
  daemon (the policy may suspend it again);
- **release** managed jobs that are held (priority 0: an older plugin's submit hold, an older
  daemon's ``requeuehold``, a failed launch) under a fresh lease, so Slurm still does not start
  them before the policy decides. An operator's ``scontrol hold`` (``JobHeldAdmin``) stays: such
  a job is left out of the policy's view and keeps its lease until the operator releases it;
- give every other pending managed job a **fresh lease** (``StartTime=now+lease_s``): jobs the old
  daemon had pinned but Slurm had not started yet go back to the queue.

Jobs the backend cannot understand are handed to Slurm by the first snapshot itself. In dry-run
(shadow) mode the backend's runner only records the commands: the report then says what a live
daemon would have done.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from slurm_sched.model import Resume
from slurm_sched.slurm.backend import SlurmBackend


@dataclass
class ReconcileReport:
    """What the reconciliation found and did (job ids)."""

    running: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    leased: list[str] = field(default_factory=list)
    left_to_slurm: list[str] = field(default_factory=list)
    #: job id -> error, for the jobs a step could not be carried out on
    failed: dict[str, str] = field(default_factory=dict)

    def summary(self) -> str:
        parts = [
            f"{len(self.running)} running adopted",
            f"{len(self.resumed)} suspended resumed",
            f"{len(self.released)} held released",
            f"{len(self.leased)} pending re-leased",
            f"{len(self.left_to_slurm)} left to Slurm",
        ]
        if self.failed:
            parts.append(f"{len(self.failed)} failed")
        return ", ".join(parts)

    def as_dict(self) -> dict[str, object]:
        return {
            "running": self.running,
            "resumed": self.resumed,
            "released": self.released,
            "leased": self.leased,
            "left_to_slurm": self.left_to_slurm,
            "failed": self.failed,
        }


def reconcile(backend: SlurmBackend) -> ReconcileReport:
    """Reconcile the backend's cluster (see the module docstring).

    Raises:
        BackendUnavailableError: slurmctld does not answer (the caller retries).
    """
    t0 = backend.clock()
    snap = backend.snapshot()
    report = ReconcileReport(
        running=[v.job_id for v in snap.running],
        left_to_slurm=sorted(backend.left_to_slurm),
    )
    resumes = [
        Resume(job_id=v.job_id, reason="reconcile: suspended by a scheduler that is gone")
        for v in snap.suspended
    ]
    for r in backend.apply(resumes) if resumes else []:
        if r.ok:
            report.resumed.append(r.action.job_id)
        else:
            report.failed[r.action.job_id] = f"resume: {r.error}"
    for jid, err in backend.release_held(backend.held_jobs()).items():
        if err is None:
            report.released.append(jid)
        else:
            report.failed[jid] = f"release: {err}"
    if backend.lease is not None:
        pending = backend.pending_jobs()
        # the snapshot itself renewed the leases that were due: not twice
        fresh = [j for j in pending if backend.renewed_at.get(j, -1.0) >= t0]
        report.leased.extend(fresh)
        todo = [j for j in pending if j not in set(fresh)]
        for jid, err in backend.renew_leases(todo).items():
            if err is None:
                report.leased.append(jid)
            else:
                report.failed[jid] = f"lease: {err}"
    return report
