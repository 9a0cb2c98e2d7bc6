"""Replaying policies: the default list, unknown names, failures reported, notes."""

from __future__ import annotations

from typing import Any

import pytest

from slurm_sched.advisor import replay as replay_mod
from slurm_sched.advisor.replay import _notes, default_policies, replay, validate_names
from slurm_sched.errors import UnknownPolicyError
from slurm_sched.model import parse_cluster_spec
from slurm_sched.policy import registry
from tests.builders import job
from tests.unit.advisor.conftest import history


def test_default_policies_are_the_plain_ones() -> None:
    names = default_policies("fifo")
    assert names[0] == "fifo" and names.count("fifo") == 1
    assert "tiresias" in names
    for n in names:
        p = registry.create(n)
        assert not p.clairvoyant and p.progress_model is None, n
    assert "sjf" not in names and "muri-l" not in names


def test_unknown_policy_is_a_clear_error() -> None:
    with pytest.raises(UnknownPolicyError, match="unknown policy; known: fifo"):
        validate_names(["fifo", "no-such-policy"])
    assert validate_names(["FIFO", "fifo", "tiresias"]) == ["fifo", "tiresias"]


def test_replay_and_a_failing_policy_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    acc = history(2)
    specs = [j.to_spec(acc.origin_s) for j in acc.jobs]
    real = replay_mod.simulate

    def flaky(jobs: Any, cluster: Any, policy: Any, **kw: Any) -> Any:
        if policy.name == "tiresias":
            raise RuntimeError("boom\nsecond line")
        return real(jobs, cluster, policy, **kw)

    monkeypatch.setattr(replay_mod, "simulate", flaky)
    seen: list[tuple[str, int, int]] = []
    runs = replay(["fifo", "tiresias"], specs, parse_cluster_spec("1x4"),
                  on_progress=lambda n, d, t: seen.append((n, d, t)))
    assert runs["fifo"].ok and len(runs["fifo"].outcomes) == 12
    assert runs["tiresias"].error == "RuntimeError: boom"
    assert seen[-1] == ("fifo", 12, 12)
    assert runs["fifo"].busy_gpu_s == pytest.approx(sum(o.gpu_s for o in runs["fifo"].outcomes))


def test_jobs_too_big_for_the_cluster_are_noted() -> None:
    specs = [job("a", 0, 8, 100), job("b", 0, 1, 100)]
    run = replay(["fifo"], specs, parse_cluster_spec("1x4"))["fifo"]
    assert run.ok and run.rejected == 1 and len(run.outcomes) == 1
    assert "1 job(s) can never fit" in run.notes[0]


class _Stub:
    def __init__(self, clairvoyant: bool, world: str | None) -> None:
        self.clairvoyant = clairvoyant
        self.progress_model = world


def test_notes_say_what_a_policy_lacks() -> None:
    specs = [job("a", 0, 1, 10), job("b", 0, 1, 10, model="resnet50", batch_size=64)]
    assert _notes(_Stub(False, None), specs) == []  # type: ignore[arg-type]
    notes = _notes(_Stub(True, "a-srpt"), specs)  # type: ignore[arg-type]
    assert "true run time" in notes[0]
    assert "'a-srpt' world" in notes[1]
    assert notes[2].startswith("1 of 2 jobs give no model/batch-size hints")
