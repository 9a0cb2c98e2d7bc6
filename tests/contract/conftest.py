"""Harnesses that run the ONE backend contract suite against both backends.

``backend_factory`` (ids ``sim`` and ``slurm``) yields a :class:`Harness`: ``submit`` a few jobs,
get the backend, and ``wait`` until a snapshot satisfies a condition. The simulated harness moves
virtual time forward (``advance_to``); the Slurm harness submits short ``checkpointed_sleep``
jobs with ``sbatch`` to the real mini cluster (session fixture ``slurm_cluster``) and polls with
a deadline.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from slurm_sched.backend import ClusterBackend
from slurm_sched.model import Action, ActionResult, ClusterSnapshot, JobSpec, parse_cluster_spec
from slurm_sched.sim.backend import SimulatedBackend
from slurm_sched.slurm.backend import SlurmBackend
from slurm_sched.slurm.cluster import MiniCluster
from tests.contract.slurm_jobs import STEP_S, JobDef, cancel_and_wait, submit_sleep_job
from tests.integration.conftest import slurm_cluster  # noqa: F401  (session fixture)

#: the mini cluster's default topology (cluster.sh), mirrored by the simulated harness
SIM_CLUSTER = parse_cluster_spec("2x4:a100,2x4:v100")


class Harness(abc.ABC):
    """One backend plus the means to feed it jobs and wait for it."""

    name: str
    backend: ClusterBackend

    @abc.abstractmethod
    def submit(self, jobs: Sequence[JobDef]) -> list[str]:
        """Create the jobs (all submitted now); returns their ids in order."""

    @abc.abstractmethod
    def wait(
        self, cond: Callable[[ClusterSnapshot], bool], timeout_s: float, what: str = ""
    ) -> ClusterSnapshot:
        """Snapshots until ``cond`` holds (time passes meanwhile); fails the test on timeout."""

    @abc.abstractmethod
    def confirmed_running(self, job_id: str) -> bool:
        """The cluster itself (not just the backend's intent) runs the job."""

    def apply_one(self, action: Action, timeout_s: float = 15.0) -> ActionResult:
        """Apply one action, retrying while the backend says the job is in transition."""
        deadline = time.monotonic() + timeout_s
        while True:
            [res] = self.backend.apply([action])
            if res.ok or "retry" not in (res.error or "") or time.monotonic() > deadline:
                return res
            self.pause()
            self.backend.snapshot()

    def pause(self) -> None:  # noqa: B027  (optional hook)
        """Let a little time pass."""

    def cleanup(self) -> None:  # noqa: B027  (optional hook)
        """Stop whatever the test left running."""


class SimHarness(Harness):
    name = "sim"

    def __init__(self) -> None:
        self.backend: SimulatedBackend = SimulatedBackend(SIM_CLUSTER, [], restart_overhead_s=0)

    def submit(self, jobs: Sequence[JobDef]) -> list[str]:
        specs = [
            JobSpec(
                job_id=f"j{i}",
                submit_time_s=0.0,
                num_gpus=d.gpus,
                duration_s=d.duration_s,
                gpu_type=d.gpu_type,
            )
            for i, d in enumerate(jobs)
        ]
        self.backend = SimulatedBackend(SIM_CLUSTER, specs, restart_overhead_s=0)
        self.backend.advance_to(0.0)
        return [s.job_id for s in specs]

    def pause(self) -> None:
        b = self.backend
        nxt = b.next_event_s()
        step = b.now_s + STEP_S
        b.advance_to(step if nxt is None else min(step, nxt))

    def wait(
        self, cond: Callable[[ClusterSnapshot], bool], timeout_s: float, what: str = ""
    ) -> ClusterSnapshot:
        b = self.backend
        end = b.now_s + timeout_s
        while True:
            snap = b.snapshot()
            if cond(snap):
                return snap
            if b.now_s >= end:
                pytest.fail(f"sim: timed out waiting for {what or cond}")
            self.pause()

    def confirmed_running(self, job_id: str) -> bool:
        return self.backend.snapshot().job(job_id).state.value == "running"


class SlurmHarness(Harness):
    name = "slurm"

    def __init__(self, cluster: MiniCluster, out_dir: Path) -> None:
        self.cluster = cluster
        self.out_dir = out_dir
        self.backend: SlurmBackend = SlurmBackend.for_mini_cluster(cluster, start_timeout_s=30)
        self.job_ids: list[str] = []

    def submit(self, jobs: Sequence[JobDef]) -> list[str]:
        ids = [submit_sleep_job(self.cluster, self.backend, d, self.out_dir) for d in jobs]
        self.job_ids.extend(ids)
        self.backend.expect(ids)
        return ids

    def pause(self) -> None:
        time.sleep(0.2)

    def wait(
        self, cond: Callable[[ClusterSnapshot], bool], timeout_s: float, what: str = ""
    ) -> ClusterSnapshot:
        end = time.monotonic() + timeout_s
        while True:
            snap = self.backend.snapshot()
            if cond(snap):
                return snap
            if time.monotonic() > end:
                pytest.fail(f"slurm: timed out after {timeout_s}s waiting for {what or cond}")
            time.sleep(0.2)

    def confirmed_running(self, job_id: str) -> bool:
        self.backend.snapshot()
        job = self.backend.slurm_jobs.get(job_id)
        if job is None or job.state != "RUNNING" or job_id in self.backend.in_flight:
            return False
        settings = self.backend.store.read_settings(job_id)
        if settings is not None and set(settings["gpus_per_node"]) != set(job.nodes):
            raise AssertionError(f"job {job_id} runs on {job.nodes}, settings say {settings}")
        return True

    def cleanup(self) -> None:
        cancel_and_wait(self.cluster, self.job_ids)


@pytest.fixture(
    params=[
        pytest.param("sim", id="sim"),
        pytest.param("slurm", id="slurm", marks=pytest.mark.integration),
    ]
)
def backend_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    """A fresh harness per test: ``sim`` (in-memory) or ``slurm`` (the real mini cluster)."""
    h: Harness
    if request.param == "sim":
        h = SimHarness()
    else:
        cluster = request.getfixturevalue("slurm_cluster")
        h = SlurmHarness(cluster, tmp_path / "out")
    try:
        yield h
    finally:
        h.cleanup()
