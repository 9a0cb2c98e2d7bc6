"""Property tests over every registered policy on random traces and clusters."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_sched.controller import Controller
from slurm_sched.model import JobSpec, parse_cluster_spec
from slurm_sched.perf import registry as perf_registry
from slurm_sched.policy import registry
from slurm_sched.sim.backend import SimulatedBackend
from slurm_sched.sim.clock import SimulatedClock
from tests.invariants import CheckingBackend

CLUSTERS = ["1x4", "2x4", "2x8", "1x8,2x2", "3x4"]


@st.composite
def traces(draw):
    n = draw(st.integers(min_value=1, max_value=14))
    jobs = []
    for i in range(n):
        jobs.append(
            JobSpec(
                job_id=f"j{i}",
                submit_time_s=draw(st.integers(min_value=0, max_value=300)),
                num_gpus=draw(st.sampled_from([1, 1, 2, 3, 4, 8])),
                duration_s=draw(st.integers(min_value=1, max_value=400)),
            )
        )
    return jobs


@pytest.mark.parametrize("policy", registry.names())
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=traces(), cluster_spec=st.sampled_from(CLUSTERS), overhead=st.sampled_from([0, 7]))
def test_capacity_gangs_and_exactly_once(policy, jobs, cluster_spec, overhead):
    cluster = parse_cluster_spec(cluster_spec)
    pol = registry.create(policy)
    capacity = max(1, pol.max_jobs_per_gpu)  # at most C jobs per GPU; 1 = exclusive
    sim = SimulatedBackend(cluster, jobs, restart_overhead_s=overhead,
                           progress=perf_registry.create(pol.progress_model or "identity"),
                           max_jobs_per_gpu=capacity)
    checked = CheckingBackend(sim, max_jobs_per_gpu=capacity, exact_gangs=not pol.elastic)
    Controller(checked, pol, SimulatedClock(sim)).run()
    done = Counter(c.spec.job_id for c in sim.completed())
    fits = {j.job_id for j in jobs if j.num_gpus <= cluster.total_gpus}
    assert set(done) == fits, "every job that fits finishes"
    assert all(n == 1 for n in done.values()), "and finishes exactly once"
    assert {s.job_id for s, _ in sim.rejected} == {j.job_id for j in jobs} - fits
    for c in sim.completed():
        assert c.finish_s >= c.spec.submit_time_s + c.spec.duration_s - 1e-6
        assert c.first_start_s >= c.spec.submit_time_s
    assert not checked.failed_actions, checked.failed_actions[:3]
