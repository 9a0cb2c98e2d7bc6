"""A-SRPT: prediction-assisted online scheduling of mixed-parallel DL jobs.

Paper: Z. Luo, J. Liu, M. Lee, N. B. Shroff, "Prediction-Assisted Online Distributed Deep
Learning Workload Scheduling in GPU Clusters", arXiv 2501.05563 (spec ``shared/specs/a-srpt.md``).

How it works (spec sections 2.5-2.6):

1. At arrival, a random forest predicts the job's iterations ``n~`` from its recurring-job group
   and user (``slurm_sched.perf.iteration_predictor``); its virtual size is
   ``p~ = (g_i / G) * n~ * alpha~_min`` (the whole cluster as one machine of speed 1).
2. A virtual single machine runs preemptive SRPT over the virtual sizes (:class:`VirtualSrpt`).
   A job enters ``pending_queue`` at its virtual completion time, so larger predicted workloads
   start later and leave room for small jobs still to come.
3. Algorithm 1 starts jobs on the real cluster strictly in queue order (no backfilling: when
   the head does not fit, nothing starts). A communication-heavy job (``alpha_max / alpha~_min
   >= 1.5``) takes GPUs from the servers with the most free GPUs; if the Heavy-Edge mapping there
   is still slower than ``1.5 alpha~_min`` it may wait until ``t + tau * p~`` for a better one
   (blocking: nothing else starts meanwhile). Other jobs take the least-free servers (they fill
   fragments and keep empty servers for heavy jobs). Jobs are never preempted.
4. The predictor learns online: a job this policy started that disappears from the snapshot has
   completed; its iteration count is ``elapsed / alpha(x)`` (exact in the simulator, the spec's
   "elapsed / alpha estimate" on Slurm) and is fed to the predictor.

Job inputs (``JobSpec.attrs``): ``asrpt_stages`` (inline profile, see
:meth:`~slurm_sched.perf.asrpt_model.JobProfile.to_json`) or ``asrpt_profile`` (a synthetic
table name), ``group`` (recurring-job group id). The policy never reads ``duration_s`` (only
:class:`~slurm_sched.policy.a_srpt_baselines.ASrptPerfect` does) nor ``iterations``.

Deviations / readings (see docs/reproductions/a-srpt.md):
- Jobs without a profile are opaque: one "iteration" = one second of run time on any placement
  (alpha = 1 s), never communication-heavy. Jobs without ``attrs["group"]`` get the derived
  group ``user|model|num_gpus``.
- The virtual machine advances in continuous time, event-driven (reading B8); ties follow
  section 2.8. A job first seen after its submit time (a scheduler restart, a late poll) enters
  the virtual machine at its submit time if the virtual clock has not passed it, else now; after
  a restart the virtual state is rebuilt from the submit times of the pending jobs.
- The delay deadline ``t + tau * p~`` is re-evaluated at every cycle (every completion) and at
  the deadline itself (a policy timer), the event-driven equivalent of lines 16-19. ``tau``
  defaults to 1 (reading B6; the testbed used 0: the ``a-srpt-tau0`` variant).
- A job requiring a GPU type only counts that type's free GPUs; TP jobs need whole TP groups
  per server (section 2.10 extension) and wait at the head until those exist.
"""

from __future__ import annotations

import functools
import heapq
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from slurm_sched.model import Action, ClusterSnapshot, JobState, JobView, Placement, Start
from slurm_sched.perf.asrpt_model import (
    COMM_HEAVY,
    JobProfile,
    Network,
    alpha_max,
    alpha_min_est,
    alpha_on_placement,
    profile_of,
)
from slurm_sched.perf.iteration_predictor import IterationPredictor, RandomForestPredictor
from slurm_sched.policy.base import Policy
from slurm_sched.policy.placement import FreeMap, free_map

PAPER = "Luo et al., arXiv 2501.05563 (A-SRPT: prediction-assisted SRPT, mixed parallelism)"
ServerOrder = Literal["most", "least", "best-fit"]


# ============================================================ virtual single machine (2.5)
class VirtualSrpt:
    """Preemptive SRPT on one machine of speed 1, advanced event by event.

    Heap key (remaining, release, job id): the job with the least remaining size runs; ties by
    release then id (section 2.8). Decreasing the top's key keeps the heap valid, so advancing
    costs O(log n) per completion.
    """

    def __init__(self) -> None:
        self.now_s = -math.inf
        self._heap: list[tuple[float, float, str]] = []

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, job_id: str, release_s: float, size_s: float) -> list[tuple[str, float]]:
        """Advance to ``release_s`` (returning the completions on the way), then add the job.

        A release earlier than the virtual clock is taken as now (the job was seen late).
        """
        if not size_s >= 0:
            raise ValueError(f"job {job_id}: virtual size must be >= 0, got {size_s}")
        done = self.advance_to(release_s) if release_s > self.now_s else []
        if self.now_s == -math.inf:
            self.now_s = release_s
        heapq.heappush(self._heap, (size_s, max(release_s, self.now_s), job_id))
        return done + self.advance_to(self.now_s)  # zero-size jobs complete at once

    def advance_to(self, t_s: float) -> list[tuple[str, float]]:
        """Process until ``t_s``; return (job id, virtual completion time) in completion order."""
        out: list[tuple[str, float]] = []
        if self.now_s == -math.inf:
            self.now_s = t_s
            return out
        heap = self._heap
        while heap and self.now_s + heap[0][0] <= t_s:
            rem, _, jid = heapq.heappop(heap)
            self.now_s += rem
            out.append((jid, self.now_s))
        if heap and t_s > self.now_s:
            rem, rel, jid = heap[0]
            heapq.heapreplace(heap, (rem - (t_s - self.now_s), rel, jid))
        self.now_s = max(self.now_s, t_s)
        return out

    def next_completion_s(self) -> float | None:
        return self.now_s + self._heap[0][0] if self._heap else None

    def remaining_s(self, job_id: str) -> float | None:
        for rem, _, jid in self._heap:
            if jid == job_id:
                return rem
        return None


def srpt_completions(jobs: Sequence[tuple[str, float, float]]) -> list[tuple[str, float]]:
    """(id, release, size) -> [(id, completion)] in completion order (offline helper)."""
    vm = VirtualSrpt()
    out: list[tuple[str, float]] = []
    for jid, rel, size in sorted(jobs, key=lambda j: (j[1], j[0])):
        out.extend(vm.add(jid, rel, size))
    out.extend(vm.advance_to(math.inf))
    return out


# ======================================================================= per-job knowledge
@dataclass
class JobInfo:
    """What the policy derived about a job at its arrival (fixed from then on)."""

    job_id: str
    release_s: float
    num_gpus: int
    gpu_type: str | None
    profile: JobProfile | None
    group: str
    user: str
    alpha_min_s: float
    alpha_max_s: float
    predicted_iters: float
    virtual_size_s: float
    start_s: float | None = None
    alpha_run_s: float | None = None

    @property
    def comm_heavy(self) -> bool:
        return self.alpha_min_s > 0 and self.alpha_max_s / self.alpha_min_s >= COMM_HEAVY

    @property
    def tp(self) -> int:
        return self.profile.tp if self.profile is not None else 1

    @property
    def predicted_duration_s(self) -> float:
        return self.predicted_iters * self.alpha_min_s


def group_of(job: JobView) -> str:
    """Recurring-job group id: ``attrs["group"]``, else derived from user, model and GPUs."""
    g = job.spec.attrs.get("group")
    if g is not None:
        return str(g)
    return f"{job.spec.user}|{job.spec.model or '-'}|{job.spec.num_gpus}"


# ======================================================================= placement helpers
def feasible(free: FreeMap, num_gpus: int, unit: int = 1) -> bool:
    """Whether ``num_gpus`` GPUs in whole groups of ``unit`` per server are free."""
    if unit == 1:
        return sum(map(len, free.values())) >= num_gpus
    return sum(len(g) // unit * unit for g in free.values()) >= num_gpus


def pick_servers(
    free: FreeMap, num_gpus: int, order: ServerOrder, unit: int = 1
) -> dict[str, int] | None:
    """GPUs per server: servers by free GPUs (most or least first, ties by cluster order),
    taking ``min(free, remaining)`` (in whole ``unit`` groups) from each (reading B7).

    ``best-fit``: the server with the fewest free GPUs that holds the whole job, else ``most``
    (the consolidating packer of the other baselines, used by the placement ablation)."""
    if num_gpus <= 0:
        return {}
    # One C-level pass for the counts, then list.index scans per count value: the policies
    # call this once per started job on clusters of thousands of servers.
    if unit == 1:
        counts = list(map(len, free.values()))
    else:
        counts = [len(g) // unit * unit for g in free.values()]
    top = max(counts, default=0)
    names = list(free)
    if order == "best-fit":
        for c in range(num_gpus, top + 1):
            if c in counts:  # the fewest that hold the job, first in cluster order
                return {names[counts.index(c)]: num_gpus}
        order = "most"
    values = range(top, 0, -1) if order == "most" else range(1, top + 1)
    need = num_gpus
    out: dict[str, int] = {}
    for c in values:
        at = 0
        while True:
            try:
                at = counts.index(c, at)
            except ValueError:
                break
            take = min(c, need)
            out[names[at]] = take
            need -= take
            if need == 0:
                return out
            at += 1
    return None


def take_gpus(free: FreeMap, counts: dict[str, int]) -> Placement:
    """Turn per-node counts into a placement on the lowest free indices (removed from free)."""
    alloc: dict[str, list[int]] = {}
    for node, c in counts.items():
        alloc[node] = free[node][:c]
        del free[node][:c]
    return Placement.of(alloc)


class PredictiveBase(Policy):
    """Shared machinery of A-SRPT and its baselines: per-job estimates at arrival, online
    training of the predictor from completions, alpha of a placement."""

    paper = PAPER
    progress_model = "a-srpt"

    def __init__(
        self,
        predictor: IterationPredictor | None = None,
        *,
        net: Network | None = None,
        keep_predictions: bool = False,
    ) -> None:
        self.predictor = predictor if predictor is not None else RandomForestPredictor()
        self.net = net or Network()
        self.info: dict[str, JobInfo] = {}
        #: job id -> predicted iterations of every job seen (only with ``keep_predictions``;
        #: for evaluation: ``info`` forgets finished jobs)
        self.predictions: dict[str, float] | None = {} if keep_predictions else None
        self._started: dict[str, JobInfo] = {}
        #: (job id, group, user, observed iterations) of every completion this policy saw
        self.observed: list[tuple[str, str, str, float]] = []

    # ---------------------------------------------------------------- prediction
    def predict_iterations(self, job: JobView, info_group: str, alpha_min_s: float) -> float:
        """Predicted iterations at submission (the clairvoyant variant overrides this)."""
        return self.predictor.predict(info_group, job.spec.user)

    def _register(self, job: JobView, cluster_gpus: int, gpus_per_server: int) -> JobInfo:
        prof = profile_of(job.spec)
        if prof is not None and prof.tp <= gpus_per_server:
            amin = alpha_min_est(prof, gpus_per_server, self.net)
            amax = alpha_max(prof, gpus_per_server, self.net)
        else:
            prof, amin, amax = None, 1.0, 1.0
        group = group_of(job)
        n_pred = max(0.0, self.predict_iterations(job, group, amin))
        size = job.spec.num_gpus / cluster_gpus * n_pred * amin
        info = JobInfo(
            job_id=job.job_id, release_s=job.spec.submit_time_s, num_gpus=job.spec.num_gpus,
            gpu_type=job.spec.gpu_type, profile=prof, group=group, user=job.spec.user,
            alpha_min_s=amin, alpha_max_s=amax, predicted_iters=n_pred, virtual_size_s=size,
        )
        self.info[job.job_id] = info
        if self.predictions is not None:
            self.predictions[job.job_id] = n_pred
        return info

    def _new_arrivals(self, snapshot: ClusterSnapshot) -> list[JobInfo]:
        """Register pending jobs seen for the first time, in (submit, id) order."""
        new = [j for j in snapshot.pending if j.job_id not in self.info]
        if not new:
            return []
        new.sort(key=lambda j: (j.spec.submit_time_s, j.job_id))
        cluster = snapshot.cluster
        g = max(1, cluster.max_gpus_per_node)
        return [self._register(j, max(1, cluster.total_gpus), g) for j in new]

    def _learn_completions(self, snapshot: ClusterSnapshot, now_s: float) -> list[str]:
        """Feed jobs this policy started and that are gone to the predictor. Returns ids of
        started jobs that are pending again (requeued by someone else)."""
        if not self._started:
            return []
        by_id = snapshot.by_id
        requeued: list[str] = []
        for jid in list(self._started):
            view = by_id.get(jid)
            info = self._started[jid]
            if view is None:
                del self._started[jid]
                self.info.pop(jid, None)
                if info.start_s is None or not info.alpha_run_s:
                    continue
                n_obs = max(0.0, (now_s - info.start_s) / info.alpha_run_s)
                n_obs = float(round(n_obs, 6))
                self.predictor.observe(info.group, info.user, n_obs)
                self.observed.append((jid, info.group, info.user, n_obs))
            elif view.state is JobState.PENDING:
                del self._started[jid]
                info.start_s = info.alpha_run_s = None
                requeued.append(jid)
        return requeued

    # ---------------------------------------------------------------- placement
    def _free_for(self, free: FreeMap, snapshot: ClusterSnapshot, info: JobInfo) -> FreeMap:
        if info.gpu_type is None:
            return free
        by_name = snapshot.cluster.by_name
        return {n: g for n, g in free.items() if by_name[n].gpu_type == info.gpu_type}

    def _plan(
        self, free: FreeMap, snapshot: ClusterSnapshot, info: JobInfo, order: ServerOrder
    ) -> tuple[dict[str, int], float] | None:
        """Per-node GPU counts on the most/least free servers and alpha of that placement."""
        sub = self._free_for(free, snapshot, info)
        counts = pick_servers(sub, info.num_gpus, order, info.tp)
        if counts is None:
            return None
        if info.profile is None:
            return counts, info.alpha_min_s
        place = Placement.of({n: list(range(c)) for n, c in counts.items()})
        return counts, alpha_on_placement(info.profile, place, snapshot.cluster, self.net)

    def _must_plan(
        self, free: FreeMap, snapshot: ClusterSnapshot, info: JobInfo, order: ServerOrder
    ) -> tuple[dict[str, int], float]:
        """:meth:`_plan` for a job already checked by :meth:`_fits`."""
        plan = self._plan(free, snapshot, info, order)
        if plan is None:  # _fits and pick_servers count the same whole TP groups
            raise AssertionError(f"job {info.job_id} fits but no placement was found")
        return plan

    def _start(
        self, free: FreeMap, snapshot: ClusterSnapshot, info: JobInfo, counts: dict[str, int],
        alpha_s: float, now_s: float, reason: str,
    ) -> Start:
        sub = self._free_for(free, snapshot, info)
        placement = take_gpus(sub, counts)
        info.start_s = now_s
        info.alpha_run_s = alpha_s
        self._started[info.job_id] = info
        return Start(job_id=info.job_id, placement=placement,
                     reason=f"{reason}; alpha={alpha_s:.4g}s vs min {info.alpha_min_s:.4g}s")

    def _fits(self, free: FreeMap, snapshot: ClusterSnapshot, info: JobInfo) -> bool:
        return feasible(self._free_for(free, snapshot, info), info.num_gpus, info.tp)


@dataclass
class _Delay:
    job_id: str
    kappa_s: float
    deadline_s: float


class ASrpt(PredictiveBase):
    """A-SRPT (Algorithm 1) over a virtual single-machine SRPT schedule."""

    name = "a-srpt"
    summary = ("A-SRPT: random-forest iteration prediction, virtual single-machine SRPT order, "
               "Heavy-Edge placement, comm-heavy delay (tau=1); non-preemptive")

    def __init__(
        self,
        predictor: IterationPredictor | None = None,
        *,
        tau: float = 1.0,
        comm_heavy: float = COMM_HEAVY,
        nonblocking_delay: bool = False,
        net: Network | None = None,
        keep_predictions: bool = False,
    ) -> None:
        super().__init__(predictor, net=net, keep_predictions=keep_predictions)
        if not (tau >= 0 and math.isfinite(tau)):
            raise ValueError(f"tau must be finite and >= 0, got {tau}")
        if not comm_heavy > 0:
            raise ValueError(f"comm_heavy must be > 0, got {comm_heavy}")
        self.tau = tau
        self.comm_heavy = comm_heavy
        self.nonblocking_delay = nonblocking_delay
        self.vm = VirtualSrpt()
        self.queue: deque[str] = deque()
        #: virtual completion time of every job that reached the queue (ordering invariant)
        self.virtual_done_s: dict[str, float] = {}
        self._delays: dict[str, _Delay] = {}

    # ---------------------------------------------------------------- the cycle
    def decide(self, snapshot: ClusterSnapshot, now_s: float) -> list[Action]:
        requeued = self._learn_completions(snapshot, now_s)
        if len(self.virtual_done_s) > 2 * len(self.info) + 64:  # forget finished jobs
            self.virtual_done_s = {j: t for j, t in self.virtual_done_s.items() if j in self.info}
        for jid in reversed(requeued):  # a requeued job goes back to the head
            self.queue.appendleft(jid)
        for info in self._new_arrivals(snapshot):
            self._enqueue(self.vm.add(info.job_id, info.release_s, info.virtual_size_s))
        self._enqueue(self.vm.advance_to(now_s))
        if not self.queue and not self._delays:
            return []
        free = free_map(snapshot)
        actions: list[Action] = []
        if self.nonblocking_delay:
            actions.extend(self._serve_parked(snapshot, free, now_s))
        by_id = snapshot.by_id
        while self.queue:
            jid = self.queue[0]
            view = by_id.get(jid)
            if view is None or view.state is not JobState.PENDING:
                self.queue.popleft()  # cancelled, or started elsewhere
                if view is None:
                    self.info.pop(jid, None)
                    self._delays.pop(jid, None)
                continue
            info = self.info[jid]
            if not self._fits(free, snapshot, info):
                break  # line 24: the head waits for GPUs, nothing else starts
            if not info.comm_heavy:  # lines 20-22
                counts, a = self._must_plan(free, snapshot, info, "least")
                self.queue.popleft()
                actions.append(self._start(free, snapshot, info, counts, a, now_s,
                                           "a-srpt: head of virtual SRPT order, least-free"))
                continue
            counts, a = self._must_plan(free, snapshot, info, "most")
            delay = self._delays.get(jid)
            if delay is None:
                if a <= self.comm_heavy * info.alpha_min_s:  # line 12
                    why = "comm-heavy, consolidated enough"
                elif self.tau * info.virtual_size_s <= 0:
                    why = "comm-heavy, no delay allowed (tau * p~ = 0)"
                else:  # line 15: wait for a strictly better placement until the deadline
                    delay = _Delay(jid, a, now_s + self.tau * info.virtual_size_s)
                    self._delays[jid] = delay
                    if self.nonblocking_delay:
                        self.queue.popleft()
                        continue
                    break
            else:
                if a < delay.kappa_s:
                    why = "comm-heavy, better placement found while delayed"
                elif now_s >= delay.deadline_s:
                    why = "comm-heavy, delay deadline reached"
                else:
                    break  # blocking delay: nothing else starts
                del self._delays[jid]
            self.queue.popleft()
            actions.append(self._start(free, snapshot, info, counts, a, now_s,
                                       f"a-srpt: {why}, most-free"))
        return actions

    def _serve_parked(
        self, snapshot: ClusterSnapshot, free: FreeMap, now_s: float
    ) -> list[Action]:
        out: list[Action] = []
        by_id = snapshot.by_id
        for jid, delay in sorted(self._delays.items(), key=lambda kv: kv[1].deadline_s):
            view = by_id.get(jid)
            if view is None or view.state is not JobState.PENDING:
                del self._delays[jid]
                continue
            info = self.info[jid]
            if not self._fits(free, snapshot, info):
                continue
            counts, a = self._must_plan(free, snapshot, info, "most")
            if a < delay.kappa_s or now_s >= delay.deadline_s:
                del self._delays[jid]
                out.append(self._start(free, snapshot, info, counts, a, now_s,
                                       "a-srpt: parked comm-heavy job"))
        return out

    def _enqueue(self, done: list[tuple[str, float]]) -> None:
        for jid, t in done:
            self.virtual_done_s[jid] = t
            if jid in self.info:
                self.queue.append(jid)

    def next_wakeup_s(self, snapshot: ClusterSnapshot, now_s: float) -> float | None:
        times = [d.deadline_s for d in self._delays.values() if d.deadline_s > now_s]
        t = self.vm.next_completion_s()
        if t is not None and t > now_s:
            times.append(t)
        return min(times) if times else None

    def explain(self, snapshot: ClusterSnapshot, job_id: str) -> str:
        info = self.info.get(job_id)
        job = snapshot.by_id.get(job_id)
        if job is None or info is None or job.state is not JobState.PENDING:
            return super().explain(snapshot, job_id)
        head = (f"predicted {info.predicted_iters:.0f} iterations x alpha~_min "
                f"{info.alpha_min_s:.4g}s on {info.num_gpus} GPU(s) (group {info.group})")
        if job_id in self._delays:
            d = self._delays[job_id]
            return (f"job {job_id} is communication-heavy and waits for a placement faster than "
                    f"{d.kappa_s:.4g}s/iter, at the latest until t={d.deadline_s:.0f}; {head}")
        if job_id in self.queue:
            pos = list(self.queue).index(job_id)
            return (f"job {job_id} completed in the virtual SRPT schedule at "
                    f"t={self.virtual_done_s.get(job_id, float('nan')):.0f} and is #{pos + 1} in "
                    f"pending_queue (strict order; {snapshot.num_free_gpus} GPUs free); {head}")
        rem = self.vm.remaining_s(job_id)
        return (f"job {job_id} is still running in the virtual single-machine SRPT schedule "
                f"(remaining virtual size {rem if rem is not None else float('nan'):.4g}s); "
                f"{head}")


POLICIES = [
    ASrpt,
    ("a-srpt-tau0", functools.partial(ASrpt, tau=0.0),
     "A-SRPT with tau=0 (no delay for communication-heavy jobs, the paper's testbed setting)"),
    ("a-srpt-nonblocking", functools.partial(ASrpt, nonblocking_delay=True),
     "A-SRPT whose delayed communication-heavy jobs do not block the queue (reading B5 flag)"),
]
