"""The day/week bootstrap: deterministic with a seed, and the recommendation rule."""

from __future__ import annotations

import pytest

from slurm_sched.advisor.outcomes import JobOutcome
from slurm_sched.advisor.resample import CONFIDENCE, block_of, resample
from tests.unit.advisor.conftest import DAY, T0
from tests.unit.advisor.test_metrics import out


def daily(jcts: list[float], prefix: str = "") -> list[JobOutcome]:
    """One job per day, submitted at 01:00 of day i, with JCT jcts[i]."""
    return [out(f"{prefix}{i}", i * DAY + 3600, i * DAY + 3600, i * DAY + 3600 + j)
            for i, j in enumerate(jcts)]


def test_blocks_are_utc_days_and_iso_weeks() -> None:
    assert block_of(T0, "day") == block_of(T0 + DAY - 1, "day") != block_of(T0 + DAY, "day")
    # T0 is a Monday: its week runs to Sunday 23:59:59
    assert block_of(T0, "week") == block_of(T0 + 7 * DAY - 1, "week")
    assert block_of(T0 - 1, "week") != block_of(T0, "week")
    assert block_of(T0 + 7 * DAY, "week") == block_of(T0, "week") + 1
    with pytest.raises(ValueError):
        block_of(T0, "month")


def test_a_clear_winner_is_recommended() -> None:
    base = daily([100, 200, 300, 400, 500, 600, 700, 800, 900, 1000])
    good = daily([0.5 * j for j in [100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]])
    meh = daily([50, 400, 150, 800, 250, 1200, 350, 1600, 450, 2000])  # wins some days
    rs = resample({"base": base, "good": good, "meh": meh}, "base", origin_s=T0,
                  resamples=200, seed=1)
    assert rs.blocks == 10 and rs.jobs == 10 and rs.resamples == 200
    assert rs.odds["good"].win_share == 1.0
    assert rs.odds["good"].beat_share == 1.0
    assert rs.odds["good"].improvement_median == pytest.approx(0.5)
    assert rs.odds["good"].improvement_p5 == pytest.approx(0.5)
    assert rs.odds["base"].win_share == 0.0
    assert rs.odds["good"].avg_jct_s == pytest.approx(275)
    rec = rs.recommendation
    assert rec.policy == "good" and rec.win_share == 1.0
    assert "switch to good" in rec.text and "100%" in rec.text


def test_seeded_and_deterministic() -> None:
    base = daily([100, 200, 300, 400, 500, 600])
    other = daily([120, 150, 330, 380, 520, 560])
    runs = {"base": base, "other": other}
    a = resample(runs, "base", origin_s=T0, resamples=100, seed=7)
    b = resample(runs, "base", origin_s=T0, resamples=100, seed=7)
    c = resample(runs, "base", origin_s=T0, resamples=100, seed=8)
    assert a == b
    assert a.odds["other"].beat_share != c.odds["other"].beat_share or \
        a.odds["other"].improvement_p5 != c.odds["other"].improvement_p5


def test_stay_when_no_policy_is_confidently_better() -> None:
    base = daily([100, 200, 300, 400])
    coin = daily([50, 400, 150, 350])  # better on half the days, about even overall
    rs = resample({"base": base, "coin": coin}, "base", origin_s=T0, seed=3)
    assert rs.odds["coin"].beat_share < CONFIDENCE
    assert rs.recommendation.policy is None
    assert rs.recommendation.text.startswith("stay with Slurm's own scheduling (base)")


def test_clairvoyant_policies_do_not_compete() -> None:
    base = daily([100, 200, 300])
    oracle = daily([10, 20, 30])
    good = daily([50, 100, 150])
    rs = resample({"base": base, "oracle": oracle, "good": good}, "base", origin_s=T0,
                  clairvoyant={"oracle"}, seed=0)
    assert rs.odds["oracle"].win_share is None
    assert rs.odds["oracle"].beat_share == 1.0
    assert rs.odds["good"].win_share == 1.0
    assert rs.recommendation.policy == "good"


def test_only_common_jobs_count_and_weeks_block() -> None:
    base = daily([100] * 14)
    partial = daily([50] * 13)  # the last day's job not completed
    rs = resample({"base": base, "partial": partial}, "base", origin_s=T0, block="week",
                  resamples=20)
    assert rs.jobs == 13 and rs.blocks == 2
    single = resample({"base": daily([100])}, "base", origin_s=T0, resamples=5)
    assert single.notes and "cannot measure" in single.notes[0]
    with pytest.raises(ValueError):
        resample({"x": base}, "base", origin_s=T0)
