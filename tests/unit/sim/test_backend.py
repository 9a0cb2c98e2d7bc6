"""SimulatedBackend: every action kind, its rules, and the progress accounting."""

from __future__ import annotations

import pytest

from slurm_sched.errors import InputError
from slurm_sched.model import (
    ClusterSnapshot,
    JobSettings,
    JobState,
    JobView,
    Migrate,
    Preempt,
    Reconfigure,
    Resume,
    Share,
    Start,
    Suspend,
    parse_cluster_spec,
)
from slurm_sched.perf.progress import ProgressModel, UniformInterference
from slurm_sched.sim.backend import SimulatedBackend
from tests.builders import job, place

CLUSTER = parse_cluster_spec("2x2")


def backend(*jobs, **kw) -> SimulatedBackend:
    b = SimulatedBackend(CLUSTER, jobs, **kw)
    b.advance_to(0)
    return b


def finish_times(b: SimulatedBackend) -> dict[str, float]:
    while (t := b.next_event_s()) is not None:
        b.advance_to(t)
    return {c.spec.job_id: c.finish_s for c in b.completed()}


def test_start_runs_to_completion_and_frees_gpus():
    b = backend(job("a", 0, 2, 10))
    [r] = b.apply([Start(job_id="a", placement=place(**{"node-1": [0, 1]}))])
    assert r.ok
    assert b.snapshot().free_gpus["node-1"] == ()
    assert finish_times(b) == {"a": 10}
    assert b.finished()
    assert b.snapshot().free_gpus["node-1"] == (0, 1)
    assert b.busy_gpu_s == pytest.approx(20)


@pytest.mark.parametrize(
    ("placement", "error"),
    [
        ({"node-1": [0]}, "asks for 2 GPU(s), placement has 1"),
        ({"node-9": [0, 1]}, "unknown node"),
        ({"node-1": [0, 5]}, "no GPU index 5"),
    ],
)
def test_bad_start_fails_as_data(placement, error):
    b = backend(job("a", 0, 2, 10))
    [r] = b.apply([Start(job_id="a", placement=place(**placement))])
    assert not r.ok and error in r.error
    assert b.snapshot().job("a").state is JobState.PENDING


def test_start_on_a_held_gpu_needs_share_and_share_respects_capacity():
    b = backend(job("a", 0, 1, 10), job("b", 0, 1, 10), job("c", 0, 1, 10), max_jobs_per_gpu=2)
    gpu0 = place(**{"node-1": [0]})
    assert b.apply([Start(job_id="a", placement=gpu0)])[0].ok
    r = b.apply([Start(job_id="b", placement=gpu0)])[0]
    assert not r.ok and "use Share" in r.error
    assert b.apply([Share(job_id="b", placement=gpu0, with_jobs=("a",))])[0].ok
    r = b.apply([Share(job_id="c", placement=gpu0, with_jobs=("a", "b"))])[0]
    assert not r.ok and "max 2" in r.error
    assert b.jobs_on_gpu("node-1", 0) == ("a", "b")


def test_sharing_slows_both_jobs_by_xi_until_one_ends():
    b = backend(job("a", 0, 1, 10), job("b", 0, 1, 20), progress=UniformInterference(xi=2.0))
    gpu0 = place(**{"node-1": [0]})
    b.apply([Start(job_id="a", placement=gpu0), Share(job_id="b", placement=gpu0)])
    # both at rate 1/2: a ends at 20 (10 work); b has done 10 of 20, then runs alone: ends at 30
    assert finish_times(b) == pytest.approx({"a": 20, "b": 30})
    assert b.busy_gpu_s == pytest.approx(30)  # one GPU busy for 30 s, counted once


class _FasterAfterHalf(ProgressModel):
    """Rate 1 for the first half of a job's work, 2 for the rest: a rate that changes by itself."""

    def plan_speed(self, job, placement):
        return 1.0 if job.work_done_s < job.spec.duration_s / 2 else 2.0

    def rate_holds_until(self, job, placement):
        half = job.spec.duration_s / 2
        return half if job.work_done_s < half else None


def test_a_rate_that_changes_by_itself_moves_the_completion_and_stops_the_clock_there():
    b = backend(job("a", 0, 1, 100), progress=_FasterAfterHalf())
    b.apply([Start(job_id="a", placement=place(**{"node-1": [0]}))])
    assert b.next_event_s() == 50  # the change, not the completion at rate 1 (100)
    b.advance_to(50)
    assert b.snapshot().job("a").rate == 2.0
    assert b.next_event_s() == 75
    assert finish_times(b) == {"a": 75}


def test_a_job_changed_before_its_announced_rate_change_drops_it():
    b = backend(job("a", 0, 1, 100), progress=_FasterAfterHalf())
    b.apply([Start(job_id="a", placement=place(**{"node-1": [0]}))])
    b.advance_to(20)
    b.apply([Suspend(job_id="a")])
    # the change at 50 is stale and no stop (the superseded completion at 100 still is one)
    assert b.next_event_s() == 100
    b.advance_to(30)
    b.apply([Resume(job_id="a")])  # 20 done: rate 1 until 50 done at 60, then 2
    assert finish_times(b) == {"a": 85}


@pytest.mark.parametrize("in_place", [True, False])
def test_a_reconfigure_to_the_same_gpus_restarts_unless_settings_change_in_place(in_place):
    b = backend(job("a", 0, 1, 100), restart_overhead_s=30, in_place_settings=in_place)
    gpu0 = place(**{"node-1": [0]})
    b.apply([Start(job_id="a", placement=gpu0)])
    b.advance_to(40)
    new = JobSettings(sub_batch_size=64, accumulation_steps=2)
    assert b.apply([Reconfigure(job_id="a", placement=gpu0, settings=new)])[0].ok
    v = b.snapshot().job("a")
    assert v.settings == new and v.state is JobState.RUNNING
    assert v.preemptions == 0
    assert finish_times(b) == {"a": 100 if in_place else 130}


def test_suspend_resume_keeps_gpus_and_stops_progress():
    b = backend(job("a", 0, 1, 10))
    b.apply([Start(job_id="a", placement=place(**{"node-1": [0]}))])
    b.advance_to(4)
    assert b.apply([Suspend(job_id="a")])[0].ok
    assert b.snapshot().free_gpus["node-1"] == (1,)
    b.advance_to(100)
    assert b.snapshot().job("a").work_done_at(100) == pytest.approx(4)
    assert b.apply([Resume(job_id="a")])[0].ok
    assert finish_times(b) == {"a": 106}


def test_preempt_requeues_and_restart_pays_the_overhead():
    b = backend(job("a", 0, 1, 10), restart_overhead_s=3)
    b.apply([Start(job_id="a", placement=place(**{"node-1": [0]}))])
    b.advance_to(4)
    assert b.apply([Preempt(job_id="a")])[0].ok
    v = b.snapshot().job("a")
    assert v.state is JobState.PENDING and v.placement is None and v.preemptions == 1
    b.advance_to(10)
    b.apply([Start(job_id="a", placement=place(**{"node-2": [1]}))])
    assert finish_times(b) == {"a": 10 + 3 + 6}
    [c] = b.completed()
    assert c.first_start_s == 0 and c.executed_s == pytest.approx(4 + 9) and c.preemptions == 1
    assert c.queue_s == pytest.approx(19 - 13)


def test_migrate_and_reconfigure():
    b = backend(job("a", 0, 2, 10), restart_overhead_s=1)
    b.apply([Start(job_id="a", placement=place(**{"node-1": [0, 1]}))])
    b.advance_to(2)
    assert b.apply([Migrate(job_id="a", placement=place(**{"node-2": [0, 1]}))])[0].ok
    assert b.snapshot().free_gpus == {"node-1": (0, 1), "node-2": ()}
    b.advance_to(5)
    settings = JobSettings(plan="zero-dp", accumulation_steps=2)
    r = b.apply([Reconfigure(job_id="a", placement=place(**{"node-1": [0]}), settings=settings)])
    assert r[0].ok
    v = b.snapshot().job("a")
    assert v.settings == settings and v.placement.num_gpus == 1
    # a bad target leaves the job where it was
    b2 = backend(job("x", 0, 1, 10), job("y", 0, 1, 10))
    b2.apply([Start(job_id="x", placement=place(**{"node-1": [0]})),
              Start(job_id="y", placement=place(**{"node-1": [1]}))])
    r = b2.apply([Migrate(job_id="x", placement=place(**{"node-1": [1]}))])[0]
    assert not r.ok
    assert b2.snapshot().job("x").placement == place(**{"node-1": [0]})
    assert b2.snapshot().job("x").state is JobState.RUNNING


def test_apply_is_idempotent_per_request_id():
    b = backend(job("a", 0, 1, 10), job("b", 0, 1, 10))
    a = Start(job_id="a", placement=place(**{"node-1": [0]}), request_id="r1")
    first = b.apply([a])
    again = b.apply([a])
    assert first == again and first[0].ok
    assert b.snapshot().job("a").state is JobState.RUNNING


def test_jobs_that_can_never_fit_are_reported_not_dropped():
    b = SimulatedBackend(CLUSTER, [job("huge", 0, 8, 10), job("gpu", 0, 1, 10, gpu_type="h100")])
    assert {s.job_id for s, _ in b.rejected} == {"huge", "gpu"}
    assert "cluster has 4" in dict((s.job_id, r) for s, r in b.rejected)["huge"]


def test_arrivals_appear_at_their_submit_time_only():
    b = SimulatedBackend(CLUSTER, [job("late", 50, 1, 10)])
    b.advance_to(49.9)
    assert b.snapshot().jobs == ()
    b.advance_to(50)
    assert [j.job_id for j in b.snapshot().pending] == ["late"]


def _captured(*views: JobView, now: float, free: dict[str, tuple[int, ...]]) -> ClusterSnapshot:
    return ClusterSnapshot(now_s=now, cluster=CLUSTER, jobs=views, known_free_gpus=free)


def test_from_state_continues_a_captured_state():
    running = JobView(
        spec=job("r", 0, 2, 100),
        state=JobState.RUNNING,
        placement=place(**{"node-1": [0, 1]}),
        first_start_s=10,
        accounted_at_s=20,
        executed_s=10,
        work_done_s=10,
        rate=1.0,
    )
    suspended = JobView(
        spec=job("s", 0, 1, 50),
        state=JobState.SUSPENDED,
        placement=place(**{"node-2": [0]}),
        first_start_s=5,
        executed_s=5,
        work_done_s=5,
    )
    pending = JobView(spec=job("p", 70, 1, 10), work_done_s=3)  # submitted after the capture
    # node-2 GPU 1: neither free nor held by a job of the snapshot
    b = SimulatedBackend.from_state(
        _captured(running, suspended, pending, now=30, free={"node-1": (), "node-2": ()}),
        restart_overhead_s=0,
        max_jobs_per_gpu=1,
    )
    assert b.now_s == 30
    assert b.blocked_gpus == (("node-2", 1),)
    snap = b.snapshot()
    assert snap.free_gpus == {"node-1": (), "node-2": ()}
    r = snap.job("r")
    assert r.state is JobState.RUNNING and r.work_done_s == 20 and r.executed_s == 20
    assert snap.job("s").state is JobState.SUSPENDED
    p = snap.job("p")
    assert p.state is JobState.PENDING and p.work_done_s == 3 and p.spec.submit_time_s == 30
    # r finishes its remaining 80 s; the blocked GPU never becomes free
    assert finish_times(b) == {"r": 110}
    assert b.snapshot().free_gpus == {"node-1": (0, 1), "node-2": ()}


def test_from_state_refuses_placements_the_cluster_cannot_hold():
    def held(job_id: str, gpu: int) -> JobView:
        return JobView(
            spec=job(job_id, 0, 1, 10),
            state=JobState.RUNNING,
            placement=place(**{"node-1": [gpu]}),
        )

    with pytest.raises(InputError, match="no such GPU in the cluster") as e:
        SimulatedBackend.from_state(_captured(held("x", 5), now=0, free={}))
    assert e.value.value == "node-1:5"
    two = _captured(held("x", 0), held("y", 0), now=0, free={})
    with pytest.raises(InputError, match="more jobs than the replay's capacity of 1") as e:
        SimulatedBackend.from_state(two, max_jobs_per_gpu=1)
    assert e.value.value == "y"
    assert SimulatedBackend.from_state(two, max_jobs_per_gpu=2).jobs_on_gpu("node-1", 0) == (
        "x",
        "y",
    )
