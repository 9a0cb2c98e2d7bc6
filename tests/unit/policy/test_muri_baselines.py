"""Muri's baselines (spec ``shared/specs/muri.md`` section 3): SRSF, Themis, AntMan."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from slurm_sched.model import ClusterSnapshot, JobSettings, JobState, JobView, parse_cluster_spec
from slurm_sched.perf.muri_stages import OPPORTUNISTIC
from slurm_sched.policy.antman import AntMan, antman_class
from slurm_sched.policy.srsf import Srsf, srsf_key
from slurm_sched.policy.themis import Themis, min_max_allocation
from slurm_sched.sim.runner import simulate
from tests.approx import approx_nested
from tests.builders import job, place

ONE_NODE = parse_cluster_spec("1x4")


# --------------------------------------------------------------------------- SRSF
def test_srsf_orders_by_remaining_gpu_time():
    """A: 2 GPUs x 100 s = 200 GPU-s; B: 4 GPUs x 60 s = 240 GPU-s; C: 1 GPU x 150 s = 150.

    SRTF would run B (60 s) first; SRSF runs C (150 GPU-s) then A beside it, B last:
    C 0-150, A 0-100, B waits for 4 free GPUs at 150 -> 210.
    """
    jobs = [job("A", 0, 2, 100), job("B", 0, 4, 60), job("C", 0, 1, 150)]
    res = simulate(jobs, ONE_NODE, "srsf", restart_overhead_s=0)
    got = {c.spec.job_id: (c.first_start_s, c.finish_s) for c in res.completed}
    assert got == approx_nested({"A": (0, 100), "B": (150, 210), "C": (0, 150)})
    srtf = simulate(jobs, ONE_NODE, "srtf", restart_overhead_s=0)
    assert {c.spec.job_id: c.first_start_s for c in srtf.completed}["B"] == 0


def test_srsf_key_is_remaining_times_gpus():
    v = JobView(spec=job("x", 5, 4, 100), state=JobState.RUNNING, rate=1.0, accounted_at_s=0,
                placement=place(**{"node-1": [0, 1, 2, 3]}))
    assert srsf_key(v, 30.0) == (70.0 * 4, 5, "x")
    assert Srsf.clairvoyant


# --------------------------------------------------------------------------- Themis
@pytest.mark.parametrize("seed", range(40))
def test_themis_allocation_is_the_min_max(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 12))
    gpus = rng.choice([1.0, 2.0, 4.0, 8.0], size=n)
    age = rng.uniform(0, 1000, n)
    rem = rng.uniform(1, 5000, n)
    denom = rng.uniform(100, 8000, n)
    cap = float(rng.choice([4, 8, 16]))
    x = min_max_allocation(gpus, age, rem, denom, cap)
    assert np.all(x >= 0) and np.all(x <= 1 + 1e-12)
    assert gpus @ x <= cap * (1 + 1e-9)
    rho = np.max((age + rem / x) / denom)
    floor = np.max((age + rem) / denom)  # everyone at x = 1
    if rho > floor * (1 + 1e-9):
        # a lower level is infeasible: its least allocations exceed the GPUs
        t = rho * (1 - 1e-6)
        room = t * denom - age
        need = np.where(room > 0, rem / np.maximum(room, 1e-300), np.inf)
        assert np.any(need > 1) or gpus @ np.minimum(need, 1) > cap
    # brute force for two jobs: scan x0, give job 1 what is left
    if n == 2:
        best = np.inf
        for x0 in np.linspace(1e-4, 1, 20001):
            x1 = min(1.0, (cap - gpus[0] * x0) / gpus[1]) if cap - gpus[0] * x0 > 0 else 0
            if x1 <= 0:
                continue
            best = min(best, max((age[0] + rem[0] / x0) / denom[0],
                                 (age[1] + rem[1] / x1) / denom[1]))
        assert rho <= best * (1 + 1e-3)


def test_themis_runs_the_job_furthest_from_its_fair_share():
    """Two 4-GPU jobs on 4 GPUs: the one that never ran goes first (x * 1e9), and it preempts
    the one that has run."""
    a = JobView(spec=job("a", 0, 4, 1000), state=JobState.RUNNING, rate=1.0,
                placement=place(**{"node-1": [0, 1, 2, 3]}), accounted_at_s=0,
                executed_s=0, first_start_s=0)
    b = JobView(spec=job("b", 50, 4, 1000))
    pol = Themis()
    acts = pol.decide(ClusterSnapshot(now_s=100, cluster=ONE_NODE, jobs=(a, b)), 100)
    assert [(x.kind, x.job_id) for x in acts] == [("preempt", "a"), ("start", "b")]


def test_themis_artifact_bug_flag_scales_by_iteration_time():
    jobs = [job(f"j{i}", i * 10, 2, 200 + 50 * i, iterations=100 * (i + 1)) for i in range(6)]
    fixed = simulate(jobs, ONE_NODE, Themis(), restart_overhead_s=0)
    bug = simulate(jobs, ONE_NODE, Themis(artifact_iso_bug=True), restart_overhead_s=0)
    assert fixed.metrics.jobs == bug.metrics.jobs == 6


# --------------------------------------------------------------------------- AntMan
def test_antman_class_from_trace_or_hash():
    assert antman_class(job("x", 0, 1, 1, attrs={"priority": 0})) == 0
    assert antman_class(job("x", 0, 1, 1, attrs={"priority": 1})) == 1
    bits = Counter(antman_class(job(f"j{i}", 0, 1, 1)) for i in range(1000))
    assert 400 < bits[0] < 600, "about half and half without the column"


def test_antman_opportunistic_jobs_share_guarantee_gpus_and_nobody_is_preempted():
    # G1 (guarantee) takes the node; O1 (opportunistic) shares it; G2 (guarantee) must wait.
    jobs = [job("G1", 0, 4, 100, attrs={"priority": 0}),
            job("O1", 1, 4, 50, attrs={"priority": 1}),
            job("G2", 2, 2, 30, attrs={"priority": 0})]
    res = simulate(jobs, ONE_NODE, "antman", restart_overhead_s=0)
    got = {c.spec.job_id: c for c in res.completed}
    assert got["O1"].first_start_s == 1, "opportunistic job starts on a guarantee job's GPUs"
    assert got["G2"].first_start_s >= got["G1"].finish_s - 1e-9
    assert res.metrics.preemptions == 0
    # the guarantee job is not slowed down by its opportunistic neighbour (rate 1 / 1.015)
    assert got["G1"].finish_s == pytest.approx(100 * 1.015)
    # without profiles the opportunistic job runs at half speed next to G1
    assert got["O1"].finish_s > 1 + 50 * 1.015


def test_antman_guarantee_job_reserves_gpus_incrementally():
    """G-big (4 GPUs) waits behind G-small (2 GPUs, 100 s); a later 2-GPU guarantee job may
    not take the GPUs G-big has reserved, so G-big starts when G-small ends."""
    cluster = parse_cluster_spec("1x4")
    small = JobView(spec=job("small", 0, 2, 100, attrs={"priority": 0}),
                    state=JobState.RUNNING, placement=place(**{"node-1": [0, 1]}), rate=1.0)
    big = JobView(spec=job("big", 1, 4, 100, attrs={"priority": 0}))
    late = JobView(spec=job("late", 2, 2, 10, attrs={"priority": 0}))
    pol = AntMan()
    acts = pol.decide(ClusterSnapshot(now_s=5, cluster=cluster, jobs=(small, big, late)), 5)
    assert acts == [], "big reserved GPUs 2-3; late may not take them"
    assert pol._reserved["big"] == [("node-1", 2), ("node-1", 3)]
    done = ClusterSnapshot(now_s=100, cluster=cluster, jobs=(big, late))
    acts = pol.decide(done, 100)
    assert [(a.kind, a.job_id) for a in acts] == [("start", "big")]


@pytest.mark.parametrize("seed", range(5))
def test_antman_never_more_than_one_guarantee_and_one_opportunistic_per_gpu(seed):
    rng = random.Random(seed)
    jobs = [job(f"j{i}", rng.randint(0, 200), rng.choice([1, 2, 4]), rng.randint(10, 300),
                attrs={"priority": rng.randint(0, 1)}) for i in range(30)]
    seen = []

    class Spy(AntMan):
        def decide(self, snapshot, now_s):
            for slot, holders in snapshot.occupancy.items():
                kinds = Counter(snapshot.by_id[h].settings.plan == OPPORTUNISTIC
                                for h in holders)
                assert kinds[True] <= 1 and kinds[False] <= 1, (slot, holders)
                seen.append(len(holders))
            return super().decide(snapshot, now_s)

    res = simulate(jobs, parse_cluster_spec("2x4"), Spy(), restart_overhead_s=0)
    assert res.metrics.jobs == 30 and res.metrics.preemptions == 0
    assert max(seen) == 2, "sharing happened"


def test_opportunistic_settings_mark_the_job():
    jobs = [JobView(spec=job("o", 0, 1, 10, attrs={"priority": 1}))]
    acts = AntMan().decide(ClusterSnapshot(now_s=0, cluster=ONE_NODE, jobs=tuple(jobs)), 0)
    assert acts[0].settings == JobSettings(plan=OPPORTUNISTIC)


# --------------------------------------------------------------------------- conservation
@pytest.mark.parametrize("policy", ["srtf", "srsf", "tiresias-3q", "themis"])
def test_exclusive_policies_never_beat_the_gpu_time_bound(policy):
    rng = random.Random(4)
    jobs = [job(f"j{i}", 0, rng.choice([1, 2, 4, 8]), rng.randint(50, 500)) for i in range(40)]
    res = simulate(jobs, parse_cluster_spec("2x8"), policy, restart_overhead_s=3,
                   progress_model="muri")
    bound = sum(j.num_gpus * j.duration_s for j in jobs) / 16
    assert res.metrics.makespan_s >= bound * 1.015 - 1e-6


def test_antman_first_fit_puts_a_guarantee_job_on_the_first_node_that_holds_it():
    """node-1 has 2 GPUs without a guarantee job (an opportunistic job on them), node-2 all 4.
    A 2-GPU guarantee job goes to node-2 by default (most available) and, with
    ``guarantee_node="first-fit"``, to node-1 beside the opportunistic job."""
    cluster = parse_cluster_spec("2x4")
    g0 = JobView(spec=job("g0", 0, 2, 100, attrs={"priority": 0}), state=JobState.RUNNING,
                 placement=place(**{"node-1": [0, 1]}), rate=1.0)
    o1 = JobView(spec=job("o1", 0, 2, 100, attrs={"priority": 1}), state=JobState.RUNNING,
                 placement=place(**{"node-1": [2, 3]}), rate=1.0,
                 settings=JobSettings(plan=OPPORTUNISTIC))
    g2 = JobView(spec=job("g2", 1, 2, 10, attrs={"priority": 0}))
    snap = ClusterSnapshot(now_s=1, cluster=cluster, jobs=(g0, o1, g2))
    most = AntMan().decide(snap, 1)
    assert [a.placement for a in most] == [place(**{"node-2": [0, 1]})]
    first = AntMan(guarantee_node="first-fit").decide(snap, 1)
    assert [(a.kind, a.placement) for a in first] == [("share", place(**{"node-1": [2, 3]}))]
    with pytest.raises(ValueError, match="guarantee_node"):
        AntMan(guarantee_node="x")


def test_antman_first_fit_reserves_a_wide_job_whole_nodes_only():
    """3 nodes x 4 GPUs; guarantee jobs hold 2 GPUs on node-1 and on node-2. An 8-GPU guarantee
    job collects 4 + 2 + 2 available GPUs and starts by default; with "first-fit" it needs two
    nodes whose GPUs are all available, so it reserves node-3 and waits for another."""
    cluster = parse_cluster_spec("3x4")
    held = tuple(
        JobView(spec=job(f"g{i}", 0, 2, 100, attrs={"priority": 0}), state=JobState.RUNNING,
                placement=place(**{f"node-{i}": [0, 1]}), rate=1.0) for i in (1, 2))
    wide = JobView(spec=job("w", 1, 8, 10, attrs={"priority": 0}))
    snap = ClusterSnapshot(now_s=1, cluster=cluster, jobs=(*held, wide))
    most = AntMan().decide(snap, 1)
    assert [(a.kind, a.job_id) for a in most] == [("start", "w")]
    first = AntMan(guarantee_node="first-fit")
    assert first.decide(snap, 1) == []
    assert "4/8 GPU(s) reserved" in first.explain(snap, "w")


def test_antman_fifo_ties_follow_arrival_order_not_the_id_string():
    """Jobs "9" and "10" are submitted together, "9" first in the trace; each needs the whole
    node. FIFO runs "9" first (comparing ids as strings would put "10" first)."""
    jobs = [job("9", 0, 4, 10, attrs={"priority": 0}), job("10", 0, 4, 10, attrs={"priority": 0})]
    res = simulate(jobs, ONE_NODE, "antman", restart_overhead_s=0)
    start = {c.spec.job_id: c.first_start_s for c in res.completed}
    assert start["9"] == 0 and start["10"] > 0


def test_themis_ties_follow_arrival_order_not_the_id_string():
    jobs = [job("9", 0, 4, 10), job("10", 0, 4, 10)]
    res = simulate(jobs, ONE_NODE, "themis", restart_overhead_s=0)
    start = {c.spec.job_id: c.first_start_s for c in res.completed}
    assert start["9"] == 0 and start["10"] > 0


def test_themis_takes_its_allocation_from_the_allocator_given():
    """Three never-run 4-GPU jobs on 4 GPUs: the one with the largest allocation x goes first,
    so an allocator that favours the last job starts it instead of the default's choice."""
    jobs = tuple(JobView(spec=job(f"j{i}", 0, 4, 100 * (i + 1))) for i in range(3))
    snap = ClusterSnapshot(now_s=0, cluster=ONE_NODE, jobs=jobs)
    seen = []

    def last_first(gpus, age, rem, denom, capacity):
        seen.append((len(gpus), capacity))
        return np.array([0.1, 0.2, 0.7])

    default = Themis().decide(snap, 0)
    chosen = Themis(allocator=last_first).decide(snap, 0)
    assert [a.job_id for a in chosen] == ["j2"] != [a.job_id for a in default]
    assert seen == [(3, 4.0)]


def test_themis_rank_value_never_run_rules():
    from slurm_sched.policy.themis import rank_value
    # spec: a job that never ran outranks any job that has run, whatever their x
    assert rank_value(0.001, 0.0) > rank_value(1.0, 0.5)
    # executed1: a never-run job competes on x with jobs that ran (executed floored at 1 s)
    assert rank_value(0.001, 0.0, "executed1") == pytest.approx(0.001)
    assert rank_value(0.001, 0.0, "executed1") < rank_value(1.0, 10.0, "executed1")
    assert rank_value(0.5, 0.5, "executed1") == rank_value(0.5, 1.0, "executed1")
    assert rank_value(0.3, 0.0, order_by="x") == rank_value(0.3, 99.0, order_by="x") == 0.3
    # age: the time since submission stands in for the executed time
    assert rank_value(0.3, 5.0, order_by="age", age_s=10.0) == pytest.approx(0.03)
    assert rank_value(0.3, 5.0, order_by="age", age_s=0.0) == pytest.approx(0.3e9)


def test_themis_options_are_checked():
    for bad in ({"never_run": "first"}, {"order_by": "size"}, {"lease_s": -1},
                {"optimum": "max"}):
        with pytest.raises(ValueError):
            Themis(**bad)


def _running(jid, submit, gpus, dur, since):
    return JobView(spec=job(jid, submit, gpus, dur), state=JobState.RUNNING, rate=1.0,
                   placement=place(**{"node-1": list(range(gpus))}), accounted_at_s=since,
                   executed_s=0, first_start_s=since)


@pytest.mark.parametrize("lease_s, now, preempted", [(0, 50, True), (100, 50, False),
                                                     (100, 150, True)])
def test_themis_lease_keeps_a_running_job_until_it_ends(lease_s, now, preempted):
    pol = Themis(lease_s=lease_s)
    a0 = JobView(spec=job("a", 0, 4, 1000))
    acts = pol.decide(ClusterSnapshot(now_s=0, cluster=ONE_NODE, jobs=(a0,)), 0)
    assert [(x.kind, x.job_id) for x in acts] == [("start", "a")]
    a = _running("a", 0, 4, 1000, 0)
    b = JobView(spec=job("b", 40, 4, 1000))
    acts = pol.decide(ClusterSnapshot(now_s=now, cluster=ONE_NODE, jobs=(a, b)), now)
    got = [(x.kind, x.job_id) for x in acts]
    assert got == ([("preempt", "a"), ("start", "b")] if preempted else [])


@pytest.mark.parametrize("seed", range(20))
def test_themis_centre_allocation_is_the_analytic_centre(seed):
    from slurm_sched.policy.themis import centre_allocation
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 10))
    gpus = rng.choice([1.0, 2.0, 4.0, 8.0], size=n)
    least = rng.uniform(0.01, 0.3, n)
    cap = float(gpus @ least) * float(rng.uniform(1.2, 3.0))
    x = centre_allocation(gpus, least, cap)
    assert np.all(x > least) and np.all(x < 1) and gpus @ x < cap
    # stationarity of sum log(x - m) + log(1 - x) + log(cap - g x)
    mu = 1.0 / (cap - gpus @ x)
    assert 1 / (x - least) - 1 / (1 - x) == pytest.approx(gpus * mu, rel=1e-6)
    # a full optimum is a single point
    full = least * cap / float(gpus @ least)
    assert np.array_equal(centre_allocation(gpus, full, cap), full)


def test_themis_stale_never_run_uses_the_previous_plans_executed_time():
    pol = Themis(never_run="stale")
    a0 = JobView(spec=job("a", 0, 4, 1000))
    pol.decide(ClusterSnapshot(now_s=0, cluster=ONE_NODE, jobs=(a0,)), 0)
    assert pol._exec_prev["a"] == 0.0
    a = _running("a", 0, 4, 1000, 0)
    b = JobView(spec=job("b", 40, 4, 1000))
    pol.decide(ClusterSnapshot(now_s=50, cluster=ONE_NODE, jobs=(a, b)), 50)
    assert pol._exec_prev == {"a": 50.0, "b": 0.0}
