"""Operator actions on the mini Slurm cluster while the production daemon (``slurm-sched run``)
schedules ``checkpointed_sleep`` jobs (``tests/integration/daemon_run.py``).

Each test makes one change an operator makes with Slurm's own tools, and checks that the daemon
honours it, that it says so in the decision log, and that every other job finishes exactly once:

1. ``scontrol update nodename=X state=drain``: no placement on X once the daemon has seen the
   drain (``node_unavailable``), no job started on X afterwards; ``state=resume`` makes X
   usable again (``node_available``, a job placed there);
2. ``scontrol update partitionname=sched state=down`` and back ``up``: the daemon sees it
   (``partition_unavailable``) and places none of the partition's jobs until it is up
   (``partition_available``); no job starts while it is down, no cycle fails, every job
   completes once;
3. ``scontrol hold``: the held job is never offered to the policy nor released by the daemon
   (``admin_hold``), keeps its lease, and runs once ``scontrol release`` lets it
   (``admin_release``, then the daemon's own start);
4. ``scancel`` of a pending and of a running job: dropped without error (``job_end``
   ``CANCELLED``), never started again;
5. ``scontrol update jobid=X timelimit=``: Slurm keeps the new limit through the job's run (the
   daemon never sets one) and the decision log records the change (``time_limit``).

Every wait polls a state with a deadline. Run them on a private cluster::

    MINI_SLURM_PREFIX=/usr MINI_SLURM_STATE=/tmp/slurm-sched-cluster-faults \\
    MINI_SLURM_CTLD_PORT=26917 MINI_SLURM_SLURMD_PORT=27101 \\
    python -m pytest tests/integration/test_admin_actions.py -s
"""

from __future__ import annotations

import math
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slurm_sched.service.decision_log import read_decisions
from slurm_sched.slurm.cluster import MiniCluster
from tests.contract.slurm_jobs import JobDef, cancel_and_wait, squeue_jobs, wait_for
from tests.integration.daemon_run import (
    LEASE_S,
    PERIOD_S,
    DaemonProcess,
    all_final,
    check_done_once,
    final_states,
    free_port,
    holder,
    metric,
    submit,
    write_config,
)

#: the daemon's node list is read this often here (the default is 30 s)
NODE_REFRESH_S = 2.0
#: a pinned job Slurm has not started after this long gets its lease back (default 60 s)
START_TIMEOUT_S = 5.0


class Run:
    """One daemon with /metrics and its decision log, for one test."""

    def __init__(self, cluster: MiniCluster, tmp_path: Path) -> None:
        self.cluster = cluster
        self.port = free_port()
        cfg = write_config(
            tmp_path / "config.toml",
            cluster,
            metrics_port=self.port,
            node_refresh_s=NODE_REFRESH_S,
            start_timeout_s=START_TIMEOUT_S,
        )
        self.daemon = DaemonProcess(cfg, tmp_path)
        self.log = tmp_path / "decisions.jsonl"
        self.out = tmp_path / "out"

    def start(self) -> None:
        self.daemon.start()
        wait_for(self.daemon.reconciled, 60, "the daemon's start-up reconciliation")

    def decisions(self) -> list[dict[str, Any]]:
        return read_decisions(self.log) if self.log.exists() else []

    def events(self, name: str, **match: Any) -> list[dict[str, Any]]:
        return [
            r for r in self.decisions()
            if r.get("event") == name and all(r.get(k) == v for k, v in match.items())
        ]  # fmt: skip

    def starts(self) -> list[dict[str, Any]]:
        """The daemon's successful placements (start, share, migrate...), oldest first."""
        return [
            r for r in self.decisions()
            if r.get("ok") and (r.get("action") or {}).get("placement") is not None
        ]  # fmt: skip

    def cycles(self) -> float:
        return metric(self.port, "slurm_sched_cycle_latency_seconds_count")

    def check_healthy(self) -> None:
        """Alive, no failed cycle, no traceback."""
        logs = self.daemon.logs()
        assert self.daemon.alive, logs[-3000:]
        assert metric(self.port, "slurm_sched_errors_total") == 0, logs[-3000:]
        assert "Traceback" not in logs, logs

    def stop(self) -> None:
        if self.daemon.alive:
            assert self.daemon.terminate() == 0, self.daemon.logs()[-3000:]


@pytest.fixture
def run(slurm_cluster: MiniCluster, tmp_path: Path) -> Iterator[Run]:
    r = Run(slurm_cluster, tmp_path)
    try:
        yield r
    finally:
        if r.daemon.alive:
            r.daemon.kill()


def scontrol(cluster: MiniCluster, *args: str) -> None:
    proc = subprocess.run(
        ["scontrol", *args], env=cluster.env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, (args, proc.stdout, proc.stderr)


def nodes_of(decision: dict[str, Any]) -> set[str]:
    return {p["node"] for p in decision["action"]["placement"]["parts"]}


def running(cluster: MiniCluster, ids: list[str]) -> dict[str, Any]:
    jobs = squeue_jobs(cluster)
    return {j: jobs[j] for j in ids if j in jobs and jobs[j].state == "RUNNING"}


def test_drained_node_gets_no_new_job_and_is_used_again_after_resume(
    run: Run, slurm_cluster: MiniCluster
) -> None:
    defs = [JobDef(2, 3.0) for _ in range(16)]  # two waves on the 16 GPUs
    ids = submit(slurm_cluster, defs, run.out)
    late_defs = [JobDef(4, 1.0) for _ in range(4)]  # one per node: X gets one after the resume
    late: list[str] = []
    node = ""
    try:
        run.start()
        first = wait_for(lambda: running(slurm_cluster, ids), 30, "a first job running")
        node = sorted(next(iter(first.values())).nodes)[0]
        cycles_at_drain = run.cycles()
        drained_at = time.time()
        scontrol(slurm_cluster, "update", f"nodename={node}", "state=drain", "reason=admin-test")
        seen = wait_for(
            lambda: run.events("node_unavailable", node=node),
            NODE_REFRESH_S + 10,
            f"the daemon to see {node} drained",
        )[0]
        wait_for(lambda: all_final(slurm_cluster, ids), 90, "every job final", step_s=0.5)
        jobs = squeue_jobs(slurm_cluster)
        started_after = {j for j in ids if jobs[j].start_time_s > drained_at}
        on_node = {j: jobs[j].nodes for j in started_after if node in jobs[j].nodes}
        # Slurm refuses to start anything on a drained node; the daemon stops asking once seen
        assert not on_node, on_node
        # the drain is seen by a snapshot of cycle ``seen["cycle"]`` (maybe the one after its
        # actions): no placement there from the next cycle on
        late_placements = [
            r for r in run.starts() if r["cycle"] > seen["cycle"] and node in nodes_of(r)
        ]
        assert not late_placements, late_placements
        asked_before_seen = [
            r for r in run.starts()
            if r["t"] > drained_at and r["cycle"] <= seen["cycle"] and node in nodes_of(r)
        ]  # fmt: skip
        scontrol(slurm_cluster, "update", f"nodename={node}", "state=resume")
        resumed = time.time()
        wait_for(
            lambda: run.events("node_available", node=node),
            NODE_REFRESH_S + 10,
            f"the daemon to see {node} back",
        )
        late = submit(slurm_cluster, late_defs, run.out)
        wait_for(lambda: all_final(slurm_cluster, late), 60, "the late jobs final", step_s=0.5)
        run.check_healthy()
        run.stop()
    finally:
        if node:
            subprocess.run(
                ["scontrol", "update", f"nodename={node}", "state=resume"],
                env=slurm_cluster.env, capture_output=True, check=False,
            )  # fmt: skip
        cancel_and_wait(slurm_cluster, ids + late)
    jobs = squeue_jobs(slurm_cluster)
    assert any(node in jobs[j].nodes for j in late), {j: jobs[j].nodes for j in late}
    assert seen["reason"] == "admin-test" and "DRAIN" in seen["state"], seen
    check_done_once(slurm_cluster, run.out, ids + late, defs + late_defs)
    back_at = min(r["t"] for r in run.starts() if r["t"] > resumed and node in nodes_of(r))
    print(
        f"\ndrain of {node} seen {seen['t'] - drained_at:.1f} s and "
        f"{seen['cycle'] - cycles_at_drain:.0f} cycle(s) after the scontrol update "
        f"(node list read every {NODE_REFRESH_S:g} s, period {PERIOD_S:g} s); "
        f"{len(asked_before_seen)} placement(s) on it before that, none started there; "
        f"{len(started_after)} job(s) started elsewhere after the drain; a placement there "
        f"{back_at - resumed:.1f} s after the resume"
    )


def test_partition_down_starts_nothing_and_up_again_finishes_every_job_once(
    run: Run, slurm_cluster: MiniCluster
) -> None:
    partition = slurm_cluster.managed_partitions[0]
    defs = [JobDef(4, 2.0) for _ in range(8)]  # two waves
    ids = submit(slurm_cluster, defs, run.out)
    down = False
    try:
        run.start()
        wait_for(lambda: len(running(slurm_cluster, ids)) >= 4, 30, "the first wave running")
        cycles_at_down = run.cycles()
        scontrol(slurm_cluster, "update", f"partitionname={partition}", "state=down")
        down = True
        down_at = time.time()
        seen = wait_for(
            lambda: run.events("partition_unavailable", partition=partition),
            NODE_REFRESH_S + 10,
            "the daemon to see the partition down",
        )[0]
        # the first wave ends meanwhile; the second waits for the partition, not for the daemon
        wait_for(
            lambda: all_final(slurm_cluster, ids[:4]), 30, "the first wave final", step_s=0.5
        )
        held_s = START_TIMEOUT_S + 2  # long enough for a start Slurm did not carry out to return
        t_end = time.monotonic() + held_s
        while time.monotonic() < t_end:
            assert not running(slurm_cluster, ids[4:]), "a job started in a down partition"
            time.sleep(0.5)
        # taken before the update: the daemon and Slurm may start jobs as soon as it is applied,
        # before scontrol returns
        up_at = time.time()
        scontrol(slurm_cluster, "update", f"partitionname={partition}", "state=up")
        down = False
        wait_for(
            lambda: run.events("partition_available", partition=partition),
            NODE_REFRESH_S + 10,
            "the daemon to see the partition up",
        )
        wait_for(lambda: all_final(slurm_cluster, ids), 60, "every job final", step_s=0.5)
        run.check_healthy()
        run.stop()
    finally:
        if down:
            subprocess.run(
                ["scontrol", "update", f"partitionname={partition}", "state=up"],
                env=slurm_cluster.env, capture_output=True, check=False,
            )  # fmt: skip
        cancel_and_wait(slurm_cluster, ids)
    jobs = squeue_jobs(slurm_cluster)
    # Slurm's start times are whole seconds (rounded down)
    during = {
        j: jobs[j].start_time_s for j in ids if down_at < jobs[j].start_time_s < math.floor(up_at)
    }
    assert not during, during
    # no placement once the daemon saw the partition down, until it was up again
    asked = [r for r in run.starts() if down_at < r["t"] < up_at]
    assert not [r for r in asked if r["cycle"] > seen["cycle"]], asked
    # a start asked before the daemon saw it is taken back with Slurm's reason
    taken_back = run.events("start_taken_back")
    assert len(taken_back) <= len(asked), (taken_back, asked)
    check_done_once(slurm_cluster, run.out, ids, defs)
    print(
        f"\npartition down {up_at - down_at:.1f} s: seen {seen['t'] - down_at:.1f} s and "
        f"{seen['cycle'] - cycles_at_down:.0f} cycle(s) after the scontrol update; "
        f"{len(asked)} start(s) asked before that, {len(taken_back)} taken back "
        f"({', '.join(sorted({r['slurm_reason'] for r in taken_back})) or 'none'}); no job "
        "started while down; 0 failed cycles"
    )


def test_admin_hold_is_never_released_by_the_daemon(run: Run, slurm_cluster: MiniCluster) -> None:
    fill_defs = [JobDef(4, 4.0) for _ in range(4)]
    fill = submit(slurm_cluster, fill_defs, run.out)
    ids = list(fill)
    try:
        run.start()
        wait_for(lambda: len(running(slurm_cluster, fill)) == 4, 30, "the fill jobs running")
        held_def, other_def = JobDef(4, 1.0), JobDef(4, 1.0)
        [held] = submit(slurm_cluster, [held_def], run.out)
        ids.append(held)
        scontrol(slurm_cluster, "hold", held)
        [other] = submit(slurm_cluster, [other_def], run.out)
        ids.append(other)
        assert squeue_jobs(slurm_cluster)[held].reason == "JobHeldAdmin"
        wait_for(lambda: run.events("admin_hold", job_id=held), 10, "the hold in the log")
        # the fill jobs end and the job behind the held one runs; the held one stays held,
        # under the daemon's lease, for longer than a lease
        held_since = time.monotonic()
        while True:
            job = squeue_jobs(slurm_cluster)[held]
            assert job.state == "PENDING" and job.reason == "JobHeldAdmin", job
            other_done = final_states(slurm_cluster, [other]) == {other: "COMPLETED"}
            if other_done and time.monotonic() - held_since > LEASE_S + 2:
                break
            assert time.monotonic() - held_since < 60, "the job behind the held one did not end"
            time.sleep(0.5)
        job = squeue_jobs(slurm_cluster)[held]
        now = time.time()
        assert now < job.eligible_time_s <= now + LEASE_S + 6, (job.eligible_time_s, now)
        released_at = time.time()
        scontrol(slurm_cluster, "release", held)
        wait_for(lambda: all_final(slurm_cluster, ids), 30, "the held job run", step_s=0.5)
        run.check_healthy()
        run.stop()
    finally:
        cancel_and_wait(slurm_cluster, ids)
    check_done_once(slurm_cluster, run.out, ids, [*fill_defs, held_def, other_def])
    [rel] = run.events("admin_release", job_id=held)
    start = [r for r in run.starts() if r["job_id"] == held]
    assert [r["t"] >= rel["t"] for r in start] == [True], (start, rel)  # the daemon's start
    # ... not Slurm's: the daemon writes the job's settings file before its pin
    assert holder(slurm_cluster).store.read_settings(held) is not None
    commands = [c for r in run.decisions() for c in r.get("commands", [])]
    assert f"scontrol release {held}" not in commands and f"release {held}" not in commands
    print(
        f"\nheld job {held}: held {released_at - run.events('admin_hold', job_id=held)[0]['t']:.1f}"
        f" s under the daemon's lease while {len(fill) + 1} other jobs ran; placed by the daemon "
        f"{start[0]['t'] - released_at:.1f} s after scontrol release"
    )


def test_admin_scancel_of_a_pending_and_a_running_job(run: Run, slurm_cluster: MiniCluster) -> None:
    fill_defs = [JobDef(4, 5.0) for _ in range(4)]
    fill = submit(slurm_cluster, fill_defs, run.out)
    wait_defs = [JobDef(4, 1.0) for _ in range(3)]
    waiting = submit(slurm_cluster, wait_defs, run.out)
    ids = fill + waiting
    try:
        run.start()
        wait_for(lambda: len(running(slurm_cluster, fill)) == 4, 30, "the fill jobs running")
        victim_running, victim_pending = fill[0], waiting[0]
        subprocess.run(
            ["scancel", victim_pending, victim_running], env=slurm_cluster.env, check=True
        )
        wait_for(lambda: all_final(slurm_cluster, ids), 60, "every job final", step_s=0.5)
        wait_for(
            lambda: {r["job_id"] for r in run.events("job_end")} >= set(ids),
            10,
            "a job_end line for every job",
        )
        run.check_healthy()
        run.stop()
    finally:
        cancel_and_wait(slurm_cluster, ids)
    cancelled = {victim_running, victim_pending}
    states = final_states(slurm_cluster, ids)
    assert {j for j, s in states.items() if s == "CANCELLED"} == cancelled, states
    rest = [(j, d) for j, d in zip(ids, fill_defs + wait_defs, strict=True) if j not in cancelled]
    check_done_once(slurm_cluster, run.out, [j for j, _ in rest], [d for _, d in rest])
    ends = [r for r in run.events("job_end") if r["job_id"] in ids]
    assert sorted(r["job_id"] for r in ends) == sorted(ids), ends  # each end noticed once
    by_job = {r["job_id"]: r["state"] for r in ends}
    assert {j: by_job[j] for j in cancelled} == dict.fromkeys(cancelled, "CANCELLED")
    assert all(by_job[j] == "COMPLETED" for j, _ in rest), by_job
    failed = [r for r in run.decisions() if r.get("ok") is False]
    assert not [r for r in failed if r["job_id"] in cancelled], failed
    assert not [r for r in run.starts() if r["job_id"] == victim_pending]
    print(
        f"\nscancel of pending job {victim_pending} and running job {victim_running}: both "
        f"CANCELLED, {len(rest)} others COMPLETED once, {len(failed)} failed action(s)"
    )


def test_admin_time_limit_change_is_kept(run: Run, slurm_cluster: MiniCluster) -> None:
    fill_defs = [JobDef(4, 3.0) for _ in range(4)]
    fill = submit(slurm_cluster, fill_defs, run.out)
    target_def = JobDef(4, 1.0)
    [target] = submit(slurm_cluster, [target_def], run.out)  # sbatch -t 10 (minutes)
    ids = [*fill, target]
    try:
        run.start()
        wait_for(lambda: len(running(slurm_cluster, fill)) == 4, 30, "the fill jobs running")
        assert squeue_jobs(slurm_cluster)[target].state == "PENDING"
        scontrol(slurm_cluster, "update", f"jobid={target}", "timelimit=3")
        [changed] = wait_for(
            lambda: run.events("time_limit", job_id=target), 10, "the new limit in the log"
        )
        limits = []
        while not all_final(slurm_cluster, ids):
            limits.append(squeue_jobs(slurm_cluster)[target].time_limit_s)
            assert len(limits) < 120, "not final after about 60 s"
            time.sleep(0.5)
        limits.append(squeue_jobs(slurm_cluster)[target].time_limit_s)
        run.check_healthy()
        run.stop()
    finally:
        cancel_and_wait(slurm_cluster, ids)
    assert set(limits) == {180.0}, limits  # through the daemon's leases, pin and start
    assert (changed["limit_was_s"], changed["limit_s"]) == (600.0, 180.0), changed
    commands = [c for r in run.decisions() for c in r.get("commands", [])]
    assert [r for r in run.starts() if r["job_id"] == target]
    assert not [c for c in commands if "timelimit" in c.lower()], commands
    check_done_once(slurm_cluster, run.out, ids, [*fill_defs, target_def])
    print(f"\ntime limit of job {target} set to 3 min while pending: read back {len(limits)} "
          "times through its lease renewals, pin and run, always 180 s")
