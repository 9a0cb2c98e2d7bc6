"""Carrying out actions on the Slurm backend: check, plan, reserve, run, record.

Contract: :meth:`Applier.apply` handles one ``apply`` call against the current view (the last
snapshot plus what earlier actions of the call reserved). Per action: a request id seen before
returns its earlier result; otherwise the action is checked (``validate.py``) and translated
into stages of commands (``translate.py``; a Preempt of a start Slurm has not carried out takes
the start back, a Start of a job still being requeued waits for the requeue), reserved in the
view (``journal.py``) and its settings file written. Then the stages of all accepted actions
run together, stage by stage, one ``scontrol`` batch each (``execute.py``); a later action on a
job whose earlier one failed fails too. Accepted actions are finalized, refused ones rolled
back; in dry-run mode every one is rolled back, leaving no trace. A rejection is data
(``ActionResult(ok=False)``), never an exception: it raises only
:class:`~slurm_sched.errors.BackendUnavailableError`. ``last_commands`` holds each result's
command lines.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

from slurm_sched.backend import ActionRejected, require
from slurm_sched.backend.idempotent_apply import Admitted, apply_idempotent
from slurm_sched.model import Action, ActionResult, JobSpec, JobState, Placement, Start
from slurm_sched.slurm.execute import Executor
from slurm_sched.slurm.intents import UNSTART, Intents
from slurm_sched.slurm.journal import Journal, Undo
from slurm_sched.slurm.parse import GpuRequest, SlurmJob
from slurm_sched.slurm.shared import PENDING_STATES, BackendState, Mismatch, log
from slurm_sched.slurm.translate import (
    MAY_START_WITHIN_S,
    JobContext,
    TranslateError,
    Translation,
    translate,
)
from slurm_sched.slurm.validate import Validator

#: an accepted action's translation and how to take its reservation back
_Planned = tuple[Translation, Undo]


def _log_rejection(action: Action, exc: Exception) -> None:
    log.debug("rejected %s %s: %s", action.kind, action.job_id, exc)


def refuse_without_requeue(job: SlurmJob, kind: str) -> None:
    """A preempt, migrate or resize of a running job is a ``scontrol requeue``, which Slurm
    refuses for a job submitted with ``--no-requeue``: reject it before any command (no
    checkpoint signal, no failed requeue); the job runs to its end where it is."""
    if not job.requeue:
        raise ActionRejected(
            f"cannot {kind} job {job.job_id}: it was submitted with --no-requeue (Slurm "
            "refuses to requeue it); it runs to its end where it is"
        )


class Applier:
    """Carries out the actions of ``apply`` (see the module docstring)."""

    def __init__(
        self,
        state: BackendState,
        validator: Validator,
        journal: Journal,
        executor: Executor,
        intents: Intents,
    ) -> None:
        self.state = state
        self.validator = validator
        self.journal = journal
        self.executor = executor
        self.intents = intents

    def apply(self, actions: Sequence[Action]) -> list[ActionResult]:
        """Check, plan, reserve and run ``actions`` (see the module docstring)."""
        now = self.state.clock()
        commands: dict[int, tuple[str, ...]] = {}

        def admit(index: int, action: Action) -> _Planned:
            tr = self._plan(action, now)
            # reserve now, so that later actions of this call see the GPUs taken
            undo = Undo(
                action.job_id,
                self.state.views[action.job_id],
                self.state.intents.get(action.job_id),
            )
            self.journal.reserve(action, tr, now)
            self._write_settings(action, tr)
            commands[index] = tuple(c.text() for c in tr.commands())
            return tr, undo

        results = apply_idempotent(
            actions,
            self.state.results,
            admit,
            lambda planned: self._run(planned, now),
            rejections=(ActionRejected, TranslateError),
            on_rejected=_log_rejection,
        )
        self.state.last_commands = [commands.get(i, ()) for i in range(len(results))]
        return results

    def _run(
        self, planned: list[Admitted[_Planned]], now: float
    ) -> Iterator[tuple[int, ActionResult]]:
        """Run the stages of every planned action together, then finalize or roll back each
        (last first); yields each action's result."""
        errors = self.executor.execute([(p.index, p.work[0].stages) for p in planned])
        failed_jobs: set[str] = set()
        for p in planned:  # a later action on a job whose earlier one failed
            i, action = p.index, p.action
            if errors.get(i) is None and action.job_id in failed_jobs:
                errors[i] = f"an earlier action on job {action.job_id} in this call failed"
            elif errors.get(i) is not None:
                failed_jobs.add(action.job_id)
        for p in reversed(planned):
            i, action, (tr, undo) = p.index, p.action, p.work
            err = errors.get(i)
            if err is None and self.state.dry_run:
                # shadow mode: validated and translated, nothing more
                self.journal.rollback(undo, now)
                res = ActionResult(action=action, ok=True)
            elif err is None:
                self.journal.finalize(action, tr, now)
                if "requeue" in {c.argv[1] for st in tr.stages for c in st if c.is_scontrol}:
                    nodes = frozenset(self.state.slurm[action.job_id].nodes)
                    self.state.requeued[action.job_id] = (self.state.clock(), nodes)
                if tr.kind in ("suspend", "resume") or UNSTART in tr.notes:
                    self.state.jobs_cache = None  # no intent covers these: read Slurm again
                res = ActionResult(action=action, ok=True)
                self.state.stats.by_kind[action.kind] = (
                    self.state.stats.by_kind.get(action.kind, 0) + 1
                )
            else:
                self.journal.rollback(undo, now)
                res = ActionResult(action=action, ok=False, error=err)
                log.warning("%s %s failed in Slurm: %s", action.kind, action.job_id, err)
            yield i, res

    def _plan(self, action: Action, now: float) -> Translation:
        jid = action.job_id
        view = self.state.views.get(jid)
        job = self.state.slurm.get(jid)
        if view is None or job is None:
            raise ActionRejected(f"job {jid} is not active (unknown, not managed or finished)")
        kind = action.kind
        state = view.state
        if kind in ("start", "share"):
            require(view, JobState.PENDING, kind)
            asked: Placement = action.placement  # type: ignore[union-attr]
            placement = self.validator.check_gpus(view, asked, share=kind == "share", exact=True)
            if placement != asked:
                self.state.mismatches.append(Mismatch(jid, asked, placement, now))
                log.info("job %s: Slurm will put the shard on %s (asked %s)", jid, placement, asked)
            self.validator.check_requeue_grace(jid, placement)
            begin_passed = 0 < job.eligible_time_s <= now
            ctx = JobContext(
                jid,
                self._request(job, view.spec),
                held=job.held,
                active=False,
                # NumNodes is left out of the pin only when Slurm's min AND max are that count:
                # with a larger max (``-N 1-4``, or a count unknown after a requeue) Slurm may add
                # nodes to the pinned ones (a 2-GPU job ran on 2 nodes x 2 GPUs that way)
                node_count=job.node_count if job.max_nodes == job.node_count else None,
                tres_per_node=job.tres_per_node,
                tres_per_job=job.tres_per_job,
                # a held job past its begin time starts with the release alone
                begin_now=not (job.held and begin_passed),
                eligible=begin_passed and not job.held,
                # a go already sent (an earlier start whose GPUs were still busy), or a begin
                # time passed or close: Slurm may start it before this pin lands
                may_start=jid in self.state.intents
                or not job.eligible_time_s > now + MAY_START_WITHIN_S,
            )
            if kind == "share" and not any(self.state.holders.get(x) for x in placement.slots()):
                # nobody to share with: start it like a Start, so it takes a whole GPU's shards
                action = Start(job_id=jid, placement=asked, settings=action.settings)  # type: ignore[union-attr]
            it = self.state.intents.get(jid)
            if job.state not in PENDING_STATES:
                if it is None or it.phase != "preempting":
                    raise ActionRejected(
                        f"job {jid} is still {job.state} in Slurm (requeue in progress); retry"
                    )
                # preempted (maybe in this very call) and not requeued yet: re-pin once it is
                ctx = JobContext(jid, ctx.request, active=False)  # every field
                tr = translate(action, ctx, self.state.shards)
                return replace(tr, stages=(), after_requeue=tr.stages, expect_placement=placement)
            return replace(translate(action, ctx, self.state.shards), expect_placement=placement)
        elif kind == "suspend":
            require(view, JobState.RUNNING, kind)
            if jid in self.state.intents:
                raise ActionRejected(f"job {jid} is still starting in Slurm; retry")
        elif kind == "resume":
            require(view, JobState.SUSPENDED, kind)
        elif kind == "preempt":
            if state not in (JobState.RUNNING, JobState.SUSPENDED):
                raise ActionRejected(f"cannot preempt job {jid} in state {state}")
            it = self.state.intents.get(jid)
            if it is not None and it.phase == "released" and job.state in PENDING_STATES:
                # pinned but not started yet: take the start back instead
                return Translation(
                    "preempt",
                    jid,
                    (self.intents.unstart_cmds(jid),),
                    expect_state="pending",
                    notes=(UNSTART,),
                )
            if it is not None:
                raise ActionRejected(f"job {jid} is still starting in Slurm; retry")
            refuse_without_requeue(job, kind)
        elif kind == "migrate":
            require(view, JobState.RUNNING, kind)
            if jid in self.state.intents:
                raise ActionRejected(f"job {jid} is still starting in Slurm; retry")
            refuse_without_requeue(job, kind)
            self.validator.check_gpus(view, action.placement, share=False, exact=True)  # type: ignore[union-attr]
        elif kind == "reconfigure":
            if state is JobState.SUSPENDED:
                raise ActionRejected(f"cannot reconfigure suspended job {jid}; resume first")
            if jid in self.state.intents:
                raise ActionRejected(f"job {jid} is still starting in Slurm; retry")
            if state is not JobState.PENDING:
                refuse_without_requeue(job, kind)
            self.validator.check_gpus(view, action.placement, share=False, exact=False)  # type: ignore[union-attr]
            if state is JobState.PENDING:
                self.validator.check_requeue_grace(jid, action.placement)  # type: ignore[union-attr]
        ctx = JobContext(
            job_id=jid,
            request=self._request(job, view.spec),
            held=job.held,
            active=state is not JobState.PENDING,
        )
        return translate(action, ctx, self.state.shards)

    @staticmethod
    def _request(job: SlurmJob, spec: JobSpec) -> GpuRequest:
        req = job.gpu_request
        if req.kind is None:  # GRES cleared by an earlier, interrupted re-pin
            return GpuRequest(kind="gpu", gpu_type=spec.gpu_type, form="none")
        return req

    def _write_settings(self, action: Action, tr: Translation) -> None:
        """Write the job's settings file before Slurm (re)starts it."""
        if tr.expect_placement is None:
            return
        view = self.state.views[action.job_id]
        settings = tr.settings if tr.settings is not None else view.settings
        shares = tuple(getattr(action, "with_jobs", ()))
        try:
            self.state.store.write_settings(
                action.job_id,
                settings,
                tr.expect_placement,
                shares,
                since_s=view.spec.submit_time_s,
            )
        except OSError as exc:
            log.warning("cannot write settings of job %s: %s", action.job_id, exc)
