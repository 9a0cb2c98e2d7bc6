"""The Slurm backend's in-flight work: what it started and Slurm has not confirmed yet.

Contract: an :class:`Intent` per job with work under way (a start pinned and let go, a requeue
issued with stages to run once the job is PENDING again, a preemption), kept in the shared state
by ``journal.py`` (on ``apply``) and shown by ``view.py`` as intended until Slurm confirms it.
:meth:`Intents.advance` moves them forward on each fresh ``squeue``: a confirmed start drops its
intent (a placement other than the one asked is logged and kept in ``mismatches``), a finished
requeue re-pins the job once the requeue grace has passed (``validate.py``), a start not RUNNING
within ``start_timeout_s`` is taken back (:meth:`Intents.unstart_cmds`: its begin time goes a
lease ahead again) and makes the backend read ``sinfo`` eagerly for a while; a start Slurm
requeued (its launch failed) is dropped at once, so the policy places the job again. Its commands go
through ``execute.py``; it raises only :class:`~slurm_sched.errors.BackendUnavailableError`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from slurm_sched.model import Placement
from slurm_sched.slurm.execute import Executor
from slurm_sched.slurm.parse import SlurmJob
from slurm_sched.slurm.query import EAGER_SINFO_S
from slurm_sched.slurm.shared import (
    PENDING_STATES,
    RUNNING_STATES,
    BackendState,
    Mismatch,
    log,
)
from slurm_sched.slurm.states import SlurmJobState
from slurm_sched.slurm.translate import Cmd, Stage
from slurm_sched.slurm.validate import requeue_grace_left
from slurm_sched.slurm.view import placement_of

#: Translation note: a Preempt of a job pinned but not started yet takes the start back (its begin
#: time goes a lease ahead again)
UNSTART = "unstart"


@dataclass
class Intent:
    """Work the backend started and Slurm has not finished yet.

    phase ``released``: pinned and let go (``StartTime=now``), waiting for RUNNING;
    ``requeueing``: requeue issued, ``after`` stages to run once the job is PENDING again;
    ``preempting``: requeue issued, the job is PENDING for the policy already.
    """

    job_id: str
    kind: str
    phase: str
    placement: Placement | None
    since_s: float
    min_restarts: int
    after: tuple[Stage, ...] = ()
    share: bool = False
    warned: bool = False


class Intents:
    """Moves the in-flight work forward (see the module docstring)."""

    def __init__(self, state: BackendState, executor: Executor) -> None:
        self.state = state
        self.executor = executor

    def advance(self, now: float) -> None:
        run_after: list[tuple[int, tuple[Stage, ...]]] = []
        after_ids: list[str] = []
        unstart: list[str] = []
        for jid, it in list(self.state.intents.items()):
            job = self.state.slurm.get(jid)
            if job is None or job.final:
                self.state.intents.pop(jid, None)
                continue
            if it.phase == "preempting":
                if job.state in PENDING_STATES and job.restart_cnt >= it.min_restarts:
                    self.state.intents.pop(jid)
            elif it.phase == "requeueing":
                if (
                    job.state in PENDING_STATES
                    and job.restart_cnt >= it.min_restarts
                    and requeue_grace_left(self.state, jid, it.placement) <= 0
                ):
                    run_after.append((len(after_ids), it.after))
                    after_ids.append(jid)
                elif now - it.since_s > self.state.start_timeout_s and not it.warned:
                    it.warned = True
                    log.warning("job %s: requeue not finished after %.0fs", jid, now - it.since_s)
            elif it.phase == "released":
                if job.state in RUNNING_STATES or job.state is SlurmJobState.SUSPENDED:
                    if job.restart_cnt >= it.min_restarts:
                        self.state.intents.pop(jid)
                        self._check_placement(jid, it, job, now)
                elif job.state in PENDING_STATES and job.restart_cnt > it.min_restarts:
                    # Slurm requeued it after our go: its launch failed (24.11 under load sent
                    # the batch launch twice; the second found the first's spool files and
                    # failed) and Slurm holds it ("launch failed requeued held"). It will not
                    # start: hand it back to the policy now; its next start releases the hold.
                    log.warning(
                        "job %s: Slurm requeued it after the start on %s (%s%s); the start failed",
                        jid,
                        it.placement,
                        job.reason,
                        ", held" if job.held else "",
                    )
                    self.state.stats.launch_failures += 1
                    self.state.intents.pop(jid)
                    if it.placement is not None:
                        # its killed run may still be cleaning up there
                        self.state.requeued[jid] = (now, frozenset(it.placement.nodes))
                elif job.state in PENDING_STATES and now - it.since_s > self.state.start_timeout_s:
                    log.warning(
                        "job %s pinned %.0fs ago on %s but still %s (%s); taking the start back",
                        jid,
                        now - it.since_s,
                        it.placement,
                        job.state,
                        job.reason,
                    )
                    self.state.stats.start_timeouts += 1
                    self.state.intents.pop(jid)
                    unstart.append(jid)
                    self.state.notice(
                        "start_taken_back",
                        job_id=jid,
                        nodes=list(it.placement.nodes) if it.placement is not None else [],
                        after_s=round(now - it.since_s, 1),
                        slurm_reason=job.reason,
                        why="Slurm did not start the pinned job; it waits under a lease again",
                    )
                    # Slurm disagrees about free GPUs: look at its per-node view for a while
                    self.state.sinfo_eager_until = time.monotonic() + EAGER_SINFO_S
        if run_after:
            errors = self.executor.execute(run_after)
            for k, jid in enumerate(after_ids):
                it = self.state.intents[jid]
                if errors.get(k):
                    log.error("job %s: re-pin after requeue failed: %s", jid, errors[k])
                    self.state.intents.pop(jid)
                else:
                    it.phase = "released"
                    it.since_s = now
        if unstart:
            self.executor.execute([(k, (self.unstart_cmds(j),)) for k, j in enumerate(unstart)])

    def unstart_cmds(self, jid: str) -> Stage:
        """Take back the start of a pinned job that has not started: its begin time goes a lease
        ahead again (a hold without a lease, which only the scheduler would ever release)."""
        if self.state.lease is not None:
            return (Cmd(("scontrol", *self.state.lease.renew_argv(jid))),)
        return (Cmd(("scontrol", "hold", jid)),)

    def _check_placement(self, jid: str, it: Intent, job: SlurmJob, now: float) -> None:
        actual = placement_of(job)
        asked = it.placement
        if asked is None or actual is None or actual.as_dict == asked.as_dict:
            return
        self.state.mismatches.append(Mismatch(jid, asked, actual, now))
        if set(actual.nodes) != set(asked.nodes):
            log.error("job %s runs on %s, asked %s", jid, actual, asked)
        else:
            log.info("job %s: Slurm chose GPUs %s (asked %s)", jid, actual, asked)
