"""Fairness metrics: each user's share of the cluster's GPUs and throughput against its fair
share, Jain's index, and the efficiency gain from GPU trading (Gandiva_fair).

- :func:`water_fill`: the demand-capped proportional share (max-min fair with weights):
  ``x_i = min(cap_i, lambda * w_i)`` with ``sum x_i = min(capacity, sum cap_i)``. With users'
  GPU demands as caps and tickets as weights it is the fair share of the spec (unused share
  redistributed to the others in ticket proportion).
- :func:`jain_index`: ``(sum v)^2 / (n * sum v^2)``; 1 = all equal, 1/n = one gets everything.
- :class:`FairnessProbe`: integrates, over a time window of a run, each user's GPU time held by
  its RUNNING jobs, its fair GPU time (water-filled over the users active at each moment, with
  their demand = GPUs of their unfinished jobs) and its work (isolated seconds x GPUs, i.e.
  reference-GPU seconds: the throughput a progress model with GPU generations credits). Feed it
  ``observe`` after every controller cycle (state is constant between cycles, so it is exact),
  and once more after the run: a simulation's last completions end it without a cycle.
- :func:`trading_gain`: per-user and total relative change of throughput between two runs.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from slurm_sched.model import ClusterSnapshot, CompletedJob, JobState

K = TypeVar("K", bound=Hashable)


def water_fill(
    caps: Mapping[K, float], weights: Mapping[K, float], capacity: float
) -> dict[K, float]:
    """Weighted max-min fair split of ``capacity`` with per-item caps (see module docstring).

    Items with zero weight get nothing. Raises ValueError on a negative cap, weight or capacity.
    """
    if capacity < 0:
        raise ValueError(f"capacity must be >= 0, got {capacity}")
    for k, c in caps.items():
        if c < 0 or weights[k] < 0:
            raise ValueError(f"item {k!r}: cap {c} and weight {weights[k]} must be >= 0")
    out: dict[K, float] = {k: 0.0 for k in caps}
    live = [k for k in caps if weights[k] > 0 and caps[k] > 0]
    live.sort(key=lambda k: caps[k] / weights[k])
    left = float(capacity)
    wsum = sum(weights[k] for k in live)
    for i, k in enumerate(live):
        if wsum <= 0 or left <= 0:
            break
        level = left / wsum
        if caps[k] <= level * weights[k]:
            out[k] = caps[k]
            left -= caps[k]
            wsum -= weights[k]
        else:
            for r in live[i:]:
                out[r] = level * weights[r]
            break
    return out


def jain_index(values: Sequence[float]) -> float:
    """Jain's fairness index of ``values`` (1.0 for an empty or all-zero list)."""
    vals = [float(v) for v in values]
    sq = sum(v * v for v in vals)
    if not vals or sq == 0:
        return 1.0
    return sum(vals) ** 2 / (len(vals) * sq)


@dataclass(frozen=True)
class UserShare:
    """One user's totals over the probe window."""

    user: str
    gpu_s: float  # GPU-seconds held by its running jobs
    fair_gpu_s: float  # its water-filled fair GPU-seconds
    work_s: float  # reference-GPU seconds of work done (isolated s x GPUs)
    active_s: float  # seconds with at least one unfinished job

    @property
    def share_ratio(self) -> float:
        """Received / fair GPU time (1.0 = exactly fair)."""
        return self.gpu_s / self.fair_gpu_s if self.fair_gpu_s > 0 else 1.0


@dataclass
class FairnessProbe:
    """Accumulates per-user GPU time, fair GPU time and work over ``[start_s, end_s]``.

    ``capacity_gpus``: GPUs shared (fair-share capacity); ``tickets``: per-user tickets
    (``default_tickets`` for others).
    """

    capacity_gpus: float
    tickets: Mapping[str, float] = field(default_factory=dict)
    default_tickets: float = 1.0
    start_s: float = 0.0
    end_s: float = float("inf")
    _t: float | None = None
    _running: dict[str, float] = field(default_factory=dict)
    _running_by_type: dict[tuple[str, str], float] = field(default_factory=dict)
    _demand: dict[str, float] = field(default_factory=dict)
    _work_seen: dict[str, float] = field(default_factory=dict)
    _n_completed: int = 0
    gpu_s: dict[str, float] = field(default_factory=dict)
    fair_gpu_s: dict[str, float] = field(default_factory=dict)
    work_s: dict[str, float] = field(default_factory=dict)
    active_s: dict[str, float] = field(default_factory=dict)
    #: GPU-seconds per (user, GPU type) held by running jobs.
    gpu_s_by_type: dict[tuple[str, str], float] = field(default_factory=dict)

    def _inside(self, t0: float, t1: float) -> float:
        """Fraction of [t0, t1] inside the window."""
        if t1 <= t0:
            return 0.0
        lo, hi = max(t0, self.start_s), min(t1, self.end_s)
        return max(0.0, hi - lo) / (t1 - t0)

    def observe(
        self, now_s: float, snap: ClusterSnapshot, completed: Sequence[CompletedJob]
    ) -> None:
        """Account the interval since the last call, then record the state at ``now_s``."""
        if self._t is not None and now_s > self._t:
            dt = now_s - self._t
            frac = self._inside(self._t, now_s)
            if frac > 0:
                fair = water_fill(
                    self._demand,
                    {u: self.tickets.get(u, self.default_tickets) for u in self._demand},
                    self.capacity_gpus,
                )
                for u in self._demand:
                    self.fair_gpu_s[u] = self.fair_gpu_s.get(u, 0.0) + fair[u] * dt * frac
                    self.active_s[u] = self.active_s.get(u, 0.0) + dt * frac
                    self.gpu_s.setdefault(u, 0.0)
                for u, g in self._running.items():
                    self.gpu_s[u] = self.gpu_s.get(u, 0.0) + g * dt * frac
                for k, g in self._running_by_type.items():
                    self.gpu_s_by_type[k] = self.gpu_s_by_type.get(k, 0.0) + g * dt * frac
            for c in completed[self._n_completed:]:
                jid = c.spec.job_id
                seen = self._work_seen.pop(jid, 0.0)
                self._add_work(c.spec.user, (c.spec.duration_s - seen) * c.spec.num_gpus, frac)
            for j in snap.jobs:
                w = j.work_done_at(now_s)
                seen = self._work_seen.get(j.job_id, 0.0)
                if w > seen:
                    self._add_work(j.spec.user, (w - seen) * j.spec.num_gpus, frac)
        else:
            for j in snap.jobs:
                self._work_seen.setdefault(j.job_id, j.work_done_at(now_s))
        self._n_completed = len(completed)
        self._t = now_s
        self._running = {}
        self._running_by_type = {}
        self._demand = {}
        nodes = snap.cluster.by_name
        for j in snap.jobs:
            self._work_seen[j.job_id] = j.work_done_at(now_s)
            u = j.spec.user
            self._demand[u] = self._demand.get(u, 0.0) + j.spec.num_gpus
            if j.state is JobState.RUNNING and j.placement is not None:
                self._running[u] = self._running.get(u, 0.0) + j.placement.num_gpus
                for part in j.placement.parts:
                    k = (u, nodes[part.node].gpu_type)
                    self._running_by_type[k] = self._running_by_type.get(k, 0.0) + len(part.gpus)

    def _add_work(self, user: str, amount: float, frac: float) -> None:
        self.work_s[user] = self.work_s.get(user, 0.0) + amount * frac

    def shares(self) -> list[UserShare]:
        users = sorted(set(self.gpu_s) | set(self.fair_gpu_s) | set(self.work_s))
        return [
            UserShare(
                user=u,
                gpu_s=self.gpu_s.get(u, 0.0),
                fair_gpu_s=self.fair_gpu_s.get(u, 0.0),
                work_s=self.work_s.get(u, 0.0),
                active_s=self.active_s.get(u, 0.0),
            )
            for u in users
        ]

    def jain(self) -> float:
        """Jain's index of the users' received/fair GPU-time ratios."""
        return jain_index([s.share_ratio for s in self.shares() if s.fair_gpu_s > 0])


def trading_gain(
    with_trading: Mapping[str, float], without_trading: Mapping[str, float]
) -> dict[str, float]:
    """Relative throughput change per user (0.3 = +30%) and ``"__total__"`` for the cluster."""
    out = {
        u: with_trading.get(u, 0.0) / v - 1.0
        for u, v in without_trading.items() if v > 0
    }
    tot_b = sum(without_trading.values())
    if tot_b > 0:
        out["__total__"] = sum(with_trading.values()) / tot_b - 1.0
    return out
