"""Rubick's candidates: the configurations a job can run in (:class:`Cand`) and a job's
model for one predictor version (:class:`JobModel`: its candidates, their speeds and its GPU
sensitivity curve with slopes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from slurm_sched.perf.rubick.job_info import JobInfo
from slurm_sched.perf.rubick.plans import Plan, plan_order
from slurm_sched.perf.rubick.shapes import Shape


class Cand:
    """One configuration a job can run in. ``plan``/``shape`` None = a rigid job of an unknown
    model: its requested GPUs on any split, as submitted.

    A value (never changed once made), equal and hashed by its fields. Written out rather than
    a frozen dataclass: mypyc (:mod:`slurm_sched.native`) compiles ``==`` between instances of
    a dataclass that carries another class decorator as identity, and the hash is kept."""

    def __init__(self, plan: Plan | None, shape: Shape | None, gpus: int) -> None:
        self.plan = plan
        self.shape = shape
        self.gpus = gpus
        self._hash = 0

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Cand):
            return False
        return self is other or (self.gpus == other.gpus and self.shape == other.shape
                                 and self.plan == other.plan)

    def __hash__(self) -> int:
        h = self._hash
        if h == 0:  # (dictionary keys: computed once)
            h = self._hash = hash((self.plan, self.shape, self.gpus)) or 1
        return h

    def __repr__(self) -> str:
        return f"Cand(plan={self.plan!r}, shape={self.shape!r}, gpus={self.gpus!r})"


@dataclass
class JobModel:
    """A job's candidates, speeds and GPU curve, for one predictor version."""

    info: JobInfo | None
    cands: list[Cand]
    speed: dict[Cand, float]  # S at the curve's CPU level
    curve: list[float]  # C[x], x = 0..max GPUs (running max with flatness)
    valid: list[int]  # x with arg(x) == x (the curve's valid points), ascending
    cap: int
    cpu_curve_c: float
    t_ref: float
    version: int
    #: memo of :meth:`sigma_plus` (a pure function of the curve; job models are shared)
    _sp: dict[int, float] = field(default_factory=dict, repr=False, compare=False)
    _by_speed: list[tuple[float, Cand]] | None = field(default=None, repr=False, compare=False)
    _by_size: list[tuple[float, Cand]] | None = field(default=None, repr=False, compare=False)
    #: memo of :meth:`Rubick._min_res` by SLA margin (a function of the request and the curve,
    #: which jobs of one kind share whatever their tenant and class)
    _min_res_memo: dict[float, tuple[int, int]] = field(default_factory=dict, repr=False,
                                                        compare=False)

    @property
    def rigid(self) -> bool:
        return self.info is None

    def sigma_plus(self, x: int) -> float:
        """Best gain rate from x to a valid point y in (x, cap] [3.3]."""
        got = self._sp.get(x)
        if got is None:
            got = self._sp[x] = self._sigma_plus(x)
        return got

    def _sigma_plus(self, x: int) -> float:
        if x >= self.cap:
            return 0.0
        cx = self.curve[min(x, len(self.curve) - 1)]
        best = 0.0
        for y in self.valid:
            if x < y <= self.cap:
                best = max(best, (self.curve[y] - cx) / (y - x))
        return best

    def smallest_valid(self) -> int:
        return self.valid[0] if self.valid else self.cap

    def by_speed(self) -> list[tuple[float, Cand]]:
        """(speed, candidate), fastest first (memoised)."""
        if self._by_speed is None:
            self._by_speed = sorted(((self.speed[c], c) for c in self.cands),
                                    key=lambda o: -o[0])
        return self._by_speed

    def by_size(self) -> list[tuple[float, Cand]]:
        """(speed, candidate) by fewest GPUs, then fastest, then plan order, ties in candidate
        order: GET_BEST_PLAN's order within a flatness class (memoised)."""
        if self._by_size is None:
            self._by_size = sorted(((self.speed[c], c) for c in self.cands), key=lambda o: (
                o[1].gpus, -o[0], plan_order(o[1].plan) if o[1].plan else 0))
        return self._by_size
