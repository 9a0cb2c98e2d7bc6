"""slurm-backfill: Slurm's multifactor priority, main scheduler and EASY backfill."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_sched.controller import Controller
from slurm_sched.errors import InputError
from slurm_sched.model import JobSpec, parse_cluster_spec
from slurm_sched.policy import registry
from slurm_sched.policy.slurm_backfill import SlurmBackfill, slurm_backfill_options_from_config
from slurm_sched.policy.slurm_backfill.config import parse_slurm_time_s
from slurm_sched.policy.slurm_backfill.priority import FairShare, age_factor, size_factor
from slurm_sched.sim.backend import SimulatedBackend
from slurm_sched.sim.clock import SimulatedClock
from slurm_sched.sim.runner import simulate
from tests.invariants import CheckingBackend

DATA = Path(__file__).resolve().parents[2] / "data"


def job(jid: str, t: float, gpus: int, dur: float, limit: float | None = None,
        user: str = "default", gpu_type: str | None = None) -> JobSpec:
    return JobSpec(job_id=jid, submit_time_s=t, num_gpus=gpus, duration_s=dur,
                   time_limit_s=limit, user=user, gpu_type=gpu_type)


def starts(jobs: list[JobSpec], cluster: str, policy: SlurmBackfill | str) -> dict[str, float]:
    res = simulate(jobs, parse_cluster_spec(cluster), policy, restart_overhead_s=0)
    return {c.spec.job_id: c.first_start_s for c in res.completed}


# ---------------------------------------------------------------- priority factors
def test_age_factor_grows_to_one_at_max_age() -> None:
    assert age_factor(0, 100) == 0
    assert age_factor(50, 100) == 0.5
    assert age_factor(500, 100) == 1.0
    assert age_factor(-5, 100) == 0


def test_size_factor_by_gpus_and_favor_small_inverts_it() -> None:
    assert size_factor(8, 32, favor_small=False) == 0.25
    assert size_factor(32, 32, favor_small=False) == 1.0
    assert size_factor(1, 32, favor_small=True) == 1.0
    assert size_factor(32, 32, favor_small=True) == pytest.approx(1 / 32)
    assert size_factor(2, 32, favor_small=True) > size_factor(8, 32, favor_small=True)


def test_fairshare_classic_formula_and_decay() -> None:
    fs = FairShare(half_life_s=100.0)
    assert fs.factor("a", 0) == 1.0  # nobody has used anything
    fs.factor("b", 0)  # b is known: a and b have a share of 1/2 each
    fs.add_rate("a", 4, 0.0)
    fs.add_rate("a", -4, 50.0)
    # a's usage is all the usage: U = 1, S = 1/2 -> 2^-2
    assert fs.factor("a", 50.0) == pytest.approx(0.25)
    assert fs.factor("b", 50.0) == 1.0
    # 4 GPUs for 50 s, decayed: the integral of 4 * 2^-(50 - t)/100 over [0, 50]
    expected = 4 * 100 / math.log(2) * (1 - 2 ** -0.5)
    assert fs.usage("a", 50.0) == pytest.approx(expected)
    assert fs.usage("a", 150.0) == pytest.approx(expected / 2)  # one half-life later
    fs.add_rate("b", 4, 150.0)
    fs.add_rate("b", -4, 200.0)
    assert fs.factor("b", 200.0) < 1.0
    assert fs.factor("a", 200.0) > 0.25  # its share of the usage fell


def test_fairshare_shares_and_no_decay() -> None:
    fs = FairShare(half_life_s=0.0, shares={"big": 3.0, "small": 1.0})
    fs.add_rate("big", 1, 0.0)
    fs.add_rate("small", 1, 0.0)
    # equal usage (U = 1/2 each), S = 3/4 and 1/4
    assert fs.factor("big", 10.0) == pytest.approx(2 ** (-0.5 / 0.75))
    assert fs.factor("small", 10.0) == pytest.approx(2 ** (-0.5 / 0.25))
    assert fs.usage("big", 1000.0) == pytest.approx(1000.0)  # no decay: plain GPU-seconds


def test_large_times_keep_usage_finite() -> None:
    fs = FairShare(half_life_s=1.0)
    fs.add_rate("a", 1, 0.0)
    fs.factor("b", 0.0)
    assert 0 < fs.factor("a", 5000.0) < 1
    assert fs.usage("a", 5000.0) == pytest.approx(1 / math.log(2))


# ---------------------------------------------------------------- ordering
def test_all_weights_zero_is_fifo_order() -> None:
    pol = SlurmBackfill()
    # everything waits behind a 4-GPU job on a 4-GPU cluster
    jobs = [job("0", 0, 4, 1000)] + [job(str(i), float(10 - i), 1 + i % 3, 10)
                                      for i in range(1, 8)]
    sim = SimulatedBackend(parse_cluster_spec("1x4"), jobs, restart_overhead_s=0)
    sim.advance_to(20)
    pol.decide(sim.snapshot(), 20.0)
    assert pol.queue() == ["7", "6", "5", "4", "3", "2", "1"]  # by submit time


def test_without_backfill_weights_zero_schedules_like_fifo() -> None:
    jobs = [job(f"j{i}", float(i * 7 % 97 + i / 100), 1 + (i * 5) % 8, 30 + (i * 37) % 400)
            for i in range(60)]
    ours = starts(jobs, "2x8", SlurmBackfill(backfill=False))
    fifo = starts(jobs, "2x8", "fifo")
    assert ours == fifo


def test_ties_by_submit_time_then_numeric_job_id() -> None:
    pol = SlurmBackfill()
    jobs = [job("0", 0, 4, 1000), job("10", 5, 1, 1), job("9", 5, 1, 1), job("x", 4, 1, 1)]
    sim = SimulatedBackend(parse_cluster_spec("1x4"), jobs, restart_overhead_s=0)
    sim.advance_to(6)
    pol.decide(sim.snapshot(), 6.0)
    assert pol.queue() == ["x", "9", "10"]


def test_size_weight_favours_small_jobs_when_asked() -> None:
    jobs = [job("0", 0, 4, 100), job("big", 1, 4, 10), job("small", 2, 1, 10)]
    order = starts(jobs, "1x4", SlurmBackfill(weight_job_size=1000, favor_small=True,
                                              backfill=False))
    assert order["small"] < order["big"]
    order = starts(jobs, "1x4", SlurmBackfill(weight_job_size=1000, backfill=False))
    assert order["big"] < order["small"]


# ---------------------------------------------------------------- main scheduler, backfill
def hol_trace(c_limit: float) -> list[JobSpec]:
    """A holds 3 of 4 GPUs until 100; B (4 GPUs) waits for it; C (1 GPU, 10 s) comes last."""
    return [job("A", 0, 3, 100, limit=100), job("B", 1, 4, 50, limit=60),
            job("C", 2, 1, 10, limit=c_limit)]


def test_head_of_line_blocking_without_backfill() -> None:
    got = starts(hol_trace(10), "1x4", SlurmBackfill(backfill=False))
    assert got == {"A": 0.0, "B": 100.0, "C": 150.0}  # C fits at 2 but waits behind B


def test_backfill_starts_a_short_job_before_the_reservation() -> None:
    got = starts(hol_trace(10), "1x4", SlurmBackfill())
    # the first backfill pass after C arrives: bf_interval_s (30 s) after the one at t=0
    assert got == {"A": 0.0, "B": 100.0, "C": 30.0}


def test_backfill_trusts_time_limits_not_runtimes() -> None:
    # C would run 10 s, but its limit (200 s) passes B's reserved start: it waits
    got = starts(hol_trace(200), "1x4", SlurmBackfill())
    assert got["C"] == 150.0
    # no limit at all: the default (a year) holds
    got = starts([*hol_trace(10)[:2], job("C", 2, 1, 10)], "1x4", SlurmBackfill())
    assert got["C"] == 150.0


def test_backfill_uses_gpus_the_reservation_does_not_need() -> None:
    # A: node-1's 4 GPUs until 100. B needs 6: node-1's 4 and 2 of node-2 at t=100.
    # C (2 GPUs, a long limit) fits on node-2's other 2 GPUs without delaying B.
    jobs = [job("A", 0, 4, 100, limit=100), job("B", 1, 6, 50, limit=50),
            job("C", 2, 2, 500, limit=1000), job("D", 3, 1, 10, limit=1000)]
    pol = SlurmBackfill()
    pol.record_reservations = True
    got = starts(jobs, "2x4", pol)
    assert got["C"] == 30.0
    assert got["B"] == 100.0
    assert got["D"] >= 150.0  # nothing is left outside B's GPUs, and its limit passes 100
    first = pol.reservation_log[0]
    assert (first.job_id, first.start_s) == ("B", 100.0)


def test_reservation_past_the_window_holds_nothing() -> None:
    # B's reservation (t=100) is past a 1-minute window: C starts although it outlives it
    got = starts(hol_trace(1000), "1x4", SlurmBackfill(bf_window_s=60))
    assert got["C"] == 30.0


def test_backfill_waits_for_its_interval_and_wakes_itself() -> None:
    got = starts(hol_trace(10), "1x4", SlurmBackfill(bf_interval_s=45))
    assert got["C"] == 45.0


def test_gpu_type_is_respected() -> None:
    jobs = [job("A", 0, 2, 50, gpu_type="v100"), job("B", 1, 2, 50, gpu_type="v100"),
            job("C", 2, 2, 50, gpu_type="a100")]
    res = simulate(jobs, parse_cluster_spec("1x2:a100,1x2:v100"), SlurmBackfill(),
                   restart_overhead_s=0)
    got = {c.spec.job_id: c.first_start_s for c in res.completed}
    assert got == {"A": 0.0, "B": 50.0, "C": 30.0}  # C backfilled past B on the other type


def test_fair_share_lowers_a_heavy_account() -> None:
    jobs = [job("h1", 0, 1, 1000, user="heavy"), job("h2", 10, 1, 10, user="heavy"),
            job("l1", 20, 1, 10, user="light")]
    fifo = starts(jobs, "1x1", SlurmBackfill())
    assert fifo["h2"] < fifo["l1"]
    fair = starts(jobs, "1x1", SlurmBackfill(weight_fairshare=1000))
    assert fair["l1"] < fair["h2"]
    pol = SlurmBackfill(weight_fairshare=1000)
    simulate(jobs, parse_cluster_spec("1x1"), pol, restart_overhead_s=0)
    assert pol.fairshare_factor("heavy", 1030.0) < pol.fairshare_factor("light", 1030.0)


def test_explain_names_priority_and_reservation() -> None:
    pol = SlurmBackfill()
    sim = SimulatedBackend(parse_cluster_spec("1x4"), hol_trace(10), restart_overhead_s=0)
    clock = SimulatedClock(sim)
    ctl = Controller(sim, pol, clock)
    ctl.run(until_s=29)
    text = pol.explain(sim.snapshot(), "B")
    assert "1 of 2" in text and "priority" in text


@st.composite
def limited_traces(draw: st.DrawFn) -> list[JobSpec]:
    n = draw(st.integers(min_value=2, max_value=14))
    out = []
    for i in range(n):
        dur = draw(st.integers(min_value=1, max_value=300))
        out.append(job(str(i), draw(st.integers(min_value=0, max_value=200)),
                       draw(st.sampled_from([1, 1, 2, 3, 4, 8])), dur,
                       limit=dur * draw(st.sampled_from([1.0, 1.5, 3.0])),
                       gpu_type=draw(st.sampled_from([None, None, None, "a100"]))))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=limited_traces(), cluster=st.sampled_from(["1x4", "2x4", "1x8:a100,2x2:v100"]),
       weight_age=st.sampled_from([0.0, 1000.0]), interval=st.sampled_from([1.0, 30.0]))
def test_backfill_never_delays_a_reservation(jobs: list[JobSpec], cluster: str,
                                             weight_age: float, interval: float) -> None:
    """With time limits no shorter than the runtimes and a priority order that new jobs cannot
    jump (FIFO, or age only), a job starts no later than any reservation made for it."""
    spec = parse_cluster_spec(cluster)
    pol = SlurmBackfill(weight_age=weight_age, bf_interval_s=interval, calc_period_s=17)
    pol.record_reservations = True
    sim = SimulatedBackend(spec, jobs, restart_overhead_s=0)
    checked = CheckingBackend(sim, max_jobs_per_gpu=1, exact_gangs=True)
    Controller(checked, pol, SimulatedClock(sim)).run()
    started = {c.spec.job_id: c.first_start_s for c in sim.completed()}
    assert set(started) == {j.job_id for j in jobs} - {s.job_id for s, _ in sim.rejected}
    assert not checked.failed_actions
    for r in pol.reservation_log:
        assert r.start_s >= r.made_s
        assert started[r.job_id] <= r.start_s + 1e-6, (r, started)


def test_thirty_job_live_workload_is_quick_in_the_simulator() -> None:
    """The integration suite's 30-job workload (1-4 s jobs, 1/2/4/8 GPUs, 2x4:a100,2x4:v100)
    ends well within its live deadline when simulated."""
    gpus = [1] * 13 + [2] * 9 + [4] * 6 + [8] * 2
    durations = [1, 1, 1, 2, 2, 3, 4]
    jobs = [job(str(i), 0.0, g, float(durations[i % 7])) for i, g in enumerate(gpus)]
    sim = SimulatedBackend(parse_cluster_spec("2x4:a100,2x4:v100"), jobs, restart_overhead_s=0)
    Controller(sim, registry.create("slurm-backfill"), SimulatedClock(sim)).run(until_s=3600)
    assert sim.finished() and sim.now_s <= 60


# ---------------------------------------------------------------- config, registry
def test_options_from_the_sample_config() -> None:
    text = (DATA / "scontrol_show_config.txt").read_text()
    opts = slurm_backfill_options_from_config(text)
    assert opts == {
        "weight_age": 1000.0, "weight_job_size": 500.0, "weight_fairshare": 10000.0,
        "max_age_s": 7 * 86400.0, "calc_period_s": 300.0, "decay_half_life_s": 7 * 86400.0,
        "favor_small": False, "backfill": True, "bf_interval_s": 60.0,
        "bf_window_s": 2880 * 60.0, "bf_max_job_test": 1000,
    }
    pol = registry.create("slurm-backfill", opts)
    assert isinstance(pol, SlurmBackfill) and pol.bf_window_s == 172800.0


def test_priority_basic_and_builtin() -> None:
    opts = slurm_backfill_options_from_config(
        "PriorityType = priority/basic\nPriorityWeightAge = 1000\n"
        "SchedulerType = sched/builtin\nSchedulerParameters = (null)\n")
    assert opts == {"weight_age": 0.0, "weight_job_size": 0.0, "weight_fairshare": 0.0,
                    "backfill": False}
    assert slurm_backfill_options_from_config("") == {}


@pytest.mark.parametrize(("text", "seconds"), [
    ("7-00:00:00", 7 * 86400.0), ("1-12", 36 * 3600.0), ("2-03:04", (51 * 60 + 4) * 60.0),
    ("01:30:00", 5400.0), ("30:15", 1815.0), ("5", 300.0), ("INFINITE", None),
])
def test_slurm_times(text: str, seconds: float | None) -> None:
    assert parse_slurm_time_s("PriorityMaxAge", text) == seconds


@pytest.mark.parametrize(("line", "field", "value"), [
    ("PriorityWeightAge = lots", "PriorityWeightAge", "lots"),
    ("PriorityWeightJobSize = -3", "PriorityWeightJobSize", "-3"),
    ("PriorityMaxAge = 7 days", "PriorityMaxAge", "7 days"),
    ("PriorityMaxAge = 00:00:00", "PriorityMaxAge", "00:00:00"),
    ("PriorityFavorSmall = maybe", "PriorityFavorSmall", "maybe"),
    ("PriorityType = priority/other", "PriorityType", "priority/other"),
    ("SchedulerType = sched/hold", "SchedulerType", "sched/hold"),
    ("SchedulerParameters = bf_interval=0", "SchedulerParameters", "bf_interval=0"),
    ("SchedulerParameters = bf_window=x,bf_continue", "SchedulerParameters", "bf_window=x"),
])
def test_config_errors_name_key_and_value(line: str, field: str, value: str) -> None:
    with pytest.raises(InputError) as e:
        slurm_backfill_options_from_config(line)
    assert e.value.field == field
    assert e.value.value == value
    assert field in str(e.value) and value in str(e.value)


@pytest.mark.parametrize("options", [
    {"weight_age": -1}, {"max_age_s": 0}, {"bf_max_job_test": 0}, {"backfill": "yes"},
    {"shares": {"a": -1}}, {"decay_half_life_s": -5},
])
def test_bad_options_are_input_errors(options: dict[str, object]) -> None:
    with pytest.raises(InputError):
        registry.create("slurm-backfill", options)


def test_registered() -> None:
    assert "slurm-backfill" in registry.names()
    found = registry.info("slurm-backfill")
    assert found.name == "slurm-backfill" and not found.clairvoyant
    assert {"weight_age", "bf_interval_s", "default_time_limit_s"} <= set(found.options)
