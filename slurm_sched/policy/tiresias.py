"""Tiresias: discretised two-dimensional least-attained-service (2D-LAS), preemptive.

Paper: Gu et al., "Tiresias: A GPU Cluster Manager for Distributed Deep Learning", NSDI'19.
Concrete version of spec ``sjf-bsbf.md`` section 3 (following Pollux's simulator, which the
SJF-BSBF evaluation follows):

- Queues Q0..Qk; a job's attained service is ``executed_time x requested GPUs`` (GPU-seconds).
  It is demoted from Qi to Qi+1 when attained service reaches ``thresholds_gpu_s[i]``
  (default one threshold, 3600 x 16 = 57,600 GPU-s: two queues). New jobs enter Q0.
- Each cycle walks Q0, Q1, ... each in FIFO order of *entry into that queue*; a job is marked to
  run if its GPU count still fits the GPUs left (counting, not blocking). Running jobs that are
  not marked are preempted; marked running jobs keep their GPUs; newly marked jobs take GPUs one
  at a time from the node with the most free GPUs.
- No starvation promotion (knob 0).
- Placement (``placement=``): ``"spread"`` (default) takes one GPU at a time from the node with
  the most free GPUs, so a 6-GPU job on an idle cluster gets one GPU on each of six nodes;
  ``"node-chunks"`` takes *all it still needs* (up to that node's free GPUs) from the node with
  the most free GPUs, then repeats (6 GPUs -> 4 + 2). Pollux's simulator places its Tiresias
  jobs the ``node-chunks`` way: its per-job JCTs (``benchmarks/peer/pollux/``) match
  packed step times, not spread ones (``python benchmarks/crosscheck.py --artifacts pollux``).

Option ``queue_order="sim"`` (the Tiresias simulator's ``dlas_sim_jobs``, which the Muri
artifact runs; spec ``muri.md`` section 3): each queue is a list; a new job is appended to Q0, a
demoted job to the end of its new queue when a cycle sees the crossing, and after every pass the
jobs still pending move to the back of their queue in their order, so running jobs stay ahead of
waiting ones and a preempted job keeps its place ahead of the older waiting ones. The default
(``"entry"``) orders a queue by the time each job entered it. Option ``jump_events=True``: wake
at every threshold crossing even when nobody waits (the simulators' queue-jump events are
scheduling events, which matters where events cost something, e.g. the ``muri-artifact``
profile's per-event overhead).

Deviation (documented): the spec's version re-evaluates every 60 s. Ours is event driven: it
runs at every arrival and completion and sets a timer at the exact moment the next running job
crosses a queue threshold (the "queue-jump" events of the Tiresias/Muri simulators). Priorities
only change at those moments, so the schedule is the same without 60 s rounding of demotions.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from functools import partial
from operator import itemgetter

from slurm_sched.model import (
    Action,
    ClusterSnapshot,
    JobState,
    JobView,
    Placement,
    Preempt,
    Start,
)
from slurm_sched.policy.base import Policy
from slurm_sched.policy.placement import FreeMap, pack_most_free
from slurm_sched.policy.queue_based import all_pending_fit, preemptive_in_order

POLLUX_THRESHOLDS_GPU_S: tuple[float, ...] = (3600.0 * 16,)
#: Tiresias' own simulator (dlas-gpu, 3 queues), as used in the Muri evaluation.
TIRESIAS_SIM_THRESHOLDS_GPU_S: tuple[float, ...] = (3250.0, 7200.0)
#: The rank of a keyed job (queue, entered, submitted, id): a C-level key, as decide() sorts
#: every job of a busy cluster each cycle.
_RANK = itemgetter(0, 1, 2, 3)


def pack_most_free_chunks(free: FreeMap, num_gpus: int) -> Placement | None:
    """Take every GPU still needed (up to its free count) from the node with the most free
    GPUs, then repeat; ties go to cluster order. ``free`` loses the GPUs taken. None (and
    ``free`` untouched) when the job does not fit."""
    if num_gpus <= 0 or sum(len(g) for g in free.values()) < num_gpus:
        return None
    order = sorted(free, key=lambda n: -len(free[n]))  # stable: ties keep cluster order
    alloc: dict[str, list[int]] = {}
    need = num_gpus
    for node in order:
        if need == 0:
            break
        take = free[node][:need]
        if take:
            alloc[node] = list(take)
            need -= len(take)
    for node, gpus in alloc.items():
        for g in gpus:
            free[node].remove(g)
    return Placement.of(alloc)


_PACKERS = {"spread": pack_most_free, "node-chunks": pack_most_free_chunks}


class Tiresias(Policy):
    name = "tiresias"
    paper = "Gu et al., NSDI'19 (discretised 2D-LAS)"
    summary = "discretised 2D-LAS: least attained GPU-service first; preemptive; no durations"

    def __init__(self, thresholds_gpu_s: Sequence[float] = POLLUX_THRESHOLDS_GPU_S,
                 placement: str = "spread", queue_order: str = "entry",
                 jump_events: bool = False) -> None:
        if placement not in _PACKERS:
            raise ValueError(f"placement must be one of {sorted(_PACKERS)}, got {placement!r}")
        self.placement = placement
        self._packer = _PACKERS[placement]
        if queue_order not in ("entry", "sim"):
            raise ValueError(f"queue_order must be 'entry' or 'sim', got {queue_order!r}")
        self.queue_order = queue_order
        self.jump_events = bool(jump_events)
        # queue_order="sim": the queues as lists of job ids, and each job's queue
        self._lists: list[list[str]] = [[] for _ in range(len(thresholds_gpu_s) + 1)]
        self._qid: dict[str, int] = {}
        th = tuple(float(t) for t in thresholds_gpu_s)
        if any(t <= 0 for t in th) or list(th) != sorted(th):
            raise ValueError(f"thresholds must be positive and increasing, got {th}")
        self.thresholds_gpu_s = th
        # A job is in queue bisect_right(_bounds, service); the small slack makes a timer that
        # lands exactly on a threshold (up to float error) count as crossing it.
        self._bounds = tuple(t - 1e-6 for t in th)
        # Learned state: when each job entered its current queue (FIFO order inside a queue).
        self._entered: dict[str, tuple[int, float]] = {}

    def queue_of(self, job: JobView, now_s: float) -> int:
        return bisect_right(self._bounds, job.attained_gpu_s(now_s))

    def decide(self, snapshot: ClusterSnapshot, now_s: float) -> list[Action]:
        if self.queue_order == "sim":
            return self._decide_sim(snapshot, now_s)
        if not snapshot.pending:
            return []  # priorities only matter when someone waits
        if len(self._entered) > 2 * len(snapshot.jobs) + 64:
            active = snapshot.by_id
            self._entered = {j: e for j, e in self._entered.items() if j in active}
        bounds = self._bounds
        entered = self._entered
        running = JobState.RUNNING
        keyed = []
        # Fast path: everyone waiting fits now, so rank only them (nobody gets preempted).
        jobs = snapshot.pending if all_pending_fit(snapshot) else snapshot.jobs
        for j in jobs:
            spec = j.spec
            executed = j.executed_s
            if j.state is running:
                executed += now_s - j.accounted_at_s
            q = bisect_right(bounds, executed * spec.num_gpus)
            jid = spec.job_id
            prev = entered.get(jid)
            if prev is None or prev[0] != q:
                if q == 0:
                    since = spec.submit_time_s
                elif j.state is running:
                    # crossed while running: back-date to the crossing (exact if it crossed
                    # during this run, which holds unless it was preempted right after)
                    over = executed * spec.num_gpus - self.thresholds_gpu_s[q - 1]
                    since = max(spec.submit_time_s, now_s - over / spec.num_gpus)
                else:
                    since = now_s
                prev = (q, since)
                entered[jid] = prev
            keyed.append((prev[0], prev[1], spec.submit_time_s, jid, j))
        keyed.sort(key=_RANK)
        order = [k[4] for k in keyed]
        return preemptive_in_order(snapshot, order, packer=self._packer,
                                   reason="tiresias 2D-LAS")

    def _decide_sim(self, snapshot: ClusterSnapshot, now_s: float) -> list[Action]:
        """``queue_order="sim"``: the simulator's queue lists (see the module docstring).

        The lists are kept at every cycle, also when nobody waits, since the order of
        demotions decides later ranks.
        """
        lists, qid, bounds = self._lists, self._qid, self._bounds
        active = snapshot.by_id
        if len(qid) > len(active):  # drop finished jobs
            for q, lst in enumerate(lists):
                lists[q] = [j for j in lst if j in active]
            self._qid = qid = {j: q for j, q in qid.items() if j in active}
        for j in snapshot.jobs:  # arrival order: new jobs join Q0, crossings move back
            jid = j.spec.job_id
            q = bisect_right(bounds, j.attained_gpu_s(now_s))
            old = qid.get(jid)
            if old is None:
                lists[0].append(jid)
                qid[jid] = old = 0
            if q > old:
                lists[old].remove(jid)
                lists[q].append(jid)
                qid[jid] = q
        if not snapshot.pending:
            return []
        order = [active[jid] for lst in lists for jid in lst]
        actions = preemptive_in_order(snapshot, order, packer=self._packer,
                                      reason="tiresias 2D-LAS")
        started = {a.job_id for a in actions if isinstance(a, Start)}
        preempted = {a.job_id for a in actions if isinstance(a, Preempt)}
        pending = JobState.PENDING
        for q, lst in enumerate(lists):
            waiting = [jid for jid in lst
                       if jid in preempted or (active[jid].state is pending
                                               and jid not in started)]
            if waiting:
                gone = set(waiting)
                lists[q] = [jid for jid in lst if jid not in gone] + waiting
        return actions

    def next_wakeup_s(self, snapshot: ClusterSnapshot, now_s: float) -> float | None:
        """The next moment a running job's attained service crosses a queue threshold.

        Only needed while some job waits (a demotion changes nothing otherwise, and the next
        arrival triggers a cycle anyway), unless ``jump_events``.
        """
        if not snapshot.pending and not self.jump_events:
            return None
        best = float("inf")
        thresholds = self.thresholds_gpu_s
        bounds = self._bounds
        for j in snapshot.running:
            g = j.spec.num_gpus
            service = (j.executed_s + now_s - j.accounted_at_s) * g
            q = bisect_right(bounds, service)
            if q < len(thresholds):
                when = now_s + (thresholds[q] - service) / g
                if when < best:
                    best = when
        return None if best == float("inf") else best

    def explain(self, snapshot: ClusterSnapshot, job_id: str) -> str:
        job = snapshot.by_id.get(job_id)
        base = super().explain(snapshot, job_id)
        if job is None:
            return base
        q = self.queue_of(job, snapshot.now_s)
        return f"{base}; queue Q{q}, attained {job.attained_gpu_s(snapshot.now_s):.0f} GPU-s"


POLICIES = [
    Tiresias,
    ("tiresias-3q", partial(Tiresias, thresholds_gpu_s=TIRESIAS_SIM_THRESHOLDS_GPU_S),
     "Tiresias with its own simulator's 3 queues (3,250 / 7,200 GPU-s), as in Muri"),
]
