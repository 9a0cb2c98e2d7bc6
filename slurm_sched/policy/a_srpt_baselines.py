"""The baselines of the A-SRPT paper (section V-A-1-d; spec section 3), in A-SRPT's world.

All are non-preemptive, use the same iteration predictor as A-SRPT (a random forest trained
online from completions), estimate a job's duration as ``n~ * alpha~_min`` and map replicas with
Heavy-Edge on the servers with the most free GPUs (reading B10: consolidating; no delay logic).

- ``a-srpt-spjf``: Shortest Predicted Job First (MLaaS), strict: if the shortest job does not
  fit, nothing else starts (the paper's wording; reading B11 keeps SPWF strict too).
- ``a-srpt-spwf``: Shortest Predicted Workload (duration x GPUs) First (Tiresias' idea), strict.
- ``a-srpt-wcs-duration`` / ``-workload`` / ``-subtime``: work-conserving: scan the queue in
  order and start every job that fits now.
- ``placement="best-fit"`` (not registered; the benchmark's placement ablation): a job that
  fits on one server goes to the fullest such server, so 1-GPU jobs pack instead of spreading.
- ``a-srpt-perfect``: A-SRPT with perfect prediction, ``n~ = n`` (reads the oracle: clairvoyant).
- ``a-srpt-mean`` / ``a-srpt-median``: A-SRPT with the running global mean / median of previous
  jobs' iterations as the prediction (Fig. 9's predictor baselines).
"""

from __future__ import annotations

import bisect
from typing import ClassVar, Literal

from slurm_sched.model import Action, ClusterSnapshot, JobState, JobView
from slurm_sched.perf.asrpt_model import Network
from slurm_sched.perf.iteration_predictor import (
    IterationPredictor,
    MeanPredictor,
    MedianPredictor,
)
from slurm_sched.policy.a_srpt import ASrpt, JobInfo, PredictiveBase, ServerOrder
from slurm_sched.policy.placement import free_map

OrderKey = Literal["duration", "workload", "subtime"]


class ASrptPerfect(ASrpt):
    """A-SRPT with perfect prediction: the true iteration count (an oracle)."""

    name = "a-srpt-perfect"
    summary = "A-SRPT with perfect iteration prediction (n~ = n, oracle): the upper reference"
    clairvoyant = True

    def __init__(self, *, tau: float = 1.0, nonblocking_delay: bool = False,
                 net: Network | None = None, keep_predictions: bool = False) -> None:
        # the predictor only records completions here; a cheap one avoids useless forest fits
        super().__init__(MeanPredictor(), tau=tau, nonblocking_delay=nonblocking_delay, net=net,
                         keep_predictions=keep_predictions)

    def predict_iterations(self, job: JobView, info_group: str, alpha_min_s: float) -> float:
        spec = job.spec
        # a profiled job knows its true iteration count; an opaque one counts seconds (alpha=1)
        if spec.iterations and alpha_min_s != 1.0:
            return float(spec.iterations)
        return spec.duration_s / alpha_min_s


class QueueBaseline(PredictiveBase):
    """Non-preemptive queue ordered by a predicted key; strict or work-conserving.

    A baseline is a subclass that sets :attr:`key` and :attr:`work_conserving`."""

    #: what the queue is ordered by (lowest first; ties by release time, then job id)
    key: ClassVar[OrderKey]
    #: True: start every job that fits, in order; False: stop at the first that does not
    work_conserving: ClassVar[bool]

    def __init__(
        self,
        predictor: IterationPredictor | None = None,
        *,
        net: Network | None = None,
        keep_predictions: bool = False,
        placement: ServerOrder = "most",
    ) -> None:
        if placement not in ("most", "least", "best-fit"):
            raise ValueError(f"placement must be most, least or best-fit, got {placement!r}")
        super().__init__(predictor, net=net, keep_predictions=keep_predictions)
        self.placement = placement
        self._order: list[tuple[float, float, str]] = []

    def _sort_key(self, info: JobInfo) -> tuple[float, float, str]:
        if self.key == "duration":
            k = info.predicted_duration_s
        elif self.key == "workload":
            k = info.predicted_duration_s * info.num_gpus
        else:
            k = info.release_s
        return (k, info.release_s, info.job_id)

    def decide(self, snapshot: ClusterSnapshot, now_s: float) -> list[Action]:
        for jid in self._learn_completions(snapshot, now_s):
            info = self.info.get(jid)
            if info is not None:
                bisect.insort(self._order, self._sort_key(info))
        for info in self._new_arrivals(snapshot):
            bisect.insort(self._order, self._sort_key(info))
        if not self._order:
            return []
        free = free_map(snapshot)
        untyped_free = sum(len(g) for g in free.values())
        by_id = snapshot.by_id
        actions: list[Action] = []
        drop: list[int] = []
        for idx, (_, _, jid) in enumerate(self._order):
            if untyped_free == 0:
                break
            view = by_id.get(jid)
            if view is None or view.state is not JobState.PENDING:
                drop.append(idx)
                if view is None:
                    self.info.pop(jid, None)
                continue
            info = self.info[jid]
            if info.num_gpus > untyped_free or not self._fits(free, snapshot, info):
                if self.work_conserving:
                    continue
                break
            counts, a = self._must_plan(free, snapshot, info, self.placement)
            actions.append(self._start(free, snapshot, info, counts, a, now_s,
                                       f"{self.name}: order by predicted {self.key}"))
            untyped_free -= info.num_gpus
            drop.append(idx)
        for idx in reversed(drop):
            del self._order[idx]
        return actions


class Spjf(QueueBaseline):
    name = "a-srpt-spjf"
    summary = ("SPJF: shortest predicted job first (random forest), strict order; Heavy-Edge on "
               "most-free servers; non-preemptive")
    key = "duration"
    work_conserving = False


class Spwf(QueueBaseline):
    name = "a-srpt-spwf"
    summary = ("SPWF: shortest predicted workload (duration x GPUs) first, strict order; "
               "Heavy-Edge on most-free servers; non-preemptive")
    key = "workload"
    work_conserving = False


class WcsDuration(QueueBaseline):
    name = "a-srpt-wcs-duration"
    summary = ("WCS-Duration: work-conserving, shortest predicted duration first; Heavy-Edge on "
               "most-free servers; non-preemptive")
    key = "duration"
    work_conserving = True


class WcsWorkload(QueueBaseline):
    name = "a-srpt-wcs-workload"
    summary = ("WCS-Workload: work-conserving, smallest predicted workload first; Heavy-Edge on "
               "most-free servers; non-preemptive")
    key = "workload"
    work_conserving = True


class WcsSubTime(QueueBaseline):
    name = "a-srpt-wcs-subtime"
    summary = ("WCS-SubTime: work-conserving FIFO with backfill; Heavy-Edge on most-free "
               "servers; non-preemptive")
    key = "subtime"
    work_conserving = True


POLICIES = [
    ASrptPerfect,
    ("a-srpt-mean", lambda: ASrpt(MeanPredictor()),
     "A-SRPT predicting the running global mean of previous jobs' iterations (Fig. 9)"),
    ("a-srpt-median", lambda: ASrpt(MedianPredictor()),
     "A-SRPT predicting the running global median of previous jobs' iterations (Fig. 9)"),
    Spjf,
    Spwf,
    WcsDuration,
    WcsWorkload,
    WcsSubTime,
]
