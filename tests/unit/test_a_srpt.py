"""A-SRPT (spec ``a-srpt.md`` section 7): job graph, Heavy-Edge, alpha, virtual SRPT,
Algorithm 1, the baselines, the iteration predictor and the workload generator."""

from __future__ import annotations

import itertools
import json
import math
import random
from functools import cache

import pytest

from slurm_sched.model import (
    ClusterSnapshot,
    JobSpec,
    JobState,
    JobView,
    Placement,
    parse_cluster_spec,
)
from slurm_sched.perf.asrpt_model import (
    AsrptProgress,
    JobProfile,
    Network,
    Stage,
    alpha_max,
    alpha_min_est,
    alpha_of_assignment,
    alpha_of_shape,
    build_graph,
    cut_weight,
    exhaustive_min_cut,
    heavy_edge,
    profile_of,
    synthetic_profiles,
    theorem1_bound,
)
from slurm_sched.perf.iteration_predictor import (
    MeanPredictor,
    MedianPredictor,
    PredictorStateError,
    RandomForestPredictor,
    evaluate_split,
)
from slurm_sched.policy import registry
from slurm_sched.policy.a_srpt import ASrpt, VirtualSrpt, srpt_completions
from slurm_sched.policy.a_srpt_baselines import ASrptPerfect, Spjf, WcsSubTime
from slurm_sched.sim.runner import simulate
from slurm_sched.workloads import a_srpt as workload
from tests.approx import approx_nested

MB = 1e6
NET = Network(b_inter_Bps=1.25e9, b_intra_Bps=300e9)


def example_profile(pf: float = 0.010, pb: float = 0.020) -> JobProfile:
    """Section 2.1: 3 stages x 2 replicas, RAR, h = (20, 4, 2) MB, 1 MB boundaries."""
    return JobProfile(stages=(
        Stage(k=2, pf_s=pf, pb_s=pb, d_out_B=1 * MB, h_B=20 * MB),
        Stage(k=2, pf_s=pf, pb_s=pb, d_in_B=1 * MB, d_out_B=1 * MB, h_B=4 * MB),
        Stage(k=2, pf_s=pf, pb_s=pb, d_in_B=1 * MB, h_B=2 * MB),
    ))


# ------------------------------------------------- the spec's Appendix A reference (oracle)
def ref_build_graph(k, d_in, h):
    S = len(k)
    V = [(s, r) for s in range(S) for r in range(k[s])]
    E: dict = {}

    def add(u, v, w):
        key = tuple(sorted((u, v)))
        E[key] = E.get(key, 0) + w

    for s in range(1, S):
        for a in range(k[s - 1]):
            for b in range(k[s]):
                add((s - 1, a), (s, b), 2 * d_in[s] / k[s - 1])
    for s in range(S):
        n = k[s]
        w = 2 * (n - 1) / n * h[s]
        ring = [] if n < 2 else ([(0, 1)] if n == 2 else [(r, (r + 1) % n) for r in range(n)])
        for a, b in ring:
            add((s, a), (s, b), w)
    return V, E


def ref_heavy_edge(V, E, caps):
    def w(u, v):
        return E.get(tuple(sorted((u, v))), 0)

    U = list(V)
    out = {}
    for sid, cap in sorted(caps, key=lambda c: (-c[1], c[0])):
        if cap == 0:
            continue
        if len(U) == cap:
            out.update({v: sid for v in U})
            U = []
            break
        if cap == 1:
            v = min(U, key=lambda x: sum(w(x, y) for y in U if y != x))
            out[v] = sid
            U.remove(v)
            continue
        pairs = [(w(a, b), a, b) for a, b in itertools.combinations(U, 2) if w(a, b) > 0]
        node_set = list(max(pairs, key=lambda t: t[0])[1:]) if pairs else [U[0]]
        for v in node_set:
            U.remove(v)
        while len(node_set) < cap:
            cand = [(w(a, b), b) for a in node_set for b in U if w(a, b) > 0]
            v = max(cand, key=lambda t: t[0])[1] if cand else U[0]
            node_set.append(v)
            U.remove(v)
        out.update({v: sid for v in node_set})
    return out


def random_job(rng: random.Random, max_vertices: int = 8) -> JobProfile:
    while True:
        S = rng.randint(1, 4)
        ks = [rng.randint(1, 3) for _ in range(S)]
        if sum(ks) <= max_vertices:
            break
    d = [rng.choice([0, 1, 2, 5]) * MB for _ in range(S)]
    stages = tuple(
        Stage(k=ks[s], pf_s=rng.uniform(0.005, 0.05), pb_s=rng.uniform(0.01, 0.1),
              d_in_B=d[s] if s > 0 else 0.0, d_out_B=d[s + 1] if s < S - 1 else 0.0,
              h_B=rng.choice([0, 1, 4, 20, 100]) * MB)
        for s in range(S)
    )
    return JobProfile(stages=stages)


def random_caps(rng: random.Random, n: int, g: int = 8) -> list[tuple[int, int]]:
    caps: list[int] = []
    left = n
    while left:
        c = rng.randint(1, min(g, left))
        caps.append(c)
        left -= c
    return list(enumerate(caps, start=1))


# ===================================================================== 7.1 graph
def test_example_graph_has_11_edges_of_34_mb():
    gr = build_graph(example_profile())
    assert gr.number_of_nodes() == 6
    assert gr.number_of_edges() == 11
    assert sum(d["weight"] for _, _, d in gr.edges(data=True)) == pytest.approx(34 * MB)
    assert gr[(0, 0)][(0, 1)]["weight"] == pytest.approx(20 * MB)  # 2(k-1)h/k with k=2
    assert gr[(0, 0)][(1, 1)]["weight"] == pytest.approx(1 * MB)  # 2 d_in / k_prev


def test_tar_edges_weigh_half_a_ring_edge_and_trees_merge():
    k, h = 5, 10 * MB
    rar = build_graph(JobProfile(stages=(Stage(k=k, pf_s=0.01, pb_s=0.01, h_B=h),)))
    tar = build_graph(JobProfile(stages=(Stage(k=k, pf_s=0.01, pb_s=0.01, h_B=h),),
                                 allreduce="tar"))
    ring_w = 2 * (k - 1) / k * h
    assert rar.number_of_edges() == k
    assert all(d["weight"] == pytest.approx(ring_w) for *_, d in rar.edges(data=True))
    # tree A over 0..4: 0-1 0-2 1-3 1-4; tree B over 4..0: 4-3 4-2 3-1 3-0; 1-3 in both
    got = {tuple(sorted((u[1], v[1]))): d["weight"] for u, v, d in tar.edges(data=True)}
    half = ring_w / 2
    assert got == pytest.approx({(0, 1): half, (0, 2): half, (1, 3): ring_w, (1, 4): half,
                                 (3, 4): half, (2, 4): half, (0, 3): half})


def test_graph_matches_appendix_reference_on_random_jobs():
    rng = random.Random(3)
    for _ in range(50):
        p = random_job(rng, 10)
        V, E = ref_build_graph([s.k for s in p.stages], [s.d_in_B for s in p.stages],
                               [s.h_B for s in p.stages])
        gr = build_graph(p)
        assert sorted(gr.nodes) == V
        got = {tuple(sorted((u, v))): d["weight"] for u, v, d in gr.edges(data=True)}
        assert got == pytest.approx({e: w for e, w in E.items() if w > 0})


# ===================================================================== 7.2 Heavy-Edge
def test_heavy_edge_worked_example_equals_exhaustive_optimum():
    gr = build_graph(example_profile())
    caps = [(1, 4), (2, 1), (3, 1)]
    assign = heavy_edge(gr, caps)
    assert {v for v, m in assign.items() if m == 1} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    assert assign[(2, 0)] == 2 and assign[(2, 1)] == 3
    best, _ = exhaustive_min_cut(gr, caps)
    assert cut_weight(gr, assign) == pytest.approx(6 * MB)
    assert best == pytest.approx(6 * MB)


def test_heavy_edge_on_random_small_jobs():
    """Part sizes, each vertex once, cut >= optimum, identical to the spec's reference code."""
    rng = random.Random(7)
    for _ in range(100):
        p = random_job(rng)
        gr = build_graph(p)
        caps = random_caps(rng, p.num_replicas)
        assign = heavy_edge(gr, caps)
        assert sorted(assign) == sorted(gr.nodes)
        for sid, c in caps:
            assert sum(1 for m in assign.values() if m == sid) == c
        best, opt = exhaustive_min_cut(gr, caps)
        assert cut_weight(gr, assign) >= best - 1e-6
        assert cut_weight(gr, opt) == pytest.approx(best)
        V, E = ref_build_graph([s.k for s in p.stages], [s.d_in_B for s in p.stages],
                               [s.h_B for s in p.stages])
        assert assign == ref_heavy_edge(V, E, caps)


def test_heavy_edge_literal_weight_flag_and_random_fallback_stay_valid():
    rng = random.Random(11)
    for _ in range(30):
        p = random_job(rng)
        caps = random_caps(rng, p.num_replicas)
        for kw in ({"weight_to": "all"}, {"rng": random.Random(1)}):
            assign = heavy_edge(build_graph(p), caps, **kw)
            for sid, c in caps:
                assert sum(1 for m in assign.values() if m == sid) == c


def test_heavy_edge_rejects_caps_that_do_not_add_up():
    with pytest.raises(ValueError, match="caps add up to 5"):
        heavy_edge(build_graph(example_profile()), [(1, 4), (2, 1)])


def test_tensor_parallel_groups_stay_on_one_server():
    p = synthetic_profiles()["gpt-13b/pp4x1tp4"]
    assert p.num_gpus == 16 and p.num_replicas == 4
    with pytest.raises(ValueError, match="multiple of the TP degree"):
        heavy_edge(build_graph(p), [(1, 6), (2, 6), (3, 4)])
    assign = heavy_edge(build_graph(p), [(1, 8), (2, 4), (3, 4)])
    assert sorted(assign.values()) == [1, 1, 2, 3]


# ===================================================================== 7.3 alpha
def test_alpha_test_vectors():
    p = example_profile()
    assert alpha_min_est(p, 8, NET) == pytest.approx(0.03007, abs=5e-6)
    assign = heavy_edge(build_graph(p), [(1, 4), (2, 1), (3, 1)])
    assert alpha_of_assignment(p, assign, 8, NET) == pytest.approx(0.0556, abs=5e-5)
    assert alpha_max(p, 8, NET) == pytest.approx(0.1708, abs=5e-5)
    assert alpha_max(p, 8, NET) / alpha_min_est(p, 8, NET) == pytest.approx(5.68, abs=0.01)
    vgg = JobProfile(stages=(Stage(k=8, pf_s=0.030, pb_s=0.060, h_B=576 * MB),))
    assert alpha_min_est(vgg, 8, NET) == pytest.approx(0.0934, abs=5e-5)
    assert alpha_of_shape(vgg, (4, 4), 8, NET) == pytest.approx(6.541, abs=5e-4)
    assert alpha_max(vgg, 8, NET) == pytest.approx(6.541, abs=5e-4)


def test_alpha_semantics_on_random_jobs():
    rng = random.Random(5)
    for _ in range(60):
        p = random_job(rng)
        amin, amax = alpha_min_est(p, 8, NET), alpha_max(p, 8, NET)
        assert amax >= amin - 1e-12
        spread = alpha_of_shape(p, tuple(sorted((c for _, c in random_caps(rng, p.num_gpus)),
                                                reverse=True)), 8, NET)
        assert amin <= spread + 1e-12  # one server is never slower than a spread placement
    single = JobProfile(stages=(Stage(k=1, pf_s=0.012, pb_s=0.024, h_B=99 * MB),))
    assert alpha_min_est(single, 8, NET) == pytest.approx(0.036)
    assert alpha_max(single, 8, NET) == pytest.approx(0.036)


def test_profile_json_round_trip_and_attrs_lookup():
    p = synthetic_profiles()["gpt-6.7b/pp4x2"]
    q = JobProfile.from_json(json.loads(json.dumps(p.to_json())))
    assert q.num_gpus == p.num_gpus
    assert alpha_min_est(q, 8) == pytest.approx(alpha_min_est(p, 8))
    spec = JobSpec(job_id="x", submit_time_s=0, num_gpus=8, duration_s=1,
                   attrs={"asrpt_stages": p.to_json()})
    assert profile_of(spec) == q
    assert profile_of(spec.model_copy(update={"num_gpus": 4})) is None  # GPU count mismatch
    named = JobSpec(job_id="y", submit_time_s=0, num_gpus=8, duration_s=1,
                    attrs={"asrpt_profile": "gpt-6.7b/pp4x2"})
    assert profile_of(named) == p


# ===================================================================== 7.4 virtual SRPT
def brute_force_total_completion(jobs: list[tuple[str, int, int]]) -> float:
    """Exhaustive search over which released job runs between consecutive decision points."""
    releases = sorted({r for _, r, _ in jobs})

    @cache
    def best(t: float, remaining: tuple[float, ...]) -> float:
        rem = list(remaining)
        todo = [i for i, x in enumerate(rem) if x > 0]  # zero sizes are counted apart
        if not todo:
            return 0.0
        avail = [i for i in todo if jobs[i][1] <= t]
        nxt = min((r for r in releases if r > t), default=math.inf)
        if not avail:
            return best(nxt, remaining)
        out = math.inf
        for i in avail:
            run = min(rem[i], nxt - t)
            new = list(rem)
            new[i] -= run
            done = t + run if new[i] == 0 else 0.0
            out = min(out, done + best(t + run, tuple(new)))
        return out

    zero = sum(r for _, r, s in jobs if s == 0)
    return zero + best(0.0, tuple(float(s) for _, _, s in jobs))


def test_srpt_test_vector():
    got = srpt_completions([("a", 0, 10), ("b", 1, 2), ("c", 2, 5), ("d", 3, 1), ("e", 20, 0)])
    assert got == [("b", 3), ("d", 4), ("c", 9), ("a", 18), ("e", 20)]


def test_srpt_matches_brute_force_on_random_instances():
    rng = random.Random(2024)
    for _ in range(150):
        n = rng.randint(1, 6)
        jobs = [(f"j{i}", rng.randint(0, 8), rng.randint(0, 6)) for i in range(n)]
        srpt = sum(t for _, t in srpt_completions(jobs))
        assert srpt == pytest.approx(brute_force_total_completion(jobs)), jobs


def test_virtual_srpt_incremental_equals_offline():
    rng = random.Random(9)
    jobs = sorted(((f"j{i}", rng.uniform(0, 50), rng.choice([0.0, rng.uniform(0, 20)]))
                   for i in range(40)), key=lambda j: (j[1], j[0]))
    vm = VirtualSrpt()
    got = []
    t = 0.0
    for jid, rel, size in jobs:
        while t + 3.7 < rel:  # polls between arrivals must not change the result
            t += 3.7
            got.extend(vm.advance_to(t))
        got.extend(vm.add(jid, rel, size))
        t = rel
    got.extend(vm.advance_to(math.inf))
    assert got == approx_nested(srpt_completions(jobs))


# ===================================================================== 7.6 toy schedule
def toy_jobs() -> list[JobSpec]:
    one = JobProfile(stages=(Stage(k=1, pf_s=1 / 3, pb_s=2 / 3),))
    eight = JobProfile(stages=(Stage(k=8, pf_s=1 / 3, pb_s=2 / 3),))
    jobs = [JobSpec(job_id="J1", submit_time_s=0, num_gpus=8, duration_s=100, iterations=100,
                    attrs={"asrpt_stages": eight.to_json(), "group": "big"})]
    for i in range(2, 6):
        jobs.append(JobSpec(job_id=f"J{i}", submit_time_s=i - 1, num_gpus=1, duration_s=10,
                            iterations=10, attrs={"asrpt_stages": one.to_json(), "group": "s"}))
    return jobs


def test_toy_schedule_totals_251_5_against_530_for_fifo():
    cluster = parse_cluster_spec("2x4")
    res = simulate(toy_jobs(), cluster, ASrptPerfect(tau=0.0), restart_overhead_s=0)
    got = {c.spec.job_id: (c.first_start_s, c.finish_s) for c in res.completed}
    assert got == approx_nested({"J1": (105, 205), "J2": (2.25, 12.25), "J3": (3.5, 13.5),
                                 "J4": (4.75, 14.75), "J5": (6.0, 16.0)})
    assert sum(c.jct_s for c in res.completed) == pytest.approx(251.5)
    for pol in ("fifo", Spjf(), WcsSubTime()):
        other = simulate(toy_jobs(), cluster, pol, progress_model="a-srpt", restart_overhead_s=0)
        assert sum(c.jct_s for c in other.completed) == pytest.approx(530)


# ===================================================================== 7.5/7.8 invariants
def small_workload(seed: int, n: int = 40) -> list[JobSpec]:
    rng = random.Random(seed)
    table = synthetic_profiles()
    names = sorted(n for n, p in table.items() if p.num_gpus <= 8)
    jobs = []
    for i in range(n):
        name = rng.choice(names)
        p = table[name]
        iters = rng.randint(1, 400)
        amin = alpha_min_est(p, 4)
        jobs.append(JobSpec(job_id=f"w{i}", submit_time_s=rng.uniform(0, 600),
                            num_gpus=p.num_gpus, duration_s=iters * amin, iterations=iters,
                            attrs={"asrpt_profile": name, "group": f"g{i % 5}"}))
    return jobs


class Recording(ASrpt):
    """A-SRPT that records each start with the virtual completion time it had."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.starts: list[tuple[str, float, float]] = []

    def decide(self, snapshot, now_s):
        acts = super().decide(snapshot, now_s)
        for a in acts:
            self.starts.append((a.job_id, now_s, self.virtual_done_s[a.job_id]))
        return acts


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_start_order_is_virtual_completion_order_and_feasible(seed):
    jobs = small_workload(seed)
    pol = Recording(tau=1.0)
    res = simulate(jobs, parse_cluster_spec("3x4"), pol, restart_overhead_s=0)
    assert len(res.completed) == len(jobs)
    virtual = [v for _, _, v in pol.starts]
    assert virtual == sorted(virtual), "real start order == virtual completion order"
    assert all(t >= v - 1e-9 for _, t, v in pol.starts), "no start before virtual completion"
    for c in res.completed:
        assert c.first_start_s >= c.spec.submit_time_s
        assert c.preemptions == 0
    assert res.stats.by_kind.keys() <= {"start"}, "never preempts, migrates or resizes"


def test_runtime_is_iterations_times_alpha_of_the_placement():
    p = synthetic_profiles()["vgg19/dp4"]
    spec = JobSpec(job_id="v", submit_time_s=0, num_gpus=4, duration_s=100 * alpha_min_est(p, 4),
                   iterations=100, attrs={"asrpt_profile": "vgg19/dp4"})
    cluster = parse_cluster_spec("2x4")
    view = JobView(spec=spec, state=JobState.RUNNING)
    world = AsrptProgress()
    split = Placement.of({"node-1": [0, 1], "node-2": [0, 1]})
    one = Placement.of({"node-1": [0, 1, 2, 3]})
    assert world.rate(view, one, [], cluster) == pytest.approx(1.0)
    runtime = spec.duration_s / world.rate(view, split, [], cluster)
    assert runtime == pytest.approx(100 * alpha_of_shape(p, (2, 2), 4, Network()))


def test_asrpt_is_deterministic():
    jobs = small_workload(4)
    runs = [simulate(jobs, parse_cluster_spec("3x4"), ASrpt(), restart_overhead_s=0)
            for _ in range(2)]
    a, b = ([(c.spec.job_id, c.first_start_s, c.finish_s) for c in r.completed] for r in runs)
    assert a == b


# ===================================================================== 7.7 COMM_HEAVY
def snapshot_with(cluster_spec: str, running: dict[str, dict[str, list[int]]],
                  pending: list[JobSpec], now: float) -> ClusterSnapshot:
    cluster = parse_cluster_spec(cluster_spec)
    views = []
    for jid, alloc in running.items():
        n = sum(len(g) for g in alloc.values())
        views.append(JobView(spec=JobSpec(job_id=jid, submit_time_s=0, num_gpus=n,
                                          duration_s=1e6), state=JobState.RUNNING,
                             placement=Placement.of(alloc), first_start_s=0))
    views += [JobView(spec=s) for s in pending]
    return ClusterSnapshot(now_s=now, cluster=cluster, jobs=tuple(views))


def perfect_job(job_id: str, profile: str, iters: int, submit: float = 0.0) -> JobSpec:
    p = synthetic_profiles()[profile]
    return JobSpec(job_id=job_id, submit_time_s=submit, num_gpus=p.num_gpus,
                   duration_s=iters * alpha_min_est(p, 4), iterations=iters,
                   attrs={"asrpt_profile": profile, "group": job_id})


def decide_at_virtual_completion(pol, cluster_spec, running, job):
    """Let ``job`` arrive at 0, then run the cycle at its virtual completion time."""
    pol.decide(snapshot_with(cluster_spec, running, [job], 0.0), 0.0)
    t = pol.next_wakeup_s(snapshot_with(cluster_spec, running, [job], 0.0), 0.0)
    assert t is not None and t > 0
    return pol.decide(snapshot_with(cluster_spec, running, [job], t), t)


def test_non_heavy_job_takes_least_free_servers():
    # node-1 has 1 free GPU, node-2 three, node-3 four: a 1-GPU job goes to node-1
    running = {"r1": {"node-1": [0, 1, 2]}, "r2": {"node-2": [0]}}
    acts = decide_at_virtual_completion(ASrptPerfect(), "3x4", running,
                                        perfect_job("s", "resnet152/dp1", 10))
    assert [a.job_id for a in acts] == ["s"]
    assert acts[0].placement.nodes == ("node-1",)


def test_comm_heavy_job_consolidates_on_most_free_server():
    running = {"r1": {"node-1": [0, 1, 2]}, "r2": {"node-2": [0]}}
    acts = decide_at_virtual_completion(ASrptPerfect(), "3x4", running,
                                        perfect_job("v", "vgg19/dp4", 10))
    assert len(acts) == 1 and acts[0].placement.as_dict == {"node-3": (0, 1, 2, 3)}


def test_comm_heavy_job_waits_blocking_until_deadline_then_starts():
    # every node has 2 free GPUs: a 4-GPU VGG job can only be split (alpha 85x the minimum)
    running = {"r1": {"node-1": [0, 1]}, "r2": {"node-2": [0, 1]}}
    v = perfect_job("v", "vgg19/dp4", 1000)
    small = perfect_job("s", "resnet152/dp1", 1, submit=0.0)
    pol = ASrptPerfect(tau=2.0)
    snap = snapshot_with("2x4", running, [v], 0.0)
    # v completes in the virtual machine at t_v; s arrives after that
    t_v = 4 / 8 * 1000 * alpha_min_est(synthetic_profiles()["vgg19/dp4"], 4)
    assert pol.decide(snap, 0.0) == []
    snap = snapshot_with("2x4", running, [v], t_v)
    assert pol.decide(snap, t_v) == [], "comm-heavy, split placement: it waits"
    deadline = pol._delays["v"].deadline_s
    assert deadline == pytest.approx(t_v + 2.0 * t_v)
    assert pol.next_wakeup_s(snap, t_v) == pytest.approx(deadline)
    small2 = small.model_copy(update={"submit_time_s": t_v + 1})
    snap = snapshot_with("2x4", running, [v, small2], t_v + 1)
    assert pol.decide(snap, t_v + 1) == [], "blocking: the small job queued behind v waits"
    snap = snapshot_with("2x4", running, [v, small2], deadline)
    acts = pol.decide(snap, deadline)
    assert [a.job_id for a in acts][:1] == ["v"]
    assert len(acts[0].placement.nodes) == 2, "deadline: starts with the current placement"


def test_delayed_job_starts_when_placement_improves_and_tau0_starts_at_once():
    running = {"r1": {"node-1": [0, 1]}, "r2": {"node-2": [0, 1]}}
    v = perfect_job("v", "vgg19/dp4", 1000)
    t_v = 4 / 8 * 1000 * alpha_min_est(synthetic_profiles()["vgg19/dp4"], 4)
    pol = ASrptPerfect(tau=2.0)
    pol.decide(snapshot_with("2x4", running, [v], 0.0), 0.0)
    assert pol.decide(snapshot_with("2x4", running, [v], t_v), t_v) == []
    freed = {"r1": {"node-1": [0, 1]}}  # r2 finished: node-2 is empty
    acts = pol.decide(snapshot_with("2x4", freed, [v], t_v + 5), t_v + 5)
    assert len(acts) == 1 and acts[0].placement.nodes == ("node-2",)
    now0 = ASrptPerfect(tau=0.0)
    now0.decide(snapshot_with("2x4", running, [v], 0.0), 0.0)
    acts = now0.decide(snapshot_with("2x4", running, [v], t_v), t_v)
    assert len(acts) == 1 and len(acts[0].placement.nodes) == 2


def test_head_of_line_blocks_and_unseen_jobs_enter_queue_at_release():
    # a 4-GPU head that does not fit blocks a 1-GPU job behind it (no backfilling)
    running = {"r1": {"node-1": [0, 1, 2]}}
    pol = ASrpt(tau=0.0)  # empty forest: every job is unseen, predicted 0, virtual size 0
    jobs = [perfect_job("big", "vgg19/dp4", 10, submit=0), perfect_job("s", "resnet152/dp1", 1,
                                                                         submit=0)]
    acts = pol.decide(snapshot_with("1x4", running, jobs, 0.0), 0.0)
    assert acts == []
    assert list(pol.queue) == ["big", "s"]
    assert pol.info["big"].predicted_iters == 0 and pol.virtual_done_s["big"] == 0.0


def test_asrpt_never_reads_the_oracle_duration():
    def pending(dur: float) -> list[JobSpec]:
        return [perfect_job("a", "bert-large/dp2", 50).model_copy(update={"duration_s": dur}),
                perfect_job("b", "vgg19/dp1", 10).model_copy(update={"duration_s": dur * 7})]

    outs = []
    for dur in (10.0, 1e5):
        rf = RandomForestPredictor(refit_min=1)
        rf.observe_many([("a", "default", 40.0), ("b", "default", 12.0)] * 3)
        pol = ASrpt(rf, tau=1.0)
        acts = pol.decide(snapshot_with("2x4", {}, pending(dur), 0.0), 0.0)
        outs.append(([a.model_dump() for a in acts],
                     {j: (i.virtual_size_s, i.predicted_iters) for j, i in pol.info.items()}))
    assert outs[0] == outs[1]
    assert outs[0][1]["a"][1] == pytest.approx(40.0)
    assert not ASrpt.clairvoyant and ASrptPerfect.clairvoyant


def test_policy_learns_iterations_from_completions():
    jobs = [perfect_job(f"j{i}", "resnet152/dp1", 100 + i) for i in range(25)]
    jobs = [j.model_copy(update={"attrs": {**j.attrs, "group": "rec"}, "submit_time_s": i * 1.0})
            for i, j in enumerate(jobs)]
    pol = ASrpt(tau=0.0)
    simulate(jobs, parse_cluster_spec("1x4"), pol, restart_overhead_s=0)
    # the run ends with the last completion, so the policy sees all but the last one
    seen = sorted(n for _, _, _, n in pol.observed)
    assert seen == pytest.approx([100 + i for i in range(24)])
    assert pol.predictor.predict("rec", "default") == pytest.approx(112, rel=0.1)


def test_opaque_jobs_run_and_all_variants_are_registered():
    names = registry.names()
    for n in ("a-srpt", "a-srpt-perfect", "a-srpt-mean", "a-srpt-median", "a-srpt-spjf",
              "a-srpt-spwf", "a-srpt-wcs-duration", "a-srpt-wcs-workload", "a-srpt-wcs-subtime"):
        assert n in names
    jobs = [JobSpec(job_id=f"o{i}", submit_time_s=i * 5.0, num_gpus=g, duration_s=30 + i,
                    gpu_type="a100" if i == 3 else None)
            for i, g in enumerate([1, 2, 4, 1, 3])]
    for n in ("a-srpt", "a-srpt-spjf", "a-srpt-wcs-subtime"):
        res = simulate(jobs, parse_cluster_spec("1x4:a100,1x4"), n)
        assert len(res.completed) == len(jobs)


# ===================================================================== 7.11 theorem
def test_theorem_bound_sample_value():
    assert theorem1_bound(1, 0, 2000, 32, 1.0, 1.0, 0.0) == pytest.approx(2 + 2000 / 1968)
    assert theorem1_bound(1, 0, 2000, 32, 1.0, 1.0, 0.0) == pytest.approx(3.016, abs=5e-4)
    assert theorem1_bound(1, 0, 2000, 32, 2.0, 1.0, 0.5) > theorem1_bound(1, 0, 2000, 32, 2.0,
                                                                           1.0, 0.0)
    with pytest.raises(ValueError, match="g_max < G"):
        theorem1_bound(1, 0, 32, 32, 1.0, 1.0, 0.0)


# ===================================================================== 7.9 predictor
def synthetic_records(seed: int, n: int = 1500) -> list[tuple[str, str, float]]:
    """Recurring groups: each group's iterations are drawn around its own value."""
    rng = random.Random(seed)
    centres = {f"g{i}": rng.choice([50, 200, 800, 3000, 12000]) * rng.uniform(0.8, 1.2)
               for i in range(40)}
    users = {g: f"u{i % 7}" for i, g in enumerate(centres)}
    weights = [rng.paretovariate(1.2) for _ in centres]
    out = []
    for _ in range(n):
        g = rng.choices(list(centres), weights)[0]
        out.append((g, users[g], max(1.0, round(rng.gauss(centres[g], 0.1 * centres[g])))))
    return out


def test_random_forest_beats_mean_and_median_on_held_out_recurring_jobs():
    recs = synthetic_records(1)
    errs = {e.predictor: e.mean_abs_error for e in evaluate_split(recs, {
        "rf": RandomForestPredictor(), "mean": MeanPredictor(), "median": MedianPredictor()})}
    assert errs["rf"] < errs["median"] and errs["rf"] < errs["mean"]
    assert errs["rf"] < 0.5 * errs["median"]


def test_unseen_group_predicts_exactly_zero():
    p = RandomForestPredictor()
    p.observe_many(synthetic_records(2, 200))
    assert p.predict("never-seen", "u1") == 0.0
    assert p.predict("g0", "someone-new") >= 0.0
    assert MeanPredictor().predict("x", "y") == 0.0


def test_running_mean_median_and_per_group_variants():
    m, md = MeanPredictor(), MedianPredictor()
    gm = MedianPredictor(per_group=True)
    for g, n in [("a", 1), ("a", 3), ("b", 100), ("a", 2)]:
        for p in (m, md, gm):
            p.observe(g, "u", n)
    assert m.predict("a", "u") == pytest.approx(26.5)
    assert md.predict("a", "u") == pytest.approx(2.5)
    assert gm.predict("a", "u") == pytest.approx(2.0)
    assert gm.predict("zzz", "u") == pytest.approx(2.5)  # unseen group: global value


def test_predictor_persists_across_restarts(tmp_path):
    path = tmp_path / "rf.json"
    recs = synthetic_records(3, 300)
    p = RandomForestPredictor(path)
    p.observe_many(recs)
    before = {g: p.predict(g, u) for g, u, _ in recs[:30]}  # triggers a fit, which saves
    assert path.exists()
    q = RandomForestPredictor(path)  # a restarted scheduler
    assert q.history == p.history
    assert {g: q.predict(g, u) for g, u, _ in recs[:30]} == pytest.approx(before)
    # mean / median persist too, and kinds and versions are checked
    mp = tmp_path / "mean.json"
    m = MeanPredictor(mp)
    m.observe_many(recs[:10])
    assert MeanPredictor(mp).predict("g", "u") == pytest.approx(m.predict("g", "u"))
    with pytest.raises(PredictorStateError, match="field 'kind'"):
        RandomForestPredictor(mp)
    state = json.loads(path.read_text())
    state["version"] = 99
    path.write_text(json.dumps(state))
    with pytest.raises(PredictorStateError, match="field 'version' = 99"):
        RandomForestPredictor(path)
    path.write_text('{"format": "other"}')
    with pytest.raises(PredictorStateError, match="field 'format'"):
        RandomForestPredictor(path)


def test_policy_restart_with_predictor_file_predicts_the_same(tmp_path):
    path = tmp_path / "asrpt.json"
    jobs = [perfect_job(f"j{i}", "resnet152/dp1", 100 + (i % 3)) for i in range(30)]
    jobs = [j.model_copy(update={"attrs": {**j.attrs, "group": f"g{i % 3}"},
                                 "submit_time_s": i * 1.0}) for i, j in enumerate(jobs)]
    pol = ASrpt(RandomForestPredictor(path, refit_min=5), tau=0.0)
    simulate(jobs, parse_cluster_spec("1x4"), pol, restart_overhead_s=0)
    pol.predictor.fit()
    expect = pol.predictor.predict("g1", "default")
    assert expect == pytest.approx(101, rel=0.05)
    again = ASrpt(RandomForestPredictor(path), tau=0.0)
    assert again.predictor.predict("g1", "default") == pytest.approx(expect)


# ===================================================================== workload
def test_workload_is_seeded_documented_and_consistent(tmp_path):
    cfg = workload.WorkloadConfig(base="muri", seed=3)
    a, b = workload.build(cfg), workload.build(cfg)
    assert [j.model_dump() for j in a.jobs] == [j.model_dump() for j in b.jobs]
    table = synthetic_profiles()
    for j in a.jobs[:200]:
        p = table[j.attrs["asrpt_profile"]]
        assert p.num_gpus == j.num_gpus
        assert j.duration_s == pytest.approx(j.iterations * alpha_min_est(p, 8))
        assert profile_of(j) == p
    assert len(a.history()) == a.split == int(0.8 * len(a.jobs))
    js = a.job_set(100, 10)
    assert js[0].submit_time_s == 0 and len(js) == 100
    out = tmp_path / "w.jsonl"
    hist = tmp_path / "h.json"
    assert workload.main(["--out", str(out), "--seed", "3", "--base", "muri", "--jobs", "50",
                          "--history-out", str(hist)]) == 0
    assert len(out.read_text().splitlines()) == 50
    assert len(RandomForestPredictor(hist).history) == a.split


def test_workload_single_gpu_share_override():
    w = workload.build(workload.WorkloadConfig(base="muri", seed=1, single_gpu_share=0.0))
    assert all(j.num_gpus > 1 for j in w.jobs)
    w = workload.build(workload.WorkloadConfig(base="muri", seed=1, single_gpu_share=1.0))
    assert all(j.num_gpus == 1 for j in w.jobs)


def test_pick_servers_orders_and_best_fit_baseline_packs():
    from slurm_sched.policy.a_srpt import pick_servers

    free = {"a": [0, 1, 2], "b": [0], "c": [0, 1, 2, 3], "d": [0, 1]}
    assert pick_servers(free, 5, "most") == {"c": 4, "a": 1}
    assert pick_servers(free, 5, "least") == {"b": 1, "d": 2, "a": 2}
    assert pick_servers(free, 2, "best-fit") == {"d": 2}
    assert pick_servers(free, 5, "best-fit") == {"c": 4, "a": 1}
    assert pick_servers(free, 4, "most", unit=2) == {"c": 4}
    assert pick_servers(free, 11, "most") is None
    running = {"r1": {"node-1": [0, 1, 2]}}
    job = perfect_job("s", "resnet152/dp1", 10)
    spread = Spjf().decide(snapshot_with("2x4", running, [job], 0.0), 0.0)
    packed = Spjf(placement="best-fit").decide(snapshot_with("2x4", running, [job], 0.0), 0.0)
    assert spread[0].placement.nodes == ("node-2",) and packed[0].placement.nodes == ("node-1",)


def test_pick_servers_matches_sorting_every_server():
    """pick_servers scans counts per value; the order is the plain sort's."""
    from slurm_sched.policy.a_srpt import pick_servers

    def reference(free, num_gpus, order, unit):
        nodes = [(len(g) // unit * unit, i, n) for i, (n, g) in enumerate(free.items())]
        nodes = [t for t in nodes if t[0] > 0]
        if order == "best-fit":
            fits = [t for t in nodes if t[0] >= num_gpus]
            if fits:
                return {min(fits, key=lambda t: (t[0], t[1]))[2]: num_gpus}
            order = "most"
        nodes.sort(key=lambda t: (-t[0], t[1]) if order == "most" else (t[0], t[1]))
        need, out = num_gpus, {}
        for avail, _, n in nodes:
            if need == 0:
                break
            out[n] = min(avail, need)
            need -= out[n]
        return out if need == 0 else None

    rng = random.Random(11)
    for _ in range(3000):
        gpn = rng.choice([1, 2, 4, 8])
        free = {f"s{k}": sorted(rng.sample(range(gpn), rng.randint(0, gpn)))
                for k in range(rng.randint(0, 8))}
        args = (rng.randint(1, 3 * gpn), rng.choice(["most", "least", "best-fit"]),
                rng.choice([1, 2, 4]))
        got = pick_servers(free, *args)
        want = reference(free, *args)
        assert got == want and (got is None or list(got) == list(want))
