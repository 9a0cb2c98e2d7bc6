"""Metrics against hand-computed values."""

import pytest

from slurm_sched.model import CompletedJob
from slurm_sched.sim.metrics import compute_metrics
from tests.builders import job


def rec(jid, submit, gpus, dur, start, finish, executed=None, user="u", preemptions=0):
    return CompletedJob(spec=job(jid, submit, gpus, dur, user=user), first_start_s=start,
                        finish_s=finish, executed_s=dur if executed is None else executed,
                        preemptions=preemptions)


def test_hand_computed_metrics():
    done = [
        rec("a", 0, 2, 100, 0, 100, user="x"),
        rec("b", 10, 4, 50, 100, 150, user="y"),
        rec("c", 20, 2, 30, 150, 180, user="x", preemptions=1, executed=30),
    ]
    m = compute_metrics("fifo", done, total_gpus=4, busy_gpu_s=460)
    assert m.jobs == 3
    assert m.avg_jct_s == pytest.approx(400 / 3)  # 100, 140, 160
    assert m.median_jct_s == 140
    assert m.p99_jct_s == pytest.approx(140 + 0.98 * 20)  # linear interpolation
    assert m.avg_queue_s == pytest.approx((0 + 90 + 130) / 3)
    assert m.makespan_s == 180
    assert m.gpu_util == pytest.approx(460 / 720)
    assert m.lower_bound_jct_s == pytest.approx(60)
    assert m.preemptions == 1
    assert m.per_tenant["x"].jobs == 2
    assert m.per_tenant["x"].avg_jct_s == pytest.approx(130)
    assert m.per_tenant["y"].gpu_time_s == 200


def test_empty_run_is_all_zero():
    m = compute_metrics("fifo", [], total_gpus=4, busy_gpu_s=0, rejected_jobs=2)
    assert m.jobs == 0 and m.rejected_jobs == 2
