"""The baseline's start times against the observed ones."""

from __future__ import annotations

import pytest

from slurm_sched.advisor.validation import validate
from tests.unit.advisor.test_metrics import out


def test_start_differences() -> None:
    observed = [out(str(i), 0, 100 * i, 100 * i + 50) for i in range(5)]
    # simulated starts: +0, -30, +120, +600, +1200 s; job "9" only in the simulation
    shifts = [0, -30, 120, 600, 1200]
    simulated = [out(str(i), 0, 100 * i + d, 100 * i + d + 50) for i, d in enumerate(shifts)]
    simulated.append(out("9", 0, 0, 10))
    v = validate("slurm-backfill", observed, simulated, tolerance_s=600)
    assert v.jobs == 5
    assert v.mean_abs_s == pytest.approx((0 + 30 + 120 + 600 + 1200) / 5)
    assert v.median_s == pytest.approx(120)
    assert v.p90_abs_s == pytest.approx(600 + 0.6 * 600)  # between the 4th and 5th of 5
    assert v.within_share == pytest.approx(4 / 5)
    assert validate("x", observed, simulated, tolerance_s=60).within_share == pytest.approx(2 / 5)


def test_no_common_job() -> None:
    v = validate("x", [out("a", 0, 0, 1)], [out("b", 0, 0, 1)])
    assert v.jobs == 0 and v.within_share == 0.0
