"""slurmctld SIGKILLed right after it started a job loses that start: after the restart the job
is pending again with the same restart count (a requeue counts one), while its first run may
still be ending on its node, where slurmd refuses a second copy and Slurm drains the node
("Duplicate jobid"). The backend notices it (``start_lost``) and does not place the job on those
nodes for ``LOST_START_GRACE_S``; elsewhere at once. The runner is the recorded fake of
``tests/contract/recorded.py``."""

from __future__ import annotations

from pathlib import Path

from slurm_sched.model import Placement, Start
from slurm_sched.slurm.backend import SlurmBackend
from slurm_sched.slurm.validate import LOST_START_GRACE_S
from tests.contract.recorded import NOW, FakeRunner, squeue_with

#: recorded job 29 (1 GPU, running on a100-1) as slurmctld recovers it after losing its start
FORGOTTEN = {"job_state": "PENDING", "state_reason": "BeginTime", "nodes": "", "start_time": 0,
             "eligible_time": NOW + 100, "gres_detail": [], "job_resources": None}  # fmt: skip


def backend_at(now: list[float], tmp_path: Path) -> tuple[SlurmBackend, FakeRunner]:
    runner = FakeRunner(squeue_with())
    backend = SlurmBackend(runner, partitions=["sched"], settings_dir=tmp_path / "settings",
                           clock=lambda: now[0], min_query_interval_s=0.0)
    return backend, runner


def test_lost_start_keeps_the_job_off_its_node_for_the_grace(tmp_path: Path) -> None:
    now = [NOW]
    backend, runner = backend_at(now, tmp_path)
    backend.snapshot()
    runner.squeue = squeue_with(("29", FORGOTTEN))
    backend.snapshot()
    [lost] = [f for e, f in backend.take_notices() if e == "start_lost"]
    assert (lost["job_id"], lost["nodes"]) == ("29", ["a100-1"])
    [r] = backend.apply([Start(job_id="29", placement=Placement.of({"a100-1": [0]}))])
    assert not r.ok and r.error is not None and "lost its start on a100-1" in r.error
    assert not [x for x in runner.lines if "JobId=29 Node" in x]
    [r] = backend.apply([Start(job_id="29", placement=Placement.of({"v100-2": [3]}))])
    assert r.ok, r.error


def test_lost_start_node_is_usable_again_after_the_grace(tmp_path: Path) -> None:
    now = [NOW]
    backend, runner = backend_at(now, tmp_path)
    backend.snapshot()
    runner.squeue = squeue_with(("29", FORGOTTEN))
    backend.snapshot()
    now[0] += LOST_START_GRACE_S + 1
    backend.snapshot()
    [r] = backend.apply([Start(job_id="29", placement=Placement.of({"a100-1": [0]}))])
    assert r.ok, r.error


def test_a_requeue_is_not_a_lost_start(tmp_path: Path) -> None:
    now = [NOW]
    backend, runner = backend_at(now, tmp_path)
    backend.snapshot()
    runner.squeue = squeue_with(("29", {**FORGOTTEN, "restart_cnt": 1}))
    backend.snapshot()
    assert [e for e, _ in backend.take_notices() if e == "start_lost"] == []
    [r] = backend.apply([Start(job_id="29", placement=Placement.of({"a100-1": [0]}))])
    assert r.ok, r.error
