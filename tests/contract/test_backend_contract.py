"""The ClusterBackend contract, run against both backends (``sim`` and ``slurm``).

What every backend must do (``slurm_sched/backend/``): snapshots reflect applied actions;
expected failures come back as data; ``apply`` is idempotent per request id; each finished job
is reported once by ``completed()``; ``finished()`` turns True when the work is done.

The Slurm variant runs short ``checkpointed_sleep`` jobs on the real mini cluster. Slurm picks
GPU indices itself (lowest free first), so the tests place jobs on empty nodes from index 0,
where the policy's choice and Slurm's agree.
"""

from __future__ import annotations

from slurm_sched.model import (
    JobSettings,
    JobState,
    Migrate,
    Placement,
    Preempt,
    Reconfigure,
    Resume,
    Start,
    Suspend,
)
from tests.contract.conftest import Harness, JobDef


def place(alloc: dict[str, list[int]]) -> Placement:
    return Placement.of(alloc)


def state_of(h: Harness, job_id: str) -> JobState | None:
    snap = h.backend.snapshot()
    v = snap.by_id.get(job_id)
    return v.state if v is not None else None


def done(h: Harness, job_id: str) -> bool:
    return any(c.spec.job_id == job_id for c in h.backend.completed())


def test_start_runs_job_where_asked_and_it_completes(backend_factory: Harness) -> None:
    h = backend_factory
    [a] = h.submit([JobDef(gpus=2, duration_s=1.5)])
    snap = h.backend.snapshot()
    assert snap.job(a).state is JobState.PENDING
    assert snap.job(a).spec.num_gpus == 2
    [r] = h.backend.apply([Start(job_id=a, placement=place({"a100-2": [0, 1]}))])
    assert r.ok, r.error
    snap = h.backend.snapshot()
    assert snap.job(a).state is JobState.RUNNING
    assert snap.job(a).placement == place({"a100-2": [0, 1]})
    assert snap.free_gpus["a100-2"] == (2, 3)
    h.wait(lambda s: h.confirmed_running(a), 15, "job running in the cluster")
    snap = h.backend.snapshot()
    assert snap.job(a).placement == place({"a100-2": [0, 1]})
    h.wait(lambda s: a not in s.by_id, 20, "job to finish")
    assert done(h, a)
    assert h.backend.snapshot().free_gpus["a100-2"] == (0, 1, 2, 3)


def test_start_on_taken_or_bad_gpus_fails_as_data(backend_factory: Harness) -> None:
    h = backend_factory
    a, b, c = h.submit(
        [JobDef(gpus=2, duration_s=20), JobDef(gpus=2, duration_s=20), JobDef(1, 20, "v100")]
    )
    h.backend.snapshot()
    ra, rb = h.backend.apply(
        [
            Start(job_id=a, placement=place({"a100-1": [0, 1]})),
            Start(job_id=b, placement=place({"a100-1": [1, 2]})),
        ]
    )
    assert ra.ok, ra.error
    assert not rb.ok and "held by" in (rb.error or "")
    bad = h.backend.apply(
        [
            Start(job_id=b, placement=place({"a100-1": [2]})),  # wrong count
            Start(job_id=b, placement=place({"nowhere-1": [0, 1]})),  # unknown node
            Start(job_id=b, placement=place({"a100-1": [2, 7]})),  # no such index
            Start(job_id=c, placement=place({"a100-2": [0]})),  # wrong GPU type
            Start(job_id="no-such-job", placement=place({"a100-2": [0]})),
            Suspend(job_id=b),  # not running
        ]
    )
    assert [r.ok for r in bad] == [False] * 6
    assert "asks for 2 GPU(s)" in (bad[0].error or "")
    assert "unknown node" in (bad[1].error or "")
    assert "no GPU index 7" in (bad[2].error or "")
    assert "needs v100" in (bad[3].error or "")
    assert "not active" in (bad[4].error or "")
    snap = h.backend.snapshot()
    assert snap.job(b).state is JobState.PENDING
    assert snap.job(c).state is JobState.PENDING


def test_suspend_and_resume(backend_factory: Harness) -> None:
    h = backend_factory
    [a] = h.submit([JobDef(gpus=1, duration_s=2.5)])
    h.backend.snapshot()
    assert h.backend.apply([Start(job_id=a, placement=place({"v100-1": [0]}))])[0].ok
    h.wait(lambda s: h.confirmed_running(a), 15, "job running")
    r = h.apply_one(Suspend(job_id=a))
    assert r.ok, r.error
    snap = h.backend.snapshot()
    assert snap.job(a).state is JobState.SUSPENDED
    assert snap.job(a).placement == place({"v100-1": [0]})  # keeps its GPU
    assert 0 not in snap.free_gpus["v100-1"]
    executed = snap.job(a).executed_s
    for _ in range(5):
        h.pause()
    snap = h.backend.snapshot()
    assert snap.job(a).state is JobState.SUSPENDED
    assert snap.job(a).executed_s <= executed + 1.0  # Slurm counts whole seconds
    r = h.apply_one(Resume(job_id=a))
    assert r.ok, r.error
    snap = h.backend.snapshot()
    assert snap.job(a).state is JobState.RUNNING
    h.wait(lambda s: a not in s.by_id, 20, "job to finish")
    assert done(h, a)


def test_preempt_requeues_then_start_again_completes(backend_factory: Harness) -> None:
    h = backend_factory
    [a] = h.submit([JobDef(gpus=2, duration_s=2.0)])
    h.backend.snapshot()
    assert h.backend.apply([Start(job_id=a, placement=place({"a100-2": [0, 1]}))])[0].ok
    h.wait(lambda s: h.confirmed_running(a), 15, "job running")
    for _ in range(3):
        h.pause()
    r = h.apply_one(Preempt(job_id=a))
    assert r.ok, r.error
    snap = h.backend.snapshot()
    assert snap.job(a).state is JobState.PENDING
    assert snap.job(a).placement is None
    assert snap.free_gpus["a100-2"] == (0, 1, 2, 3)
    snap = h.wait(lambda s: s.job(a).preemptions >= 1, 15, "requeue to be counted")
    r = h.apply_one(Start(job_id=a, placement=place({"v100-2": [0, 1]})))
    assert r.ok, r.error
    h.wait(lambda s: a not in s.by_id, 25, "job to finish after restart")
    [rec] = [c for c in h.backend.completed() if c.spec.job_id == a]
    assert rec.preemptions == 1
    assert rec.executed_s > 0


def test_migrate_moves_a_running_job(backend_factory: Harness) -> None:
    h = backend_factory
    [a] = h.submit([JobDef(gpus=1, duration_s=2.0)])
    h.backend.snapshot()
    assert h.backend.apply([Start(job_id=a, placement=place({"a100-1": [0]}))])[0].ok
    h.wait(lambda s: h.confirmed_running(a), 15, "job running")
    r = h.apply_one(Migrate(job_id=a, placement=place({"v100-2": [0]})))
    assert r.ok, r.error
    assert h.backend.snapshot().job(a).placement == place({"v100-2": [0]})
    h.wait(
        lambda s: a in s.by_id and h.confirmed_running(a),
        20,
        "job running again after the move",
    )
    snap = h.backend.snapshot()
    assert snap.job(a).placement == place({"v100-2": [0]})
    assert snap.job(a).preemptions == 0  # a move is not a preemption
    h.wait(lambda s: a not in s.by_id, 25, "job to finish")
    assert done(h, a)


def test_reconfigure_restarts_with_new_gpus_and_settings(backend_factory: Harness) -> None:
    h = backend_factory
    [a] = h.submit([JobDef(gpus=2, duration_s=2.0)])
    h.backend.snapshot()
    assert h.backend.apply([Start(job_id=a, placement=place({"a100-1": [0, 1]}))])[0].ok
    h.wait(lambda s: h.confirmed_running(a), 15, "job running")
    new = JobSettings(plan="gc", accumulation_steps=2, cpus=2)
    r = h.apply_one(Reconfigure(job_id=a, placement=place({"v100-1": [0]}), settings=new))
    assert r.ok, r.error
    snap = h.backend.snapshot()
    assert snap.job(a).placement == place({"v100-1": [0]})
    assert snap.job(a).settings == new
    assert snap.free_gpus["a100-1"] == (0, 1, 2, 3)
    h.wait(lambda s: a in s.by_id and h.confirmed_running(a), 20, "job running reconfigured")
    snap = h.backend.snapshot()
    assert snap.job(a).placement == place({"v100-1": [0]})
    assert snap.job(a).settings == new and snap.job(a).preemptions == 0
    h.wait(lambda s: a not in s.by_id, 25, "job to finish")
    assert done(h, a)


def test_apply_is_idempotent_per_request_id(backend_factory: Harness) -> None:
    h = backend_factory
    a, b = h.submit([JobDef(gpus=1, duration_s=20), JobDef(gpus=1, duration_s=20)])
    h.backend.snapshot()
    start = Start(job_id=a, placement=place({"v100-1": [0]}), request_id="r-1")
    [first] = h.backend.apply([start])
    assert first.ok
    [again] = h.backend.apply([start])
    assert again == first
    # a different action under a used request id is not applied either
    [dup] = h.backend.apply([Start(job_id=b, placement=place({"v100-1": [1]}), request_id="r-1")])
    assert dup == first
    snap = h.backend.snapshot()
    assert snap.job(b).state is JobState.PENDING
    assert snap.job(a).state is JobState.RUNNING
    # failures are remembered too
    bad = Start(job_id=b, placement=place({"v100-1": [0]}), request_id="r-2")
    [f1] = h.backend.apply([bad])
    [f2] = h.backend.apply([bad])
    assert not f1.ok and f2 == f1


def test_completed_reports_each_job_once_and_finished(backend_factory: Harness) -> None:
    h = backend_factory
    ids = h.submit([JobDef(gpus=1, duration_s=1.0), JobDef(gpus=4, duration_s=1.5)])
    h.backend.snapshot()
    assert not h.backend.finished()
    rs = h.backend.apply(
        [
            Start(job_id=ids[0], placement=place({"a100-1": [0]})),
            Start(job_id=ids[1], placement=place({"v100-2": [0, 1, 2, 3]})),
        ]
    )
    assert all(r.ok for r in rs), rs
    h.wait(lambda s: not s.jobs, 25, "both jobs to finish")
    for _ in range(3):  # more snapshots must not report them again
        h.pause()
        h.backend.snapshot()
    recs = h.backend.completed()
    assert sorted(c.spec.job_id for c in recs) == sorted(ids)
    for c in recs:
        assert c.finish_s >= c.first_start_s
        assert c.preemptions == 0
    assert h.backend.finished()
