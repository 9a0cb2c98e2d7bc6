"""The multiple-choice knapsack greedy (``policy/mckp.py``) against the exact MIP."""

from __future__ import annotations

import random

import numpy as np
import pytest
from scipy.optimize import Bounds, LinearConstraint, milp

from slurm_sched.policy.mckp import solve_greedy


def exact(group: list[int], weight: list[float], cost: list[float], capacity: float) -> float:
    """The integer optimum by HiGHS (at most one item per group, weights within capacity)."""
    groups = sorted(set(group))
    rows = [weight] + [[1.0 if g == h else 0.0 for g in group] for h in groups]
    ub = [capacity] + [1.0] * len(groups)
    res = milp(np.array(cost), integrality=np.ones(len(cost)),
               bounds=Bounds(np.zeros(len(cost)), np.ones(len(cost))),
               constraints=LinearConstraint(np.array(rows), -np.inf, np.array(ub)))
    assert res.success
    return float(res.fun)


def test_small_instance_by_hand() -> None:
    # group 0: 1 GPU saves 1.0, 2 GPUs save 1.5; group 1: 2 GPUs save 1.8; capacity 3
    sol = solve_greedy([0, 0, 1], [1, 2, 2], [-1.0, -1.5, -1.8], 3)
    assert sol.chosen == (0, 2) and sol.cost == pytest.approx(-2.8) and sol.weight == 3
    assert sol.lp_bound == pytest.approx(-2.8)
    # capacity 2: the LP takes 1 GPU of group 0 and half of group 1's step (slope -0.9)
    sol = solve_greedy([0, 0, 1], [1, 2, 2], [-1.0, -1.5, -1.8], 2)
    assert sol.lp_bound == pytest.approx(-1.9)
    assert sol.weight <= 2 and sol.cost >= sol.lp_bound


def test_items_that_cost_more_than_nothing_are_never_taken() -> None:
    sol = solve_greedy([0, 1, 1], [1, 1, 2], [0.5, -0.2, 0.3], 10)
    assert sol.chosen == (1,)


@pytest.mark.parametrize("seed", range(40))
def test_feasible_and_between_the_lp_bound_and_near_the_optimum(seed: int) -> None:
    rng = random.Random(seed)
    group, weight, cost = [], [], []
    for g in range(rng.randint(1, 25)):
        for w in rng.sample([1, 2, 4, 8, 16], rng.randint(1, 4)):
            group.append(g)
            weight.append(float(w))
            cost.append(rng.uniform(-3.0, 0.5) * (1 + 0.1 * w))
    capacity = float(rng.randint(1, 80))
    sol = solve_greedy(group, weight, cost, capacity)
    taken = [group[k] for k in sol.chosen]
    assert len(taken) == len(set(taken))  # at most one item per group
    assert sum(weight[k] for k in sol.chosen) == pytest.approx(sol.weight)
    assert sol.weight <= capacity
    assert sum(cost[k] for k in sol.chosen) == pytest.approx(sol.cost)
    best = exact(group, weight, cost, capacity)
    assert sol.lp_bound <= best + 1e-7 <= sol.cost + 2e-7
    # the gap is at most the step the LP cut: never more than the largest saving of one group
    assert sol.cost - best <= max(-min(0.0, c) for c in cost) + 1e-7


def test_bad_input_names_the_problem() -> None:
    with pytest.raises(ValueError, match="one entry per item"):
        solve_greedy([0], [1, 2], [0.0], 1)
    with pytest.raises(ValueError, match="item 0 has weight 0"):
        solve_greedy([0], [0], [-1.0], 1)
