"""SafePolicy: minimum run time, restart budget, loop pinning, dependent actions, transparency."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from slurm_sched.controller import Controller
from slurm_sched.model import (
    Action,
    ClusterSnapshot,
    JobState,
    JobView,
    Migrate,
    Placement,
    Preempt,
    Reconfigure,
    Resume,
    Share,
    Start,
    Suspend,
    parse_cluster_spec,
)
from slurm_sched.policy import registry
from slurm_sched.policy.base import Policy
from slurm_sched.service.config import SafetyConfig
from slurm_sched.service.safety import TRANSPARENT_ATTRIBUTES, SafePolicy
from slurm_sched.sim.backend import SimulatedBackend
from slurm_sched.sim.clock import SimulatedClock
from slurm_sched.traces import bundled, read_trace
from tests.builders import job, place
from tests.invariants import CheckingBackend

CLUSTER = parse_cluster_spec("2x4")


class Scripted(Policy):
    """Returns the actions it is given, whatever the snapshot (records what it saw)."""

    name = "scripted"
    shares_gpus = True
    max_jobs_per_gpu = 3
    elastic = True
    progress_model = "identity"

    def __init__(self) -> None:
        self.next: list[Action] = []
        self.wake: float | None = None

    def decide(self, snapshot: ClusterSnapshot, now_s: float) -> list[Action]:
        out, self.next = self.next, []
        return out

    def next_wakeup_s(self, snapshot: ClusterSnapshot, now_s: float) -> float | None:
        return self.wake


def running(jid: str, gpus: dict[str, list[int]], *, first_start: float = 0.0, n: int = 0,
            state: JobState = JobState.RUNNING, preemptions: int = 0) -> JobView:
    p = Placement.of(gpus)
    return JobView(spec=job(jid, 0, n or p.num_gpus, 10_000), state=state, placement=p,
                   first_start_s=first_start, preemptions=preemptions)


def pending(jid: str, gpus: int) -> JobView:
    return JobView(spec=job(jid, 0, gpus, 10_000))


def snap(now: float, *jobs: JobView) -> ClusterSnapshot:
    return ClusterSnapshot(now_s=now, cluster=CLUSTER, jobs=tuple(jobs))


def limits(**kw: float) -> SafetyConfig:
    base = {"min_runtime_before_preempt_s": 300.0, "max_preemptions_per_cycle": 8,
            "loop_preemptions": 4, "loop_window_s": 3600.0}
    base.update(kw)
    return SafetyConfig(**base)


def decide(safe: SafePolicy, inner: Scripted, s: ClusterSnapshot,
           actions: Sequence[Action]) -> list[Action]:
    inner.next = list(actions)
    return safe.decide(s, s.now_s)


A = {"node-1": [0, 1]}
B = {"node-1": [2, 3]}


def test_copies_the_inner_policy_class_attributes():
    inner = Scripted()
    safe = SafePolicy(inner, limits())
    for attr in TRANSPARENT_ATTRIBUTES:
        assert getattr(safe, attr) == getattr(inner, attr), attr
    tiresias = SafePolicy(registry.create("tiresias"), limits())
    assert tiresias.name == "tiresias" and tiresias.paper.startswith("Gu")
    assert not tiresias.shares_gpus and tiresias.max_jobs_per_gpu == 1


def test_min_runtime_refuses_a_young_run_and_the_start_that_needed_its_gpus():
    inner = Scripted()
    safe = SafePolicy(inner, limits(), clock_start_s=0.0)
    # t=0: job a starts through SafePolicy: its run begins now
    out = decide(safe, inner, snap(0, pending("a", 2)), [Start(job_id="a", placement=place(**A))])
    assert [x.job_id for x in out] == ["a"] and safe.run_start_s("a") == 0.0
    # t=100: the policy wants a out for b: refused (100 s < 300 s), and b's start with it
    s = snap(100, running("a", A, first_start=0), pending("b", 2), pending("c", 2))
    acts = [Preempt(job_id="a"), Start(job_id="b", placement=place(**A)),
            Start(job_id="c", placement=place(**B))]
    out = decide(safe, inner, s, acts)
    assert out == [acts[2]], "c uses free GPUs: kept"
    reasons = dict((a.job_id, why) for a, why in safe.refusals)
    assert set(reasons) == {"a", "b"}
    assert "100 s old" in reasons["a"] and "300 s" in reasons["a"]
    assert "node-1:0" in reasons["b"] and "job a" in reasons["b"]
    # the wrapper asks for a cycle when the restart becomes allowed
    assert safe.next_wakeup_s(s, 100) == 300.0
    inner.wake = 250.0
    assert safe.next_wakeup_s(s, 100) == 250.0, "the policy's own earlier timer wins"
    inner.wake = None
    assert "protected from restarts for 200 s" in safe.explain(s, "a")
    # t=300: allowed
    s = snap(300, running("a", A, first_start=0), running("c", B), pending("b", 2))
    acts = [Preempt(job_id="a"), Start(job_id="b", placement=place(**A))]
    assert decide(safe, inner, s, acts) == acts and safe.refusals == []
    assert safe.run_start_s("b") == 300.0 and safe.run_start_s("a") is None


def test_job_running_before_the_daemon_started_is_protected_from_the_clock_start():
    inner = Scripted()
    safe = SafePolicy(inner, limits())  # clock starts at the first cycle
    s = snap(1000, running("old", A, first_start=10), pending("p", 2))
    acts = [Preempt(job_id="old"), Start(job_id="p", placement=place(**A))]
    assert decide(safe, inner, s, acts) == []
    assert safe.run_start_s("old") == 1000.0
    # a job that first started after the clock start: its first start is the run start bound
    s = snap(1200, running("old", A, first_start=10), running("new", B, first_start=1100))
    decide(safe, inner, s, [])
    assert safe.run_start_s("new") == 1100.0
    # a replay that trusts the first starts passes -inf
    trusting = SafePolicy(inner, limits(), clock_start_s=float("-inf"))
    s = snap(1000, running("old", A, first_start=10), pending("p", 2))
    assert decide(trusting, inner, s, acts) == acts


def test_budget_keeps_the_first_restarts_in_the_policys_order():
    inner = Scripted()
    safe = SafePolicy(inner, limits(max_preemptions_per_cycle=2), clock_start_s=-1e9)
    s = snap(5000, running("a", {"node-1": [0]}), running("b", {"node-1": [1]}),
             running("c", {"node-2": [0]}), pending("p", 1), pending("q", 1), pending("r", 1))
    acts = [Preempt(job_id="c"), Preempt(job_id="a"), Preempt(job_id="b"),
            Start(job_id="p", placement=place(**{"node-2": [0]})),
            Start(job_id="q", placement=place(**{"node-1": [0]})),
            Start(job_id="r", placement=place(**{"node-1": [1]}))]
    out = decide(safe, inner, s, acts)
    assert out == [acts[0], acts[1], acts[3], acts[4]]
    assert [(a.job_id, why.split(" ")[0]) for a, why in safe.refusals] == [("b", "restart"),
                                                                           ("r", "needs")]
    assert "budget of 2 per cycle" in safe.refusals[0][1]
    # budget 0: no restart at all, but starts on free GPUs go through
    none = SafePolicy(inner, limits(max_preemptions_per_cycle=0), clock_start_s=-1e9)
    s = snap(5000, running("a", {"node-1": [0]}), pending("p", 1), pending("q", 1))
    acts = [Preempt(job_id="a"), Start(job_id="p", placement=place(**{"node-1": [0]})),
            Start(job_id="q", placement=place(**{"node-2": [3]}))]
    assert decide(none, inner, s, acts) == [acts[2]]


def test_loop_detection_pins_a_job_until_it_ends():
    inner = Scripted()
    safe = SafePolicy(inner, limits(min_runtime_before_preempt_s=0, loop_preemptions=3,
                                    loop_window_s=1000), clock_start_s=0)
    t = 0.0
    for k in range(3):  # preempt, restart, preempt, restart, preempt: 3 restarts in 1000 s
        t += 10
        s = snap(t, running("a", A, preemptions=k))
        assert decide(safe, inner, s, [Preempt(job_id="a")]) == [Preempt(job_id="a")]
        t += 10
        s = snap(t, JobView(spec=job("a", 0, 2, 10_000), preemptions=k + 1))
        assert decide(safe, inner, s, [Start(job_id="a", placement=place(**A))])
    assert safe.is_pinned("a")
    # pinned: neither preempted nor moved nor reconfigured, even long after the window
    t += 5000
    s = snap(t, running("a", A, preemptions=3), pending("b", 2))
    for act in (Preempt(job_id="a"), Migrate(job_id="a", placement=place(**B)),
                Reconfigure(job_id="a", placement=place(**{"node-2": [0]}))):
        assert decide(safe, inner, s, [act, Start(job_id="b", placement=place(**A))]) == []
        assert safe.refusals[0][1].startswith("pinned: restarted 3 times within 1000 s")
        assert "job a" in safe.refusals[1][1]
    assert "safety: pinned" in safe.explain(s, "a")
    # other actions on it go through (suspend/resume keep its GPUs)
    assert decide(safe, inner, s, [Suspend(job_id="a")]) == [Suspend(job_id="a")]
    # it ends: the pin is forgotten (a new job may reuse the id)
    decide(safe, inner, snap(t + 1, pending("b", 2)), [])
    assert not safe.is_pinned("a")


def test_restarts_spread_wider_than_the_window_do_not_pin():
    inner = Scripted()
    safe = SafePolicy(inner, limits(min_runtime_before_preempt_s=0, loop_preemptions=2,
                                    loop_window_s=100), clock_start_s=0)
    for t in (0.0, 150.0, 300.0, 450.0):
        s = snap(t, running("a", A))
        assert decide(safe, inner, s, [Migrate(job_id="a", placement=place(**B))])
        s = snap(t + 1, running("a", B))
        decide(safe, inner, s, [])
    assert not safe.is_pinned("a")


def test_refused_migration_keeps_the_job_and_blocks_its_old_and_new_gpus():
    inner = Scripted()
    safe = SafePolicy(inner, limits(), clock_start_s=0)
    decide(safe, inner, snap(0, pending("a", 2)), [Start(job_id="a", placement=place(**A))])
    s = snap(10, running("a", A), pending("b", 2))
    acts = [Migrate(job_id="a", placement=place(**B)), Start(job_id="b", placement=place(**A)),
            Preempt(job_id="a")]
    assert decide(safe, inner, s, acts) == []
    assert [a.job_id for a, _ in safe.refusals] == ["a", "b", "a"]
    assert "earlier action on job a was refused" in safe.refusals[2][1]


def test_a_move_onto_gpus_a_refused_job_keeps_is_refused_and_keeps_its_own_gpus():
    inner = Scripted()
    safe = SafePolicy(inner, limits(), clock_start_s=0)
    decide(safe, inner, snap(900, pending("young", 2)),
           [Start(job_id="young", placement=place(**A))])
    s = snap(1000, running("young", A), running("old", B, first_start=0), pending("p", 2))
    acts = [Preempt(job_id="young"), Migrate(job_id="old", placement=place(**A)),
            Start(job_id="p", placement=place(**B))]
    assert decide(safe, inner, s, acts) == []
    assert [a.job_id for a, _ in safe.refusals] == ["young", "old", "p"]
    assert "job old" in safe.refusals[2][1]


def test_elastic_start_share_suspend_resume_are_not_restarts():
    inner = Scripted()
    safe = SafePolicy(inner, limits(max_preemptions_per_cycle=0), clock_start_s=0)
    s = snap(1, running("a", A), running("s", B, state=JobState.SUSPENDED), pending("e", 4),
             pending("sh", 1))
    acts = [Reconfigure(job_id="e", placement=place(**{"node-2": [0, 1, 2]})),
            Share(job_id="sh", placement=place(**{"node-1": [0]}), with_jobs=("a",)),
            Suspend(job_id="a"), Resume(job_id="s")]
    assert decide(safe, inner, s, acts) == acts
    assert safe.run_start_s("e") == 1 and safe.restarts_allowed == 0
    # a suspended job's preemption is a restart (it frees GPUs held by a checkpointed run)
    assert decide(safe, inner, s, [Preempt(job_id="s")]) == []


def test_decide_does_not_touch_the_snapshot_and_delegates_explain():
    inner = Scripted()
    safe = SafePolicy(inner, limits(), clock_start_s=0)
    s = snap(3, running("a", A), pending("b", 2))
    before = s.model_dump()
    decide(safe, inner, s, [Preempt(job_id="a")])
    assert s.model_dump() == before
    assert safe.explain(s, "b") == inner.explain(s, "b")


# ------------------------------------------------------------------ simulation
def _run(policy: Policy, jobs) -> tuple[int, int, CheckingBackend]:
    sim = SimulatedBackend(parse_cluster_spec("4x4"), jobs, restart_overhead_s=30,
                           max_jobs_per_gpu=1)
    checked = CheckingBackend(sim)
    Controller(checked, policy, SimulatedClock(sim)).run()
    done = [c.spec.job_id for c in sim.completed()]
    assert sorted(done) == sorted(j.job_id for j in jobs), "every job finishes exactly once"
    return sum(c.preemptions for c in sim.completed()), len(done), checked


@pytest.mark.parametrize("name", ["tiresias", "tiresias-3q", "srtf"])
def test_simulated_trace_fewer_preemptions_every_job_finishes(name):
    jobs = read_trace(bundled("tiresias/60_job.csv"))
    bare, n, _ = _run(registry.create(name), jobs)
    safe = SafePolicy(registry.create(name), SafetyConfig(min_runtime_before_preempt_s=120))
    guarded, m, checked = _run(safe, jobs)
    assert n == m == 60
    assert bare >= 3, "the bare policy preempts on this trace"
    assert guarded < bare
    assert safe.restarts_refused > 0
    assert not checked.failed_actions, "no dropped restart leaves a failing action behind"


def test_simulated_thrashing_policy_is_pinned():
    """A policy that swaps two jobs at every cycle: the loop limit ends the ping-pong."""

    class PingPong(Policy):
        name = "ping-pong"

        def decide(self, snapshot: ClusterSnapshot, now_s: float) -> list[Action]:
            run = [j for j in snapshot.running]
            wait = [j for j in snapshot.pending]
            if not wait:
                return []
            if not run:
                return [Start(job_id=wait[0].job_id, placement=place(**{"node-1": [0]}))]
            return [Preempt(job_id=run[0].job_id),
                    Start(job_id=wait[0].job_id, placement=place(**{"node-1": [0]}))]

        def next_wakeup_s(self, snapshot: ClusterSnapshot, now_s: float) -> float | None:
            return now_s + 60 if snapshot.pending else None

    jobs = [job("x", 0, 1, 2000), job("y", 0, 1, 2000)]
    lim = SafetyConfig(min_runtime_before_preempt_s=0, loop_preemptions=3, loop_window_s=3600)
    sim = SimulatedBackend(parse_cluster_spec("1x1"), jobs, restart_overhead_s=10)
    safe = SafePolicy(PingPong(), lim)
    Controller(sim, safe, SimulatedClock(sim)).run()
    assert len(sim.completed()) == 2
    assert sum(c.preemptions for c in sim.completed()) <= 2 * 3
    assert safe.restarts_refused > 0


@pytest.mark.parametrize(
    "name", ["tiresias", "srtf", "gandiva-fair", "pollux", "muri-l", "antman", "sia", "rubick"]
)
def test_wrapped_policies_finish_every_job_without_failed_actions(name):
    """Preemptive, time-slicing (suspend/migrate), elastic (reconfigure) and sharing policies
    under tight limits: every job finishes once and no kept action fails in the backend."""
    import random
    from collections import Counter

    from slurm_sched.perf import registry as perf_registry

    tight = [SafetyConfig(min_runtime_before_preempt_s=20, max_preemptions_per_cycle=1,
                          loop_preemptions=2, loop_window_s=500),
             SafetyConfig(max_preemptions_per_cycle=0), SafetyConfig()]
    for seed in range(6):
        rng = random.Random(seed)
        jobs = [job(f"j{i}", rng.randint(0, 300), rng.choice([1, 1, 2, 3, 4]),
                    rng.randint(1, 400)) for i in range(rng.randint(3, 14))]
        safe = SafePolicy(registry.create(name), tight[seed % 3])
        cap = max(1, safe.max_jobs_per_gpu)
        sim = SimulatedBackend(parse_cluster_spec(rng.choice(["2x4", "1x8,2x2", "3x4"])), jobs,
                               restart_overhead_s=rng.choice([0, 7]), max_jobs_per_gpu=cap,
                               progress=perf_registry.create(safe.progress_model or "identity"))
        checked = CheckingBackend(sim, max_jobs_per_gpu=cap, exact_gangs=not safe.elastic)
        Controller(checked, safe, SimulatedClock(sim)).run()
        done = Counter(c.spec.job_id for c in sim.completed())
        assert set(done) == {j.job_id for j in jobs} and set(done.values()) == {1}, seed
        assert not checked.failed_actions, (seed, checked.failed_actions[:2])
