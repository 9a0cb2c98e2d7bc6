"""The Pollux-artifact world: statistical steps, placement step times, rates."""

from __future__ import annotations

import pytest

from slurm_sched.model import JobSettings, JobState, JobView, Placement, parse_cluster_spec
from slurm_sched.perf import registry
from slurm_sched.perf.pollux_artifact_world import (
    PolluxArtifactWorld,
    effective_batch,
    placement_key,
    statistical_steps,
    step_time,
)
from slurm_sched.traces.pollux_workload import isolated_run
from tests.builders import job

CLUSTER = parse_cluster_spec("16x4")


def pollux_job(app: str, gpus: int, batch: int, **settings: int) -> JobView:
    run = isolated_run(app, gpus, batch)
    spec = job("j", 0, gpus, run.duration_s).model_copy(
        update={"model": app, "batch_size": batch, "attrs": {"application": app}})
    return JobView(spec=spec, state=JobState.RUNNING, settings=JobSettings(**settings))


def test_steps_follow_statistical_progress_not_the_iteration_count() -> None:
    # YOLOv3 at 64: 14,577 iterations in its validation run, 15,970 steps of gain-weighted
    # progress (the artifact's Tiresias JCTs give 14,102 s, 15,970 x 0.883 s plus the start)
    assert statistical_steps("yolov3", 64) == pytest.approx(15970.3, abs=0.1)
    assert statistical_steps("imagenet", 6400) == pytest.approx(25094.3, abs=0.1)


def test_a_batch_between_validation_runs_interpolates_their_statistics() -> None:
    # CIFAR-10 runs were validated at 128 and 256; 132 lies between, and a bigger batch needs
    # fewer (but not proportionally fewer) steps
    at128, at132, at256 = (statistical_steps("cifar10", b) for b in (128, 132, 256))
    assert at256 < at132 < at128
    assert at132 > at128 * 128 / 132


def test_a_fixed_batch_trains_at_the_rounded_up_share_of_every_gpu() -> None:
    assert effective_batch("cifar10", 6, 128) == 6 * 22
    assert effective_batch("cifar10", 4, 128) == 128
    assert effective_batch("yolov3", 1, 64) == 64  # 8 micro-batches of 8 (max local 8)


def test_placement_key_is_the_smallest_rotation() -> None:
    assert placement_key((4, 2)) == "24"
    assert placement_key((1, 2, 1)) == "112"
    assert placement_key((0, 4)) == "4"


def test_a_one_gpu_job_above_the_initial_batch_accumulates_once() -> None:
    # NCF 32,768 on one GPU: two micro-batches of 16,384, not one of 32,768
    t = step_time("ncf", (1,), 32768)
    assert t == pytest.approx(0.0296, abs=2e-4)
    assert t > 1.3 * 0.02132  # one micro-batch of 32,768 would take 0.0213 s


def test_rate_gives_steps_times_step_time_and_depends_on_the_placement() -> None:
    world = PolluxArtifactWorld()
    v = pollux_job("yolov3", 4, 64)
    packed = Placement.of({"n0": [0, 1, 2, 3]})
    spread = Placement.of({"n0": [0, 1], "n1": [0, 1]})
    rate = world.rate(v, packed, [], CLUSTER)
    assert v.spec.duration_s / rate == pytest.approx(
        statistical_steps("yolov3", 64) * step_time("yolov3", (4,), 64))
    assert world.rate(v, spread, [], CLUSTER) < rate  # YOLOv3 is network-bound across nodes


def test_a_job_without_pollux_data_runs_at_rate_one() -> None:
    v = JobView(spec=job("x", 0, 1, 10), state=JobState.RUNNING)
    assert PolluxArtifactWorld().rate(v, Placement.of({"n0": [0]}), [], CLUSTER) == 1.0


def _elastic_run_s(world: PolluxArtifactWorld, v: JobView, p: Placement) -> float:
    """Seconds an elastic job takes from no work to the end, one epoch's rate at a time."""
    done, seconds = 0.0, 0.0
    while done < v.spec.duration_s:
        at = v.model_copy(update={"work_done_s": done})
        rate = world.rate(at, p, [], CLUSTER)
        until = world.rate_holds_until(at, p)
        end = v.spec.duration_s if until is None else until
        assert end > done
        seconds += (end - done) / rate
        done = end
    return seconds


def test_an_elastic_job_steps_through_its_epochs_and_ends_after_the_steps_of_its_batch() -> None:
    world = PolluxArtifactWorld()
    p = Placement.of({"n0": [0, 1, 2, 3]})
    same = pollux_job("cifar10", 4, 2048, sub_batch_size=512, accumulation_steps=1)
    fixed = pollux_job("cifar10", 4, 2048)
    assert _elastic_run_s(world, same, p) == pytest.approx(
        same.spec.duration_s / world.rate(fixed, p, [], CLUSTER))
    smaller = pollux_job("cifar10", 4, 2048, sub_batch_size=128, accumulation_steps=1)
    assert _elastic_run_s(world, smaller, p) == pytest.approx(
        statistical_steps("cifar10", 512) * step_time("cifar10", (4,), 512))
    # early epochs gain little from a big batch: there the smaller batch is the faster one
    assert world.rate(smaller, p, [], CLUSTER) > world.rate(same, p, [], CLUSTER)
    assert world.rate_holds_until(fixed, p) is None


def test_registered() -> None:
    assert isinstance(registry.create("pollux-artifact"), PolluxArtifactWorld)
