"""The shared apply template: request ids, rejections, deferred results and their order."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from slurm_sched.backend import ActionRejected
from slurm_sched.backend.idempotent_apply import Admitted, apply_idempotent
from slurm_sched.model import Action, ActionResult, Preempt, Resume, Suspend


def suspend(job_id: str, rid: str | None = None) -> Action:
    return Suspend(job_id=job_id, request_id=rid)


class Immediate:
    """A backend that does each action at once; jobs named ``bad*`` are rejected."""

    def __init__(self) -> None:
        self.done: list[str] = []
        self.told: list[tuple[str, str]] = []
        self.results: dict[str, ActionResult] = {}

    def admit(self, index: int, action: Action) -> None:
        if action.job_id.startswith("bad"):
            raise ActionRejected(f"no {action.job_id}")
        self.done.append(action.job_id)

    def on_rejected(self, action: Action, exc: Exception) -> None:
        self.told.append((action.job_id, str(exc)))

    def apply(self, actions: list[Action]) -> list[ActionResult]:
        return apply_idempotent(actions, self.results, self.admit, on_rejected=self.on_rejected)


def test_results_in_order_rejections_as_data() -> None:
    b = Immediate()
    res = b.apply([suspend("a"), suspend("bad1"), suspend("b")])
    assert [(r.action.job_id, r.ok, r.error) for r in res] == [
        ("a", True, None),
        ("bad1", False, "no bad1"),
        ("b", True, None),
    ]
    assert b.done == ["a", "b"]
    assert b.told == [("bad1", "no bad1")]
    assert b.results == {}  # no request id, nothing recorded


def test_a_seen_request_id_returns_the_earlier_result_and_does_nothing() -> None:
    b = Immediate()
    [ok] = b.apply([suspend("a", "r1")])
    [bad] = b.apply([suspend("bad", "r2")])
    assert b.results == {"r1": ok, "r2": bad}
    again = b.apply([Resume(job_id="a", request_id="r1"), suspend("c", "r2"), suspend("d", "r3")])
    assert again[0] is ok and again[1] is bad  # the earlier results, not the new actions'
    assert again[2].ok and again[2].action.job_id == "d"
    assert b.done == ["a", "d"]
    assert b.told == [("bad", "no bad")]


def test_a_request_id_done_at_once_counts_within_the_same_call() -> None:
    b = Immediate()
    first, second = b.apply([suspend("a", "r"), suspend("b", "r")])
    assert first.ok and second is first
    assert b.done == ["a"]


def test_only_the_given_rejections_are_data() -> None:
    def admit(index: int, action: Action) -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        apply_idempotent([suspend("a")], {}, admit)
    [res] = apply_idempotent([suspend("a")], {}, admit, rejections=(ValueError,))
    assert not res.ok and res.error == "boom"


class Deferred:
    """A backend that reserves actions (``admit``) and runs them together (``settle``)."""

    def __init__(self, fail: frozenset[str] = frozenset()) -> None:
        self.fail = fail
        self.results: dict[str, ActionResult] = {}
        self.admitted: list[tuple[int, str]] = []
        self.settled: list[list[tuple[int, str, str]]] = []
        self.recorded_when_yielded: list[bool] = []

    def admit(self, index: int, action: Action) -> str:
        if action.kind == "preempt":
            raise ActionRejected(f"cannot preempt {action.job_id}")
        self.admitted.append((index, action.job_id))
        return f"work-{action.job_id}"

    def settle(self, planned: list[Admitted[str]]) -> Iterator[tuple[int, ActionResult]]:
        self.settled.append([(p.index, p.action.job_id, p.work) for p in planned])
        for p in reversed(planned):
            if p.action.job_id in self.fail:
                res = ActionResult(action=p.action, ok=False, error="failed in the cluster")
            else:
                res = ActionResult(action=p.action, ok=True)
            yield p.index, res
            # the template records each result as it is yielded, before the next one
            rid = p.action.request_id
            self.recorded_when_yielded.append(rid is None or self.results.get(rid) is res)

    def apply(self, actions: list[Action]) -> list[ActionResult]:
        return apply_idempotent(actions, self.results, self.admit, self.settle)


def test_deferred_results_come_from_settle_at_their_place() -> None:
    b = Deferred(fail=frozenset({"c"}))
    res = b.apply(
        [suspend("a", "ra"), Preempt(job_id="b", request_id="rb"), suspend("c", "rc"), suspend("d")]
    )
    assert [(r.action.job_id, r.ok, r.error) for r in res] == [
        ("a", True, None),
        ("b", False, "cannot preempt b"),
        ("c", False, "failed in the cluster"),
        ("d", True, None),
    ]
    assert b.admitted == [(0, "a"), (2, "c"), (3, "d")]
    assert b.settled == [[(0, "a", "work-a"), (2, "c", "work-c"), (3, "d", "work-d")]]
    assert b.recorded_when_yielded == [True, True, True]
    assert set(b.results) == {"ra", "rb", "rc"}
    assert b.results["rc"] is res[2] and b.results["rb"] is res[1]
    # the next call returns every recorded result, without admitting anything
    again = b.apply([suspend("x", "ra"), suspend("y", "rc")])
    assert again == [res[0], res[2]]
    assert len(b.admitted) == 3 and len(b.settled) == 1


def test_a_deferred_request_id_is_not_seen_until_settled() -> None:
    """Within one call, a repeated request id whose first action waits for ``settle`` is
    admitted again (its result is not recorded yet)."""
    b = Deferred()
    first, second = b.apply([suspend("a", "r"), suspend("a", "r")])
    assert b.admitted == [(0, "a"), (1, "a")]
    assert first.ok and second.ok


def test_settle_is_not_called_when_nothing_was_deferred() -> None:
    b = Deferred()
    [res] = b.apply([Preempt(job_id="a")])
    assert not res.ok and b.settled == []


def test_a_deferred_action_left_without_a_result_is_a_bug() -> None:
    def settle(planned: list[Admitted[str]]) -> list[tuple[int, ActionResult]]:
        return []

    with pytest.raises(RuntimeError, match="without a result"):
        apply_idempotent([suspend("a")], {}, lambda i, a: "work", settle)
    with pytest.raises(RuntimeError, match="no settle"):
        apply_idempotent([suspend("a")], {}, lambda i, a: "work")
