"""The advisor on real accounting: a mixed workload that Slurm schedules itself (partition
``direct``), read back from slurmdbd with ``sacct`` in both formats, replayed under
``slurm-backfill`` with the cluster's own settings (``scontrol show config``).

Tolerance of the replayed start times: :data:`START_TOLERANCE_S` per job and
:data:`MEAN_TOLERANCE_S` on average (see there). Measured: every job 1-6 s earlier in the replay
than Slurm started it (Slurm 22.05.8: mean 3.5 s; 24.11.5: mean 2.4 s), because the replay has no
launch and end-report latency.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from slurm_sched.advisor.cluster_shape import cluster_shape
from slurm_sched.advisor.pipeline import advise
from slurm_sched.advisor.sources import slurm_config
from slurm_sched.slurm.cluster import MiniCluster
from slurm_sched.traces.sacct import SACCT_COLUMNS, Accounting, read_sacct
from tests.contract.slurm_jobs import cancel_and_wait, wait_for

#: (GPUs, nodes, seconds of sleep, account): 16 GPUs busy from the start, so most jobs queue;
#: the 8-GPU two-node jobs block the queue head while smaller ones could run (backfill)
WORKLOAD = [
    (4, 1, 8, "alpha"), (4, 1, 8, "beta"), (4, 1, 6, "alpha"), (4, 1, 6, "beta"),
    (8, 2, 5, "alpha"), (2, 1, 4, "beta"), (1, 1, 3, "alpha"), (1, 1, 3, "beta"),
    (4, 1, 5, "alpha"), (2, 1, 5, "beta"), (1, 1, 9, "alpha"), (8, 2, 4, "beta"),
    (1, 1, 2, "alpha"), (1, 1, 2, "beta"), (2, 1, 3, "alpha"), (4, 1, 4, "beta"),
]  # fmt: skip

#: Slurm's times are whole seconds, and each start waits for slurmd to report the end of the job
#: before it (about a second, which the replay does not have) and for the next scheduling pass;
#: jobs placed by Slurm's backfill start at its next pass (bf_interval, 30 s by default) while
#: the replay's pass runs on its own 30 s clock. Per job the replay must start it within this:
START_TOLERANCE_S = 35.0
#: and on average within this
MEAN_TOLERANCE_S = 8.0


def _run(cluster: MiniCluster, *argv: str) -> str:
    return subprocess.run(
        list(argv), env=cluster.env, capture_output=True, text=True, check=True, timeout=60
    ).stdout


def _sacct(cluster: MiniCluster, ids: list[str], tmp: Path, fmt: str) -> Accounting:
    out = tmp / f"sacct.{fmt}"
    args = ["--json"] if fmt == "json" else ["-P", f"--format={','.join(SACCT_COLUMNS)}"]
    out.write_text(_run(cluster, "sacct", "-X", "-a", "-j", ",".join(ids), *args))
    return read_sacct(out)


def test_slurm_backfill_replays_the_observed_starts(
    slurm_cluster: MiniCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in slurm_cluster.exported().items():
        monkeypatch.setenv(name, value)  # sinfo and scontrol of the advisor run here
    subprocess.run(["sacctmgr", "-i", "add", "account", "alpha,beta"], env=slurm_cluster.env,
                   capture_output=True, check=False)  # fails when they exist already
    subprocess.run(["sacctmgr", "-i", "add", "user", "root", "account=alpha,beta"],
                   env=slurm_cluster.env, capture_output=True, check=False)
    ids: list[str] = []
    try:
        for gpus, nodes, seconds, account in WORKLOAD:
            ids.append(_run(
                slurm_cluster, "sbatch", "--parsable", "-p", "direct", "-A", account, "-t", "2",
                "-N", str(nodes), f"--gres=gpu:{gpus // nodes}", "-o", "/dev/null",
                "--wrap", f"sleep {seconds}",
            ).strip())  # fmt: skip

        def all_accounted() -> bool:
            text = _run(slurm_cluster, "sacct", "-X", "-n", "-P", "-j", ",".join(ids),
                        "--format=JobID,State,End")
            rows = [line.split("|") for line in text.splitlines() if line]
            return len(rows) == len(ids) and all(
                r[1] == "COMPLETED" and r[2] != "Unknown" for r in rows)

        wait_for(all_accounted, 240, "every job COMPLETED in slurmdbd", step_s=1.0)
    finally:
        cancel_and_wait(slurm_cluster, ids)

    text, doc = _sacct(slurm_cluster, ids, tmp_path, "txt"), _sacct(slurm_cluster, ids,
                                                                    tmp_path, "json")
    assert text.warnings == doc.warnings == []
    assert [j.job_id for j in text.jobs] == [j.job_id for j in doc.jobs]
    assert sorted(j.job_id for j in text.jobs) == sorted(ids)
    for a, b in zip(text.jobs, doc.jobs, strict=True):
        assert (a.num_gpus, a.nodes, a.account, a.submit_s, a.start_s, a.end_s) == (
            b.num_gpus, b.nodes, b.account, b.submit_s, b.start_s, b.end_s)
    assert [j.num_gpus for j in sorted(text.jobs, key=lambda j: int(j.job_id))] == [
        g for g, _, _, _ in WORKLOAD]

    shape = cluster_shape(partition="direct")
    assert shape.cluster.total_gpus == 16
    options = slurm_config(None, live=True)
    advice = advise(doc, shape, policies=[], baseline="slurm-backfill", partition="direct",
                    resamples=5, options={"slurm-backfill": options})
    run = advice.runs["slurm-backfill"]
    assert run.ok, run.error
    simulated = {o.job_id: o.start_s for o in run.outcomes}
    diffs = {o.job_id: simulated[o.job_id] - o.start_s for o in advice.observed}
    assert len(diffs) == len(ids)
    worst = max(diffs.items(), key=lambda kv: abs(kv[1]))
    assert abs(worst[1]) <= START_TOLERANCE_S, (worst, diffs)
    assert advice.validation is not None
    assert advice.validation.mean_abs_s <= MEAN_TOLERANCE_S, diffs
    print(f"start-time differences (s): {sorted(diffs.values())}")
