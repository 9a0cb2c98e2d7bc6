"""Every registered policy, end to end on the real mini Slurm cluster, through the same code.

For each name in ``registry.names()`` (so policies added later are covered with no new test code)
30 short ``checkpointed_sleep`` jobs (1-4 s, 1/2/4/8 GPUs) are submitted with hints via
``sbatch``; ``Controller(SlurmBackend, policy, WallClock)`` runs until all are done. Checked:
each job ran to completion exactly once, on the nodes the policy's last Start/Migrate chose, and
no GPU was ever held by two jobs at once. Plus dedicated tests of Share (two jobs on one GPU
index through gres/shard), suspend/resume and preempt/requeue with checkpoint resume.
"""

from __future__ import annotations

import os
import random
import re
import time
from pathlib import Path

import pytest

from slurm_sched.clock import WallClock
from slurm_sched.controller import Controller
from slurm_sched.model import (
    ActionResult,
    JobSpec,
    JobState,
    Placement,
    Preempt,
    Resume,
    Share,
    Start,
    Suspend,
    parse_cluster_spec,
)
from slurm_sched.policy import registry
from slurm_sched.sim.backend import SimulatedBackend
from slurm_sched.sim.clock import SimulatedClock
from slurm_sched.slurm.backend import SlurmBackend
from slurm_sched.slurm.cluster import MiniCluster
from tests.contract.slurm_jobs import (
    STEP_S,
    JobDef,
    assert_resumes_in_order,
    cancel_and_wait,
    job_log,
    squeue_jobs,
    submit_sleep_job,
    wait_for,
)

NUM_JOBS = 30
DEADLINE_S = 150.0
MAX_PREEMPTS_PER_JOB = 3
#: a policy that needs more simulated time than this for the workload (a round-based policy such
#: as Sia with 60 s rounds, made for hour-long jobs) runs with LIVE_TIME_OPTIONS instead: the
#: test jobs last seconds, so the rounds are shortened the same way for every such policy
MAX_SIM_MAKESPAN_S = 120.0
LIVE_TIME_OPTIONS = {"round_s": 5.0, "interval_s": 5.0}
#: SLURM_SCHED_TEST_POLICIES=fifo,tiresias runs only those (default: every registered policy)
POLICIES = [
    p
    for p in registry.names()
    if not os.environ.get("SLURM_SCHED_TEST_POLICIES")
    or p in os.environ["SLURM_SCHED_TEST_POLICIES"].split(",")
]


def workload(seed: int = 7, shard_small: bool = False) -> list[JobDef]:
    """30 jobs of 1-4 s (mostly 1-2 s), 1/2/4/8 GPUs (mostly small; two 8-GPU two-node gangs).

    ``shard_small``: 1-GPU jobs ask for gres/shard, so that a sharing policy can co-locate them.
    """
    rng = random.Random(seed)
    gpus = [1] * 13 + [2] * 9 + [4] * 6 + [8] * 2
    rng.shuffle(gpus)
    return [
        JobDef(
            gpus=g,
            duration_s=float(rng.choice((1, 1, 1, 2, 2, 3, 4))),
            shard=shard_small and g == 1,
        )
        for g in gpus
    ]


class Recorder:
    """Controller hook: the policy's placements, and GPU occupancy as Slurm reports it.

    Stops the clock (so the run ends at once and the test fails) when the policy restarts jobs
    far more often than it could usefully do (a preempt/start loop).
    """

    def __init__(self, backend: SlurmBackend, clock: WallClock | None = None) -> None:
        self.backend = backend
        self.clock = clock
        self.placed: dict[str, Placement] = {}
        self.over_allocated: list[str] = []
        self.failed: list[ActionResult] = []
        self.preempts = 0

    @property
    def thrashing(self) -> bool:
        return self.preempts > MAX_PREEMPTS_PER_JOB * NUM_JOBS

    def __call__(self, now_s: float, results: list[ActionResult]) -> None:
        for r in results:
            if not r.ok:
                self.failed.append(r)
            elif r.action.kind in ("start", "share", "migrate", "reconfigure"):
                self.placed[r.action.job_id] = r.action.placement  # type: ignore[union-attr]
            elif r.action.kind == "preempt":
                self.preempts += 1
        if self.thrashing and self.clock is not None:
            self.clock.stop()
        holders: dict[tuple[str, int], list[tuple[str, int]]] = {}
        for job in self.backend.slurm_jobs.values():
            if job.holds_resources:
                for a in job.alloc:
                    for g in a.gpus:
                        holders.setdefault((a.node, g), []).append((job.job_id, a.shards))
        cap = self.backend.max_jobs_per_gpu
        for slot, jobs in holders.items():
            exclusive = any(shards == 0 for _, shards in jobs)
            if len(jobs) > (1 if exclusive else cap):
                self.over_allocated.append(f"t={now_s:.1f} {slot}: {jobs}")


def simulated_makespan(
    policy_name: str, jobs: list[JobDef], options: dict[str, object] | None = None
) -> float:
    """The same workload and policy in the simulator: how long it takes there."""
    specs = [
        JobSpec(
            job_id=str(i),
            submit_time_s=0.0,
            num_gpus=d.gpus,
            duration_s=d.duration_s,
            iterations=max(1, round(d.duration_s / STEP_S)),
            num_cpus=1,
        )
        for i, d in enumerate(jobs)
    ]
    backend = SimulatedBackend(parse_cluster_spec("2x4:a100,2x4:v100"), specs, restart_overhead_s=0)
    policy = registry.create(policy_name, options)
    Controller(backend, policy, SimulatedClock(backend)).run(until_s=3600)
    return backend.now_s if backend.finished() else float("inf")


@pytest.mark.parametrize("policy_name", POLICIES)
def test_policy_runs_30_jobs_on_slurm(
    policy_name: str, slurm_cluster: MiniCluster, tmp_path: Path
) -> None:
    options: dict[str, object] = {}
    sim_s = simulated_makespan(policy_name, workload())
    if sim_s > MAX_SIM_MAKESPAN_S:
        takes = registry.info(policy_name).options
        options = {k: v for k, v in LIVE_TIME_OPTIONS.items() if k in takes}
        sim_s = simulated_makespan(policy_name, workload(), options)
    assert sim_s <= MAX_SIM_MAKESPAN_S, (
        f"{policy_name} (options {options}) needs {sim_s:.0f} s for this 30-job workload in the "
        f"simulator; give it an option in LIVE_TIME_OPTIONS that shortens its rounds"
    )
    deadline_s = max(DEADLINE_S, 3 * sim_s + 60)
    policy = registry.create(policy_name, options)
    # the policy's own sharing capacity C (Muri and Gandiva_fair: 4; the mini cluster's 8 shards
    # per GPU carry up to C = 4, docs/slurm-backend.md)
    backend = SlurmBackend.for_mini_cluster(
        slurm_cluster, max_jobs_per_gpu=policy.max_jobs_per_gpu if policy.shares_gpus else 1
    )
    out = tmp_path / "out"
    # a sharing policy gets its 1-GPU jobs as gres/shard jobs: the only GRES Slurm 22.05 lets
    # two jobs share (a gpu job cannot become a shard job later)
    jobs = workload(shard_small=policy.shares_gpus)
    ids = [submit_sleep_job(slurm_cluster, backend, d, out) for d in jobs]
    backend.expect(ids)
    clock = WallClock(period_s=0.5)
    rec = Recorder(backend, clock)
    controller = Controller(backend, policy, clock, on_cycle=rec)
    t0 = time.monotonic()
    try:
        controller.run(until_s=time.time() + deadline_s)
        assert not rec.thrashing, (
            f"{policy_name} preempted {rec.preempts} times for {NUM_JOBS} jobs: a preempt/start "
            "loop (each wall-clock cycle re-ranks the jobs)"
        )
        left = sorted(set(ids) - {c.spec.job_id for c in backend.completed()})
        assert backend.finished(), f"{policy_name}: not done after {deadline_s:.0f}s: {left}"
    finally:
        cancel_and_wait(slurm_cluster, ids)
    elapsed = time.monotonic() - t0

    # each job completed exactly once, with Slurm's final state COMPLETED
    # (other managed jobs already in the queue are scheduled too and may show up here)
    done = [c.spec.job_id for c in backend.completed()]
    assert len(done) == len(set(done)), "a job was reported twice"
    assert set(ids) <= set(done), f"not reported: {sorted(set(ids) - set(done))}"
    final = squeue_jobs(slurm_cluster)
    for jid in ids:
        assert final[jid].state == "COMPLETED", (jid, final[jid].state)
        events = job_log(out, jid)
        # its work was done once: every run after the first resumes where the last one stopped
        # (a preempt that races with the end of a job restarts it with nothing left to do)
        iterations = str(max(1, round(jobs[ids.index(jid)].duration_s / STEP_S)))
        assert ("done", {"iterations": iterations}) in events, (jid, events)
        assert_resumes_in_order(jid, events)
        # ran where the policy put it: Slurm's nodes = the nodes of the last Start/Migrate
        assert jid in rec.placed, f"job {jid} completed without a Start from {policy_name}"
        asked = set(rec.placed[jid].nodes)
        ran_on = set(backend.slurm_jobs[jid].nodes) if jid in backend.slurm_jobs else None
        assert ran_on == asked, (jid, ran_on, asked)
        starts = [f for e, f in events if e == "start"]
        assert starts and starts[-1]["node"] in asked, (jid, starts, asked)
    assert not rec.over_allocated, rec.over_allocated[:5]
    print(
        f"\n{policy_name}: {len(ids)} jobs in {elapsed:.1f}s, {controller.stats.cycles} cycles, "
        f"actions {controller.stats.by_kind}, failed {len(rec.failed)}, "
        f"GPU-index mismatches {len(backend.mismatches)}"
    )


def shards_per_gpu(cluster: MiniCluster, node: str) -> int:
    """S of ``node``, from its GRES as sinfo reports it (``gpu:v100:4,shard:v100:32`` -> 8)."""
    [gres] = [n["gres"] for n in cluster.status()["nodes"] if n["name"] == node]
    counts = dict(re.findall(r"(gpu|shard):\w+:(\d+)", gres))
    return int(counts["shard"]) // int(counts["gpu"])


def _start(backend: SlurmBackend, job_id: str, placement: Placement) -> None:
    backend.snapshot()
    [r] = backend.apply([Start(job_id=job_id, placement=placement)])
    assert r.ok, r.error


def _progress(backend: SlurmBackend, job_id: str) -> int:
    p = backend.store.read_progress(job_id)
    return p.iterations_done if p is not None else 0


def test_share_puts_two_jobs_on_one_gpu(slurm_cluster: MiniCluster, tmp_path: Path) -> None:
    """A Share decision observed as two RUNNING jobs with the same GPU index (gres/shard)."""
    backend = SlurmBackend.for_mini_cluster(slurm_cluster, max_jobs_per_gpu=2)
    out = tmp_path / "out"
    a, b = (
        submit_sleep_job(slurm_cluster, backend, JobDef(1, 3.0, shard=True), out) for _ in range(2)
    )
    excl = submit_sleep_job(slurm_cluster, backend, JobDef(1, 3.0), out)
    ids = [a, b, excl]
    backend.expect([a, b])
    try:
        gpu = Placement.of({"v100-2": [0]})
        _start(backend, a, gpu)
        backend.snapshot()
        # a gpu-GRES job cannot join (22.05 cannot turn it into shards): fails as data
        [bad] = backend.apply([Share(job_id=excl, placement=gpu, with_jobs=(a,))])
        assert not bad.ok and "gpu GRES" in (bad.error or ""), bad.error
        [r] = backend.apply([Share(job_id=b, placement=gpu, with_jobs=(a,))])
        assert r.ok, r.error
        snap = backend.snapshot()
        assert snap.occupancy[("v100-2", 0)] == (a, b)

        def both_running() -> bool:
            backend.snapshot()
            jobs = backend.slurm_jobs
            return all(jobs[j].state == "RUNNING" for j in (a, b)) and not backend.in_flight

        wait_for(both_running, 15, "both shard jobs running")
        jobs = backend.slurm_jobs
        for j in (a, b):
            assert jobs[j].gpu_slots() == {"v100-2": (0,)}, jobs[j].raw_gres_detail
        # S shards per GPU, C = 2: the started job takes S - 1 shards, the sharing one 1
        spg = shards_per_gpu(slurm_cluster, "v100-2")
        assert [x.shards for x in jobs[a].alloc] == [spg - 1], jobs[a].raw_gres_detail
        assert [x.shards for x in jobs[b].alloc] == [1], jobs[b].raw_gres_detail
        wait_for(lambda: (backend.snapshot() and backend.finished()) or None, 20, "jobs done")
        for j in (a, b):
            starts = [f for e, f in job_log(out, j) if e == "start"]
            assert starts[-1]["node"] == "v100-2" and starts[-1]["cuda"] == "0", starts
    finally:
        cancel_and_wait(slurm_cluster, ids)


def test_suspend_resume_preempt_and_checkpoint_resume(
    slurm_cluster: MiniCluster, tmp_path: Path
) -> None:
    """Suspend/resume and preempt/requeue observed; the job resumes at its checkpoint."""
    backend = SlurmBackend.for_mini_cluster(slurm_cluster)
    out = tmp_path / "out"
    [a] = [submit_sleep_job(slurm_cluster, backend, JobDef(2, 5.0), out)]  # 20 x 0.25 s
    backend.expect([a])
    try:
        _start(backend, a, Placement.of({"a100-1": [0, 1]}))
        wait_for(lambda: _progress(backend, a) >= 3, 20, "3 iterations")
        backend.snapshot()
        [r] = backend.apply([Suspend(job_id=a)])
        assert r.ok, r.error
        assert backend.snapshot().job(a).state is JobState.SUSPENDED
        time.sleep(1.0)
        paused_at = _progress(backend, a)
        time.sleep(1.0)
        assert _progress(backend, a) == paused_at, "progress while suspended"
        [r] = backend.apply([Resume(job_id=a)])
        assert r.ok, r.error
        wait_for(lambda: _progress(backend, a) >= paused_at + 3, 20, "progress after resume")
        backend.snapshot()
        [r] = backend.apply([Preempt(job_id=a)])
        assert r.ok, r.error
        snap = wait_for(
            lambda: (
                (s := backend.snapshot()).job(a).preemptions == 1 and not backend.in_flight and s
            ),
            20,
            "requeue",
        )
        assert snap.job(a).state is JobState.PENDING and snap.job(a).placement is None
        saved = [f for e, f in job_log(out, a) if e == "checkpoint"]
        assert saved, job_log(out, a)
        ckpt = int((backend.store.directory / f"{a}.ckpt").read_text())
        assert ckpt >= paused_at + 3
        assert saved[-1]["iterations"] == str(ckpt) and saved[-1]["signal"] == "TERM", saved
        _start(backend, a, Placement.of({"v100-1": [0, 1]}))
        wait_for(lambda: (backend.snapshot() and backend.finished()) or None, 30, "job done")
        events = job_log(out, a)
        starts = [f for e, f in events if e == "start"]
        assert len(starts) == 2, events
        assert starts[0]["node"] == "a100-1" and starts[1]["node"] == "v100-1"
        assert int(starts[1]["resume_from"]) == ckpt
        assert next(f for e, f in events if e == "done")["iterations"] == "20"
        [rec] = backend.completed()
        assert rec.preemptions == 1
        assert squeue_jobs(slurm_cluster)[a].state == "COMPLETED"
    finally:
        cancel_and_wait(slurm_cluster, [a])


#: four complementary stage profiles (ms per iteration: storage, CPU, GPU, network): each job
#: is dominated by another resource, so Muri's matching groups them
MURI_PROFILES = [(10, 60, 20, 10), (60, 10, 10, 20), (10, 10, 60, 20), (20, 10, 10, 60)]


@pytest.mark.parametrize("policy_name", ["muri-l", "muri-s"])
def test_muri_groups_interleave_on_one_gpu(
    policy_name: str, slurm_cluster: MiniCluster, tmp_path: Path
) -> None:
    """24 one-GPU jobs with stage profiles on 16 GPUs: Muri's groups become Shares that Slurm
    runs as several RUNNING jobs on one GPU index (gres/shard, one shard per group member)."""
    policy = registry.create(policy_name)
    backend = SlurmBackend.for_mini_cluster(slurm_cluster, max_jobs_per_gpu=policy.max_jobs_per_gpu)
    out = tmp_path / "out"
    ids = [
        submit_sleep_job(
            slurm_cluster, backend, JobDef(1, 3.0, shard=True), out,
            extra_hints={"stage_times_ms": list(MURI_PROFILES[i % 4])},
        )
        for i in range(24)
    ]
    backend.expect(ids)
    clock = WallClock(period_s=0.5)
    rec = Recorder(backend, clock)
    co_running: set[tuple[str, int]] = set()

    def on_cycle(now_s: float, results: list[ActionResult]) -> None:
        rec(now_s, results)
        per_gpu: dict[tuple[str, int], int] = {}
        for job in backend.slurm_jobs.values():
            if job.job_id in ids and job.state == "RUNNING":
                for node, gpus in job.gpu_slots().items():
                    for g in gpus:
                        per_gpu[(node, g)] = per_gpu.get((node, g), 0) + 1
        co_running.update(slot for slot, n in per_gpu.items() if n >= 2)

    controller = Controller(backend, policy, clock, on_cycle=on_cycle)
    try:
        controller.run(until_s=time.time() + DEADLINE_S)
        assert backend.finished(), sorted(set(ids) - {c.spec.job_id for c in backend.completed()})
    finally:
        cancel_and_wait(slurm_cluster, ids)
    shares = controller.stats.by_kind.get("share", 0)
    assert shares >= 1, f"{policy_name} formed no group: {controller.stats.by_kind}"
    assert co_running, "no GPU index ever ran two jobs of one group at once"
    assert not rec.over_allocated, rec.over_allocated[:5]
    final = squeue_jobs(slurm_cluster)
    for jid in ids:
        assert final[jid].state == "COMPLETED", (jid, final[jid].state)
        assert ("done", {"iterations": "12"}) in job_log(out, jid), job_log(out, jid)
