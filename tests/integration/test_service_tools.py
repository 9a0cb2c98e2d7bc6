"""``slurm-sched snapshot | replay | explain`` on the real mini Slurm cluster.

A few ``checkpointed_sleep`` jobs are submitted, one is started by a backend; then the CLI takes
a live snapshot (read-only: nothing in Slurm changes), replays it under a policy (decide once,
then simulate to the end) and explains a waiting job, from the file and live.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from slurm_sched.cli import main
from slurm_sched.model import JobState, Placement, Start
from slurm_sched.service.snapshot_io import load_snapshot
from slurm_sched.slurm.backend import SlurmBackend
from slurm_sched.slurm.cluster import MiniCluster
from tests.contract.slurm_jobs import (
    JobDef,
    cancel_and_wait,
    squeue_jobs,
    submit_sleep_job,
    wait_for,
)


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    rc = main(list(args))
    out = capsys.readouterr()
    assert rc == 0, out.err
    return out.out


def test_live_snapshot_replay_and_explain(
    slurm_cluster: MiniCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    backend = SlurmBackend.for_mini_cluster(slurm_cluster)
    out = tmp_path / "out"
    runner_job = submit_sleep_job(slurm_cluster, backend, JobDef(2, 60.0), out)
    waiting = [
        submit_sleep_job(slurm_cluster, backend, JobDef(1, 30.0, gpu_type="v100"), out),
        submit_sleep_job(slurm_cluster, backend, JobDef(4, 30.0), out),
    ]
    ids = [runner_job, *waiting]
    try:
        snap = backend.snapshot()
        free = [n for n, g in snap.free_gpus.items() if len(g) >= 2]
        assert free, "the test needs two free GPUs on one node"
        node = free[0]
        placement = Placement.of({node: list(snap.free_gpus[node][:2])})
        [res] = backend.apply([Start(job_id=runner_job, placement=placement)])
        assert res.ok, res.error

        def running() -> bool:
            backend.snapshot()
            job = backend.slurm_jobs.get(runner_job)
            return job is not None and job.state == "RUNNING" and not backend.in_flight

        wait_for(running, 20, f"job {runner_job} running")
        before = {j: squeue_jobs(slurm_cluster)[j].state for j in ids}

        path = tmp_path / "live.json"
        rc = main(["snapshot", "--mini-cluster", "--out", str(path)])
        err = capsys.readouterr().err
        assert rc == 0, err
        sf = load_snapshot(path)
        running_release = subprocess.run(
            ["scontrol", "--version"], env=slurm_cluster.env, capture_output=True, text=True,
            check=True,
        ).stdout.split()[-1]  # "slurm-wlm 22.05.8", "slurm 24.11.5"
        assert sf.slurm_version == running_release, sf.slurm_version
        assert sf.source == f"mini-cluster:{slurm_cluster.state_dir}"
        by_id = sf.snapshot.by_id
        assert by_id[runner_job].state is JobState.RUNNING
        assert by_id[runner_job].placement is not None
        assert set(by_id[runner_job].placement.nodes) == {node}
        for j in waiting:
            assert by_id[j].state is JobState.PENDING, (j, by_id[j].state)
        assert by_id[waiting[0]].spec.gpu_type == "v100"
        # read-only: the capture changed nothing in Slurm
        after = {j: squeue_jobs(slurm_cluster)[j].state for j in ids}
        assert after == before

        doc = json.loads(_cli(capsys, "replay", str(path), "--policy", "fifo", "--simulate",
                              "--format", "json"))
        started = {a["job_id"] for a in doc["actions"] if a["kind"] == "start"}
        assert set(waiting) & started, doc["actions"]
        assert doc["metrics"]["jobs"] == len(by_id)
        assert runner_job not in started, "a running job keeps its GPUs"

        text = _cli(capsys, "explain", waiting[1], "--policy", "fifo", "--snapshot", str(path))
        assert f"job {waiting[1]}: pending; asks for 4 GPU(s)" in text
        assert "fifo says:" in text
        live = _cli(capsys, "explain", runner_job, "--policy", "tiresias", "--mini-cluster")
        assert f"job {runner_job}: running" in live and node in live
    finally:
        cancel_and_wait(slurm_cluster, ids)
