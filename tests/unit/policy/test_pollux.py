"""Pollux baseline and its goodput model (spec ``sjf-bsbf.md`` section 3)."""

from __future__ import annotations

import random

import pytest

from slurm_sched.controller import Controller
from slurm_sched.model import JobSettings, JobSpec, JobState, Reconfigure, parse_cluster_spec
from slurm_sched.perf.pollux_goodput import (
    _grad_stats,
    best_config,
    efficiency_ratio,
    gain,
    init_batch,
    max_replicas,
    replica_options,
    speedup,
    stats_at,
    validated_batches,
)
from slurm_sched.perf.sjf_bsbf_model import GavelXi, job_profile
from slurm_sched.perf.sjf_bsbf_world import SjfBsbfWorld
from slurm_sched.policy import registry
from slurm_sched.policy.pollux import Pollux, _Job, exhaustive_counts, greedy_counts, objective
from slurm_sched.sim.backend import SimulatedBackend
from slurm_sched.sim.clock import SimulatedClock
from slurm_sched.workloads.sjf_bsbf import generate_jobs
from tests.builders import job, place
from tests.invariants import CheckingBackend


def pjob(job_id: str, app: str, gpus: int, batch: int, duration: float, submit: float = 0.0
         ) -> JobSpec:
    return job(job_id, submit, gpus, duration, model=app, batch_size=batch)


# ------------------------------------------------------------------ goodput model
def test_gain_is_one_at_the_initial_batch_and_at_most_the_scale():
    assert gain(2.0, 5.0, 1.0) == pytest.approx(1.0)
    for scale in (1.5, 4.0, 32.0):
        g = gain(1.0, 3.0, scale)
        assert 1.0 <= g <= scale
    with pytest.raises(ValueError, match="scale"):
        gain(1.0, 1.0, 0.0)


def test_efficiency_ratio_of_the_requested_batch_is_one():
    prof = job_profile(pjob("x", "cifar10", 8, 2048, 100))
    assert efficiency_ratio(prof, 2048, 0.3) == pytest.approx(1.0)
    assert efficiency_ratio(prof, 4096, 0.3) < 2.0, "doubling the batch less than doubles"
    assert init_batch("cifar10") == 128


def test_speedup_is_one_on_one_gpu_and_grows_with_gpus():
    prof = job_profile(pjob("x", "cifar10", 8, 2048, 100))
    assert speedup(prof, 1, 0.5) == pytest.approx(1.0)
    assert speedup(prof, 4, 0.5) > 1.5
    assert speedup(prof, 0, 0.5) == 0.0
    cfg = best_config(prof, 4, 0.5)
    assert cfg.global_batch >= init_batch("cifar10") and cfg.replicas == 4


def test_max_replicas_explores_by_doubling_and_caps_ncf():
    assert max_replicas("cifar10", 0) == 1
    assert max_replicas("cifar10", 1) == 2
    assert max_replicas("cifar10", 4) == 8
    assert max_replicas("bert", 64) == 64
    assert max_replicas("ncf", 8) == 1
    assert replica_options(16, 4) == [1, 2, 3, 4, 8, 12, 16]


# ------------------------------------------------------------------ allocation search
def _random_jobs(rng: random.Random, n: int) -> list[_Job]:
    pool = [j for j in generate_jobs(300, 2) if job_profile(j) is not None]
    out = []
    for spec in rng.sample(pool, n):
        out.append(_Job(view=None, profile=job_profile(spec),  # type: ignore[arg-type]
                        current=rng.choice([0, 1, 2, 4]), fraction=rng.random(),
                        penalty=rng.uniform(0.5, 1.0), limit=rng.choice([1, 2, 4, 8, 16]),
                        alloc=1))
    return out


def test_greedy_search_is_close_to_the_exhaustive_optimum():
    rng = random.Random(5)
    options = [1, 2, 3, 4, 8, 12, 16]
    same, worst = 0, 0.0
    for _ in range(60):
        jobs = _random_jobs(rng, rng.randint(2, 4))
        free = rng.randint(1, 12)
        g, e = greedy_counts(jobs, free, options), exhaustive_counts(jobs, free, options)
        assert sum(g) - len(jobs) <= free and all(k <= j.limit or k == 1
                                                   for k, j in zip(g, jobs, strict=True))
        og, oe = objective(jobs, g), objective(jobs, e)
        assert og >= oe - 1e-9, "exhaustive is the optimum"
        same += og <= oe * (1 + 1e-9)
        worst = max(worst, og / oe - 1)
    assert same >= 50
    assert worst < 0.15


def test_restart_penalty_applies_only_to_a_changed_allocation():
    prof = job_profile(pjob("x", "cifar10", 8, 2048, 100))
    j = _Job(view=None, profile=prof, current=2, fraction=0.5, penalty=0.5,  # type: ignore
             limit=8)
    assert j.value(2) == pytest.approx(speedup(prof, 2, 0.5))
    assert j.value(4) == pytest.approx(0.5 * speedup(prof, 4, 0.5))


# ------------------------------------------------------------------ policy end to end
def run(jobs, cluster_spec="4x4", pol=None, in_place_settings=False):
    cluster = parse_cluster_spec(cluster_spec)
    sim = SimulatedBackend(cluster, jobs, progress=SjfBsbfWorld(GavelXi()),
                           restart_overhead_s=30, max_jobs_per_gpu=1,
                           in_place_settings=in_place_settings)
    checked = CheckingBackend(sim, max_jobs_per_gpu=1, exact_gangs=False)
    log: list = []

    class Log(CheckingBackend):
        def apply(self, actions):
            before = checked.snapshot().by_id
            log.extend((a, before[a.job_id].placement) for a in actions)
            return checked.apply(actions)

    Controller(Log(checked), pol or Pollux(), SimulatedClock(sim)).run()
    return sim, checked, [a for a, _ in log], log


def test_runs_a_calibrated_workload_elastically_and_completes_every_job():
    jobs = [j for j in generate_jobs(120, 4) if j.num_gpus <= 16][:25]
    jobs = [j.model_copy(update={"submit_time_s": 200.0 * i}) for i, j in enumerate(jobs)]
    sim, checked, log, _held = run(jobs)
    assert not checked.failed_actions, checked.failed_actions[:2]
    assert sorted(c.spec.job_id for c in sim.completed()) == sorted(j.job_id for j in jobs)
    reconf = [a for a in log if isinstance(a, Reconfigure)]
    assert reconf, "elastic jobs start and resize with Reconfigure"
    assert any(a.placement.num_gpus != sim.completed()[0].spec.num_gpus for a in reconf)
    for a in reconf:
        k = a.placement.num_gpus
        if k > 4:  # distributed allocations take whole nodes
            assert all(len(p.gpus) == 4 for p in a.placement.parts)
        assert a.settings.sub_batch_size is not None and a.settings.accumulation_steps >= 1


def test_a_job_is_never_restarted_onto_the_gpus_it_holds():
    # a resize that cannot be placed falls back to a smaller count, which can be the job's own
    # GPUs: that is no re-allocation (through Slurm it would be a requeue for nothing)
    jobs = [j for j in generate_jobs(120, 4) if j.num_gpus <= 16][:25]
    jobs = [j.model_copy(update={"submit_time_s": 60.0 * i}) for i, j in enumerate(jobs)]
    _sim, checked, _log, held = run(jobs)
    assert not checked.failed_actions
    assert not [a.job_id for a, before in held
                if isinstance(a, Reconfigure) and a.placement == before]


def test_first_allocation_is_one_gpu_then_it_explores():
    spec = pjob("x", "cifar10", 16, 4096, 3000)
    _sim, _checked, log, _held = run([spec])
    counts = [a.placement.num_gpus for a in log if isinstance(a, Reconfigure)]
    assert counts[0] == 1 and max(counts) > 1
    assert counts == sorted(counts), "alone on the cluster it only grows"


def test_rebatch_re_picks_the_batch_on_the_same_gpus_as_training_advances():
    spec = pjob("x", "cifar10", 1, 4096, 3000)  # one GPU in the cluster: it never resizes
    sim, checked, log, _held = run([spec], "1x1", pol=Pollux(rebatch=True),
                                   in_place_settings=True)
    assert not checked.failed_actions
    same = [a for a in log if isinstance(a, Reconfigure) and a.reason.endswith("same GPUs")]
    assert same, "alone on one GPU, only the batch can change"
    batches = {a.settings.sub_batch_size * a.settings.accumulation_steps for a in same}
    assert len(batches) > 1  # the best batch moves with the epoch's gradient statistics
    [done] = sim.completed()
    assert done.preemptions == 0  # in place: no restart
    _sim, _checked, plain, _held = run([spec], "1x1")
    assert not [a for a in plain if isinstance(a, Reconfigure) and a.reason.endswith("same GPUs")]


def test_rigid_jobs_without_profile_get_exactly_their_request():
    jobs = [job("a", 0, 2, 100), job("b", 10, 4, 50), job("c", 20, 3, 80)]
    sim, checked, log, _held = run(jobs, "1x4")
    assert not checked.failed_actions
    assert all(a.kind == "start" and a.placement.num_gpus == {"a": 2, "b": 4, "c": 3}[a.job_id]
               for a in log)
    assert len(sim.completed()) == 3


def test_world_rate_of_a_reconfigured_job_follows_goodput():
    spec = pjob("x", "cifar10", 8, 2048, 1000)
    prof = job_profile(spec)
    be = SimulatedBackend(parse_cluster_spec("2x4"), [spec], progress=SjfBsbfWorld(GavelXi()),
                          restart_overhead_s=0)
    be.advance_to(0)
    cfg = best_config(prof, 4, 0.0)
    be.apply([Reconfigure(job_id="x", placement=place(**{"node-1": [0, 1, 2, 3]}),
                          settings=JobSettings(accumulation_steps=cfg.steps,
                                               sub_batch_size=cfg.sub_batch))])
    v = be.snapshot().by_id["x"]
    assert v.state is JobState.RUNNING
    t = prof.iter_model.t_iter(cfg.sub_batch, cfg.steps, 1, 4)
    expect = prof.ref_time_s / t * efficiency_ratio(prof, cfg.global_batch, 0.0)
    assert v.rate == pytest.approx(expect)


def test_speedup_base_fair_measures_each_job_against_its_fair_share():
    jobs = [pjob(f"j{i}", app, 4, 2048, 1000) for i, app in
            enumerate(("cifar10", "bert", "yolov3"))]
    be = SimulatedBackend(parse_cluster_spec("4x4"), jobs, progress=SjfBsbfWorld(GavelXi()))
    be.advance_to(0)
    snap = be.snapshot()
    fair = Pollux(speedup_base="fair")._jobs(snap, 0.0)  # 16 GPUs, 3 jobs: 6 each
    one = Pollux()._jobs(snap, 0.0)
    for f, o in zip(fair, one, strict=True):
        assert f.value(6) == pytest.approx(1.0)
        assert o.value(1) == pytest.approx(1.0)
        assert f.value(2) == pytest.approx(o.value(2) / o.value(6))
    with pytest.raises(ValueError, match="speedup_base"):
        Pollux(speedup_base="two")


def test_stats_at_a_batch_interpolate_between_the_validation_runs_around_it():
    lo, hi = validated_batches("cifar10")[1:3]  # 256, 512
    a, b = _grad_stats("cifar10", lo), _grad_stats("cifar10", hi)
    assert stats_at("cifar10", lo, 40) == (a.sqr[40], a.var[40])
    sqr, var = stats_at("cifar10", (3 * lo + hi) / 4, 40)
    assert sqr == pytest.approx(0.75 * a.sqr[40] + 0.25 * b.sqr[40])
    assert var == pytest.approx(0.75 * a.var[40] + 0.25 * b.var[40])
    first, last = validated_batches("cifar10")[0], validated_batches("cifar10")[-1]
    assert stats_at("cifar10", first / 2, 3) == stats_at("cifar10", first, 3)
    assert stats_at("cifar10", last * 2, 3) == stats_at("cifar10", last, 3)


def test_grad_stats_current_predicts_with_the_batch_the_job_trains_at():
    spec = pjob("x", "cifar10", 8, 4096, 3000)
    be = SimulatedBackend(parse_cluster_spec("2x4"), [spec], progress=SjfBsbfWorld(GavelXi()))
    be.advance_to(0)
    pol = Pollux(grad_stats="current")
    [never_ran] = pol._jobs(be.snapshot(), 0.0)
    assert never_ran.stats_batch == init_batch("cifar10")
    be.apply(pol.decide(be.snapshot(), 0.0))
    be.advance_to(900.0)
    [j] = pol._jobs(be.snapshot(), 900.0)
    s = be.snapshot().by_id["x"].settings
    assert s.sub_batch_size is not None
    assert j.stats_batch == s.sub_batch_size * s.accumulation_steps  # on one GPU
    assert j.value(2) == pytest.approx(
        speedup(j.profile, 2, j.fraction, j.stats_batch) * j.penalty)
    [requested] = Pollux()._jobs(be.snapshot(), 900.0)
    assert requested.stats_batch is None
    assert j.value(2) != pytest.approx(requested.value(2))
    with pytest.raises(ValueError, match="grad_stats"):
        Pollux(grad_stats="latest")


def test_registered_as_elastic_in_the_sjf_bsbf_world():
    pol = registry.create("pollux")
    assert pol.elastic and not pol.shares_gpus and pol.progress_model == "sjf-bsbf"
    with pytest.raises(ValueError, match="search"):
        Pollux(search="nsga")
