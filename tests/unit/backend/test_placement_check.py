"""The shared placement checks: every rejection, its message, the order they are checked in."""

from __future__ import annotations

import pytest

from slurm_sched.backend import ActionRejected
from slurm_sched.backend.placement_check import (
    Slot,
    check_count,
    check_part,
    check_placement,
    missing_gpu,
)
from slurm_sched.model import JobView, Placement, parse_cluster_spec
from tests.builders import job, place

#: a100-1, a100-2: 4 x a100 each; v100-1: 2 x v100
CLUSTER = parse_cluster_spec("2x4:a100,1x2:v100")


def view(gpus: int = 1, gpu_type: str | None = None) -> JobView:
    return JobView(spec=job("a", 0, gpus, 10, gpu_type=gpu_type))


def rejection(
    v: JobView,
    p: Placement,
    holders: dict[Slot, list[str]] | None = None,
    *,
    share: bool = False,
    exact: bool = True,
    **kw: object,
) -> str | None:
    """The message ``check_placement`` rejects with; None when it accepts."""
    try:
        check_placement(v, p, CLUSTER, holders or {}, share=share, exact=exact, **kw)  # type: ignore[arg-type]
    except ActionRejected as exc:
        return str(exc)
    return None


def test_a_placement_on_free_gpus_of_the_right_type_is_accepted() -> None:
    assert rejection(view(2, "a100"), place(**{"a100-1": [0], "a100-2": [3]})) is None
    assert rejection(view(2), place(**{"v100-1": [0, 1]})) is None


@pytest.mark.parametrize(
    ("placement", "gpu_type", "error"),
    [
        ({"a100-1": [0]}, None, "job a asks for 2 GPU(s), placement has 1"),
        ({"nope-9": [0, 1]}, None, "unknown node 'nope-9'"),
        ({"v100-1": [0, 1]}, "a100", "job a needs a100 GPUs, node v100-1 has v100"),
        ({"v100-1": [1, 2]}, None, "node v100-1 has no GPU index 2"),
    ],
)
def test_each_cluster_rejection_and_its_message(
    placement: dict[str, list[int]], gpu_type: str | None, error: str
) -> None:
    assert rejection(view(2, gpu_type), place(**placement)) == error


def test_the_count_is_checked_only_when_exact() -> None:
    p = place(**{"a100-1": [0, 1, 2]})
    assert rejection(view(2), p, exact=False) is None
    assert rejection(view(2), p, exact=True) == "job a asks for 2 GPU(s), placement has 3"


def test_a_held_gpu_needs_share() -> None:
    holders = {("a100-1", 1): ["x", "y"]}
    p = place(**{"a100-1": [1]})
    assert rejection(view(), p, holders) == (
        "GPU a100-1:1 is held by x,y; use Share to co-locate"
    )
    assert rejection(view(), p, holders, share=True) is None


def test_capacity_is_checked_only_when_given() -> None:
    holders = {("a100-1", 1): ["x", "y"]}
    p = place(**{"a100-1": [1]})
    assert rejection(view(), p, holders, share=True, max_jobs_per_gpu=3) is None
    assert rejection(view(), p, holders, share=True, max_jobs_per_gpu=2) == (
        "GPU a100-1:1 already holds 2 job(s) (max 2)"
    )
    # a free GPU is never full, even at capacity 1
    assert rejection(view(), place(**{"a100-1": [0]}), holders, max_jobs_per_gpu=1) is None


def test_the_jobs_own_gpus_are_neither_held_nor_full() -> None:
    holders = {("a100-1", 0): ["a"], ("a100-1", 1): ["a"]}
    p = place(**{"a100-1": [0, 1]})
    assert rejection(view(2), p, holders) == "GPU a100-1:0 is held by a; use Share to co-locate"
    own = {("a100-1", 0), ("a100-1", 1)}
    assert rejection(view(2), p, holders, own=own, max_jobs_per_gpu=1) is None


def test_a_node_not_offered_for_new_jobs_is_refused() -> None:
    p = place(**{"a100-2": [0]})
    assert rejection(view(), p, available_nodes={"a100-1"}) == (
        "node a100-2 is not available for new jobs"
    )
    assert rejection(view(), p, available_nodes={"a100-1", "a100-2"}) is None
    assert rejection(view(), p) is None  # None: every node is offered


def test_checks_run_in_the_documented_order() -> None:
    """Several problems at once: the first in the documented order is the one reported."""
    holders = {("a100-1", 0): ["x"]}
    # count before any node
    assert rejection(view(3), place(**{"nope-9": [0]}), holders).startswith("job a asks for 3")
    # per node in the placement's order: a100-1's held GPU before nope-9's unknown node
    assert "held by x" in rejection(view(2), place(**{"a100-1": [0], "nope-9": [0]}), holders)
    assert "unknown node" in rejection(view(2), place(**{"nope-9": [0], "a100-1": [0]}), holders)
    # unavailable before the GPU type, the type before the indices
    assert "not available" in rejection(
        view(1, "a100"), place(**{"v100-1": [7]}), available_nodes=set()
    )
    assert "needs a100" in rejection(view(1, "a100"), place(**{"v100-1": [7]}))
    # GPU by GPU: the held GPU 0 before the missing GPU 4; held before full
    assert "held by x" in rejection(view(2), place(**{"a100-1": [0, 4]}), holders)
    assert "no GPU index 4" in rejection(view(2), place(**{"a100-1": [1, 4]}), holders)
    assert "held by x" in rejection(view(), place(**{"a100-1": [0]}), holders, max_jobs_per_gpu=1)


def test_check_count_and_check_part_are_the_pieces_of_check_placement() -> None:
    with pytest.raises(ActionRejected, match="asks for 2 GPU"):
        check_count(view(2), place(**{"a100-1": [0]}))
    check_count(view(2), place(**{"a100-1": [0], "a100-2": [0]}))
    part = place(**{"v100-1": [1]}).parts[0]
    assert check_part(view(), part, CLUSTER, {}, share=False).name == "v100-1"
    with pytest.raises(ActionRejected, match="held by x"):
        check_part(view(), part, CLUSTER, {("v100-1", 1): ["x"]}, share=False)


def test_the_checks_change_nothing() -> None:
    holders = {("a100-1", 0): ["x"]}
    check_placement(
        view(), place(**{"a100-1": [0]}), CLUSTER, holders, share=True, exact=True
    )
    assert holders == {("a100-1", 0): ["x"]}


def test_missing_gpu_names_the_first_gpu_the_cluster_lacks() -> None:
    assert missing_gpu(CLUSTER, place(**{"a100-1": [0, 3], "v100-1": [1]})) is None
    assert missing_gpu(CLUSTER, place(**{"a100-1": [0], "v100-1": [1, 2, 5]})) == ("v100-1", 2)
    assert missing_gpu(CLUSTER, place(**{"nope-9": [0], "v100-1": [9]})) == ("nope-9", 0)
