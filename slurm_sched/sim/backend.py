"""The in-memory cluster the simulator drives: a real :class:`ClusterBackend`, not a mock.

It owns the event queue (arrivals, completions) and the simulated time. Progress is accounted
lazily (see :class:`~slurm_sched.model.job.JobView`): a job's view changes only when its state,
placement or rate changes, so a snapshot is cheap even with thousands of active jobs.

It starts empty and is fed a trace, or continues a captured state
(:meth:`SimulatedBackend.from_state`, used by snapshot replay).

Rules it enforces (an action breaking one fails as data, never silently; the placement checks
are the shared ones of :mod:`slurm_sched.backend.placement_check`):
- a GPU holds at most ``max_jobs_per_gpu`` jobs (running or suspended); ``Start`` and ``Migrate``
  need GPUs no other job holds, ``Share`` may join jobs already there;
- a job's GPUs must be of its required type, exist on the named nodes, and (except for
  ``Reconfigure``) number exactly what the job asked for: gangs start whole;
- a job restarted after a preemption, migration or reconfiguration makes no progress for
  ``restart_overhead_s``; a job's first start makes none for ``start_overhead_s`` (0 by
  default);
- with ``event_overhead`` (off by default; the Muri artifact's accounting), every running job
  loses its overhead of progress at every scheduling event, restarted or not (see
  :meth:`SimulatedBackend.scheduling_point`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

from slurm_sched.backend import ActionRejected, ClusterBackend, require
from slurm_sched.backend.idempotent_apply import apply_idempotent
from slurm_sched.backend.placement_check import check_placement, missing_gpu
from slurm_sched.errors import InputError
from slurm_sched.model import (
    Action,
    ActionResult,
    Cluster,
    ClusterSnapshot,
    CompletedJob,
    JobSettings,
    JobSpec,
    JobState,
    JobView,
    Migrate,
    Placement,
    Preempt,
    Reconfigure,
    Resume,
    Share,
    Start,
    Suspend,
)
from slurm_sched.perf.progress import ProgressModel
from slurm_sched.sim.events import Event, EventKind, EventQueue

log = logging.getLogger(__name__)

Slot = tuple[str, int]


class SimulatedBackend(ClusterBackend):
    """A simulated cluster fed by a trace.

    Args:
        cluster: the nodes.
        jobs: the trace; each job arrives at its ``submit_time_s``.
        progress: the progress model (rates); identity by default.
        restart_overhead_s: dead time after a restart (preempt/migrate/reconfigure).
        max_jobs_per_gpu: sharing capacity C of one GPU.
        start_overhead_s: dead time at a job's first start (0: none).
        event_overhead: ``None`` (default): off. Else the overhead (s) of one job; then every
            job that runs through a scheduling event loses that much of its progress there
            (a member of an interleaving group, ``settings.group_id``, the sum over the running
            members of its group), clamped to the time it ran since its previous event or
            start; superseded completion estimates are dropped instead of waking the clock
            (the event-driven simulators this models have none). See
            :meth:`scheduling_point`.
        in_place_settings: a ``Reconfigure`` of a running job to the placement it holds
            changes only its settings, without a restart (a framework that re-batches in
            process, as AdaptDL does); ``False`` (default): it restarts like any other.
    """

    def __init__(
        self,
        cluster: Cluster,
        jobs: Iterable[JobSpec],
        progress: ProgressModel | None = None,
        restart_overhead_s: float = 30.0,
        max_jobs_per_gpu: int = 2,
        start_overhead_s: float = 0.0,
        event_overhead: Callable[[JobSpec], float] | None = None,
        in_place_settings: bool = False,
    ) -> None:
        if restart_overhead_s < 0:
            raise ValueError(f"restart_overhead_s must be >= 0, got {restart_overhead_s}")
        if start_overhead_s < 0:
            raise ValueError(f"start_overhead_s must be >= 0, got {start_overhead_s}")
        if max_jobs_per_gpu < 1:
            raise ValueError(f"max_jobs_per_gpu must be >= 1, got {max_jobs_per_gpu}")
        self.cluster = cluster
        self.progress = progress or ProgressModel()
        self.restart_overhead_s = restart_overhead_s
        self.start_overhead_s = start_overhead_s
        self.max_jobs_per_gpu = max_jobs_per_gpu
        self.event_overhead = event_overhead
        self.in_place_settings = in_place_settings
        # event_overhead only: a real event (arrival, completion) was handled since the last
        # scheduling point; each running job's (time, work done) at its previous event or start
        self._event_seen = False
        self._marks: dict[str, tuple[float, float]] = {}
        self.now_s = 0.0
        self._events = EventQueue()
        # when a running job's rate changes by itself (the progress model's rate_holds_until),
        # for the job's version it was computed at (stale when the job changed since)
        self._rate_changes = EventQueue()
        self._specs: dict[str, JobSpec] = {}
        self._views: dict[str, JobView] = {}  # active jobs, in arrival order
        self._version: dict[str, int] = {}
        self._arrival_seq: dict[str, int] = {}
        self._pending_ids: set[str] = set()
        self._scheduled: dict[str, int] = {}  # job -> version of its pending completion event
        self._slot_jobs: dict[Slot, list[str]] = {}  # running or suspended holders
        self._free: dict[str, set[int]] = {n.name: set(range(n.num_gpus)) for n in cluster.nodes}
        # Sorted view of _free handed to snapshots; rebuilt only for nodes that changed.
        self._free_view: dict[str, tuple[int, ...]] = {
            n: tuple(sorted(g)) for n, g in self._free.items()
        }
        self._free_dirty: set[str] = set()
        self._completed: list[CompletedJob] = []
        self.rejected: list[tuple[JobSpec, str]] = []
        self._results_by_request: dict[str, ActionResult] = {}
        self._pending_arrivals = 0
        # GPU-time accounting for utilisation: slots with at least one RUNNING job.
        self._busy_slots = 0
        self._busy_since_s = 0.0
        self.busy_gpu_s = 0.0
        self.first_submit_s: float | None = None
        #: GPUs held by jobs outside the simulation (see from_state): never free
        self.blocked_gpus: tuple[Slot, ...] = ()
        self._load(jobs)

    # ------------------------------------------------------------------ seeding
    @classmethod
    def from_state(
        cls,
        snapshot: ClusterSnapshot,
        *,
        progress: ProgressModel | None = None,
        restart_overhead_s: float = 30.0,
        max_jobs_per_gpu: int = 2,
    ) -> SimulatedBackend:
        """A simulated cluster that continues ``snapshot`` (a captured state) from its time.

        Contract: the trace is the snapshot's jobs; each arrives at its submit time, or at the
        snapshot time if it was submitted later. Time then stands at the snapshot time (at least
        0) and every job is as the snapshot shows it, its progress folded up to that time:
        running and suspended jobs hold their GPUs, pending ones wait (a preempted job resumes
        from its progress). A job too big for the cluster is in ``rejected``, as for a trace.
        GPUs the snapshot shows neither free nor held by one of its jobs are in
        ``blocked_gpus`` and never become free (their holders are not in the snapshot, so
        nobody knows when they end). Other arguments: as for the constructor.

        The snapshot's jobs are unfinished, with unique ids; a running or suspended job has a
        placement, a pending one has none.

        Raises:
            InputError: a placement names a GPU the cluster does not have, or a GPU is held by
                more than ``max_jobs_per_gpu`` jobs.
        """
        now = snapshot.now_s
        specs = [
            v.spec if v.spec.submit_time_s <= now
            else v.spec.model_copy(update={"submit_time_s": max(0.0, now)})
            for v in snapshot.jobs
        ]
        backend = cls(snapshot.cluster, specs, progress=progress,
                      restart_overhead_s=restart_overhead_s, max_jobs_per_gpu=max_jobs_per_gpu)
        backend.advance_to(max(0.0, now))
        backend._seed(snapshot)
        return backend

    def _seed(self, snapshot: ClusterSnapshot) -> None:
        """Put the (arrived) jobs of ``snapshot`` in their state; block the GPUs held outside."""
        now = self.now_s
        holders: dict[Slot, int] = {}
        placed: list[str] = []
        for v in snapshot.jobs:
            if v.job_id not in self._views:  # rejected: can never fit this cluster
                continue
            # progress folded up to now (a view is exact as of its own accounted_at_s only);
            # the spec as loaded (its submit time may have been moved to the snapshot time)
            update: dict[str, object] = {
                "spec": self._specs[v.job_id],
                "work_done_s": v.work_done_at(now),
                "executed_s": v.executed_at(now),
                "accounted_at_s": now,
                "rate": 0.0,
            }
            if v.state is JobState.PENDING:
                self._store(v.model_copy(update=update))
                continue
            assert v.placement is not None
            missing = missing_gpu(self.cluster, v.placement)
            if missing is not None:
                raise InputError("no such GPU in the cluster", field="placement",
                                 value=f"{missing[0]}:{missing[1]}")
            for slot in v.placement.slots():
                holders[slot] = holders.get(slot, 0) + 1
                if holders[slot] > self.max_jobs_per_gpu:
                    raise InputError(
                        f"GPU {slot[0]}:{slot[1]} is held by more jobs than the replay's "
                        f"capacity of {self.max_jobs_per_gpu} per GPU",
                        field="placement", value=v.job_id,
                    )
            nv = v.model_copy(update=update)
            self._store(nv)
            self._take_slots(nv)
            placed.append(v.job_id)
        blocked: list[Slot] = []
        for node in snapshot.cluster.nodes:
            shown_free = set(snapshot.free_gpus.get(node.name, ()))
            for g in range(node.num_gpus):
                if (node.name, g) not in holders and g not in shown_free:
                    self._free[node.name].discard(g)
                    self._free_dirty.add(node.name)
                    blocked.append((node.name, g))
        self._refresh_rates(placed)
        self.blocked_gpus = tuple(blocked)

    # ------------------------------------------------------------------ trace
    def _load(self, jobs: Iterable[JobSpec]) -> None:
        capacity: dict[str | None, int] = {None: self.cluster.total_gpus}
        for t in self.cluster.gpu_types:
            capacity[t] = self.cluster.gpus_of_type(t)
        for spec in jobs:
            if spec.job_id in self._specs:
                raise ValueError(f"duplicate job id {spec.job_id!r} in trace")
            cap = capacity.get(spec.gpu_type, 0)
            if spec.num_gpus > cap:
                # Never dropped silently: kept in `rejected` and reported by the metrics.
                reason = (
                    f"asks for {spec.num_gpus} GPU(s)"
                    f"{' of type ' + spec.gpu_type if spec.gpu_type else ''}; cluster has {cap}"
                )
                self.rejected.append((spec, reason))
                log.warning("job %s can never run: %s", spec.job_id, reason)
                continue
            self._specs[spec.job_id] = spec
            self._events.push(Event(spec.submit_time_s, EventKind.ARRIVAL, spec.job_id))
            self._pending_arrivals += 1
            if self.first_submit_s is None or spec.submit_time_s < self.first_submit_s:
                self.first_submit_s = spec.submit_time_s

    @property
    def total_jobs(self) -> int:
        return len(self._specs)

    # ------------------------------------------------------------------ clock
    def next_event_s(self) -> float | None:
        if self.event_overhead is not None:
            # superseded completion estimates are no events there: drop them
            while (ev := self._events.peek()) is not None and (
                ev.kind is EventKind.COMPLETION and self._version.get(ev.job_id) != ev.version
            ):
                self._events.pop()
        # a rate change is a stop too: a completion it brings forward must not be overrun
        while (ev := self._rate_changes.peek()) is not None and (
            self._version.get(ev.job_id) != ev.version
        ):
            self._rate_changes.pop()
        times = [t for t in (self._events.peek_time(), self._rate_changes.peek_time())
                 if t is not None]
        return min(times, default=None)

    def advance_to(self, t_s: float) -> None:
        """Move time to ``t_s``, handling every event at or before it."""
        if t_s < self.now_s:
            raise ValueError(f"time cannot go back: {t_s} < now {self.now_s}")
        while True:
            nt = self._events.peek_time()
            rt = self._rate_changes.peek_time()
            if rt is not None and rt <= t_s and (nt is None or rt < nt):
                ev = self._rate_changes.pop()
                self._set_now(ev.time_s)
                if self._version.get(ev.job_id) == ev.version:
                    self._refresh_rates([ev.job_id], force=True)
                continue
            if nt is None or nt > t_s:
                break
            ev = self._events.pop()
            self._set_now(ev.time_s)
            if ev.kind is EventKind.ARRIVAL:
                self._arrive(ev.job_id)
                self._event_seen = True
            elif ev.kind is EventKind.COMPLETION and self._version.get(ev.job_id) == ev.version:
                self._complete(ev.job_id)
                self._event_seen = True
        self._set_now(t_s)

    def scheduling_point(self, *, timer: bool) -> None:
        """The clock stopped here for the scheduler; ``timer``: at the policy's own timer.

        With ``event_overhead``, a stop on an arrival, a completion or the policy's timer is a
        scheduling event: every running job gives back ``min(overhead, time since its previous
        event or start)`` of its progress (a group member: the sum of its running group's
        overheads), and its completion moves accordingly. A job completing here is not charged
        (it is gone); one starting here is charged from its next event on. Without
        ``event_overhead`` this does nothing.
        """
        if self.event_overhead is None or not (self._event_seen or timer):
            return
        self._event_seen = False
        now = self.now_s
        running = [v for v in self._views.values() if v.state is JobState.RUNNING]
        own = {v.job_id: self.event_overhead(v.spec) for v in running}
        groups: dict[str, float] = {}
        for v in running:
            gid = v.settings.group_id
            if gid is not None:
                groups[gid] = groups.get(gid, 0.0) + own[v.job_id]
        for v in running:
            jid = v.job_id
            gid = v.settings.group_id
            overhead = groups[gid] if gid is not None else own[jid]
            mark_t, mark_work = self._marks.get(jid, (now, v.work_done_s))
            work = v.work_done_at(now)
            loss = min(v.rate * min(overhead, now - mark_t), work - mark_work)
            if loss > 0 and work < v.spec.duration_s:
                nv = v.model_copy(update={
                    "work_done_s": work - loss,
                    "executed_s": v.executed_at(now),
                    "accounted_at_s": now,
                })
                self._store(nv)
                self._schedule_completion(nv)
                work -= loss
            self._marks[jid] = (now, work)

    def _set_now(self, t_s: float) -> None:
        if t_s > self.now_s:
            self.busy_gpu_s += self._busy_slots * (t_s - self._busy_since_s)
            self._busy_since_s = t_s
            self.now_s = t_s

    def _arrive(self, job_id: str) -> None:
        self._pending_arrivals -= 1
        spec = self._specs[job_id]
        self._views[job_id] = JobView.model_construct(
            spec=spec,
            state=JobState.PENDING,
            placement=None,
            settings=JobSettings(),
            first_start_s=None,
            accounted_at_s=self.now_s,
            executed_s=0.0,
            work_done_s=0.0,
            rate=0.0,
            stall_until_s=0.0,
            preemptions=0,
        )
        self._version[job_id] = 0
        self._arrival_seq[job_id] = len(self._arrival_seq)
        self._pending_ids.add(job_id)

    def _complete(self, job_id: str) -> None:
        v = self._account(self._views[job_id])
        self._release_slots(v)
        del self._views[job_id]
        self._pending_ids.discard(job_id)
        del self._version[job_id]
        self._scheduled.pop(job_id, None)
        self._marks.pop(job_id, None)
        self._completed.append(
            CompletedJob(
                spec=v.spec,
                first_start_s=v.first_start_s if v.first_start_s is not None else self.now_s,
                finish_s=self.now_s,
                executed_s=v.executed_s,
                preemptions=v.preemptions,
            )
        )
        self._refresh_rates(self._neighbours(v))

    # ------------------------------------------------------------------ backend API
    def snapshot(self) -> ClusterSnapshot:
        return ClusterSnapshot.model_construct(
            now_s=self.now_s,
            cluster=self.cluster,
            jobs=tuple(self._views.values()),
            known_free_gpus=self._free_gpus_view(),
            known_pending=tuple(map(self._views.__getitem__,
                                    sorted(self._pending_ids, key=self._arrival_seq.__getitem__))),
        )

    def _free_gpus_view(self) -> dict[str, tuple[int, ...]]:
        """The free-GPU map for a snapshot: a new dict only when something changed, since
        snapshots are frozen and may keep the old one."""
        if self._free_dirty:
            view = dict(self._free_view)
            for n in self._free_dirty:
                view[n] = tuple(sorted(self._free[n]))
            self._free_view = view
            self._free_dirty.clear()
        return self._free_view

    def finished(self) -> bool:
        return not self._views and self._pending_arrivals == 0

    def completed(self) -> list[CompletedJob]:
        return list(self._completed)

    @property
    def completed_count(self) -> int:
        return len(self._completed)

    def apply(self, actions: Sequence[Action]) -> list[ActionResult]:
        changed: list[JobView] = []

        def admit(_index: int, action: Action) -> None:
            changed.extend(self._apply_one(action))

        results = apply_idempotent(
            actions, self._results_by_request, admit, on_rejected=self._log_rejection
        )
        if changed:
            affected: dict[str, None] = {}
            for v in changed:
                for n in self._neighbours(v):
                    affected[n] = None
                if v.job_id in self._views:
                    affected[v.job_id] = None
            self._refresh_rates(affected)
        return results

    def _log_rejection(self, action: Action, exc: Exception) -> None:
        log.debug("t=%.0f rejected %s %s: %s", self.now_s, action.kind, action.job_id, exc)

    # ------------------------------------------------------------------ actions
    def _apply_one(self, a: Action) -> list[JobView]:
        v = self._views.get(a.job_id)
        if v is None:
            raise ActionRejected(f"job {a.job_id} is not active (unknown, not arrived or finished)")
        kind = a.kind
        if isinstance(a, (Start, Share)):
            require(v, JobState.PENDING, kind)
            self._check_placement(v, a.placement, allow_shared=isinstance(a, Share), exact=True)
            restarted = v.first_start_s is not None
            return [self._place(v, a.placement, a.settings, restarted=restarted)]
        if isinstance(a, Suspend):
            require(v, JobState.RUNNING, kind)
            return [self._set_state(v, JobState.SUSPENDED)]
        if isinstance(a, Resume):
            require(v, JobState.SUSPENDED, kind)
            return [self._set_state(v, JobState.RUNNING)]
        if isinstance(a, Preempt):
            if v.state not in (JobState.RUNNING, JobState.SUSPENDED):
                raise ActionRejected(f"cannot preempt job {v.job_id} in state {v.state}")
            v = self._account(v)
            self._release_slots(v)
            nv = v.model_copy(
                update={
                    "state": JobState.PENDING,
                    "placement": None,
                    "rate": 0.0,
                    "preemptions": v.preemptions + 1,
                }
            )
            self._store(nv)
            return [v]
        if isinstance(a, (Migrate, Reconfigure)):
            if isinstance(a, Migrate):
                require(v, JobState.RUNNING, kind)
            elif v.state is JobState.SUSPENDED:
                raise ActionRejected(f"cannot reconfigure suspended job {v.job_id}; resume first")
            if (isinstance(a, Reconfigure) and self.in_place_settings
                    and v.state is JobState.RUNNING and a.placement == v.placement):
                v = self._account(v)
                self._store(v.model_copy(update={"settings": a.settings}))
                self._refresh_rates([v.job_id], force=True)
                return [v, self._views[v.job_id]]
            old = v
            if v.state is not JobState.PENDING:
                v = self._account(v)
                self._release_slots(v)
                v = v.model_copy(update={"state": JobState.PENDING, "placement": None})
                self._store(v)
            try:
                self._check_placement(v, a.placement, allow_shared=False,
                                      exact=isinstance(a, Migrate))
            except ActionRejected:
                if old.state is not JobState.PENDING:  # put it back as it was
                    self._store(old)
                    self._take_slots(old)
                raise
            settings = a.settings if isinstance(a, Reconfigure) else v.settings
            restarted = v.first_start_s is not None
            nv = self._place(v, a.placement, settings, restarted=restarted)
            return [old, nv]
        raise ActionRejected(f"unknown action kind {kind!r}")

    def _check_placement(
        self, v: JobView, p: Placement, *, allow_shared: bool, exact: bool
    ) -> None:
        """The shared placement checks against this cluster's holders and sharing capacity."""
        check_placement(
            v,
            p,
            self.cluster,
            self._slot_jobs,
            share=allow_shared,
            exact=exact,
            max_jobs_per_gpu=self.max_jobs_per_gpu,
        )

    # ------------------------------------------------------------------ state changes
    def _place(
        self, v: JobView, p: Placement, settings: JobSettings, *, restarted: bool
    ) -> JobView:
        now = self.now_s
        nv = v.model_copy(
            update={
                "state": JobState.RUNNING,
                "placement": p,
                "settings": settings,
                "first_start_s": v.first_start_s if v.first_start_s is not None else now,
                "accounted_at_s": now,
                "stall_until_s": now + (self.restart_overhead_s if restarted
                                        else self.start_overhead_s),
                "rate": 0.0,  # set by _refresh_rates
            }
        )
        self._store(nv)
        self._take_slots(nv)
        if self.event_overhead is not None:
            self._marks[nv.job_id] = (now, nv.work_done_s)
        return nv

    def _set_state(self, v: JobView, state: JobState) -> JobView:
        v = self._account(v)
        was_running = v.state is JobState.RUNNING
        nv = v.model_copy(update={"state": state, "rate": 0.0})
        self._store(nv)
        if was_running != (state is JobState.RUNNING):
            delta = -1 if was_running else 1
            for slot in nv.placement.slots() if nv.placement else ():
                if not self._running_on(slot, exclude=nv.job_id):
                    self._busy_slots += delta
        return nv

    def _account(self, v: JobView) -> JobView:
        """Fold progress up to now into the stored view."""
        now = self.now_s
        if v.state is not JobState.RUNNING or now == v.accounted_at_s:
            if v.accounted_at_s != now:
                v = v.model_copy(update={"accounted_at_s": now})
                self._views[v.job_id] = v
            return v
        nv = v.model_copy(
            update={
                "work_done_s": v.work_done_at(now),
                "executed_s": v.executed_at(now),
                "accounted_at_s": now,
            }
        )
        self._views[v.job_id] = nv
        return nv

    def _store(self, v: JobView) -> None:
        self._views[v.job_id] = v
        if v.state is JobState.PENDING:
            self._pending_ids.add(v.job_id)
        else:
            self._pending_ids.discard(v.job_id)
        self._version[v.job_id] += 1  # invalidates any scheduled completion

    def _running_on(self, slot: Slot, exclude: str) -> bool:
        return any(
            j != exclude and self._views[j].state is JobState.RUNNING
            for j in self._slot_jobs.get(slot, ())
        )

    def _take_slots(self, v: JobView) -> None:
        assert v.placement is not None
        running = v.state is JobState.RUNNING
        for slot in v.placement.slots():
            holders = self._slot_jobs.setdefault(slot, [])
            if running and not self._running_on(slot, exclude=v.job_id):
                self._busy_slots += 1
            holders.append(v.job_id)
            self._free[slot[0]].discard(slot[1])
            self._free_dirty.add(slot[0])

    def _release_slots(self, v: JobView) -> None:
        if v.placement is None:
            return
        running = v.state is JobState.RUNNING
        for slot in v.placement.slots():
            holders = self._slot_jobs[slot]
            holders.remove(v.job_id)
            if running and not self._running_on(slot, exclude=v.job_id):
                self._busy_slots -= 1
            if not holders:
                del self._slot_jobs[slot]
                self._free[slot[0]].add(slot[1])
                self._free_dirty.add(slot[0])

    def _neighbours(self, v: JobView) -> list[str]:
        """Active jobs sharing a GPU with ``v``'s placement (excluding ``v``)."""
        if v.placement is None:
            return []
        out: dict[str, None] = {}
        for slot in v.placement.slots():
            for j in self._slot_jobs.get(slot, ()):
                if j != v.job_id:
                    out[j] = None
        return list(out)

    def _refresh_rates(self, job_ids: Iterable[str], *, force: bool = False) -> None:
        """Recompute the rate of each running job given; reschedule its completion (``force``:
        even when the rate is unchanged, as at a change the progress model announced)."""
        for jid in job_ids:
            v = self._views.get(jid)
            if v is None:
                continue
            if v.state is not JobState.RUNNING or v.placement is None:
                continue
            placement = v.placement
            if force:
                v = self._account(v)  # the model's rate depends on the work done by now
            co = [
                self._views[j]
                for j in self._neighbours(v)
                if self._views[j].state is JobState.RUNNING
            ]
            rate = self.progress.rate(v, placement, co, self.cluster)
            if rate <= 0:
                raise ValueError(f"progress model gave rate {rate} for job {jid}")
            if rate == v.rate and self._has_completion(v) and not force:
                continue
            v = self._account(v)
            nv = v.model_copy(update={"rate": rate})
            self._store(nv)
            self._schedule_completion(nv)

    def _schedule_completion(self, v: JobView) -> None:
        """Push the completion of running ``v`` at its rate, and the time its rate changes by
        itself if the progress model says it does before then (both for its current version)."""
        jid = v.job_id
        begin = max(self.now_s, v.stall_until_s)
        left = max(0.0, v.spec.duration_s - v.work_done_s)
        self._events.push(Event(begin + left / v.rate, EventKind.COMPLETION, jid,
                                self._version[jid]))
        self._scheduled[jid] = self._version[jid]
        assert v.placement is not None
        until = self.progress.rate_holds_until(v, v.placement)
        if until is not None and v.work_done_s < until < v.spec.duration_s:
            change = begin + (until - v.work_done_s) / v.rate
            # the kind is unused in that queue: every entry there is a rate change
            self._rate_changes.push(Event(change, EventKind.COMPLETION, jid, self._version[jid]))

    def _has_completion(self, v: JobView) -> bool:
        return self._scheduled.get(v.job_id) == self._version[v.job_id]

    # ------------------------------------------------------------------ introspection
    def jobs_on_gpu(self, node: str, gpu: int) -> tuple[str, ...]:
        """Jobs holding one GPU now (running or suspended)."""
        return tuple(self._slot_jobs.get((node, gpu), ()))
