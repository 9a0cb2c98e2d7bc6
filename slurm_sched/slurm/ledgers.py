"""Reconciling Slurm's jobs with the Slurm backend's ledgers.

Contract: :meth:`Ledgers.reconcile` folds each ``squeue`` job list into the shared state: every
managed job gets a ledger (its spec parsed once from the job and its hints, saved in the
settings store) and its runs accounted (executed time, first start, runs ended by a requeue);
a job that finishes (or vanishes from ``squeue``) becomes a
:class:`~slurm_sched.backend.CompletedJob` once; a job the scheduler cannot understand (bad
hint, unknown GRES, no GPU, more GPUs than the partitions have) is listed in
``left_to_slurm`` with the reason and handed to Slurm once (begin time now, released if held),
never dropped. On fresh data only, it then moves the intents forward (``intents.py``), hands
over, and renews the leases that are due (``leases.py``). :meth:`Ledgers.fold_run` records a
run before our requeue ends it. Raises only :class:`~slurm_sched.errors.BackendUnavailableError`
(from commands); a ledger that cannot be written is logged, never fatal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from slurm_sched.model import CompletedJob, JobSpec
from slurm_sched.protocol.hints import (
    HintError,
    duration_from_time_limit,
    hints_to_jobspec,
    parse_hints,
)
from slurm_sched.protocol.settings_file import Ledger
from slurm_sched.slurm.execute import Executor
from slurm_sched.slurm.intents import Intents
from slurm_sched.slurm.leases import Leases
from slurm_sched.slurm.parse import SlurmJob
from slurm_sched.slurm.query import SlurmQuery
from slurm_sched.slurm.shared import PENDING_STATES, RUNNING_STATES, BackendState, log
from slurm_sched.slurm.states import SlurmJobState
from slurm_sched.slurm.translate import Cmd, Stage, start_now_cmd


class Ledgers:
    """Keeps the ledgers and completions in step with Slurm (see the module docstring)."""

    def __init__(
        self,
        state: BackendState,
        query: SlurmQuery,
        executor: Executor,
        intents: Intents,
        leases: Leases,
    ) -> None:
        self.state = state
        self.query = query
        self.executor = executor
        self.intents = intents
        self.leases = leases

    def reconcile(self, jobs: list[SlurmJob], now: float, fresh: bool = True) -> None:
        """Fold Slurm's job list into the backend's state. Commands that react to what Slurm
        shows (handing unmanageable jobs to Slurm, renewing leases, re-pinning after a requeue)
        run only on ``fresh`` data, never on a reused ``squeue`` output that may predate the
        last apply."""
        self.state.slurm = {j.job_id: j for j in jobs}
        first = self.state.first
        self.state.first = False
        hand_over: list[SlurmJob] = []
        lease_due: list[str] = []
        admin_held: set[str] = set()
        seen: set[str] = set()
        for job in jobs:
            jid = job.job_id
            if not self.state.managed(job):
                continue
            seen.add(jid)
            if jid in self.state.done:
                continue
            if job.final:
                self.state.intents.pop(jid, None)
                if jid in self.state.left_to_slurm:
                    self.state.final_left.add(jid)
                    self.state.done.add(jid)
                elif first and jid not in self.state.tracked:
                    self.state.done.add(jid)  # finished before this backend looked
                else:
                    self._finish(job, now)
                continue
            ledger = None if jid in self.state.left_to_slurm else self._ledger(job)
            if ledger is None:  # cannot be managed: hand it to Slurm (once)
                if job.state in PENDING_STATES and jid not in self.state.released:
                    hand_over.append(job)
                continue
            self.state.tracked.add(jid)
            self._account(job, ledger, now)
            self._note_time_limit(job)
            if job.admin_held:
                admin_held.add(jid)
            if (
                self.state.lease is not None
                and job.state in PENDING_STATES
                # held: Slurm will not start it and the policy's Start releases it; but an
                # operator's hold keeps its lease, so that its release hands the job to the
                # policy, not to Slurm
                and (not job.held or job.admin_held)
                and jid not in self.state.intents  # pinned or being requeued by us on purpose
                and self.state.lease.due(job.eligible_time_s, now)
                # a held job whose begin time Slurm would not show: once per renewal window
                and not (
                    job.admin_held
                    and now - self.state.renewed_at.get(jid, -1e18)
                    < self.state.lease.renew_window_s
                )
            ):
                lease_due.append(jid)
        # tracked jobs that vanished from squeue (purged after MinJobAge while we were away)
        for jid in list(self.state.tracked - seen - self.state.done):
            log.warning("job %s vanished from squeue without a final state", jid)
            self.state.notice("job_end", job_id=jid, state="vanished")
            ledger = self.state.ledgers.get(jid)
            if ledger is not None:
                self._record_completion(jid, ledger, now, ledger.run_executed_s)
            self.state.done.add(jid)
            self.state.intents.pop(jid, None)
        self._note_admin_holds(admin_held)
        if not fresh:
            return
        self.intents.advance(now)
        self._hand_over(hand_over, now)
        if lease_due and not self.state.dry_run:  # shadow mode renews nothing (the live one does)
            self.leases.renew_leases(lease_due)

    def _note_admin_holds(self, held: set[str]) -> None:
        """Notice the jobs an operator has held or released since the last look (a held job is
        not offered to the policy: ``view.py``)."""
        for jid in sorted(held - self.state.admin_held, key=_id_key):
            log.info("job %s is held by an operator: not started until released", jid)
            self.state.notice(
                "admin_hold", job_id=jid, why="held by an operator: not started, not released"
            )
        for jid in sorted(self.state.admin_held - held, key=_id_key):
            job = self.state.slurm.get(jid)
            state = str(job.state) if job is not None else "gone"
            log.info("job %s is no longer held by an operator (%s)", jid, state)
            self.state.notice("admin_release", job_id=jid, state=state)
        self.state.admin_held = held

    def _note_time_limit(self, job: SlurmJob) -> None:
        """Notice a changed time limit (an operator's ``scontrol update TimeLimit=``): Slurm
        enforces it; the scheduler never sets a limit, and the job's spec (its duration estimate
        included) stays the one it was submitted with."""
        jid = job.job_id
        seen = self.state.time_limits.get(jid, job.time_limit_s)
        self.state.time_limits[jid] = job.time_limit_s
        if seen != job.time_limit_s:
            log.info("job %s: time limit changed from %s s to %s s", jid, seen, job.time_limit_s)
            self.state.notice("time_limit", job_id=jid, limit_was_s=seen, limit_s=job.time_limit_s)

    def _hand_over(self, jobs: Sequence[SlurmJob], now: float) -> None:
        """Let Slurm schedule jobs the scheduler cannot: begin time now, released if held."""
        items: list[tuple[int, tuple[Stage, ...]]] = []
        for k, job in enumerate(jobs):
            stages: list[Stage] = []
            if job.eligible_time_s > now or job.eligible_time_s <= 0:
                stages.append((start_now_cmd(job.job_id),))
            if job.held:
                stages.append((Cmd(("scontrol", "release", job.job_id)),))
            items.append((k, tuple(stages)))
        if not items:
            return
        errors = self.executor.execute(items)
        for k, job in enumerate(jobs):
            if errors.get(k):
                log.error("could not hand unmanageable job %s to Slurm: %s", job.job_id, errors[k])
            else:
                self.state.released.add(job.job_id)

    def _ledger(self, job: SlurmJob) -> Ledger | None:
        """The job's ledger (spec parsed once); None if the job cannot be managed."""
        jid = job.job_id
        ledger = self.state.ledgers.get(jid)
        if ledger is not None:
            return ledger
        ledger = self.state.store.read_ledger(jid)
        if ledger is None:
            try:
                spec = self._spec(job)
            except _Unmanageable as exc:
                self.state.left_to_slurm[jid] = str(exc)
                log.warning(
                    "job %s cannot be scheduled by slurm_sched (%s); releasing it to Slurm",
                    jid,
                    exc,
                )
                return None
            ledger = Ledger(spec=spec)
            self._save_ledger(jid, ledger)
        self.state.ledgers[jid] = ledger
        return ledger

    def _spec(self, job: SlurmJob) -> JobSpec:
        req = job.gpu_request
        if req.other:
            raise _Unmanageable(f"GRES the scheduler does not handle: {', '.join(req.other)}")
        num_gpus = req.total(job.node_count)
        if num_gpus < 1:
            raise _Unmanageable("the job asks for no GPU")
        try:
            hints = parse_hints(job.comment, source=f"job {job.job_id}")
        except HintError as exc:
            raise _Unmanageable(str(exc)) from exc
        cluster = self.query.cluster
        gpu_type = req.gpu_type
        if gpu_type is None and job.features in cluster.gpu_types:
            gpu_type = job.features
        cap = cluster.gpus_of_type(gpu_type)
        if num_gpus > cap:
            raise _Unmanageable(
                f"asks for {num_gpus} GPU(s){' of type ' + gpu_type if gpu_type else ''}; "
                f"the managed partitions have {cap}"
            )
        return hints_to_jobspec(
            job_id=job.job_id,
            submit_time_s=max(0.0, job.submit_time_s),
            num_gpus=num_gpus,
            user=job.account or job.user or "default",
            gpu_type=gpu_type,
            hints=hints,
            default_duration_s=duration_from_time_limit(job.time_limit_s),
            num_cpus=max(1, job.cpus),
        )

    def _save_ledger(self, jid: str, ledger: Ledger) -> None:
        self.state.ledgers[jid] = ledger
        try:
            self.state.store.write_ledger(jid, ledger)
        except OSError as exc:  # the ledger is a convenience; never fail a cycle on it
            log.warning("cannot write ledger of job %s: %s", jid, exc)

    @staticmethod
    def _with_run(ledger: Ledger, job: SlurmJob, now: float) -> tuple[Ledger, bool]:
        """The ledger with the job's current run (running or suspended) folded in; True when a
        new run began (the previous run's time moves to ``earlier_runs_s``)."""
        executed = job.executed_s(now)
        if job.start_time_s != ledger.run_key:
            earlier = ledger.earlier_runs_s + (ledger.run_executed_s if ledger.run_key else 0.0)
            new = replace(
                ledger, earlier_runs_s=earlier, run_key=job.start_time_s, run_executed_s=executed
            )
            return new, True
        return replace(ledger, run_executed_s=executed), False

    def _account(self, job: SlurmJob, ledger: Ledger, now: float) -> None:
        """Fold Slurm's view of the current run into the job's ledger."""
        if job.state not in RUNNING_STATES and job.state is not SlurmJobState.SUSPENDED:
            return
        ledger, changed = self._with_run(ledger, job, now)
        if ledger.first_start_s is None:
            ledger = replace(ledger, first_start_s=job.start_time_s)
            changed = True
        if changed:
            self._save_ledger(job.job_id, ledger)
        else:
            self.state.ledgers[job.job_id] = ledger

    def _finish(self, job: SlurmJob, now: float) -> None:
        jid = job.job_id
        ledger = self.state.ledgers.get(jid) or self.state.store.read_ledger(jid)
        if ledger is None:
            try:
                ledger = Ledger(spec=self._spec(job))
            except _Unmanageable:
                self.state.done.add(jid)
                return
        last_run = job.executed_s(now)  # final: end - start - suspended time of the last run
        if job.start_time_s != ledger.run_key:
            earlier = ledger.earlier_runs_s + ledger.run_executed_s
        else:
            earlier = ledger.earlier_runs_s
        first = ledger.first_start_s
        if first is None:
            first = job.start_time_s if job.start_time_s > 0 else job.end_time_s
        finish = job.end_time_s if job.end_time_s > 0 else now
        ledger = replace(ledger, first_start_s=first, earlier_runs_s=earlier)
        self._record_completion(
            jid, ledger, finish, last_run, restarts=max(0, job.restart_cnt - ledger.moves)
        )
        self.state.done.add(jid)
        # a job cancelled by its owner or an operator ends here too: dropped, never restarted
        self.state.notice("job_end", job_id=jid, state=str(job.state),
                          ran_s=round(ledger.earlier_runs_s + last_run, 1))

    def _record_completion(
        self,
        jid: str,
        ledger: Ledger,
        finish_s: float,
        last_run_s: float,
        restarts: int | None = None,
    ) -> None:
        first = ledger.first_start_s if ledger.first_start_s is not None else finish_s
        self.state.completed.append(
            CompletedJob(
                spec=ledger.spec,
                first_start_s=first,
                finish_s=max(finish_s, first),
                executed_s=max(0.0, ledger.earlier_runs_s + last_run_s),
                preemptions=restarts or 0,
            )
        )
        self.state.ledgers.pop(jid, None)
        self.state.settings.pop(jid, None)
        self.state.progress_cache.pop(jid, None)
        self.state.renewed_at.pop(jid, None)
        self.state.time_limits.pop(jid, None)
        log.info("job %s finished at %.0f", jid, finish_s)

    def fold_run(self, jid: str, job: SlurmJob, now: float, move: bool = False) -> None:
        """Before a requeue: record how long the current run ran (Slurm forgets it), and count
        moves (Migrate/Reconfigure), which Slurm counts as restarts but are no preemptions."""
        ledger = self.state.ledgers.get(jid)
        if ledger is None:
            return
        if job.holds_resources:
            ledger, _ = self._with_run(ledger, job, now)
        if move:
            ledger = replace(ledger, moves=ledger.moves + 1)
        self._save_ledger(jid, ledger)


class _Unmanageable(Exception):
    """Internal: a job the scheduler cannot understand (left to Slurm)."""


def _id_key(job_id: str) -> tuple[int, str]:
    return (int(job_id), "") if job_id.isdigit() else (1 << 62, job_id)
