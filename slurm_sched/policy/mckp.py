"""Multiple-choice knapsack with one capacity: a fast near-optimal answer for big instances.

Each *group* (a job) takes at most one of its *items* (its configurations), every item has a
weight (GPUs) and a cost (to minimise; taking nothing costs 0), and the weights taken must fit
one capacity. Sia's allocation program has exactly this form; HiGHS solves it exactly for
small rounds but finds no solution within 10 s at 35,000 items (``benchmarks/bench_scale.py``'s
snapshot).

:func:`solve_greedy` is the classic answer through the LP relaxation (Sinha and Zoltners,
"The multiple-choice knapsack problem", Operations Research 27(3), 1979): per group, the lower
convex hull of its (weight, cost) points starting at (0, 0); all hull steps sorted by cost per
unit of weight; steps taken in that order while they fit. The LP optimum takes the same steps
up to the first that does not fit, plus a fraction of it; here that group stays on the step
before, and later steps of other groups that still fit are taken too. The result is feasible,
and its cost exceeds the LP bound (so the integer optimum) by at most the one step that was
cut, which :class:`Solution` reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Solution:
    """The items taken (indices into the input), their total cost and weight, and
    ``lp_bound``: the LP relaxation's optimum, a lower bound of the integer optimum."""

    chosen: tuple[int, ...]
    cost: float
    weight: float
    lp_bound: float


def _hull(points: list[tuple[float, float, int]]) -> list[tuple[float, float, int]]:
    """Lower convex hull of (weight, cost, item) points sorted by weight, from (0, 0, -1);
    only the part where the cost still falls."""
    hull: list[tuple[float, float, int]] = [(0.0, 0.0, -1)]
    for p in points:
        if p[1] >= hull[-1][1]:
            continue  # more weight and no lower cost than the last kept point: never worth it
        while len(hull) >= 2:
            (w1, c1, _), (w2, c2, _) = hull[-2], hull[-1]
            # drop the middle point when it lies on or above the segment from hull[-2] to p
            if (c2 - c1) * (p[0] - w1) >= (p[1] - c1) * (w2 - w1):
                hull.pop()
            else:
                break
        hull.append(p)
    return hull


def solve_greedy(
    group: Sequence[int], weight: Sequence[float], cost: Sequence[float], capacity: float
) -> Solution:
    """At most one item per group, total weight <= ``capacity``, low total cost (see module).

    Args:
        group: the group of each item.
        weight: each item's weight, > 0.
        cost: each item's cost; taking nothing from a group costs 0.
        capacity: the weight limit.
    """
    if not (len(group) == len(weight) == len(cost)):
        raise ValueError("group, weight and cost must have one entry per item")
    best: dict[tuple[int, float], int] = {}  # the cheapest item of each (group, weight)
    for k, (g, w) in enumerate(zip(group, weight, strict=True)):
        if not w > 0:
            raise ValueError(f"item {k} has weight {w!r}; weights must be > 0")
        j = best.get((g, w))
        if j is None or cost[k] < cost[j] or (cost[k] == cost[j] and k < j):
            best[(g, w)] = k
    per_group: dict[int, list[tuple[float, float, int]]] = {}
    for (g, w), k in best.items():
        per_group.setdefault(g, []).append((w, cost[k], k))
    # hull steps: (cost per weight, group, position on the hull, weight step, cost step, item)
    steps: list[tuple[float, int, int, float, float, int]] = []
    for g, pts in per_group.items():
        pts.sort()
        hull = _hull(pts)
        for i in range(1, len(hull)):
            dw = hull[i][0] - hull[i - 1][0]
            dc = hull[i][1] - hull[i - 1][1]
            steps.append((dc / dw, g, i, dw, dc, hull[i][2]))
    # convex hulls: a group's steps come in hull order when sorted by slope (ties by position)
    steps.sort(key=lambda s: (s[0], s[1], s[2]))
    at: dict[int, int] = {}  # group -> hull position reached
    item_of: dict[int, int] = {}
    blocked: set[int] = set()
    used = total = 0.0
    lp_bound: float | None = None
    for _slope, g, i, dw, dc, item in steps:
        if lp_bound is None and used + dw > capacity:
            # the LP would take the fitting fraction of this step and stop here
            lp_bound = total + dc * max(0.0, capacity - used) / dw
        if g in blocked or at.get(g, 0) != i - 1:
            continue
        if used + dw > capacity:
            blocked.add(g)  # its next hull point does not fit: it stays where it is
            continue
        used += dw
        total += dc
        at[g] = i
        item_of[g] = item
    return Solution(
        chosen=tuple(sorted(item_of.values())),
        cost=total,
        weight=used,
        lp_bound=total if lp_bound is None else lp_bound,
    )
