"""The mini cluster and the job_submit plugin, checked against real slurmctld/slurmd daemons."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from slurm_sched.model import Placement
from slurm_sched.protocol.hints import JobHints, encode_hints, parse_hints
from slurm_sched.slurm.cluster import MiniCluster
from slurm_sched.slurm.parse import SlurmJob
from slurm_sched.slurm.translate import PENDING_ONLY, JobContext, ShardConfig, pin_stages
from tests.contract.slurm_jobs import squeue_jobs

NODES = {"a100-1": "a100", "a100-2": "a100", "v100-1": "v100", "v100-2": "v100"}
ACTIVE = {"RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING"}
BUSY = {"mixed", "allocated", "completing", "idle"}


def run(
    cluster: MiniCluster, *cmd: str, user: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """A Slurm client command against the cluster; ``user`` runs it as that (non-root) user."""
    argv = list(cmd)
    if user is not None:
        argv = ["runuser", "-u", user, "--", "env", f"SLURM_CONF={cluster.slurm_conf}", *argv]
    proc = subprocess.run(
        argv, env=cluster.env, capture_output=True, text=True, timeout=30, cwd="/tmp", check=False
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"{argv} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc


def jobs(cluster: MiniCluster) -> dict[int, SlurmJob]:
    return {int(jid): job for jid, job in squeue_jobs(cluster).items()}


def wait_for(what: str, check: Callable[[], bool], timeout_s: float = 15.0) -> float:
    """Poll ``check`` until true; returns the seconds it took."""
    t0 = time.monotonic()
    while not check():
        if time.monotonic() - t0 > timeout_s:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.05)
    return time.monotonic() - t0


@pytest.fixture
def submit(slurm_cluster: MiniCluster) -> Iterator[Callable[..., int]]:
    """``submit(*sbatch_args, user=None) -> job id``; every job is cancelled after the test."""
    submitted: list[int] = []

    def _submit(*args: str, user: str | None = None) -> int:
        proc = run(slurm_cluster, "sbatch", "--parsable", "--chdir=/tmp", *args, user=user)
        job_id = int(proc.stdout.strip().split(";")[0])
        submitted.append(job_id)
        return job_id

    yield _submit
    if submitted:
        run(slurm_cluster, "scancel", *map(str, submitted), check=False)


def state(cluster: MiniCluster, job_id: int) -> str:
    return str(jobs(cluster)[job_id].state)


def pin(cluster: MiniCluster, job_id: int, node: str) -> None:
    """What the scheduler does to start a job: nodes and ``StartTime=now`` in ONE update."""
    run(
        cluster,
        "scontrol",
        "update",
        f"jobid={job_id}",
        f"NodeList={node}",
        "NumNodes=1-1",
        "StartTime=now",
    )


def test_all_nodes_idle_with_typed_gpus_and_shards(slurm_cluster):
    """Four nodes, 4 fake GPUs each, 8 shards per GPU; every node without jobs is idle."""

    def busy_nodes() -> set[str]:
        return {
            node
            for job in jobs(slurm_cluster).values()
            if job.state in ACTIVE
            for node in job.nodes
        }

    def idle_unless_busy() -> bool:
        # jobs of other test sessions sharing the cluster may keep some nodes busy
        before = busy_nodes()
        nodes = slurm_cluster.status()["nodes"]
        after = busy_nodes()
        return len(nodes) == len(NODES) and all(
            n["state"] == "idle" or (n["name"] in before | after and n["state"] in BUSY)
            for n in nodes
        )

    wait_for("every node without jobs idle", idle_unless_busy)
    status = slurm_cluster.status()
    assert status["up"]
    assert {n["name"] for n in status["nodes"]} == set(NODES)
    for node in status["nodes"]:
        gpu = NODES[node["name"]]
        assert node["gres"] == f"gpu:{gpu}:4,shard:{gpu}:32"
        assert "sched" in node["partitions"]
        assert node["cpus"] == 16 and node["real_memory"] == 64000
    assert slurm_cluster.managed_partitions == ["sched"]
    assert slurm_cluster.unmanaged_partitions == ["direct"]


def test_up_again_is_a_fast_no_op(slurm_cluster):
    assert slurm_cluster.up() < 3.0
    assert slurm_cluster.status()["up"]


def test_managed_job_waits_under_its_lease_not_held(slurm_cluster, submit):
    t0 = time.time()
    job_id = submit("-o", "/dev/null", "--wrap", "sleep 1")  # no -p: default partition sched
    time.sleep(1.0)  # Slurm would have started a runnable job by now
    job = jobs(slurm_cluster)[job_id]
    assert job.partition == "sched"
    assert job.state == "PENDING"
    assert job.priority > 0  # not held: if no scheduler renews the lease, Slurm starts it
    lease = slurm_cluster.lease_s
    assert t0 + lease - 2 <= job.eligible_time_s <= time.time() + lease + 1, (job, lease)


def test_submit_hold_is_dropped_in_managed_partitions(slurm_cluster, submit):
    """A user's --hold would keep the job from Slurm for ever once the scheduler is gone."""
    job_id = submit("--hold", "-o", "/dev/null", "--wrap", "sleep 1", user="nobody")
    job = jobs(slurm_cluster)[job_id]
    assert job.state == "PENDING" and job.priority > 0, job
    assert job.eligible_time_s > time.time() + slurm_cluster.lease_s / 2


def test_non_root_owner_cannot_start_hold_release_or_change_a_managed_job(
    slurm_cluster, submit
):
    job_id = submit("-o", "/dev/null", "--wrap", "sleep 1", user="nobody")
    before = jobs(slurm_cluster)[job_id]
    for cmd in (
        ("update", f"jobid={job_id}", "StartTime=now"),  # jump the lease
        ("update", f"jobid={job_id}", "NodeList=a100-1"),
        ("update", f"jobid={job_id}", "TimeLimit=5"),
        ("hold", str(job_id)),
        ("release", str(job_id)),
        ("update", f"jobid={job_id}", "Partition=direct"),
    ):
        proc = run(slurm_cluster, "scontrol", *cmd, user="nobody", check=False)
        assert proc.returncode != 0, cmd
    job = jobs(slurm_cluster)[job_id]
    assert job.state == "PENDING" and job.priority > 0
    assert job.eligible_time_s == before.eligible_time_s
    assert job.partition == "sched"
    # the owner may still cancel
    run(slurm_cluster, "scancel", str(job_id), user="nobody")
    wait_for("job cancelled", lambda: state(slurm_cluster, job_id) == "CANCELLED")


def test_pinned_job_starts_at_once_on_that_node_and_nowhere_else(slurm_cluster, submit):
    """A pending job under its lease, pinned with StartTime=now in one update: Slurm starts it
    on the pinned node (the update is atomic, it never sees the job eligible elsewhere)."""
    job_id = submit("--gres=gpu:a100:1", "-o", "/dev/null", "--wrap", "sleep 1")
    assert jobs(slurm_cluster)[job_id].eligible_time_s > time.time() + 10
    pin(slurm_cluster, job_id, "a100-2")
    took_s = wait_for(
        "job running", lambda: state(slurm_cluster, job_id) in ("RUNNING", "COMPLETED")
    )
    print(f"pin -> RUNNING: {took_s:.2f}s")
    assert took_s < 5.0
    assert jobs(slurm_cluster)[job_id].nodes == ("a100-2",)
    wait_for("job completed", lambda: state(slurm_cluster, job_id) == "COMPLETED")


def test_requeue_gives_the_job_a_lease_and_a_pin_restarts_it_elsewhere(slurm_cluster, submit):
    """Preempt/Migrate use a plain requeue: PENDING again, not held, EligibleTime ~121 s
    ahead (Slurm's own lease); the re-pin with StartTime=now runs it on the new node."""
    job_id = submit("--gres=gpu:1", "--requeue", "-o", "/dev/null", "--wrap", "sleep 30")
    pin(slurm_cluster, job_id, "v100-1")
    wait_for("job running", lambda: state(slurm_cluster, job_id) == "RUNNING")
    run(slurm_cluster, "scontrol", "requeue", str(job_id))
    wait_for("job pending again", lambda: state(slurm_cluster, job_id) == "PENDING")
    job = jobs(slurm_cluster)[job_id]
    assert job.priority > 0 and job.restart_cnt == 1
    assert time.time() + 100 < job.eligible_time_s < time.time() + 125, job
    pin(slurm_cluster, job_id, "v100-2")
    wait_for("job running again", lambda: state(slurm_cluster, job_id) == "RUNNING")
    assert jobs(slurm_cluster)[job_id].nodes == ("v100-2",)


def test_pin_never_shrinks_a_running_job(slurm_cluster, submit):
    """A pin that reaches a job Slurm has just started is refused whole: its ResetAccrueTime
    fails before NodeList is looked at. Without it, Slurm takes NodeList as a shrink of the
    running job (its steps on the other nodes killed) and refuses only the remaining fields."""
    job_id = submit("-N", "2", "--gres=gpu:1", "-o", "/dev/null", "--wrap", "sleep 60")
    run(
        slurm_cluster, "scontrol", "update", f"JobId={job_id}", "NodeList=a100-1,a100-2",
        "NumNodes=2-2", "StartTime=now",
    )  # fmt: skip
    wait_for("job running", lambda: state(slurm_cluster, job_id) == "RUNNING")
    job = jobs(slurm_cluster)[job_id]
    assert job.nodes == ("a100-1", "a100-2")
    # the scheduler's pin for another placement, from a snapshot that still showed it PENDING
    ctx = JobContext(str(job_id), job.gpu_request, node_count=2, tres_per_node=job.tres_per_node)
    stages = pin_stages(ctx, Placement.of({"a100-1": [0, 1]}), share=False, shards=ShardConfig())
    (pin_cmd,) = stages[0]
    assert PENDING_ONLY in pin_cmd.argv and any(a.startswith("NodeList=") for a in pin_cmd.argv)
    refused = run(slurm_cluster, *pin_cmd.argv, check=False)
    assert refused.returncode != 0 and "no longer pending" in refused.stderr, refused
    job = jobs(slurm_cluster)[job_id]
    assert (str(job.state), job.nodes) == ("RUNNING", ("a100-1", "a100-2"))
    # the same update without the guard: the job loses a100-2, although scontrol reports failure
    unguarded = [a for a in pin_cmd.argv if a != PENDING_ONLY]
    shrunk = run(slurm_cluster, *unguarded, check=False)
    assert shrunk.returncode != 0 and "no longer pending" in shrunk.stderr, shrunk
    assert jobs(slurm_cluster)[job_id].nodes == ("a100-1",)


def test_two_shard_jobs_share_one_gpu(slurm_cluster, submit, tmp_path: Path):
    script = "echo CVD=$CUDA_VISIBLE_DEVICES; sleep 2"
    ids = [
        submit("--gres=shard:1", "-o", str(tmp_path / "out-%j.txt"), "--wrap", script)
        for _ in range(2)
    ]
    for job_id in ids:
        pin(slurm_cluster, job_id, "v100-1")

    def both_running() -> bool:
        current = jobs(slurm_cluster)
        return all(current[j].state == "RUNNING" for j in ids)

    wait_for("both shard jobs running", both_running, timeout_s=10)
    current = jobs(slurm_cluster)
    assert all(current[j].nodes == ("v100-1",) for j in ids)
    # gres_detail: "shard:v100:1(IDX:0)" on 22.05, "shard:v100:1(1/8,0/8,0/8,0/8)" on 24.11
    allocs = [current[j].alloc for j in ids]
    assert allocs[0] == allocs[1] and len(allocs[0]) == 1, allocs
    assert len(allocs[0][0].gpus) == 1 and allocs[0][0].shards == 1, allocs

    wait_for("shard jobs done", lambda: all(state(slurm_cluster, j) == "COMPLETED" for j in ids))
    outputs = [(tmp_path / f"out-{j}.txt").read_text().strip() for j in ids]
    assert outputs[0] == outputs[1]
    assert outputs[0].startswith("CVD=") and outputs[0] != "CVD="


def test_bad_hint_is_rejected_by_sbatch_with_field_and_value(slurm_cluster, submit):
    proc = run(
        slurm_cluster,
        "sbatch",
        "--comment",
        '{"v":1,"batch_size":-3}',
        "--wrap",
        "true",
        check=False,
    )
    assert proc.returncode != 0
    assert "slurm_sched: hint 'batch_size' = -3: must be >= 1" in proc.stderr
    proc = run(slurm_cluster, "sbatch", "--comment", "fast please", "--wrap", "true", check=False)
    assert proc.returncode != 0
    assert "not valid JSON" in proc.stderr


def test_valid_hint_is_accepted_and_reads_back_verbatim(slurm_cluster, submit):
    hints = JobHints(model="resnet50", batch_size=256, duration_s=90.5, plans=["dp", "gc"])
    comment = encode_hints(hints)
    job_id = submit("--comment", comment, "-o", "/dev/null", "--wrap", "sleep 1")
    job = jobs(slurm_cluster)[job_id]
    assert job.comment == comment
    assert parse_hints(job.comment) == hints


def test_jobs_outside_managed_partitions_are_untouched(slurm_cluster, submit):
    job_id = submit(
        "-p", "direct", "--comment", "free text", "-o", "/dev/null", "--wrap", "sleep 1"
    )
    assert jobs(slurm_cluster)[job_id].priority > 0
    wait_for(
        "unmanaged job started by Slurm",
        lambda: state(slurm_cluster, job_id) in ("RUNNING", "COMPLETED"),
        timeout_s=10,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _job_process_pids(cluster: MiniCluster) -> list[int]:
    """Processes whose environment has this cluster's SLURM_CONF and a SLURM_JOB_ID."""
    pids = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            env = environ.read_bytes().split(b"\0")
        except OSError:
            continue
        if f"SLURM_CONF={cluster.slurm_conf}".encode() in env and any(
            e.startswith(b"SLURM_JOB_ID=") for e in env
        ):
            pids.append(int(environ.parent.name))
    return pids


def _parent(pid: int) -> int:
    # field 4 of /proc/PID/stat; the command name before it may contain spaces
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_down_stops_job_processes_whose_slurmstepd_died(slurm_cluster):
    """A job script orphaned by its slurmstepd (seen after cancelling hundreds of jobs at once)
    must not outlive ``down``: nothing of a stopped cluster may keep running."""
    private = MiniCluster(
        # not under pytest's tmp_path: munged wants every parent directory world-searchable
        f"/tmp/slurm-sched-test-orphan-{os.getpid()}", nodes="orphan-1:a100:2", shards_per_gpu=0,
        ctld_port=_free_port(), slurmd_port=_free_port(),
    )  # fmt: skip
    private.up()
    try:
        job = int(run(private, "sbatch", "--parsable", "--chdir=/tmp", "--gres=gpu:1",
                      "-o", "/dev/null", "--wrap", "sleep 600").stdout.split(";")[0])
        pin(private, job, "orphan-1")
        wait_for("the job's processes", lambda: bool(_job_process_pids(private)))
        script = min(_job_process_pids(private))
        stepd = _parent(script)
        assert "slurmstepd" in Path(f"/proc/{stepd}/cmdline").read_text()
        os.kill(stepd, signal.SIGKILL)
        wait_for("the script to be orphaned", lambda: _parent(script) != stepd)
    finally:
        private.down(purge=True)
    assert _job_process_pids(private) == []


def test_job_list_update_as_wide_as_the_terminal_is_attributed_per_line(slurm_cluster, submit):
    """scontrol reads a batch through readline, which echoes a line exactly as wide as the
    terminal (80 columns without a tty) with cursor escapes; the runner's output attribution
    would then fail and the batch be re-run line by line (a re-run go answers "no longer
    pending"). The runner sets COLUMNS so wide that no line reaches it."""
    from slurm_sched.slurm.runner import CommandRunner

    real = [str(submit("-o", "/dev/null", "--wrap", "sleep 30")) for _ in range(3)]
    ids = list(real)

    def echo() -> str:
        return f"scontrol: update JobId={','.join(ids)} StartTime=now+300"

    while 80 - len(echo()) > 9:
        ids.append("9000000")  # no such job: an error of its own
    ids.append("9" * (80 - len(echo()) - 1))  # the comma and this id fill the 80 columns
    assert len(echo()) == 80
    lines = [["update", f"JobId={','.join(ids)}", "StartTime=now+300"],
             ["update", f"JobId={real[0]}", "StartTime=now+300"]]  # fmt: skip
    runner = CommandRunner(env=slurm_cluster.env)
    [listed, single] = runner._run_batch(lines)
    assert runner.batch_fallbacks == 0
    assert single.ok, single.stderr
    assert listed.stderr.count("Invalid job id specified") == len(ids) - len(real), listed
    # the same batch in an 80-column terminal: the echo cannot be matched to the line
    narrow = CommandRunner(env={**slurm_cluster.env, "COLUMNS": "80", "TERM": "xterm"})
    narrow._run_batch(lines)
    assert narrow.batch_fallbacks == 1
