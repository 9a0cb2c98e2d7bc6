"""The Slurm backend's reservation journal: accepted actions in the view before Slurm runs them.

Contract: during ``apply``, :meth:`Journal.reserve` shows an accepted action at once in the
current view (job state and placement, GPU holders, shard use, exclusive GPUs) and in the
intents, so that later actions of the same call see its GPUs taken; the caller keeps an
:class:`Undo` (the job's view and intent before). Once Slurm has run the action's commands,
:meth:`Journal.finalize` records what must outlive the next snapshot (the job's settings, the
run a requeue ends, via ``ledgers.py``); when Slurm refused them, or in dry-run mode,
:meth:`Journal.rollback` puts the view and intent back as they were. It runs no command.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurm_sched.model import Action, JobState, JobView, Placement
from slurm_sched.slurm.intents import UNSTART, Intent
from slurm_sched.slurm.ledgers import Ledgers
from slurm_sched.slurm.shared import BackendState
from slurm_sched.slurm.translate import Translation


@dataclass(frozen=True)
class Undo:
    """A job's view and intent before ``reserve``, for ``rollback``."""

    job_id: str
    view: JobView
    intent: Intent | None


class Journal:
    """Reserves, finalizes and rolls back actions in the view (see the module docstring)."""

    def __init__(self, state: BackendState, ledgers: Ledgers) -> None:
        self.state = state
        self.ledgers = ledgers

    def reserve(self, action: Action, tr: Translation, now: float) -> None:
        """Show an accepted action in the current view and the intents (undone on failure)."""
        jid = action.job_id
        job = self.state.slurm[jid]
        view = self.state.views[jid]
        kind = tr.kind  # a Share on free GPUs is carried out as a Start
        share = kind == "share"
        if kind in ("start", "share", "migrate", "reconfigure") and tr.after_requeue:
            # a start or share keeps the restart count of the intent in flight, if any
            prev = self.state.intents.get(jid) if kind in ("start", "share") else None
            self.state.intents[jid] = Intent(
                jid,
                kind,
                "requeueing",
                tr.expect_placement,
                now,
                prev.min_restarts if prev is not None else job.restart_cnt + 1,
                tr.after_requeue,
                share=share,
            )
            self._set_view(view, JobState.RUNNING, tr.expect_placement, now, share=share)
        elif kind in ("start", "share", "migrate", "reconfigure"):
            self.state.intents[jid] = Intent(
                jid,
                kind,
                "released",
                tr.expect_placement,
                now,
                min_restarts=job.restart_cnt,
                share=share,
            )
            self._set_view(view, JobState.RUNNING, tr.expect_placement, now, share=share)
        elif kind == "preempt" and UNSTART in tr.notes:
            self.state.intents.pop(jid, None)
            self._set_view(view, JobState.PENDING, None, now)
        elif kind == "preempt":
            self.state.intents[jid] = Intent(
                jid, kind, "preempting", None, now, job.restart_cnt + 1
            )
            self._set_view(view, JobState.PENDING, None, now)
        elif kind == "suspend":
            self._set_view(view, JobState.SUSPENDED, view.placement, now)
        elif kind == "resume":
            self._set_view(view, JobState.RUNNING, view.placement, now)

    def finalize(self, action: Action, tr: Translation, now: float) -> None:
        """Bookkeeping of an action Slurm accepted."""
        jid = action.job_id
        job = self.state.slurm[jid]
        kind = tr.kind  # a Share on free GPUs is carried out as a Start
        if kind in ("start", "share", "reconfigure") and tr.settings is not None:
            self.state.settings[jid] = tr.settings
            self.state.views[jid] = self.state.views[jid].model_copy(
                update={"settings": tr.settings}
            )
        if kind == "preempt" and UNSTART not in tr.notes:
            self.ledgers.fold_run(jid, job, now)
        elif kind in ("migrate", "reconfigure") and tr.after_requeue:
            self.ledgers.fold_run(jid, job, now, move=True)

    def rollback(self, undo: Undo, now: float) -> None:
        """Slurm refused an action: put the job's view and intent back as they were."""
        jid = undo.job_id
        current = self.state.views[jid]
        old = undo.view
        self._set_view(current, old.state, old.placement, now)
        self.state.views[jid] = old
        if undo.intent is None:
            self.state.intents.pop(jid, None)
        else:
            self.state.intents[jid] = undo.intent

    def _set_view(
        self,
        view: JobView,
        state: JobState,
        placement: Placement | None,
        now: float,
        share: bool = False,
    ) -> None:
        jid = view.job_id
        old = view.placement if view.state is not JobState.PENDING else None
        if old is not None:
            for slot in old.slots():
                hs = self.state.holders.get(slot, [])
                if jid in hs:
                    hs.remove(jid)
                    if not hs:
                        self.state.holders.pop(slot, None)
                        self.state.exclusive.discard(slot)
                        self.state.shard_use.pop(slot, None)
        if placement is not None and state is not JobState.PENDING:
            shard_job = share or self.state.is_shard_job(jid)
            for slot in placement.slots():
                self.state.holders.setdefault(slot, []).append(jid)
                if shard_job:
                    n = self.state.shards.share_shards if share else self.state.shards.start_shards
                    self.state.shard_use[slot] = self.state.shard_use.get(slot, 0) + n
                else:
                    self.state.exclusive.add(slot)
        self.state.views[jid] = view.model_copy(
            update={
                "state": state,
                "placement": placement if state is not JobState.PENDING else None,
                "accounted_at_s": now,
                "settings": self.state.settings.get(jid, view.settings),
                "first_start_s": view.first_start_s
                if view.first_start_s is not None or state is not JobState.RUNNING
                else now,
            }
        )
