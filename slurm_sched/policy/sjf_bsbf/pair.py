"""Theorem 1 of SJF-BSBF (spec ``sjf-bsbf.md`` section 2): whether a new job should share a running
job's GPUs now or wait for it (:func:`pair_decision`), the pair's average completion time with
overlap (:func:`overlap_average`), and the test helpers :func:`simulate_pair` (a step-by-step
simulation of two jobs sharing) and :func:`eq25`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PairDecision:
    """PAIR_DECISION's outcome; times are pair-average JCTs from now (seconds)."""

    share: bool
    t_overlap: float
    t_sequential: float

    @property
    def t_pair(self) -> float:
        return min(self.t_overlap, self.t_sequential)


def overlap_average(d_r: float, d_n: float, xi_r: float, xi_n: float) -> float:
    """Pair-average JCT from now when R (``d_r`` left alone) and N (``d_n`` alone) run together
    from now on, slowed by ``xi_r`` / ``xi_n`` until the first finishes (Theorem 1). Every caller
    uses this one sequence of operations, so equal inputs give bit-identical times."""
    if xi_r * d_r <= xi_n * d_n:  # R finishes first under overlap (Case 2 at kappa = 0)
        t_r = xi_r * d_r
        t_n = t_r + (d_n - t_r / xi_n)
    else:  # N finishes first (Case 1)
        t_n = xi_n * d_n
        t_r = t_n + (d_r - t_n / xi_r)
    return (t_r + t_n) / 2.0


def pair_decision(d_r: float, d_n: float, d_nx: float, xi_r: float, xi_n: float) -> PairDecision:
    """Theorem 1 as "compare full overlap with no overlap" (spec 2.2, mapping A1).

    Args:
        d_r: the running job's remaining time alone in its current configuration.
        d_n: the new job's run time alone with the candidate sub-batch.
        d_nx: the new job's run time alone when it waits (A2).
        xi_r, xi_n: slow-down factors of R and N while they share.
    Ties (``t_overlap == t_sequential``) do not share.
    """
    t_ov = overlap_average(d_r, d_n, xi_r, xi_n)
    t_seq = (d_r + (d_r + d_nx)) / 2.0
    return PairDecision(t_ov < t_seq, t_ov, t_seq)


def simulate_pair(t_a: float, i_a: float, t_b: float, i_b: float, xi_a: float, xi_b: float,
                  kappa: float) -> tuple[float, float]:
    """JCTs of a pair by direct simulation: A runs alone from 0, B joins at ``kappa``.

    Used to check eq. (18)-(25) (validation check 3). Both start from time 0's point of view;
    B's JCT counts from 0 (it was waiting).
    """
    if not kappa >= 0:
        raise ValueError(f"kappa must be >= 0, got {kappa}")
    solo_a = t_a * i_a
    if kappa >= solo_a:  # A finishes before B joins: sequential
        return solo_a, kappa + t_b * i_b
    left_a = i_a - kappa / t_a  # iterations of A when B joins
    left_b = float(i_b)
    shared_a, shared_b = t_a * xi_a, t_b * xi_b
    if left_a * shared_a <= left_b * shared_b:
        end_a = kappa + left_a * shared_a
        left_b -= left_a * shared_a / shared_b
        return end_a, end_a + left_b * t_b
    end_b = kappa + left_b * shared_b
    left_a -= left_b * shared_b / shared_a
    return end_b + left_a * t_a, end_b


def eq25(t_a: float, i_a: float, t_b: float, i_b: float, xi_a: float, xi_b: float,
         kappa: float) -> float:
    """The paper's eq. (25): pair-average JCT in Case 2 (A finishes first) as a function of
    the insertion time kappa."""
    slope = (2 * xi_b + xi_a - 2 * xi_a * xi_b) / (2 * xi_b)
    return slope * kappa + (1 - 1 / (2 * xi_b)) * t_a * xi_a * i_a + 0.5 * t_b * i_b
