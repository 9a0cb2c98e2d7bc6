"""Safety limits around any policy: the production daemon never runs a policy bare.

A research policy may re-rank every job at every cycle; on a live cluster a wall-clock cycle
every few seconds can then checkpoint and requeue the same jobs again and again (each restart
costs minutes of GPU time). :class:`SafePolicy` wraps the policy and filters its actions with
three limits (:class:`~slurm_sched.service.config.SafetyConfig`):

1. **Minimum run time**: no restart (Preempt, Migrate, or Reconfigure of a running or suspended
   job) of a job whose current run is younger than ``min_runtime_before_preempt_s`` (wall time
   since the run began, suspended time included: the limit bounds how often a job can be
   restarted, which is a wall-clock rate).
2. **Budget**: at most ``max_preemptions_per_cycle`` restarts per cycle, the first ones in the
   policy's order.
3. **Loop detection**: a job restarted ``loop_preemptions`` times within ``loop_window_s`` is
   pinned: it is never restarted again until it ends.

When a restart is dropped, the job keeps its GPUs, so every later action of the same cycle that
needed them (a Start, Share, Migrate or Reconfigure whose placement overlaps them) is dropped as
well, and so is every later action on that job; otherwise those actions would fail in the
backend. A dropped Migrate/Reconfigure also keeps the job on its old GPUs. ``refusals`` lists
the dropped actions of the last cycle with a human reason.

What a snapshot does not say, SafePolicy tracks itself from the actions it let through:
:class:`~slurm_sched.model.job.JobView` has the first start of a job but not the start of its
current run. A run begins when SafePolicy lets a Start/Share/Migrate/Reconfigure of the job
through. A job first seen running without such an action (it was running before the daemon
started) is assumed to have begun its run at the later of its first start and
``clock_start_s`` (default: the time of the first cycle): conservative, it is protected for the
minimum run time after the daemon starts. Restarts counted for loop detection are the ones
SafePolicy let through (a restart the backend then failed still counts: it pins sooner, never
later).

Besides delegating to the policy's own timer, ``next_wakeup_s`` asks for a cycle when a restart
refused for the minimum run time becomes allowed, so the policy gets to decide again then
(without it an event-driven policy such as SRTF would wait for the next arrival or completion).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from slurm_sched.model import Action, ClusterSnapshot, JobState, JobView
from slurm_sched.model.actions import PLACING_KINDS
from slurm_sched.policy.base import Policy
from slurm_sched.service.config import SafetyConfig

Slot = tuple[str, int]

#: Class attributes copied from the wrapped policy, so that the wrapper is transparent to the
#: controller, the simulator (sharing capacity, progress model) and the CLI.
TRANSPARENT_ATTRIBUTES = (
    "name",
    "paper",
    "summary",
    "clairvoyant",
    "shares_gpus",
    "max_jobs_per_gpu",
    "elastic",
    "progress_model",
)

_HOLDING = (JobState.RUNNING, JobState.SUSPENDED)


class SafePolicy(Policy):
    """``inner`` with the safety limits ``limits`` applied to its actions (module docstring)."""

    name = "safe"

    def __init__(
        self, inner: Policy, limits: SafetyConfig, clock_start_s: float | None = None
    ) -> None:
        self.inner = inner
        self.limits = limits
        self.clock_start_s = clock_start_s
        for attr in TRANSPARENT_ATTRIBUTES:
            setattr(self, attr, getattr(inner, attr))
        #: dropped actions of the last ``decide``, with the reason
        self.refusals: list[tuple[Action, str]] = []
        #: restarts let through over the whole run (kept per kind, for reports and tests)
        self.restarts_allowed = 0
        self.restarts_refused = 0
        self._run_start: dict[str, float] = {}
        self._restarts: dict[str, deque[float]] = {}
        self._pinned: dict[str, str] = {}  # job -> why
        self._retry_at: float | None = None

    # ------------------------------------------------------------------ queries
    def run_start_s(self, job_id: str) -> float | None:
        """When the current run of ``job_id`` began, as tracked (None: not running)."""
        return self._run_start.get(job_id)

    def is_pinned(self, job_id: str) -> bool:
        return job_id in self._pinned

    # ------------------------------------------------------------------ Policy API
    def decide(self, snapshot: ClusterSnapshot, now_s: float) -> list[Action]:
        if self.clock_start_s is None:
            self.clock_start_s = now_s
        self._observe(snapshot)
        actions = self.inner.decide(snapshot, now_s)
        self.refusals = []
        self._retry_at = None
        if not actions:
            return actions
        return self._filter(snapshot, now_s, actions)

    def next_wakeup_s(self, snapshot: ClusterSnapshot, now_s: float) -> float | None:
        wake = self.inner.next_wakeup_s(snapshot, now_s)
        retry = self._retry_at
        if retry is not None and retry > now_s and (wake is None or retry < wake):
            return retry
        return wake

    def explain(self, snapshot: ClusterSnapshot, job_id: str) -> str:
        text = self.inner.explain(snapshot, job_id)
        why = self._pinned.get(job_id)
        if why is not None:
            text += (f"\nsafety: pinned ({why}); it is not preempted, migrated or "
                     "reconfigured again until it ends")
        job = snapshot.by_id.get(job_id)
        start = self._run_start.get(job_id)
        if why is None and job is not None and job.state in _HOLDING and start is not None:
            until = start + self.limits.min_runtime_before_preempt_s
            if until > snapshot.now_s:
                text += (f"\nsafety: protected from restarts for {until - snapshot.now_s:.0f} s "
                         f"more (minimum run time {self.limits.min_runtime_before_preempt_s:g} s)")
        return text

    # ------------------------------------------------------------------ tracking
    def _observe(self, snapshot: ClusterSnapshot) -> None:
        """Fold the snapshot into the tracked runs: forget jobs that ended or wait, and give
        jobs seen holding GPUs for the first time a run start."""
        by_id = snapshot.by_id
        for jid in [j for j in self._run_start if (v := by_id.get(j)) is None
                    or v.state is JobState.PENDING]:
            del self._run_start[jid]
        if len(self._restarts) + len(self._pinned) > 0:
            for jid in [j for j in self._restarts if j not in by_id]:
                del self._restarts[jid]
            for jid in [j for j in self._pinned if j not in by_id]:
                del self._pinned[jid]  # pinned "until it ends": it ended
        assert self.clock_start_s is not None
        for job in snapshot.running + snapshot.suspended:
            if job.job_id not in self._run_start:
                first = job.first_start_s if job.first_start_s is not None else self.clock_start_s
                self._run_start[job.job_id] = max(first, self.clock_start_s)

    def _count_restart(self, job_id: str, now_s: float) -> None:
        window = self.limits.loop_window_s
        times = self._restarts.setdefault(job_id, deque())
        times.append(now_s)
        while times and times[0] <= now_s - window:
            times.popleft()
        if len(times) >= self.limits.loop_preemptions:
            self._pinned[job_id] = (
                f"restarted {len(times)} times within {window:g} s "
                f"(loop limit {self.limits.loop_preemptions})"
            )

    # ------------------------------------------------------------------ filtering
    def _restart_refusal(self, job: JobView, now_s: float, kept_restarts: int) -> str | None:
        """Why restarting ``job`` now is not allowed, or None."""
        pinned = self._pinned.get(job.job_id)
        if pinned is not None:
            return f"pinned: {pinned}"
        start = self._run_start.get(job.job_id)
        min_run = self.limits.min_runtime_before_preempt_s
        if start is not None and now_s - start < min_run:
            ready = start + min_run
            if self._retry_at is None or ready < self._retry_at:
                self._retry_at = ready
            return (f"current run is {now_s - start:.0f} s old, minimum before a restart is "
                    f"{min_run:g} s")
        if kept_restarts >= self.limits.max_preemptions_per_cycle:
            return f"restart budget of {self.limits.max_preemptions_per_cycle} per cycle used"
        return None

    def _filter(
        self, snapshot: ClusterSnapshot, now_s: float, actions: Iterable[Action]
    ) -> list[Action]:
        by_id = snapshot.by_id
        kept: list[Action] = []
        kept_restarts = 0
        blocked: dict[Slot, str] = {}  # GPUs a refused action left held -> by which job
        refused_jobs: dict[str, str] = {}  # job whose restart was refused -> reason
        for action in actions:
            jid = action.job_id
            job = by_id.get(jid)
            if jid in refused_jobs:
                self._refuse(action, f"an earlier action on job {jid} was refused "
                                     f"({refused_jobs[jid]})")
                continue
            restarts = job is not None and _is_restart(action, job)
            if restarts:
                assert job is not None and job.placement is not None
                why = self._restart_refusal(job, now_s, kept_restarts)
                if why is not None:
                    self._refuse(action, why)
                    self.restarts_refused += 1
                    refused_jobs[jid] = why
                    for slot in job.placement.slots():
                        blocked.setdefault(slot, jid)
                    continue
            if action.kind in PLACING_KINDS:
                placement = action.placement  # type: ignore[union-attr]
                clash = next((s for s in placement.slots() if s in blocked), None)
                if clash is not None:
                    holder = blocked[clash]
                    self._refuse(action, f"needs GPU {clash[0]}:{clash[1]}, which job {holder} "
                                         "keeps because its restart was refused")
                    if restarts and job is not None and job.placement is not None:
                        # a refused move leaves the job where it is
                        refused_jobs[jid] = "its move was refused"
                        for slot in job.placement.slots():
                            blocked.setdefault(slot, jid)
                    continue
            kept.append(action)
            if restarts:
                kept_restarts += 1
                self.restarts_allowed += 1
                self._count_restart(jid, now_s)
                if action.kind == "preempt":
                    self._run_start.pop(jid, None)
            if action.kind in PLACING_KINDS:
                self._run_start[jid] = now_s
        return kept

    def _refuse(self, action: Action, why: str) -> None:
        self.refusals.append((action, why))


def _is_restart(action: Action, job: JobView) -> bool:
    """True when ``action`` checkpoints and restarts a job that holds GPUs now."""
    if job.state not in _HOLDING:
        return False
    return action.kind in ("preempt", "migrate", "reconfigure")
