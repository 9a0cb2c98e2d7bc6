"""Fault tests of the production daemon (``slurm-sched run``) on the real mini Slurm cluster.

The daemon runs as a real subprocess (``python -m slurm_sched.cli run --config ...``) with a short
fail-open lease, scheduling ``checkpointed_sleep`` jobs submitted with ``sbatch``:

1. SIGKILLed every ~15 s and restarted at once during a 60-job run: every job completes exactly
   once (Slurm's final state, one completion record, one ``done`` in its log, every restart
   resuming from the checkpoint before);
2. stopped for good: the pending managed jobs are started by Slurm's own scheduler once their
   lease runs out (not before), within the lease plus one periodic scheduling pass;
3. slurmctld stopped and started again mid-run: the daemon keeps running, counts the failed
   cycles (``slurm_sched_errors_total``), and every job finishes.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
import time
from pathlib import Path

from slurm_sched.protocol.settings_file import settings_entry_for
from slurm_sched.service.decision_log import read_decisions
from slurm_sched.slurm.cluster import MiniCluster
from slurm_sched.slurm.lease import SLURM_DEFAULT_SCHED_INTERVAL_S
from tests.contract.slurm_jobs import (
    JobDef,
    cancel_and_wait,
    settings_read_at_starts,
    squeue_jobs,
    wait_for,
)
from tests.integration.daemon_run import (
    LEASE_S,
    REPO,
    DaemonProcess,
    all_final,
    check_done_once,
    final_states,
    free_port,
    metric,
    submit,
    write_config,
)


def test_sigkill_every_15s_all_60_jobs_complete_exactly_once(
    slurm_cluster: MiniCluster, tmp_path: Path
) -> None:
    """SRTF (preemptive): 40 jobs of 2-6 s, then 20 of 1 s that preempt the longer ones; the
    daemon is SIGKILLed 7.5 s after its start and every 15 s after that."""
    # a lease renewed up to lease/2 before a kill must outlast the restart on a loaded machine
    # (two suites on two cores): every run here is the daemon's, none Slurm's after a lease
    daemon = DaemonProcess(
        write_config(tmp_path / "config.toml", slurm_cluster, policy="srtf", lease_s=40),
        tmp_path,
    )
    rng = random.Random(60)
    first = [
        JobDef(gpus=rng.choice((1, 1, 2, 2, 4)), duration_s=float(rng.choice((2, 3, 4, 6))))
        for _ in range(40)
    ]
    late = [JobDef(gpus=rng.choice((1, 2, 4)), duration_s=1.0) for _ in range(20)]
    defs = first + late
    out = tmp_path / "out"
    ids = submit(slurm_cluster, first, out)
    daemon.start()
    kills = 0
    t0 = time.monotonic()
    next_kill = t0 + 7.5
    try:
        time.sleep(4)
        ids += submit(slurm_cluster, late, out)
        while not all_final(slurm_cluster, ids):
            assert time.monotonic() - t0 < 240, (
                f"not done after 240 s: {final_states(slurm_cluster, ids)}\n{daemon.logs()[-3000:]}"
            )
            if time.monotonic() >= next_kill and daemon.reconciled():
                daemon.kill()
                kills += 1
                daemon.start()
                next_kill = time.monotonic() + 15
            assert daemon.alive, daemon.logs()[-3000:]
            time.sleep(0.5)
        elapsed = time.monotonic() - t0
        # the last instance may have started just as the last job ended: it must still finish
        # its start-up reconciliation (with or without jobs left)
        end = time.monotonic() + 60
        while not daemon.reconciled() and time.monotonic() < end:
            assert daemon.alive, daemon.logs()[-3000:]
            time.sleep(0.2)
    finally:
        if daemon.alive:
            daemon.kill()
        cancel_and_wait(slurm_cluster, ids)
    decisions = read_decisions(tmp_path / "decisions.jsonl")
    preempts = sum(1 for r in decisions if r.get("kind") == "preempt" and r["ok"])
    print(f"\n60 jobs in {elapsed:.1f} s with {kills} SIGKILLs of the daemon, {preempts} preempts")
    assert kills >= 2, f"the run ended after {elapsed:.0f} s, before two kills"
    check_done_once(slurm_cluster, out, ids, defs)
    logs = daemon.logs()
    assert logs.count("reconcile (did)") == kills + 1, logs[-3000:]
    assert "Traceback" not in logs, logs
    # every run was placed by a daemon, none by Slurm after a lease ran out, and started with
    # the settings written for its node: the daemon writes the settings file before each pin
    # (the decision log may miss the cycle a kill cut short), and a file keeps the decisions of
    # earlier pins, which Slurm may still act on when a kill cut the next one short
    for jid in ids:
        node, settings = settings_read_at_starts(out, jid)[-1]
        assert settings is not None, f"job {jid} ran without a decision of the daemon"
        assert settings_entry_for(settings, nodes=[node]) is not None, (jid, node, settings)


def slurm_sched_interval_s(cluster: MiniCluster) -> float:
    """Slurm's periodic main scheduling pass: on a quiet cluster, the longest a job waits after
    its begin time has passed (the backfill pass skips quiet periods)."""
    text = subprocess.run(
        ["scontrol", "show", "config"], env=cluster.env, capture_output=True, text=True, check=True
    ).stdout
    m = re.search(r"sched_interval=(\d+)", text)
    return float(m.group(1)) if m else SLURM_DEFAULT_SCHED_INTERVAL_S


def test_daemon_stopped_for_good_slurm_starts_pending_jobs_within_the_lease(
    slurm_cluster: MiniCluster, daemon: DaemonProcess, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    # four jobs fill the 16 GPUs; three more wait for them under the daemon's lease
    fill = submit(slurm_cluster, [JobDef(4, 60.0)] * 4, out)
    waiting = submit(slurm_cluster, [JobDef(4, 1.0)] * 3, out)
    ids = fill + waiting
    daemon.start()
    try:

        def leased_and_full() -> bool:
            jobs = squeue_jobs(slurm_cluster)
            now = time.time()
            running = all(jobs[j].state == "RUNNING" for j in fill)
            # the daemon has replaced the plugin's 120 s lease with its own
            leased = all(
                jobs[j].state == "PENDING"
                and now < float(jobs[j].eligible_time_s) <= now + LEASE_S + 6
                for j in waiting
            )
            return running and leased

        wait_for(leased_and_full, 30, "fill jobs running, waiting jobs under the daemon's lease")
        daemon.kill()
        killed_at = time.time()
        cancel_and_wait(slurm_cluster, fill)  # the GPUs are free now; only the lease holds
        bound_s = LEASE_S + slurm_sched_interval_s(slurm_cluster) + 10

        def started() -> dict[str, float] | None:
            jobs = squeue_jobs(slurm_cluster)
            if all(float(jobs[j].start_time_s) > 0 and jobs[j].state != "PENDING"
                   for j in waiting):
                return {j: float(jobs[j].start_time_s) for j in waiting}
            return None

        starts = wait_for(started, bound_s + 5, "Slurm to start the waiting jobs", step_s=0.5)
    finally:
        cancel_and_wait(slurm_cluster, ids)
    delays = {j: s - killed_at for j, s in starts.items()}
    print(f"\nstarted by Slurm {sorted(round(d, 1) for d in delays.values())} s after the kill "
          f"(lease {LEASE_S} s, bound {bound_s:.0f} s)")
    # not before the lease ran out (renewed at least every lease/2 until the kill) ...
    assert min(delays.values()) >= LEASE_S / 2 - 1.5, delays
    # ... and not much after: fail-open within the lease plus one periodic scheduling pass
    assert max(delays.values()) <= bound_s, delays


def test_slurmctld_restart_mid_run_daemon_survives_and_every_job_finishes(
    slurm_cluster: MiniCluster, tmp_path: Path
) -> None:
    port = free_port()
    d = DaemonProcess(
        write_config(tmp_path / "config.toml", slurm_cluster, metrics_port=port), tmp_path
    )
    rng = random.Random(3)
    defs = [
        JobDef(gpus=rng.choice((1, 2, 2, 4)), duration_s=float(rng.choice((2, 3, 4))))
        for _ in range(20)
    ]
    out = tmp_path / "out"
    ids = submit(slurm_cluster, defs, out)
    d.start()
    ctld_down = False
    try:
        wait_for(lambda: metric(port, "slurm_sched_actions_total") >= 8, 30, "first starts")
        slurm_cluster.stop_ctld()
        ctld_down = True
        down_at = time.monotonic()
        # Slurm's clients retry a dead controller for ~9 s (squeue then prints JSON with an
        # error) and succeed if it comes back meanwhile: stay down until the daemon has seen
        # the outage, and at least 8 s
        wait_for(
            lambda: metric(port, "slurm_sched_errors_total") >= 1,
            60,
            "a failed cycle while slurmctld is down",
        )
        time.sleep(max(0.0, 8 - (time.monotonic() - down_at)))
        assert d.alive, d.logs()[-3000:]
        slurm_cluster.start_ctld()
        ctld_down = False
        wait_for(lambda: all_final(slurm_cluster, ids), 120, "every job final", step_s=0.5)
        assert d.alive, d.logs()[-3000:]
        errors = metric(port, "slurm_sched_errors_total")
        cycles = metric(port, "slurm_sched_cycle_latency_seconds_count")
        assert d.terminate() == 0, d.logs()[-3000:]
    finally:
        if ctld_down:
            slurm_cluster.start_ctld()
        if d.alive:
            d.kill()
        cancel_and_wait(slurm_cluster, ids)
        # Slurm 22.05.8 may leak the GPUs of jobs that ended while it was down: clear that for
        # the tests that come after
        slurm_cluster.reconfigure()
    print(f"\nslurmctld restart: {errors:.0f} failed cycles counted of {cycles:.0f}")
    assert errors >= 1, d.logs()[-3000:]
    assert "Traceback" not in d.logs(), d.logs()
    check_done_once(slurm_cluster, out, ids, defs)


def test_shadow_mode_changes_nothing(slurm_cluster: MiniCluster, tmp_path: Path) -> None:
    """--dry-run: no lease renewal, no start; the would-be commands are logged."""
    out = tmp_path / "out"
    [jid] = submit(slurm_cluster, [JobDef(1, 1.0)], out)
    before = squeue_jobs(slurm_cluster)[jid]
    cfg = write_config(tmp_path / "config.toml", slurm_cluster)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "slurm_sched.cli", "run", "--config", str(cfg), "--once",
             "--dry-run"],
            cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        after = squeue_jobs(slurm_cluster)[jid]
    finally:
        cancel_and_wait(slurm_cluster, [jid])
    assert proc.returncode == 0, proc.stderr
    assert after.state == "PENDING"
    assert after.eligible_time_s == before.eligible_time_s  # not renewed, not started
    # under its lease: the pin needs no pending-only guard
    assert f"would run: scontrol update JobId={jid} NodeList=" in proc.stderr, proc.stderr
    assert "shadow cycle:" in proc.stderr
