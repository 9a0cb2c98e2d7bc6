"""The Policy base class: every decide() runs with the cyclic garbage collector paused."""

from __future__ import annotations

import gc

import pytest

from slurm_sched.model import Action, ClusterSnapshot
from slurm_sched.policy import registry
from slurm_sched.policy.base import Policy


class Seen(Policy):
    name = "seen"

    def __init__(self) -> None:
        self.gc_during: list[bool] = []

    def decide(self, snapshot: ClusterSnapshot, now_s: float) -> list[Action]:
        self.gc_during.append(gc.isenabled())
        return []


class SeenTwice(Seen):
    name = "seen-twice"

    def decide(self, snapshot: ClusterSnapshot, now_s: float) -> list[Action]:
        out = super().decide(snapshot, now_s)  # nested: the inner call must not turn it on
        self.gc_during.append(gc.isenabled())
        return out


def test_decide_pauses_the_collector_and_restores_it() -> None:
    assert gc.isenabled()
    p = SeenTwice()
    assert p.decide(None, 0.0) == []  # type: ignore[arg-type]
    assert p.gc_during == [False, False]
    assert gc.isenabled()
    gc.disable()
    try:
        p.decide(None, 0.0)  # type: ignore[arg-type]
        assert not gc.isenabled()  # left off by a caller: stays off
    finally:
        gc.enable()


def test_collector_is_back_after_an_exception() -> None:
    class Fails(Policy):
        name = "fails"

        def decide(self, snapshot: ClusterSnapshot, now_s: float) -> list[Action]:
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        Fails().decide(None, 0.0)  # type: ignore[arg-type]
    assert gc.isenabled()


def test_every_registered_policy_decides_with_the_collector_paused() -> None:
    for name in registry.names():
        decide = type(registry.create(name)).decide
        assert getattr(decide, "__gc_paused__", False), name
