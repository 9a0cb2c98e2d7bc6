"""Metrics rows from hand-made outcomes, and the observed row from accounting records."""

from __future__ import annotations

import pytest

from slurm_sched.advisor.metrics import percentile, size_bucket, summarise
from slurm_sched.advisor.observed import busy_gpu_s, observed_outcomes
from slurm_sched.advisor.outcomes import JobOutcome
from tests.unit.advisor.conftest import T0, acc_job


def out(job_id: str, submit: float, start: float, end: float, gpus: int = 1,
        account: str = "a", executed: float | None = None) -> JobOutcome:
    run = end - start if executed is None else executed
    return JobOutcome(job_id, account, gpus, submit, start, end, run, max(run, 1.0))


def test_size_buckets() -> None:
    assert [size_bucket(g) for g in (1, 2, 4, 5, 8, 9, 64)] == \
        ["1", "2-4", "2-4", "5-8", "5-8", ">8", ">8"]
    with pytest.raises(ValueError):
        size_bucket(0)


def test_percentile_interpolates_like_numpy() -> None:
    np = pytest.importorskip("numpy")
    values = [5.0, 1.0, 9.0, 3.0, 7.5]
    for q in (0, 5, 50, 90, 99, 100):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))
    assert percentile([], 50) == 0.0


def test_row_on_hand_made_records() -> None:
    # 4 GPUs; span 0..400
    outcomes = [
        out("a", 0, 0, 100, gpus=4, account="x"),        # JCT 100, queue 0, slowdown 1
        out("b", 0, 100, 300, gpus=2, account="y"),      # JCT 300, queue 100, slowdown 1.5
        out("c", 100, 300, 400, gpus=1, account="y"),    # JCT 300, queue 200, slowdown 3
        out("d", 0, 50, 400, gpus=9, account="z", executed=100),  # preempted: queue 300
    ]
    row = summarise("p", "simulated", outcomes, total_gpus=16)
    assert row.jobs == 4
    assert row.jct.avg_s == pytest.approx((100 + 300 + 300 + 400) / 4)
    assert row.jct.median_s == pytest.approx(300)
    assert row.queue.avg_s == pytest.approx((0 + 100 + 200 + 300) / 4)
    assert row.span_s == 400
    gpu_s = 400 + 400 + 100 + 900
    assert row.utilisation == pytest.approx(gpu_s / (16 * 400))
    assert row.per_account["x"].gpu_share == pytest.approx(400 / gpu_s)
    assert row.per_account["y"].gpu_share == pytest.approx(500 / gpu_s)
    assert row.per_account["y"].mean_slowdown == pytest.approx((1.5 + 3) / 2)
    assert row.per_account["z"].mean_slowdown == pytest.approx(4.0)
    assert list(row.by_size) == ["1", "2-4", ">8"]  # no 5-8 job: no bucket
    assert row.by_size["2-4"].jobs == 2
    assert row.by_size["2-4"].queue.avg_s == pytest.approx(50)
    assert row.by_size[">8"].jct.p99_s == pytest.approx(400)
    assert summarise("p", "simulated", outcomes, total_gpus=16,
                     busy_gpu_s=800).utilisation == pytest.approx(800 / 6400)


def test_empty_row() -> None:
    row = summarise("p", "simulated", [], total_gpus=4)
    assert row.jobs == 0 and row.utilisation == 0 and row.by_size == {}


def test_observed_outcomes_from_accounting() -> None:
    jobs = [acc_job("1", 100, 160, 1160, gpus=2, account="x"),
            acc_job("2", 200, 200, 200, account="")]  # zero run time, no account
    obs = observed_outcomes(jobs, T0 + 100)
    assert obs[0].submit_s == 0 and obs[0].start_s == 60 and obs[0].end_s == 1060
    assert obs[0].queue_s == 60 and obs[0].jct_s == 1060
    assert obs[0].slowdown == pytest.approx(1060 / 1000)
    assert obs[1].account == "u-"  # the user stands in for a missing account
    assert obs[1].run_s == 1.0
    assert busy_gpu_s(obs) == 2000
    row = summarise("observed", "observed", obs, total_gpus=4)
    assert row.utilisation == pytest.approx(2000 / (4 * 1060))
