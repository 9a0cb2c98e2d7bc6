"""Simulation profiles: the registry, what a profile supplies to ``simulate``, fixed rounds."""

from __future__ import annotations

import pytest

from slurm_sched.errors import InputError
from slurm_sched.model import parse_cluster_spec
from slurm_sched.sim import profile as profiles
from slurm_sched.sim.runner import simulate
from tests.builders import job

CLUSTER = parse_cluster_spec("1x2")


def finish(res) -> dict[str, float]:
    return {c.spec.job_id: c.finish_s for c in res.completed}


def test_every_builtin_profile_loads_under_its_own_name() -> None:
    assert profiles.names()[0] == "default"
    for name in profiles.names():
        assert profiles.get(name).name == name


def test_an_unknown_profile_names_the_field_and_the_known_ones() -> None:
    with pytest.raises(InputError) as e:
        profiles.get("muri")
    assert e.value.field == "profile"
    assert "known: default" in str(e.value)


def test_a_profile_rejects_a_negative_overhead_and_an_empty_round() -> None:
    with pytest.raises(ValueError, match="restart_overhead_s"):
        profiles.Profile(name="x", summary="", restart_overhead_s=-1)
    with pytest.raises(ValueError, match="round_s"):
        profiles.Profile(name="x", summary="", round_s=0)


def test_the_default_profile_decides_at_every_event() -> None:
    # b arrives at 7 while a holds both GPUs until 10: FIFO starts b at 10, the completion
    res = simulate([job("a", 0, 2, 10), job("b", 7, 2, 5)], CLUSTER, "fifo")
    assert finish(res) == {"a": 10, "b": 15}


def test_fixed_rounds_start_jobs_only_at_round_boundaries() -> None:
    rounds = profiles.Profile(name="rounds", summary="", round_s=6)
    # a arrives at 0 (a boundary) and ends at 10; b waits for the round at 12, not for 10
    res = simulate([job("a", 0, 2, 10), job("b", 7, 2, 5)], CLUSTER, "fifo", profile=rounds)
    assert finish(res) == {"a": 10, "b": 17}
    # an arrival between boundaries waits for the next one
    res = simulate([job("c", 1, 1, 4)], CLUSTER, "fifo", profile=rounds)
    assert finish(res) == {"c": 10}


def test_the_profile_supplies_the_overhead_and_the_caller_overrides_it() -> None:
    # srtf preempts the long job for the short one; its restart pays the overhead
    jobs = [job("long", 0, 2, 100), job("short", 10, 2, 5)]
    free = profiles.Profile(name="free", summary="", restart_overhead_s=0)
    assert finish(simulate(jobs, CLUSTER, "srtf", profile=free))["long"] == 105
    assert finish(simulate(jobs, CLUSTER, "srtf", profile=free,
                           restart_overhead_s=20))["long"] == 125
    assert finish(simulate(jobs, CLUSTER, "srtf"))["long"] == 135  # the default 30 s


def test_a_first_start_is_free_unless_the_profile_charges_it() -> None:
    jobs = [job("a", 0, 2, 10)]
    assert finish(simulate(jobs, CLUSTER, "fifo")) == {"a": 10}
    charged = profiles.Profile(name="charged", summary="", start_overhead_s=30)
    assert finish(simulate(jobs, CLUSTER, "fifo", profile=charged)) == {"a": 40}
    with pytest.raises(ValueError, match="start_overhead_s"):
        profiles.Profile(name="x", summary="", start_overhead_s=-1)


def test_a_charged_first_start_and_a_restart_each_cost_their_own_overhead() -> None:
    jobs = [job("long", 0, 2, 100), job("short", 10, 2, 5)]
    both = profiles.Profile(name="both", summary="", restart_overhead_s=20, start_overhead_s=7)
    got = finish(simulate(jobs, CLUSTER, "srtf", profile=both))
    # long: 7 dead, runs 3 by t=10, preempted; short: 7 dead, done at 22; long: 20 dead + 97
    assert got == {"short": 22, "long": 139}


def test_the_pollux_artifact_profile() -> None:
    p = profiles.get("pollux-artifact")
    assert (p.round_s, p.restart_overhead_s, p.start_overhead_s, p.cluster) == (60, 30, 31, "16x4")
    assert p.progress_model == "pollux-artifact"

def test_policy_options_of_a_profile_apply_to_a_policy_named_and_yield_to_the_callers() -> None:
    opts = profiles.Profile(name="o", summary="", policy_options={"rubick": {"online_fit": False}})
    assert opts.options_for("rubick") == {"online_fit": False}
    assert opts.options_for("rubick", {"online_fit": True, "lock_rule": "past"}) == {
        "online_fit": True, "lock_rule": "past"}
    assert opts.options_for("fifo") == {}
    assert profiles.DEFAULT.options_for("rubick") == {}
    # simulate() creates a policy given by name with them; an unknown option is refused there
    bad = profiles.Profile(name="b", summary="", policy_options={"fifo": {"nope": 1}})
    with pytest.raises(InputError, match="nope"):
        simulate([job("a", 0, 1, 10)], CLUSTER, "fifo", profile=bad)


def test_the_rubick_artifact_profile_declares_the_artifacts_world() -> None:
    p = profiles.get("rubick-artifact")
    assert (p.round_s, p.restart_overhead_s, p.start_overhead_s, p.progress_model) == (
        60.0, 260.0, 260.0, "rubick-steps")
    c = parse_cluster_spec(p.cluster or "")
    assert (len(c.nodes), c.total_gpus) == (8, 64)
    assert {(n.cpus, n.mem_gb, n.gpu_type) for n in c.nodes} == {(96, 1600.0, "a800")}
    assert p.options_for("rubick")["online_fit"] is False


def test_the_rubick_artifact_world_ends_an_uncontended_job_when_the_artifact_does() -> None:
    """Alone on the cluster, gpt2-4 (8 GPUs, zero-dp, 2,503 steps, submitted at 3,818 s) waits
    for the round at 3,840 s, loses 260 s and runs 2,504 iterations of 0.53 s: the artifact
    simulator's JCT is 1,609.54 s (``benchmarks/peer/rubick/base-rubick.csv``)."""
    from slurm_sched.traces import bundled, read_trace

    prof = profiles.get("rubick-artifact")
    jobs = [j for j in read_trace(bundled("rubick/workloads/workload-base.csv"))
            if j.job_id in ("gpt2-4", "roberta-18")]
    res = simulate(jobs, parse_cluster_spec(prof.cluster or ""), "rubick", profile=prof)
    jct = {c.spec.job_id: c.jct_s for c in res.completed}
    assert jct["gpt2-4"] == pytest.approx(1609.54, abs=0.1)
    assert jct["roberta-18"] == pytest.approx(2241.49, abs=0.1)


def event_world(overhead: float = 3.0, **kw) -> profiles.Profile:
    """Per-event overhead ``overhead`` s for model "m" on any GPU count, nothing per restart."""
    return profiles.Profile(name="ev", summary="", restart_overhead_s=0,
                            event_overhead_s={"m": {1: overhead}}, **kw)


def test_event_overhead_is_off_by_default() -> None:
    assert profiles.DEFAULT.event_overhead_s is None
    assert profiles.DEFAULT.event_overhead(job("a", 0, 1, 1, model="m")) == 0.0
    jobs = [job("a", 0, 1, 100, model="m"), job("b", 10, 1, 5, model="m")]
    free = profiles.Profile(name="free", summary="", restart_overhead_s=0)
    assert finish(simulate(jobs, CLUSTER, "fifo", profile=free)) == {"a": 100, "b": 15}


def test_every_running_job_loses_its_overhead_at_every_event() -> None:
    # a runs 0-100 on one GPU; b's arrival (10) and completion (15) are events during a's run:
    # a loses 3 s at each (never preempted); b runs through no event of its own
    jobs = [job("a", 0, 1, 100, model="m"), job("b", 10, 1, 5, model="m")]
    assert finish(simulate(jobs, CLUSTER, "fifo", profile=event_world())) == {"a": 106, "b": 15}
    # a job alone loses nothing
    assert finish(simulate(jobs[:1], CLUSTER, "fifo", profile=event_world())) == {"a": 100}


def test_the_event_overhead_is_clamped_to_the_time_run_since_the_previous_event() -> None:
    # events at 1 (b arrives) and 2 (b ends): a has run 1 s before each, so loses 1 s twice
    jobs = [job("a", 0, 1, 100, model="m"), job("b", 1, 1, 1, model="m")]
    assert finish(simulate(jobs, CLUSTER, "fifo", profile=event_world()))["a"] == 102


def test_the_event_overhead_table_lookup() -> None:
    world = profiles.Profile(name="t", summary="", event_overhead_s={"m": {1: 4, 8: 7}},
                             event_overhead_default_s=10)
    assert world.event_overhead(job("a", 0, 1, 1, model="m")) == 4
    assert world.event_overhead(job("a", 0, 4, 1, model="m")) == 4  # largest count <= 4
    assert world.event_overhead(job("a", 0, 64, 1, model="m")) == 7
    assert world.event_overhead(job("a", 0, 1, 1, model="x")) == 10
    assert world.event_overhead(job("a", 0, 1, 1)) == 10
    with pytest.raises(ValueError, match="event overheads"):
        profiles.Profile(name="x", summary="", event_overhead_s={"m": {1: -1}})


def test_a_group_member_loses_the_sum_of_its_groups_overheads() -> None:
    from slurm_sched.model import JobSettings, Share, Start
    from slurm_sched.sim.backend import SimulatedBackend
    from tests.builders import place

    jobs = [job("a", 0, 1, 100, model="m"), job("b", 0, 1, 100, model="m"),
            job("c", 0, 1, 100, model="n")]
    world = profiles.Profile(name="g", summary="", event_overhead_s={"m": {1: 2}, "n": {1: 5}})
    be = SimulatedBackend(CLUSTER, jobs, restart_overhead_s=0, max_jobs_per_gpu=2,
                          event_overhead=world.event_overhead)
    be.advance_to(0)
    grp = JobSettings(group_id="g1")
    be.apply([Start(job_id="a", placement=place(**{"node-1": [0]}), settings=grp),
              Share(job_id="b", placement=place(**{"node-1": [0]}), with_jobs=("a",),
                    settings=grp),
              Start(job_id="c", placement=place(**{"node-1": [1]}))])
    be.advance_to(20)
    before = {v.job_id: v.work_done_at(20) for v in be.snapshot().jobs}
    be.scheduling_point(timer=True)
    after = {v.job_id: v.work_done_s for v in be.snapshot().jobs}
    rate = {v.job_id: v.rate for v in be.snapshot().jobs}
    assert before["a"] - after["a"] == pytest.approx(4 * rate["a"])  # 2 + 2
    assert before["b"] - after["b"] == pytest.approx(4 * rate["b"])
    assert before["c"] - after["c"] == pytest.approx(5 * rate["c"])  # alone: its own
    # a stop on nothing (no event, no timer) charges nothing
    be.advance_to(30)
    mid = {v.job_id: v.work_done_at(30) for v in be.snapshot().jobs}
    be.scheduling_point(timer=False)
    assert {v.job_id: v.work_done_at(30) for v in be.snapshot().jobs} == mid


def test_the_profile_gives_its_policy_options_and_the_caller_overrides_them() -> None:
    world = profiles.Profile(name="o", summary="",
                             policy_options={"tiresias-3q": {"queue_order": "sim"}})
    assert world.options_for("tiresias-3q") == {"queue_order": "sim"}
    assert world.options_for("tiresias-3q", {"queue_order": "entry"}) == {"queue_order": "entry"}
    assert world.options_for("srtf") == {}


def test_the_muri_artifact_profile() -> None:
    prof = profiles.get("muri-artifact")
    assert (prof.progress_model, prof.cluster, prof.restart_overhead_s) == ("muri", "8x8", 0.0)
    assert prof.event_overhead(job("a", 0, 8, 1, model="a2c")) == 46
    assert prof.event_overhead(job("a", 0, 1, 1, model="resnet18")) == 4
    assert prof.event_overhead(job("a", 0, 1, 1, model="unknown")) == 10


def test_caller_options_override_the_profiles_and_need_a_policy_by_name() -> None:
    from slurm_sched.policy.fifo import Fifo

    jobs = [job("a", 0, 1, 10)]
    bad = profiles.Profile(name="b", summary="", policy_options={"fifo": {"nope": 1}})
    with pytest.raises(InputError, match="nope=2"):  # the caller's value, not the profile's 1
        simulate(jobs, CLUSTER, "fifo", profile=bad, policy_options={"nope": 2})
    with pytest.raises(ValueError, match="by name"):
        simulate(jobs, CLUSTER, Fifo(), policy_options={"x": 1})
