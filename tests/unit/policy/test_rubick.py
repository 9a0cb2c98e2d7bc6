"""Rubick: the validation checks of spec ``rubick.md`` §8 (performance model, curves and plans,
policy invariants, micro-benchmarks) and the baselines' basic behaviour."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_sched.controller import Controller
from slurm_sched.model import Cluster, ClusterSnapshot, JobSpec, JobState, Node, Placement
from slurm_sched.native import source_module
from slurm_sched.perf import registry as perf_registry
from slurm_sched.perf.rubick.job_info import job_info
from slurm_sched.perf.rubick.measured import (
    HELD_OUT_DP,
    HELD_OUT_GPUS,
    WELL_BEHAVED,
    forward_profile,
    held_out_errors,
    load_profile,
    measured_catalog,
    profiled_model,
)
from slurm_sched.perf.rubick.memory import accumulation_steps, enumerate_plans, gpu_memory_gb
from slurm_sched.perf.rubick.models import MODELS
from slurm_sched.perf.rubick.perf_model import (
    LOWER,
    UPPER,
    InsufficientProfileError,
    ProfileSample,
    features,
    fit_model,
    overlap,
    predict_ms,
    predict_ms_jac,
    sample_forward,
)
from slurm_sched.perf.rubick.plans import Plan
from slurm_sched.perf.rubick.predictors import FittedPredictor, OraclePredictor
from slurm_sched.perf.rubick.world_speed import RubickProgress, speed_of
from slurm_sched.policy.base import Policy
from slurm_sched.policy.rubick import Rubick
from slurm_sched.policy.rubick.curves import EPS_FLAT
from slurm_sched.policy.rubick.plans import get_best_plan
from slurm_sched.sim.backend import SimulatedBackend
from slurm_sched.sim.clock import SimulatedClock
from tests.invariants import CheckingBackend

ORACLE = OraclePredictor()


def a800(nodes: int, gpus: int = 8, cpus: int = 96, mem_gb: float = 1600.0) -> Cluster:
    return Cluster(nodes=tuple(Node(name=f"n{i + 1}", num_gpus=gpus, cpus=cpus, mem_gb=mem_gb)
                               for i in range(nodes)))


def rjob(jid: str, model: str, gpus: int, plan: str, *, submit: float = 0.0,
         duration: float = 100.0, guaranteed: bool | None = None, user: str = "default",
         cpus: int | None = None, iterations: int | None = None) -> JobSpec:
    attrs: dict = {"exec_plan": plan}
    if guaranteed is not None:
        attrs["is_sla"] = guaranteed
    return JobSpec(job_id=jid, submit_time_s=submit, num_gpus=gpus, duration_s=duration,
                   model=model, user=user, num_cpus=cpus, iterations=iterations, attrs=attrs)


# =============================================================================== §8.1-5 model
def test_overlap_function_limits():
    x, y = 3.0, 5.0
    assert overlap(x, y, 1.0) == pytest.approx(x + y)
    ks = [1.0, 1.5, 2.0, 4.0, 10.0, 60.0]
    vals = [float(overlap(x, y, k)) for k in ks]
    assert all(a >= b - 1e-12 for a, b in itertools.pairwise(vals))
    assert float(overlap(x, y, 200.0)) == pytest.approx(max(x, y), rel=1e-2)
    assert float(overlap(x, 0.0, 7.0)) == pytest.approx(x)
    assert float(overlap(0.0, 0.0, 3.0)) == 0.0
    assert np.isfinite(overlap(6e4, 5e4, 60.0))  # no overflow at large times and k


def test_analytic_jacobian_matches_central_differences():
    """The fit's Jacobian of Eq. 1, on every model's profiling samples (DP, ZeRO-Offload and 3D
    rows) at random parameters inside the bounds, against central differences."""
    rng = np.random.default_rng(5)
    lo = np.maximum(LOWER, 1e-2)
    for name in ("vit", "roberta", "bert", "t5", "gpt2", "llama7b"):
        model, fwd = MODELS[name], profiled_model(name).fwd
        feats = np.array([features(model, s.plan, s.shape, s.cpus_per_gpu,
                                   sample_forward(model, s, fwd) or fwd)
                          for s in load_profile(name)])
        for _ in range(30):
            theta = np.exp(np.log(lo) + rng.random(7) * (np.log(UPPER) - np.log(lo)))
            pred, jac = predict_ms_jac(theta, feats)
            np.testing.assert_allclose(pred, predict_ms(theta, feats), rtol=1e-12)
            for i in range(7):
                h = 1e-5 * max(1.0, theta[i])
                up, down = theta.copy(), theta.copy()
                up[i] += h
                down[i] -= h
                central = (predict_ms(up, feats) - predict_ms(down, feats)) / (2 * h)
                # relative to the prediction's own scale (the gradient is often ~0)
                err = np.abs(central - jac[:, i]) * max(1.0, theta[i]) / pred
                assert err.max() < 1e-6, (name, i, theta, err.max())


def test_zero_volume_rule():
    vit = MODELS["vit"]
    fwd = forward_profile("vit")
    one = features(vit, Plan("dp"), (1,), 4, fwd)
    assert one is not None and one[3] == 0.0  # V_dp = 0 when d = 1
    llama = MODELS["llama7b"]
    f3d = features(llama, Plan("3d", False, 2, 1, 4), (8,), 4, forward_profile("llama7b"))
    assert f3d is not None and f3d[4] > 0  # PP traffic, no TP traffic
    f_pp1 = features(llama, Plan("3d", False, 1, 8, 1), (8,), 4, forward_profile("llama7b"))
    f_tp1 = features(llama, Plan("3d", False, 8, 1, 1), (8,), 4, forward_profile("llama7b"))
    f_both1 = features(llama, Plan("3d", False, 1, 1, 8), (8,), 4, forward_profile("llama7b"))
    assert f_both1 is not None and f_both1[4] == 0.0  # t = p = 1: no TP, no PP traffic
    assert f_pp1 is not None and f_tp1 is not None and f_pp1[3] == 0.0 and f_tp1[3] == 0.0
    theta = np.array([2.0, 3.0, 0.01, 2.0, 5.0, 4.0, 6.0])
    for plan in (Plan("dp"), Plan("zero-dp"), Plan("dp", True)):
        row = features(vit, plan, (4,), 4, fwd)
        assert row is not None and row[7] == 0.0 and row[8] == 0.0  # no T_off, not offload
        t_opt = theta[2] * row[5]
        no_opt = predict_ms(np.r_[theta[:2], 0.0, theta[3:]], row[None, :])[0]
        assert predict_ms(theta, row[None, :])[0] - no_opt == pytest.approx(t_opt)  # T_oo = T_opt


def test_formula_spot_checks_by_hand():
    """T_iter by hand (spec §2.2) for a DP, a ZeRO-Offload and a 3D configuration."""
    th = dict(k_bwd=2.0, k_sync=3.0, k_opt=0.01, k_opt_off=2.5, k_const=7.0, k_off=4.0, k_swap=5.0)
    theta = np.array(list(th.values()))

    def f(x, y, k):
        return (x**k + y**k) ** (1 / k)

    vit = MODELS["vit"]
    ps = vit.ps
    # DP, 4 GPUs, forward 12 ms: T_f + f(k_bwd T_f, V/B) + k_opt P + k_const
    t_f = 12.0
    comm = 4 * 2 * ps * 3 / 4 / vit.b_intra
    hand = t_f + f(2 * t_f, comm, 3.0) + 0.01 * ps + 7.0
    row = features(vit, Plan("dp"), (4,), 1, t_f)
    assert predict_ms(theta, row[None, :])[0] == pytest.approx(hand, rel=1e-9, abs=1e-9)
    # ZeRO-Offload, 2 GPUs, 4 CPUs per GPU
    comm = 4 * 2 * ps * 1 / 2 / vit.b_intra
    t_off = 4 * ps / (2 * vit.b_pcie)
    t_opt = 2.5 * ps / (2 * 4)
    hand = t_f + f(2 * t_f, comm, 3.0) + f(comm, t_off, 4.0) + f(t_opt, t_off, 5.0) + 7.0
    row = features(vit, Plan("zero-offload"), (2,), 4, t_f)
    assert predict_ms(theta, row[None, :])[0] == pytest.approx(hand, rel=1e-9, abs=1e-9)
    # 3D (PP 2, TP 4, DP 2) on 2 nodes x 8 GPUs, T_fwd = 100 ms given
    m = MODELS["llama7b"]
    t, p, d = 4, 2, 2
    sh = m.seq * m.hidden
    v_dp = 4 * 2 * m.ps * (d - 1) / (d * t * p)
    b_dp = m.b_intra  # t * d = 8 ranks per stage fit one node
    v_tp = 4 * 4 * 2 * (t - 1) * m.batch * sh * m.layers / (d * t) / 2**20
    v_pp = 4 * 2 * p * m.batch * sh / (d * t) / 2**20
    t_fwd = 100.0
    hand = (t_fwd + f(2 * t_fwd, v_dp / b_dp, 3.0) + v_tp / m.b_intra + v_pp / 20.0
            + 0.01 * m.ps / (t * p) + 7.0)
    row = features(m, Plan("3d", False, p, t, d), (8, 8), 4, t_fwd)
    assert predict_ms(theta, row[None, :])[0] == pytest.approx(hand, rel=1e-9, abs=1e-9)


def test_fit_converges_within_bounds_on_profiled_models():
    pm = profiled_model("vit")  # 7 samples, 4 with ZeRO-Offload
    assert pm.fit.mode == "full"
    assert np.all(np.isfinite(pm.fit.theta))
    assert np.all(pm.fit.theta >= LOWER - 1e-9) and np.all(pm.fit.theta <= UPPER + 1e-9)
    assert np.mean(pm.fit.train_rel_err) <= 0.05  # spec §8.4 [R]
    assert profiled_model("bert").fit.mode == "full"


def test_held_out_error_of_well_behaved_sets():
    """Paper-mode model: average error <= 10% per (model, plan) set on the unseen points.
    RoBERTa's 1-GPU points are excluded: measured DP/ZeRO-DP on 1 GPU equal the 2-GPU times
    (705.5 vs 705 ms), which no model linear in the per-GPU batch can produce (doc)."""
    for name in ("vit", "bert", "t5"):
        errs = held_out_errors(name)
        for set_name, (avg, _) in errs.items():
            if (name, set_name) in WELL_BEHAVED:
                assert avg <= 0.10, (name, set_name, avg)
    pm = profiled_model("roberta")
    for (m, set_name, code), times in HELD_OUT_DP.items():
        if (m, set_name) not in WELL_BEHAVED or m != "roberta":
            continue
        errs = [abs(pm.iter_ms(Plan.parse(code), (g,), 4.0) - t) / t
                for g, t in zip(HELD_OUT_GPUS, times, strict=True) if g > 1]
        assert np.mean(errs) <= 0.10, (set_name, errs)


def test_too_few_samples_refuses_or_says_so():
    vit = MODELS["vit"]
    few = list(load_profile("vit"))[:5]
    with pytest.raises(InsufficientProfileError, match="7"):
        fit_model(vit, few, forward_profile("vit"))
    no_off = [s for s in load_profile("vit") if not s.plan.offload] * 3
    with pytest.raises(InsufficientProfileError, match="ZeRO-Offload"):
        fit_model(vit, no_off, forward_profile("vit"))
    res = fit_model(vit, few, forward_profile("vit"), strict=False, restarts=3)
    assert res.mode == "defaults" and "fixed" in res.message
    assert res.params["k_sync"] == 2.0 and res.params["k_off"] == 2.0


def test_online_refit_after_a_bad_prediction():
    pred = FittedPredictor()
    vit = MODELS["vit"]
    before = pred.iter_time_s(vit, Plan("dp"), (2, 2), 4.0)
    pred.observe(vit, Plan("dp"), (2, 2), 4.0, before * 2.0)  # 100% off: refit
    v0 = pred.model_version("vit")
    assert pred.refit_pending() == ["vit"]
    assert pred.model_version("vit") > v0
    assert pred.iter_time_s(vit, Plan("dp"), (2, 2), 4.0) == pytest.approx(before * 2.0)
    pred.observe(vit, Plan("dp"), (4,), 4.0, pred.iter_time_s(vit, Plan("dp"), (4,), 4.0))
    assert pred.refit_pending() == []  # within 10%: no refit


def test_first_pass_observes_merges_reports_and_a_quiet_cluster_is_not_refitted():
    """Three jobs run ViT with DP on 2 GPUs at different speeds, from before the scheduler
    started: they report in its very first pass (so a restarted daemon never schedules on
    models built before observing), the predictor is told their median, not whichever came
    last, and a later pass over the same state refits nothing (reports that overwrote each
    other would make every pass refit)."""
    from slurm_sched.model import JobView, Placement

    cluster = a800(3)
    now = 7200.0
    views = []
    for i, duration in enumerate((1000.0, 1600.0, 4000.0)):  # 1.0 / 1.6 / 4.0 s per iteration
        spec = rjob(f"j{i}", "vit", 2, "ga", duration=duration, iterations=1000)
        views.append(JobView(spec=spec, state=JobState.RUNNING,
                             placement=Placement.of({f"n{i + 1}": [0, 1]}), first_start_s=0.0,
                             accounted_at_s=now, executed_s=now, work_done_s=500.0, rate=1.0))
    snap = ClusterSnapshot(now_s=now, cluster=cluster, jobs=tuple(views))
    pol = Rubick(predictor="fitted")
    pol.decide(snap, now)
    pred = pol.predictor
    (plan, shape, _), = pred._observed["vit"]
    assert pred._observed["vit"][(plan, shape, 0.0)] == pytest.approx(1.6)
    refits, version = pred.refits, pred.model_version("vit")
    assert refits == 1
    pol.decide(snap, now)
    assert (pred.refits, pred.model_version("vit")) == (refits, version)
    # online_fit=False (the artifact's --online-model-fitting 0): no report, no refit
    off = Rubick(predictor="fitted", online_fit=False)
    off.decide(snap, now)
    assert (off.predictor.refits, off.predictor._observed) == (0, {})


# =============================================================================== §8.6-8
def _policy_model(job: JobSpec, cluster: Cluster, predictor="oracle"):
    pol = Rubick(predictor=predictor)
    view = _view(job)
    snap = ClusterSnapshot(now_s=0.0, cluster=cluster, jobs=(view,))
    return pol, pol.job_model(view, snap)


def _view(job: JobSpec):
    from slurm_sched.model import JobView

    return JobView(spec=job)


@pytest.mark.parametrize("model,gpus,plan", [("vit", 2, "zero-dp"), ("gpt2", 5, "151"),
                                             ("llama7", 16, "182"), ("llama30", 40, "524"),
                                             ("roberta", 1, "ga")])
def test_curves_monotone_flat_and_capped(model, gpus, plan):
    _, jm = _policy_model(rjob("j", model, gpus, plan), a800(8))
    c = jm.curve
    assert all(b >= a for a, b in itertools.pairwise(c))  # non-decreasing
    for x in jm.valid:  # valid points rise by more than 1% over the previous level
        assert c[x] > c[x - 1] * (1 + EPS_FLAT) - 1e-12
    for x in range(1, len(c)):
        if x not in jm.valid:
            assert c[x] == c[x - 1]  # flat elsewhere
    top = max(c)
    assert c[jm.cap] >= (1 - EPS_FLAT) * top
    assert all(c[x] < (1 - EPS_FLAT) * top for x in jm.valid if x < jm.cap)
    assert jm.sigma_plus(jm.cap) == 0.0


@pytest.mark.parametrize("model,shape,expect,time_s", [
    ("roberta", (8,), "zero-dp", 0.2179), ("t5", (1,), "zero-dp", 1.081),
    ("t5", (8,), "zero-dp", 0.2412), ("gpt2", (8,), "zero-dp", 0.5302),
    ("llama7b", (8, 8), "1-8-2", 1.131), ("llama7b", (8,) * 8, "2-4-8", 0.673),
    ("llama7b", (1,), "zero-offload", 57.875), ("llama7b", (8,), "zero-offload", 9.401),
])
def test_table_oracle_plan_choice(model, shape, expect, time_s):
    plan, t = get_best_plan(MODELS[model], shape, 4.0, ORACLE)
    assert plan.code == expect
    assert t == pytest.approx(time_s, abs=1e-3)


@pytest.mark.parametrize("model", ["vit", "gpt2", "llama7b", "llama30b", "t5-3b"])
@pytest.mark.parametrize("shape", [(1,), (4,), (8,), (5,), (4, 4), (8, 8), (8,) * 4])
def test_plan_validity(model, shape):
    m = MODELS[model]
    g = sum(shape)
    for plan in enumerate_plans(m, shape, allow_3d=True):
        steps = accumulation_steps(m, plan, g)
        assert steps is not None
        a, micro = steps
        if plan.is_3d:
            assert plan.pp * plan.tp * plan.dp == g
            assert all(k % plan.tp == 0 for k in shape)  # TP inside a node
            assert m.layers % plan.pp == 0 and m.heads % plan.tp == 0
            assert micro * a * plan.dp == m.batch
            assert gpu_memory_gb(m, plan, shape, micro) <= 80.0
        else:
            assert micro * a * g == m.batch
            assert gpu_memory_gb(m, plan, shape, micro) <= 80.0 or m.micro_limit(
                plan.family, plan.gc)


def test_plan_codes_round_trip():
    for code in ("ga", "gc", "zero-dp", "zero-dp-gc", "zero-offload", "zero-offload-gc",
                 "2-4-4", "1-8-2-gc"):
        assert Plan.parse(code).code == code
    assert Plan.parse("244") == Plan("3d", False, 2, 4, 4)
    assert Plan.parse("zero-offload+gc") == Plan("zero-offload", True)
    assert Plan.parse("tp+ga", 3) == Plan("3d", False, 1, 3, 1)
    with pytest.raises(ValueError, match="unknown plan code 'zero-3'"):
        Plan.parse("zero-3")


def test_job_info_memo_shares_one_info_per_kind_and_changes_nothing():
    """job_info with a memo: equal requests share one JobInfo, equal to the one read without
    it; other tenants, classes, batches or plan lists get their own; hints the memo cannot key
    (an unhashable plan entry) are read as before."""
    def spec(jid, **kw):
        base = dict(job_id=jid, submit_time_s=0.0, num_gpus=4, duration_s=10.0, model="gpt2",
                    user="u", attrs={"exec_plan": "ga"})
        base.update(kw)
        return JobSpec(**base)

    memo: dict = {}
    a, b = job_info(spec("a"), memo), job_info(spec("b"), memo)
    assert a is b and a == job_info(spec("a"))
    variants = [spec("c", user="v"), spec("d", attrs={"exec_plan": "ga", "is_sla": True}),
                spec("e", batch_size=64), spec("f", attrs={"plans": ["zero-dp", "ga"]}),
                spec("g", num_cpus=8), spec("h", model="bert")]
    infos = [job_info(s, memo) for s in variants]
    assert all(i is not a for i in infos)
    assert infos == [job_info(s) for s in variants]
    odd = spec("i", attrs={"plans": [["ga"], "zero-dp"]})  # a list inside: unhashable
    assert job_info(odd, memo) == job_info(odd)
    assert job_info(spec("j", model="no-such-model"), memo) is None


def test_min_res_sanity():
    cluster = a800(8)
    for spec in (rjob("a", "gpt2", 8, "ga", guaranteed=True, cpus=64),
                 rjob("b", "llama7", 8, "zero-offload", guaranteed=True, cpus=64),
                 rjob("c", "llama30", 48, "344", guaranteed=True),
                 rjob("d", "vit", 4, "gc", guaranteed=True)):
        pol, jm = _policy_model(spec, cluster)
        info = jm.info
        g, c = pol._min_res(info, jm)
        assert 1 <= g <= info.req_gpus and 1 <= c <= max(1, round(info.req_cpus_per_gpu))
        fast = [x for x in jm.cands if x.gpus == g]
        meets = any(pol.speed(info, x, c, jm.t_ref) >= 1 - 1e-9 for x in fast)
        assert meets or (g, c) == (info.req_gpus, round(info.req_cpus_per_gpu))
    # a GPT-2 job asking 8 GPUs with plain DP is as fast with ZeRO-DP on 8 and not on fewer
    pol, jm = _policy_model(rjob("e", "gpt2", 8, "ga", guaranteed=True), cluster)
    assert pol._min_res(jm.info, jm)[0] == 8


# =============================================================================== §8.17-18
def test_fig8_two_jobs_on_four_gpus():
    """Fig. 8: RoBERTa (b 64) and T5-3B (b 4) on 4 GPUs. Rubick: RoBERTa 1 GPU + T5-3B 3 GPUs
    (TP with GA), normalised total ~1.43; equal share ~0.78."""
    cluster = a800(1, gpus=4)
    jobs = (rjob("roberta", "roberta", 4, "ga"), rjob("t5", "t5-3b", 4, "tp+ga"))
    pol = Rubick(predictor="oracle")
    snap = ClusterSnapshot(now_s=0.0, cluster=cluster, jobs=tuple(_view(j) for j in jobs))
    acts = {a.job_id: a for a in pol.decide(snap, 0.0)}
    assert acts["roberta"].placement.num_gpus == 1
    assert acts["t5"].placement.num_gpus == 3 and acts["t5"].settings.plan == "1-3-1"
    total = sum(speed_of(job_info(j), acts[j.job_id].settings.plan, acts[j.job_id].settings.cpus,
                         acts[j.job_id].placement) for j in jobs)
    assert total == pytest.approx(1.43, abs=0.01)
    # equal share: 2 GPUs each, each job's best plan on 2 GPUs
    eq = 0.0
    for j in jobs:
        info = job_info(j)
        _, t = get_best_plan(info.model, (2,), 4.0, ORACLE)
        ref = ORACLE.iter_time_s(info.model, info.orig_plan, info.ref_shape, 4.0)
        eq += ref / t
    assert eq == pytest.approx(0.786, abs=0.01)
    assert total / eq - 1 == pytest.approx(0.82, abs=0.05)  # paper: +85% (1.44 / 0.78)


def test_fig7_llama7b_under_shrinking_resources():
    m = MODELS["llama7b-b16"]
    stages = [((8,) * 4, "2-4-4", 1.165), ((4,) * 4, "4-4-1", 1.803), ((4,), "2-2-1", 5.107)]
    for shape, code, t in stages:
        plan, got = get_best_plan(m, shape, 2.0, ORACLE)
        assert plan.code == code and got == pytest.approx(t, abs=1e-3)
        statics = [ORACLE.iter_time_s(m, Plan.parse(c), shape, 2.0) for c in
                   (f"1-{shape[0]}-{len(shape)}", f"{len(shape)}-{shape[0]}-1",
                    f"2-2-{sum(shape) // 4}")]
        assert all(s is None or got <= s + 1e-9 for s in statics)
    # one GPU: ZeRO-Offload+GC only; the policy gives it the CPUs that help
    for cpus, expect in ((2, 66.0), (4, 46.0)):
        cluster = a800(1, gpus=1, cpus=cpus)
        job = rjob("llama", "llama7b-b16", 1, "zero-offload-gc")
        pol = Rubick(predictor="oracle")
        snap = ClusterSnapshot(now_s=0.0, cluster=cluster, jobs=(_view(job),))
        (act,) = pol.decide(snap, 0.0)
        assert act.settings.plan == "zero-offload-gc" and act.settings.cpus == cpus
        t = ORACLE.iter_time_s(m, Plan("zero-offload", True), (1,), act.settings.cpus)
        assert t == pytest.approx(expect)
    # the policy picks the stage plans itself on each cluster shape
    for nodes, gpus, code in ((4, 8, "2-4-4"), (4, 4, "4-4-1"), (1, 4, "2-2-1")):
        job = rjob("llama", "llama7b-b16", 32, "2-2-8")
        pol = Rubick(predictor="oracle")
        snap = ClusterSnapshot(now_s=0.0, cluster=a800(nodes, gpus=gpus), jobs=(_view(job),))
        (act,) = pol.decide(snap, 0.0)
        assert act.settings.plan == code


# =============================================================================== policy invariants
class CheckedRubick(Policy):
    """Wraps a Rubick and asserts spec §8.9-15 after every pass."""

    name = "checked-rubick"
    elastic = True
    progress_model = "rubick"

    def __init__(self, inner: Rubick, quotas: dict[str, int]) -> None:
        self.inner = inner
        self.quotas = quotas
        self.passes = 0

    def next_wakeup_s(self, snapshot, now_s):
        return self.inner.next_wakeup_s(snapshot, now_s)

    def decide(self, snapshot: ClusterSnapshot, now_s: float):
        locked = {j.job_id for j in snapshot.running if self.inner._locked(j, now_s)}
        acts = self.inner.decide(snapshot, now_s)
        self.passes += 1
        by_id = snapshot.by_id
        later = Counter()
        for a in acts:
            later[(a.job_id, a.kind)] += 1
        for a in acts:
            view = by_id[a.job_id]
            info = self.inner.info(view)
            guaranteed = self.inner.guaranteed.get(a.job_id, False)
            # §8.13: only best-effort jobs are preempted (a cycle break restarts at once)
            if a.kind == "preempt" and guaranteed:
                assert later[(a.job_id, "reconfigure")] == 1, a
            # §8.15: no reconfiguration while locked, except logged SLA overrides
            if view.state is JobState.RUNNING and a.job_id in locked:
                assert a.job_id in self.inner.overrides, (a, now_s)
            if a.kind in ("reconfigure", "start") and info is not None:
                speed = self.inner.last_assigned[a.job_id][2]
                # §8.10: a guaranteed job is never assigned a slower predicted configuration
                if guaranteed:
                    assert speed >= 1.0 - 1e-9, (a, speed)
                    min_g = self.inner._minres[a.job_id][0]
                    assert a.placement.num_gpus >= min_g
                # §8.8: the global batch never changes
                plan = Plan.parse(a.settings.plan, a.placement.num_gpus)
                dp = plan.dp if plan.is_3d else a.placement.num_gpus
                assert a.settings.accumulation_steps * a.settings.sub_batch_size * dp == (
                    info.model.batch)
        # §8.14: every reallocation helps or honours a minimum
        for _recv, _donor, sp, sm, urgent in self.inner.moves:
            assert sp > sm or urgent
        return acts


def _check_capacity_and_quota(snap: ClusterSnapshot, pol: Rubick, quotas: dict[str, int]):
    """§8.9 (per-node GPUs, CPUs, memory) and §8.12 (quota charged at minRes)."""
    cpu: Counter = Counter()
    mem: Counter = Counter()
    used: Counter = Counter()
    for j in snap.running:
        g = j.placement.num_gpus
        for part in j.placement.parts:
            if j.settings.cpus:
                cpu[part.node] += j.settings.cpus * len(part.gpus) / g
            if j.settings.mem_gb:
                mem[part.node] += j.settings.mem_gb * len(part.gpus) / g
        if pol.guaranteed.get(j.job_id):
            used[j.spec.user] += pol._minres[j.job_id][0]
    for n in snap.cluster.nodes:
        assert cpu[n.name] <= n.cpus + 1e-6 and mem[n.name] <= n.mem_gb + 1e-6
    for tenant, q in quotas.items():
        assert used[tenant] <= q


MODEL_POOL = ["vit", "roberta", "bert", "t5", "gpt2", "llama7b"]


@st.composite
def rubick_traces(draw, cluster: Cluster):
    cat = measured_catalog()
    sizes = sorted((n.num_gpus for n in cluster.nodes), reverse=True)
    jobs = []
    for i in range(draw(st.integers(min_value=1, max_value=8))):
        model = draw(st.sampled_from(MODEL_POOL))
        configs = sorted(
            ((p, s) for p, s, _ in cat.configs(model)
             if len(set(s)) == 1 and len(s) <= len(sizes) and s[0] <= sizes[-1]
             and (not p.is_3d or MODELS[model].allow_3d)),
            key=lambda c: (c[0].code, c[1]))
        plan, shape = draw(st.sampled_from(configs))
        g = sum(shape)
        t = cat.table_s(model, plan, shape)
        dur = draw(st.integers(min_value=5, max_value=900))
        jobs.append(rjob(
            f"j{i}", model, g, plan.code, submit=draw(st.integers(0, 600)), duration=dur,
            guaranteed=draw(st.booleans()), user=draw(st.sampled_from(["A", "B"])),
            cpus=draw(st.sampled_from([None, 4 * g, 8 * g])),
            iterations=max(1, round(dur / t))))
    return jobs


CLUSTERS = {"1x8": a800(1), "2x8": a800(2), "2x4": a800(2, gpus=4, cpus=32, mem_gb=256),
            "3x4": a800(3, gpus=4, cpus=48, mem_gb=512)}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.data_too_large])
@given(data=st.data(), cluster_name=st.sampled_from(sorted(CLUSTERS)),
       predictor=st.sampled_from(["oracle", "fitted"]), variant=st.sampled_from(
           ["full", "full", "R"]))
def test_guarantee_and_invariants_property(data, cluster_name, predictor, variant):
    """A guaranteed job never gets a plan and resources predicted slower than its request;
    capacity, quota, preemption, reallocation and reconfiguration rules hold after every pass;
    every job finishes exactly once."""
    cluster = CLUSTERS[cluster_name]
    jobs = data.draw(rubick_traces(cluster))
    quotas = {"A": 8}
    inner = Rubick(predictor=predictor, variant=variant, quotas=quotas, restart_cost_s=20.0)
    pol = CheckedRubick(inner, quotas)
    sim = SimulatedBackend(cluster, jobs, progress=RubickProgress(), restart_overhead_s=20.0,
                           max_jobs_per_gpu=1)
    checked = CheckingBackend(sim, max_jobs_per_gpu=1, exact_gangs=False)

    class Wrap(CheckingBackend):
        def apply(self, actions):
            res = super().apply(actions)
            _check_capacity_and_quota(sim.snapshot(), inner, quotas)
            return res

    wrapped = Wrap(sim, max_jobs_per_gpu=1, exact_gangs=False)
    Controller(wrapped, pol, SimulatedClock(sim)).run(until_s=2e5)  # liveness: well past the end
    done = Counter(c.spec.job_id for c in sim.completed())
    assert set(done) == {j.job_id for j in jobs} and all(v == 1 for v in done.values())
    assert not wrapped.failed_actions and not checked.failed_actions


def test_starving_job_runs_despite_low_slope():
    """§8.16: a low-slope job behind a stream of high-slope jobs runs once it starves."""
    cluster = a800(1)
    big = rjob("big", "llama7", 8, "zero-offload", submit=5.0, duration=600.0)
    stream = [rjob(f"v{i}", "vit", 1, "ga", submit=10.0 + 25.0 * i, duration=200.0)
              for i in range(80)]
    jobs = [rjob("warm", "vit", 8, "zero-dp", submit=0.0, duration=400.0), big, *stream]

    def start_of(starve_s: float) -> float:
        # the inclusive lock keeps "warm" from being shrunk for "big" in its first minutes
        # (under the past reading its first reconfiguration is free and big starts at once)
        pol = Rubick(predictor="oracle", starve_s=starve_s, lock_rule="inclusive")
        sim = SimulatedBackend(cluster, jobs, progress=RubickProgress(), restart_overhead_s=0.0,
                               max_jobs_per_gpu=1)
        Controller(sim, pol, SimulatedClock(sim)).run()
        return next(c.first_start_s for c in sim.completed() if c.spec.job_id == "big")

    late = start_of(1e9)
    early = start_of(300.0)
    assert early <= 5.0 + 300.0 + 400.0 + 60.0  # threshold + longest running remainder + a round
    assert early < late - 600.0


def test_guaranteed_job_takes_from_best_effort_and_keeps_its_speed():
    cluster = a800(1)
    be = rjob("be", "vit", 8, "zero-dp", duration=5000.0, guaranteed=False)
    g = rjob("g", "bert", 4, "zero-dp", submit=10.0, duration=500.0, guaranteed=True)
    pol = Rubick(predictor="oracle")
    sim = SimulatedBackend(cluster, [be, g], progress=RubickProgress(), restart_overhead_s=30.0,
                           max_jobs_per_gpu=1)
    Controller(sim, pol, SimulatedClock(sim)).run(until_s=11.0)
    snap = sim.snapshot()
    gv = snap.by_id["g"]
    assert gv.state is JobState.RUNNING
    assert pol.last_assigned["g"][2] >= 1.0 - 1e-9
    assert snap.by_id["be"].placement.num_gpus < 8


# =============================================================================== world + sim
def test_progress_model_matches_the_trace_reference():
    from slurm_sched.traces import bundled, read_trace

    jobs = read_trace(bundled("rubick/workloads/workload-base.csv"))
    prog = perf_registry.create("rubick")
    assert isinstance(prog, RubickProgress)
    long_jobs = [j for j in jobs if (j.iterations or 0) >= 1000]
    for j in long_jobs:
        info = job_info(j)
        t = measured_catalog().time_s(info.model.name, info.orig_plan, info.ref_shape, 4.0)
        assert j.duration_s / j.iterations == pytest.approx(t, rel=0.02), j.job_id
    # a job of an unknown model runs at its isolated speed
    from slurm_sched.model import JobView

    anon = JobView(spec=JobSpec(job_id="x", submit_time_s=0, num_gpus=2, duration_s=5))
    assert prog.plan_speed(anon, Placement.of({"n1": [0, 1]})) == 1.0


def test_determinism_and_conservation_on_a_base_prefix():
    from slurm_sched.sim.runner import simulate
    from slurm_sched.traces import bundled, read_trace

    jobs = read_trace(bundled("rubick/workloads/workload-base.csv"))[:50]
    cluster = a800(8)
    runs = [simulate(jobs, cluster, Rubick(predictor="oracle"), restart_overhead_s=78.0)
            for _ in range(2)]
    a, b = ([(c.spec.job_id, c.first_start_s, c.finish_s) for c in r.completed] for r in runs)
    assert a == b  # §8.24
    m = runs[0].metrics
    assert m.jobs == 50
    assert m.gpu_util <= 1.0 + 1e-9  # §8.19: GPU-seconds <= 64 x makespan


@pytest.mark.parametrize("name", ["sia", "synergy", "antman-rubick"])
def test_baselines_finish_a_base_prefix(name):
    from slurm_sched.policy import registry
    from slurm_sched.sim.runner import simulate
    from slurm_sched.traces import bundled, read_trace

    jobs = read_trace(bundled("rubick/workloads/workload-base.csv"))[:40]
    res = simulate(jobs, a800(8), registry.create(name), restart_overhead_s=78.0)
    assert res.metrics.jobs == 40 and res.stats.actions_failed == 0


def test_synergy_keeps_gpus_and_plans():
    from slurm_sched.policy.rubick_baselines import Synergy

    jobs = [rjob("a", "llama7", 8, "zero-offload", duration=50.0),
            rjob("b", "vit", 2, "zero-dp", submit=1.0, duration=50.0)]
    pol = Synergy()
    sim = SimulatedBackend(a800(1), jobs, progress=RubickProgress(), restart_overhead_s=0.0,
                           max_jobs_per_gpu=1)
    seen = []

    def hook(_now, results):
        seen.extend(r.action for r in results if r.ok)

    Controller(sim, pol, SimulatedClock(sim), on_cycle=hook).run()
    starts = {a.job_id: a for a in seen if a.kind == "start"}
    assert starts["a"].placement.num_gpus == 8 and starts["a"].settings.plan == "zero-offload"
    assert starts["a"].settings.cpus == 64  # 8 CPUs per GPU for ZeRO-Offload (artifact)
    assert starts["b"].settings.cpus == 2


def test_sia_scales_dp_jobs_but_not_3d_only_models():
    from slurm_sched.policy.rubick_baselines import Sia

    sia = Sia()
    info = job_info(rjob("x", "llama30", 48, "344"))
    assert sia.sia_plan(info) == (info.orig_plan, False)
    info = job_info(rjob("y", "gpt2", 5, "151"))
    assert sia.sia_plan(info) == (Plan("dp"), True)
    from slurm_sched.model import JobView

    opts = sia.options(JobView(spec=rjob("z", "vit", 2, "zero-dp")), [8] * 8)
    assert sorted(o.gpus for o, _ in opts) == [1, 2, 4, 8]


def test_unknown_models_are_rigid_and_never_sped_up():
    pol = Rubick()
    job = JobSpec(job_id="r", submit_time_s=0, num_gpus=3, duration_s=10)
    snap = ClusterSnapshot(now_s=0.0, cluster=a800(1), jobs=(_view(job),))
    (act,) = pol.decide(snap, 0.0)
    assert act.kind == "start" and act.placement.num_gpus == 3
    assert math.isclose(pol.job_model(_view(job), snap).cap, 3)


def test_profile_samples_have_the_paper_minimum_for_fitted_models():
    assert len(load_profile("vit")) == 7 and sum(s.plan.offload for s in load_profile("vit")) == 4
    assert isinstance(load_profile("gpt2")[0], ProfileSample)


# ------------------------------------------------------------------ indexed embedding
@pytest.mark.parametrize("seed", range(30))
def test_indexed_embeddings_match_embed(seed):
    """The free-GPU index gives the nodes :func:`embed` picks from a full availability map:
    Rubick's own-nodes-first embedding and the baselines' plain best fit."""
    import random

    from slurm_sched.policy.placement import CountIndex
    from slurm_sched.policy.rubick.allocations import NodeState, State
    from slurm_sched.policy.rubick.embedding import embed, embed_free
    from slurm_sched.policy.rubick_baselines import _best_fit_embed_counts

    rng = random.Random(seed)
    names = [f"n{k}" for k in range(rng.randint(1, 10))]
    nodes = [NodeState(n, 8, 32, 256.0, set(rng.sample(range(8), rng.randint(0, 8))), 32, 256.0)
             for n in names]
    state = State(nodes)
    for _ in range(20):
        own = {n: rng.randint(1, 4) for n in rng.sample(names, rng.randint(0, min(3, len(names))))}
        avail = {n: own.get(n, 0) + len(state.nodes[n].free_gpus) for n in names}
        gpus = rng.randint(1, 20)
        shape = None if rng.random() < 0.4 else tuple(
            [rng.choice([1, 2, 4, 8])] * rng.randint(1, 3))
        g = gpus if shape is None else sum(shape)
        assert embed_free(shape, g, own, state) == embed(shape, g, avail, own, names)
        counts = CountIndex({n: len(state.nodes[n].free_gpus) for n in names})
        plain = {n: len(state.nodes[n].free_gpus) for n in names}
        assert _best_fit_embed_counts(shape, g, counts) == embed(shape, g, plain, {}, names)


# ------------------------------------------------------------------ scale paths
def _walk_one_by_one(self, snapshot, state, jobs, j, own, cap, urgent_floor, privileged, total,
                     steals):
    """The node walk as first written: every node in order, asking each for a donor."""
    pos = state.pos
    first = sorted(own, key=lambda n: (-own[n], -len(state.nodes[n].free_gpus), pos[n]))
    walk = first + [n for n in state.free_index.by_most(empty=True) if n not in own]
    jm = j.jm
    for n in walk:
        own_n = own.get(n, 0)
        if total >= cap and own_n == 0:
            break
        free_n = len(state.nodes[n].free_gpus)
        total += min(free_n, max(0, cap - total))
        while total < cap:
            need_urgent = total < urgent_floor
            sp = jm._sigma_plus(total)
            if sp <= 0 and not need_urgent:
                break
            donor = self._lowest_donor(snapshot, state, jobs, n, j, privileged)
            if donor is None:
                break
            djob, step, sigma_minus = donor
            if not (sp > sigma_minus or need_urgent):
                break
            released = self._apply_step(state, jobs, djob, step, n)
            steals.append((n, djob, sp, sigma_minus, need_urgent))
            total += released
        if total >= cap:
            break
    return total


def _lowest_donor_by_version(self, snapshot, state, jobs, node, receiver, privileged):
    """The donor cache as first written: by the node's version only."""
    rid = receiver.view.job_id
    key = (node, state.version[node], privileged,
           rid if rid in state.nodes[node].jobs else None)
    if key not in self._donor_cache:
        self._donor_cache[key] = self._lowest_donor_uncached(snapshot, state, jobs, node,
                                                             receiver, privileged)
    return self._donor_cache[key]


def _rollback_fresh_versions(self, mark):
    """Rollback as first written: undone nodes (and the state) get new numbers (no reuse of
    cached answers or of failures)."""
    while len(self.journal) > mark:
        job_id, old, _, _ = self.journal.pop()
        self.set(job_id, old, record=False)


def _flatness_order_eager(by_speed, by_size, fit):
    """The flatness order as first written: embed every candidate, then sort the fits."""
    from slurm_sched.policy.rubick.curves import EPS_FLAT

    fits = [(s, c, fit(c)) for s, c in by_size]
    fits = [f for f in fits if f[2] is not None]
    if fits:
        best = max(f[0] for f in fits)
        yield from sorted(fits, key=lambda f: f[0] < (1 - EPS_FLAT) * best)


class _Forgetful(set):
    """A set that keeps nothing: no failure of a pass is reused."""

    def add(self, item):
        return None


def _busy_snapshot(seed: int, nodes: int = 16, pending: int = 160, running: int = 60
                   ) -> ClusterSnapshot:
    """A full cluster of known and unknown models, some guaranteed, some running long."""
    import random

    from slurm_sched.model import JobView
    from slurm_sched.policy.placement import pack_consolidated

    rng = random.Random(seed)
    cluster = a800(nodes)
    free = {n.name: list(range(n.num_gpus)) for n in cluster.nodes}
    models = ["vit", "roberta", "bert", "t5", "gpt2", "llama7b", "resnet"]
    now = 30 * 3600.0
    jobs = []
    for i in range(running + pending):
        g = rng.choice([1, 1, 1, 2, 4, 8, 16])
        attrs = {"guaranteed": rng.random() < 0.3}
        spec = JobSpec(job_id=f"j{i:04d}", submit_time_s=rng.uniform(0, now - 100), num_gpus=g,
                       duration_s=rng.uniform(600, 86400), user=rng.choice("abc"),
                       model=rng.choice(models), iterations=rng.choice([50, 5000]),
                       attrs=attrs)
        if i < running:
            place = pack_consolidated(free, g)
            if place is None:
                continue
            start = rng.uniform(spec.submit_time_s, now - 10)
            jobs.append(JobView(spec=spec, state=JobState.RUNNING, placement=place,
                                first_start_s=start, accounted_at_s=now, executed_s=now - start,
                                work_done_s=min(spec.duration_s * 0.9, now - start), rate=1.0))
        else:
            jobs.append(JobView(spec=spec))
    jobs.sort(key=lambda j: (j.spec.submit_time_s, j.job_id))
    return ClusterSnapshot(now_s=now, cluster=cluster, jobs=tuple(jobs))


@pytest.mark.parametrize("variant", ["full", "R", "E"])
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("small_cluster", [0, 64])
def test_scale_paths_decide_as_the_plain_walk(variant, seed, small_cluster, monkeypatch):
    """The walk's array skipping (``small_cluster`` 0: used on every cluster), version reuse
    after rollbacks, donor answers by node content, shared per-name prediction tables, step-downs
    shared by one-node donors of a kind, the lazy flatness order and the reuse of a queued
    kind's failure decide exactly what the one-by-one walk with fresh versions,
    version-keyed donors, per-model tables, per-donor step-downs, fully sorted fits and no
    failure reuse decides, over two passes (cold, then after observations and refits).
    Patched internals: the pure-Python module (compiled code calls its own functions directly;
    ``test_compiled_core_decides_as_the_source`` ties the two together)."""
    rubick = source_module("slurm_sched.policy.rubick.policy")
    Rubick, State = rubick.Rubick, source_module("slurm_sched.policy.rubick.allocations").State

    fast = Rubick(variant=variant)
    with monkeypatch.context() as m:
        m.setattr(rubick, "SMALL_CLUSTER", small_cluster)
        got = [fast.decide(_busy_snapshot(seed), _busy_snapshot(seed).now_s) for _ in range(2)]
    got_moves = fast.moves
    with monkeypatch.context() as m:
        m.setattr(Rubick, "_walk", _walk_one_by_one)
        m.setattr(State, "rollback", _rollback_fresh_versions)
        m.setattr(Rubick, "_lowest_donor", _lowest_donor_by_version)
        m.setattr(Rubick, "_step_down_one_node",
                  lambda self, state, d, node, a: self._step_down_uncached(state, d, node))
        m.setattr(rubick, "in_flatness_order", _flatness_order_eager)
        plain = Rubick(variant=variant)
        plain._name_keyed = False
        plain._failed = _Forgetful()
        want = [plain.decide(_busy_snapshot(seed), _busy_snapshot(seed).now_s)
                for _ in range(2)]
    assert got == want
    assert got_moves == plain.moves
    assert any(got)


@pytest.mark.parametrize("variant", ["full", "R"])
@pytest.mark.parametrize("seed", range(3))
def test_only_committed_steals_shrink_donors(variant, seed, monkeypatch):
    """A donor counts as shrunk (and may not grow again in the pass) only when a receiver
    commits the step it took: the walk's steals are tentative, rolled back when the receiver
    fails or does not need them. In both passes the shrunk jobs are exactly the donors of the
    committed moves, and the walks stole more often than was committed. (The pure-Python
    module: its walk is patched to count.)"""
    Rubick = source_module("slurm_sched.policy.rubick.policy").Rubick
    pol = Rubick(variant=variant)
    tentative: list[int] = []
    orig_walk = Rubick._walk

    def counting_walk(self, *args):
        got = orig_walk(self, *args)
        tentative[-1] += len(args[-1])  # the walk's steals (rolled back by the caller)
        return got

    monkeypatch.setattr(Rubick, "_walk", counting_walk)
    uncommitted = shrunk = 0
    for _ in range(2):
        tentative.append(0)
        snap = _busy_snapshot(seed)
        pol.decide(snap, snap.now_s)
        assert pol.shrunk == {donor for _, donor, _, _, _ in pol.moves}
        shrunk += len(pol.shrunk)
        uncommitted += tentative[-1] - len(pol.moves)
    assert shrunk > 0 and uncommitted > 0


def _decisions() -> list[str]:
    """What Rubick (full, -R, -E) decides on the busy snapshots over two passes (cold, then
    after observations and refits), on the fitted and the oracle predictor: actions, moves,
    overrides, shrunk donors and explanations, as text."""
    out = []
    for variant, seed, predictor in itertools.product(("full", "R", "E"), range(3),
                                                      ("fitted", "oracle")):
        pol = Rubick(variant=variant, predictor=predictor)
        for _ in range(2):
            snap = _busy_snapshot(seed)
            acts = pol.decide(snap, snap.now_s)
            out.append(repr((variant, seed, predictor, acts, pol.moves, sorted(pol.overrides),
                             sorted(pol.shrunk),
                             [pol.explain(snap, j.job_id) for j in snap.pending[:5]])))
    return out


def test_compiled_core_decides_as_the_source():
    """This process's Rubick (the mypyc build of the hot modules when there is one, see
    :mod:`slurm_sched.native`; the test command requires it) decides exactly what the
    pure-Python modules decide, run in a child interpreter with ``SLURM_SCHED_NATIVE=off``."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    child = subprocess.run(
        [sys.executable, "-c", "import json; from tests.unit.policy.test_rubick import _decisions; "
                               "print(json.dumps(_decisions()))"],
        cwd=root, env={**os.environ, "SLURM_SCHED_NATIVE": "off"}, capture_output=True,
        text=True, check=True)
    here = _decisions()
    assert json.loads(child.stdout) == here
    assert sum("Reconfigure" in d or "Preempt" in d for d in here) >= 6


def test_sia_keeps_every_allocation_when_its_mip_finds_no_solution(caplog):
    """At 8,192 GPUs the MIP can run out of time without a solution: the round must not preempt
    every running job (it did: an empty solution read as "run nothing")."""
    from slurm_sched.policy.rubick_baselines import Sia

    jobs = [rjob(f"j{i}", "vit", 2, "zero-dp", duration=500.0) for i in range(6)]
    sim = SimulatedBackend(a800(1), jobs, progress=RubickProgress(), restart_overhead_s=0.0,
                           max_jobs_per_gpu=1)
    sim.advance_to(0.0)  # the arrivals
    assert all(r.ok for r in sim.apply(Sia().decide(sim.snapshot(), 0.0)))
    snap = sim.snapshot()
    running = {j.job_id for j in snap.running}
    assert running and snap.pending  # some run, some wait
    acts = Sia(mip_time_limit_s=1e-9).decide(snap, snap.now_s)
    assert "found no solution" in caplog.text
    assert acts == []  # nothing preempted, changed or started
    with pytest.raises(ValueError, match="mip_time_limit_s"):
        Sia(mip_time_limit_s=0)


def test_sia_solves_big_rounds_with_the_knapsack_greedy():
    """Above ``mip_max_columns`` Sia's round is the LP-relaxation greedy (policy/mckp.py, whose
    tests bound its gap to the MIP): every job still gets a configuration, within capacity
    (here the greedy leaves one GPU idle where the MIP uses all 16)."""
    from slurm_sched.policy.rubick_baselines import Sia

    jobs = [rjob(f"j{i}", m, g, "zero-dp", duration=500.0)
            for i, (m, g) in enumerate([("vit", 2), ("bert", 4), ("roberta", 1), ("vit", 8),
                                        ("t5", 2), ("bert", 2), ("vit", 1)])]

    def run(policy: Sia) -> dict[str, int]:
        sim = SimulatedBackend(a800(2), jobs, progress=RubickProgress(), restart_overhead_s=0.0,
                               max_jobs_per_gpu=1)
        sim.advance_to(0.0)
        assert all(r.ok for r in sim.apply(policy.decide(sim.snapshot(), 0.0)))
        return {j.job_id: j.num_gpus for j in sim.snapshot().running}

    by_mip, by_greedy = run(Sia()), run(Sia(mip_max_columns=0))
    assert set(by_greedy) == set(by_mip) == {j.job_id for j in jobs}
    assert sum(by_mip.values()) == 16 and 16 - 2 <= sum(by_greedy.values()) <= 16
    with pytest.raises(ValueError, match="mip_max_columns"):
        Sia(mip_max_columns=-1)


def test_lock_rule_reads_n_as_past_reconfigurations_by_default():
    """Paper §5.2: "Rubick considers to reconfigure a job only if the value of (T - N delta)/T
    exceeds a threshold ... N is the reconfiguration times": N counts the reconfigurations the
    job had, so its first reconfiguration is never locked; ``inclusive`` counts the one being
    considered too."""
    from slurm_sched.model import JobView, Placement

    spec = rjob("j", "vit", 2, "ga", duration=1000.0, iterations=1000)
    view = JobView(spec=spec, state=JobState.RUNNING, placement=Placement.of({"n1": [0, 1]}),
                   first_start_s=0.0, accounted_at_s=600.0)
    past = Rubick()
    assert past.lock_rule == "past"
    assert not past._locked(view, 600.0)  # N = 0: (T - 0) / T = 1 > 0.97
    past._reconfs["j"] = 1
    assert past._locked(view, 600.0)  # (600 - 78) / 600 = 0.87
    assert not past._locked(view, 78.0 / 0.03 + 1.0)  # T > delta / 0.03
    incl = Rubick(lock_rule="inclusive")
    assert incl._locked(view, 600.0)  # N = 0 + 1
    assert not incl._locked(view, 78.0 / 0.03 + 1.0)


def test_slope_order_and_steal_options():
    """``slope_order="ascending"`` serves the least sensitive job first (the artifact's order,
    A15); ``steal=False`` leaves best-effort receivers the free GPUs only (the artifact's
    donor loop never runs, spec 3.11 item 3). Two ViT jobs on one 8-GPU node: ``a`` asked for
    8 GPUs (speed 0.32 of its request on one GPU), ``b`` for 1 (speed 1 on one GPU)."""
    from slurm_sched.model import JobView

    snap = ClusterSnapshot(now_s=0.0, cluster=a800(1), jobs=(
        JobView(spec=rjob("a", "vit", 8, "ga")), JobView(spec=rjob("b", "vit", 1, "ga"))))

    def gpus(**kw) -> dict[str, int]:
        acts = Rubick(predictor="oracle", **kw).decide(snap, 0.0)
        return {a.job_id: a.placement.num_gpus for a in acts}

    assert gpus() == {"a": 4, "b": 4}  # b first, takes 8; a takes 4 of them back
    assert gpus(steal=False) == {"b": 8}
    assert gpus(slope_order="ascending") == {"b": 8}  # a first; b takes them all
    assert gpus(slope_order="ascending", steal=False) == {"a": 8}
    with pytest.raises(ValueError, match="slope_order"):
        Rubick(slope_order="random")


def test_rubick_steps_world_counts_work_in_iterations():
    """``rubick-steps``: a job of ``iterations`` runs ``iterations + 1`` iterations of its
    current configuration's measured time, whatever its duration (the artifact's rule)."""
    from slurm_sched.model import JobView
    from slurm_sched.perf.rubick.world_speed import RubickStepsProgress

    prog = perf_registry.create("rubick-steps")
    assert isinstance(prog, RubickStepsProgress) and prog.extra_iterations == 1
    place = Placement.of({"n1": list(range(8))})
    t8 = measured_catalog().time_s("vit", Plan("dp"), (8,), 4.0)
    assert t8 is not None
    for duration in (0.001, 5.0, 1000.0):  # the trace's duration does not matter
        view = JobView(spec=rjob("j", "vit", 2, "ga", duration=duration, iterations=9))
        busy = duration / prog.plan_speed(view, place)
        assert busy == pytest.approx(10 * t8)
    # without iterations: the rubick world
    plain = JobView(spec=rjob("p", "vit", 2, "ga", duration=50.0))
    assert prog.plan_speed(plain, place) == perf_registry.create("rubick").plan_speed(plain, place)


def test_fit_on_components_separates_zero_dp_from_dp():
    """Fitted on T_iter alone, k_opt of T5 goes to 0 and ZeRO-DP is predicted as fast as DP;
    with the profiled T_cc and T_opt in the loss (``loss="components"``, the artifact's
    three-term loss, spec §2.5) k_opt is positive and ZeRO-DP is faster on 8 GPUs, as measured
    (0.241 s vs 0.320 s)."""
    assert all(s.cc_ms and s.opt_ms for s in load_profile("t5"))
    t5 = MODELS["t5"]
    plain, parts = FittedPredictor(), FittedPredictor(loss="components")
    assert profiled_model("t5").fit.params["k_opt"] == pytest.approx(0.0, abs=1e-6)
    assert profiled_model("t5", "components").fit.params["k_opt"] > 0.01
    dp, zero = Plan.parse("ga", 8), Plan.parse("zero-dp", 8)
    assert plain.iter_time_s(t5, dp, (8,), 1.0) == pytest.approx(
        plain.iter_time_s(t5, zero, (8,), 1.0))
    assert parts.iter_time_s(t5, zero, (8,), 1.0) < 0.9 * parts.iter_time_s(t5, dp, (8,), 1.0)
    assert isinstance(Rubick(predictor="fitted-components").predictor, FittedPredictor)
    with pytest.raises(ValueError, match="loss"):
        fit_model(t5, load_profile("t5"), profiled_model("t5").fwd, loss="t_iter")
