"""The Docker demo cluster end to end: ``scripts/docker-up.sh`` brings up docker/compose.yaml
(slurmctld, four slurmd with fake GPUs, the scheduler daemon) and the tests drive it from
outside the containers, as a user would: ``sbatch`` and ``scontrol`` through ``docker exec`` in
the controller container, the scheduler's policy chosen by recreating its service with
``SLURM_SCHED_POLICY``, and its metrics read on the published port.

Checked: a sharing policy (Muri-S) runs two jobs on one GPU index; a preempting one (Tiresias
with a 10 GPU-second first queue) preempts a job that Slurm requeues and that then finishes
from its checkpoint; every job completes exactly once; ``/metrics`` answers; the scheduler
container killed, Slurm starts the waiting jobs itself once their lease runs out (fail-open).

Where Docker cannot be brought up, these tests are skipped with the reason, except under
``CI=true``, where that is a failure. ``DOCKER_KEEP=1`` leaves the cluster running.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurm_sched.slurm.parse import SlurmJob, read_jobs
from slurm_sched.slurm.states import SlurmJobState
from tests.contract.slurm_jobs import wait_for

#: a real Docker daemon and cluster: deselected with the integration tests (-m 'not integration')
pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PROJECT = "slurm-sched"
LEASE_S = 20
OUT = "/srv/slurm/out"  # on the volume every container shares
JOB_SCRIPT = "/opt/slurm-sched/src/sbatch_templates/checkpointed_sleep.sh"
METRICS = "http://127.0.0.1:9810/metrics"


def _compose_cmd() -> list[str]:
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    return ["docker-compose"]


class DockerCluster:
    """The running compose project, driven from outside the containers."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.compose = [*_compose_cmd(), "-p", PROJECT, "-f", str(REPO / "docker/compose.yaml")]

    def container(self, service: str) -> str:
        out = subprocess.run([*self.compose, "ps", "-q", service], env=self.env, check=True,
                             capture_output=True, text=True).stdout.strip()
        assert out, f"no container of service {service}"
        return out

    def ctl(self, *argv: str) -> str:
        """A command in the controller container; its stdout."""
        p = subprocess.run(["docker", "exec", self.container("slurmctld"), *argv],
                           capture_output=True, text=True, timeout=60, check=False)
        assert p.returncode == 0, f"{' '.join(argv)}: {p.stderr.strip()}"
        return p.stdout

    def scheduler(self, **settings: str) -> None:
        """(Re)create the scheduler service with these SLURM_SCHED_* settings."""
        env = {**self.env, **settings}
        # --no-deps: compose 1.29 would recreate slurmctld too, and the node containers, which
        # share its network namespace, would be left in the old one
        subprocess.run([*self.compose, "up", "-d", "--no-build", "--no-deps", "--force-recreate",
                        "scheduler"], env=env, check=True, capture_output=True, timeout=120)
        wait_for(_metrics, 60, "the scheduler's metrics")

    def stop_scheduler(self) -> None:
        subprocess.run(["docker", "stop", "-t", "10", self.container("scheduler")], check=True,
                       capture_output=True, timeout=60)

    def submit_all(self, jobs: list[tuple[str, int, float, dict[str, object], int]]) -> list[str]:
        """sbatch these jobs (gres, iterations, step seconds, hints, nodes) in one ``docker
        exec``, so that they reach the queue within about a second; their ids in order."""
        lines = []
        for gres, iterations, step_s, extra, nodes in jobs:
            hints = {"v": 1, "iterations": iterations, "duration_s": iterations * step_s, **extra}
            argv = ["sbatch", "--parsable", "-p", "sched", "-N", str(nodes), gres, "-t", "10",
                    "-o", f"{OUT}/%j.out", "--open-mode=append", f"--chdir={OUT}",
                    f"--comment={json.dumps(hints, separators=(',', ':'))}", JOB_SCRIPT,
                    str(iterations), str(step_s)]
            lines.append(shlex.join(argv))
        out = self.ctl("bash", "-euc", "\n".join(lines))
        ids = [line.split(";")[0] for line in out.split()]
        assert len(ids) == len(jobs), out
        return ids

    def jobs(self) -> dict[str, SlurmJob]:
        _, jobs = read_jobs(json.loads(self.ctl("squeue", "--json", "--states=all")),
                            "squeue --json (docker)")
        return {j.job_id: j for j in jobs}

    def log(self, job_id: str) -> str:
        return self.ctl("cat", f"{OUT}/{job_id}.out")

    def decisions(self) -> list[dict[str, object]]:
        text = self.ctl("cat", "/srv/slurm/scheduler/decisions.jsonl")
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def cancel_unfinished(self, ids: list[str]) -> None:
        jobs = self.jobs()
        left = [i for i in ids if i in jobs and jobs[i].state is not SlurmJobState.COMPLETED]
        if left:
            self.ctl("scancel", *left)


def _metrics() -> str | None:
    try:
        with urllib.request.urlopen(METRICS, timeout=2) as r:
            return str(r.read().decode())
    except OSError:
        return None


@pytest.fixture(scope="module")
def docker_cluster() -> Iterator[DockerCluster]:
    if os.geteuid() != 0:
        pytest.skip("the Docker cluster needs root (it may install and start Docker)")
    env = {**os.environ, "MINI_SLURM_LEASE_S": str(LEASE_S), "SLURM_SCHED_LEASE_S": str(LEASE_S)}
    if shutil.which("docker"):
        subprocess.run(["bash", "scripts/docker-down.sh"], cwd=REPO, env=env,
                       capture_output=True, check=False)
    up = subprocess.run(["bash", "scripts/docker-up.sh"], cwd=REPO, env=env,
                        capture_output=True, text=True, check=False)
    if up.returncode != 0:
        why = f"scripts/docker-up.sh failed: {up.stderr.strip().splitlines()[-1:]}"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    cluster = DockerCluster(env)
    cluster.ctl("mkdir", "-p", OUT)
    try:
        yield cluster
    finally:
        if os.environ.get("DOCKER_KEEP") != "1":
            subprocess.run(["bash", "scripts/docker-down.sh"], cwd=REPO, env=env,
                           capture_output=True, check=False)


def _done_once(cluster: DockerCluster, ids: list[str], timeout_s: float) -> None:
    """Every job COMPLETED, and its log says ``done`` exactly once."""
    def all_done() -> bool:
        jobs = cluster.jobs()
        return all(jobs[i].state is SlurmJobState.COMPLETED for i in ids)

    wait_for(all_done, timeout_s, f"jobs {ids} to complete")
    for i in ids:
        dones = [ln for ln in cluster.log(i).splitlines() if re.search(r"\] done\b", ln)]
        assert len(dones) == 1, (i, cluster.log(i))


def test_metrics_answer_on_the_published_port(docker_cluster: DockerCluster) -> None:
    text = wait_for(_metrics, 60, "the scheduler's metrics")
    assert re.search(r"^slurm_sched_up 1$", text, re.M), text[:500]


#: stage profiles (ms) that Muri groups: each job is dominated by another resource
MURI_PROFILES = [(10, 60, 20, 10), (60, 10, 10, 20), (10, 10, 60, 20), (20, 10, 10, 60)]


def test_a_sharing_policy_runs_two_jobs_on_one_gpu(docker_cluster: DockerCluster) -> None:
    # 24 jobs on 16 GPUs: Muri groups jobs of one queue, so the scheduler is stopped while they
    # are submitted (they wait for their lease) and sees all of them in its first cycle
    docker_cluster.stop_scheduler()
    ids = docker_cluster.submit_all([
        ("--gres=shard:1", 12, 0.5, {"stage_times_ms": list(MURI_PROFILES[i % 4])}, 1)
        for i in range(24)])
    docker_cluster.scheduler(SLURM_SCHED_POLICY="muri-s", SLURM_SCHED_POLICY_OPTIONS="{}")
    shared: set[tuple[str, int]] = set()

    def finished_noting_shares() -> bool:
        per_gpu: dict[tuple[str, int], int] = {}
        jobs = docker_cluster.jobs()
        for i in ids:
            job = jobs[i]
            if job.state is SlurmJobState.RUNNING:
                for node, gpus in job.gpu_slots().items():
                    for g in gpus:
                        per_gpu[(node, g)] = per_gpu.get((node, g), 0) + 1
        shared.update(k for k, n in per_gpu.items() if n >= 2)
        return all(jobs[i].state is SlurmJobState.COMPLETED for i in ids)

    try:
        wait_for(finished_noting_shares, 240, "24 Muri jobs to complete", step_s=0.3)
    finally:
        docker_cluster.cancel_unfinished(ids)
    assert shared, "no GPU index ever ran two jobs at once"
    kinds = {d.get("kind") for d in docker_cluster.decisions() if d.get("job_id") in ids}
    assert "share" in kinds, kinds
    _done_once(docker_cluster, ids, 10)


def test_a_preempting_policy_preempts_and_slurm_requeues(docker_cluster: DockerCluster) -> None:
    docker_cluster.scheduler(SLURM_SCHED_POLICY="tiresias",
                             SLURM_SCHED_POLICY_OPTIONS='{"thresholds_gpu_s": [10]}',
                             SLURM_SCHED_SAFETY__MIN_RUNTIME_BEFORE_PREEMPT_S="0")
    # four 4-GPU jobs fill the 16 GPUs; once each has 10 GPU-seconds they fall to the second
    # queue, and the 1-GPU jobs that come next preempt them
    big = docker_cluster.submit_all([("--gres=gpu:4", 40, 0.5, {}, 1)] * 4)
    wait_for(lambda: all(docker_cluster.jobs()[i].state is SlurmJobState.RUNNING for i in big),
             60, "the 4-GPU jobs to run")
    small = docker_cluster.submit_all([("--gres=gpu:1", 6, 0.5, {}, 1)] * 4)
    ids = big + small
    try:
        _done_once(docker_cluster, ids, 240)
    finally:
        docker_cluster.cancel_unfinished(ids)
    preempted = {str(d["job_id"]) for d in docker_cluster.decisions()
                 if d.get("kind") == "preempt" and d.get("ok") and d.get("job_id") in big}
    assert preempted, "Tiresias preempted none of the 4-GPU jobs"
    jobs = docker_cluster.jobs()
    for i in preempted:
        assert jobs[i].restart_cnt >= 1, (i, jobs[i])
        assert re.search(r"\] start .*restart=[1-9]", docker_cluster.log(i)), docker_cluster.log(i)


def test_killing_the_scheduler_hands_the_queue_to_slurm(docker_cluster: DockerCluster) -> None:
    docker_cluster.scheduler(SLURM_SCHED_POLICY="fifo", SLURM_SCHED_POLICY_OPTIONS="{}")
    sched = docker_cluster.container("scheduler")
    subprocess.run(["docker", "kill", sched], check=True, capture_output=True)
    t0 = time.monotonic()
    ids = docker_cluster.submit_all([("--gres=gpu:1", 4, 0.5, {}, 1)] * 3)
    wait_for(lambda: all(
        docker_cluster.jobs()[i].state in (SlurmJobState.RUNNING, SlurmJobState.COMPLETED)
        for i in ids), LEASE_S + 60, "Slurm to start the jobs itself")
    started_after = time.monotonic() - t0
    _done_once(docker_cluster, ids, 60)
    # not before the lease: nobody else may start a managed job early
    assert started_after >= LEASE_S - 2, started_after
    docker_cluster.scheduler(SLURM_SCHED_POLICY="tiresias", SLURM_SCHED_POLICY_OPTIONS="{}")
