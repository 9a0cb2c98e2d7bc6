"""slurmctld crashes (SIGKILL: no last state save) while the production daemon
(``slurm-sched run``, ``tests/integration/daemon_run.py``) is in the middle of a cycle.

The exact moment is hit at the process boundary: the daemon runs the Slurm clients from its own
``PATH``, whose first directory holds an ``scontrol`` wrapper (:class:`CtldKiller`). Once armed
with a pattern, the first ``scontrol`` call whose command line (argv, or the batch it reads on
stdin) matches SIGKILLs slurmctld right after a job state save that holds every job end it has
logged (a change it has not saved is lost by any crash, whatever the daemon does; a lost job end
leaves the job RUNNING for minutes after the restart), waits until it is gone, and only then
runs the real ``scontrol``, which fails as on a real crash. The test restarts slurmctld from
its state dir (``MiniCluster.start_ctld``) after the outage it wants. Both tests check that the
daemon rides through (alive, the failed cycles counted, no traceback) and that every job
ends exactly once (``COMPLETED``, one completion record, its work done once, every resume from
the checkpoint before):

1. ``test_ctld_killed_between_pin_and_go_with_leases_running_out``: fifo; slurmctld dies when
   the daemon sends the go (``update JobId=... StartTime=now``) of starts whose pins
   (``NodeList=...``) it has just set, and stays down longer than the lease (12 s), so every
   pending job's lease runs out meanwhile and running jobs end while it is down;
2. ``test_ctld_killed_with_a_suspend_in_flight``: gandiva-fair time-slicing 1-GPU shard jobs
   (quantum 2 s); slurmctld dies when the daemon sends ``suspend X``.

``-s`` prints the figures (docs/reliability.md, "slurmctld crash"). Run them on a private
cluster::

    MINI_SLURM_PREFIX=/usr MINI_SLURM_STATE=/tmp/slurm-sched-cluster-ctld \\
    MINI_SLURM_CTLD_PORT=36917 MINI_SLURM_SLURMD_PORT=37101 \\
    python -m pytest tests/integration/test_ctld_crash.py -s
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from slurm_sched.service.decision_log import read_decisions
from slurm_sched.slurm.cluster import MiniCluster
from tests.contract.slurm_jobs import JobDef, cancel_and_wait, job_log, squeue_jobs, wait_for
from tests.integration.daemon_run import (
    FINAL,
    LEASE_S,
    DaemonProcess,
    all_final,
    check_done_once,
    final_states,
    free_port,
    metric,
    submit,
    write_config,
)

#: ``scontrol`` as the daemon runs it; {real}, {dir}, {pid_file}, {conf}, {job_state} and
#: {ctld_log} are filled in
WRAPPER = """#!/bin/bash
# Fault injection for tests/integration/test_ctld_crash.py: when {dir}/trigger exists and this
# call's command (argv, or the batch on stdin) matches the extended regex in it, SIGKILL
# slurmctld and wait until it is gone, then run the real scontrol (which fails as on a crash).
real={real}
dir={dir}
if [ -e "$dir/trigger" ]; then
  pattern=$(cat "$dir/trigger" 2>/dev/null) || pattern='^$'
  # only a batch reads stdin: a call with arguments must not consume the daemon's stdin
  if [ $# -eq 0 ]; then input=$(cat); text=$input; else text="$*"; fi
  if [ -n "$pattern" ] && grep -qE -- "$pattern" <<<"$text" &&
     mv "$dir/trigger" "$dir/armed" 2>/dev/null; then
    # ours: a live slurmctld with our config on its command line. Slurm 24.11's "scontrol
    # reconfigure" starts slurmctld anew, and the PID file may still name the old process
    ours() {{ [ "$(cat "/proc/$1/comm" 2>/dev/null)" = slurmctld ] &&
      tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF -- "{conf}"; }}
    pid=$(cat {pid_file})
    if ! ours "$pid"; then
      for p in /proc/[0-9]*; do ours "${{p#/proc/}}" && pid=${{p#/proc/}} && break; done
    fi
    # crash right after a job state save that holds every job end slurmctld has logged: a job
    # end it never saved is lost (the job runs "forever" after the restart). slurmctld saves
    # within 5 s of a change (SAVE_MAX_WAIT); it packs its state before it writes the file and
    # logs with ms resolution, so a save written at least 0.2 s after the last job end holds it,
    # and so does the last save when 6 s pass without another (no change came after its pack).
    # Each try waits for a save, then freezes slurmctld (SIGSTOP: no change between the check
    # and the kill); two tries, about 12 s: the daemon kills a client call after its
    # command_timeout_s (15 s)
    last_end() {{
      local line
      line=$(grep '_job_complete: .* done' {ctld_log} 2>/dev/null | tail -n 1) || true
      line=${{line#[}}
      if [ -n "$line" ]; then date -d "${{line%%]*}}" +%s.%N; else echo 0; fi
    }}
    touch "$dir/unsaved-end"
    for try in 1 2; do
      # wait for a save after this call: it holds every change before it (the daemon's pins)
      touch "$dir/matched"
      fresh=0
      for _ in $(seq 60); do
        [ -n "$(find {job_state} -newer "$dir/matched" 2>/dev/null)" ] && fresh=1 && break
        sleep 0.1
      done
      kill -STOP "$pid"
      saved=$(stat -c %.9Y {job_state})
      ended=$(last_end)
      echo "try $try: saved $saved last job end $ended fresh save $fresh" >>"$dir/saves"
      if awk -v s="$saved" -v e="$ended" -v f="$fresh" \
           'BEGIN {{ exit !(s > e + 0.2 || (f == 0 && s > e)) }}'; then
        rm -f "$dir/unsaved-end"
        break
      fi
      [ "$try" = 2 ] && break
      kill -CONT "$pid"
    done
    kill -KILL "$pid"
    printf '%s\\n' "$text" >"$dir/fired.text"
    date +%s.%N >"$dir/fired.at"
    # gone, or a zombie nobody reaps (no init in a container): 10 s at most
    for _ in $(seq 100); do
      grep -qs '^State:[[:space:]]*[^Z]' "/proc/$pid/status" || break
      sleep 0.1
    done
  fi
  if [ $# -eq 0 ]; then exec "$real" <<<"$input"; fi
fi
exec "$real" "$@"
"""

#: the go of a start (not a lease renewal ``StartTime=now+12``)
GO = r"StartTime=now([[:space:]]|$)"
SUSPEND = r"(^|[[:space:]])suspend [0-9]"


class CtldKiller:
    """The ``scontrol`` wrapper first on the daemon's ``PATH`` (see the module docstring)."""

    def __init__(self, cluster: MiniCluster, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        path = cluster.env["PATH"]
        real = shutil.which("scontrol", path=path)
        assert real is not None, f"no scontrol on {path}"
        wrapper = self.dir / "scontrol"
        wrapper.write_text(
            WRAPPER.format(
                real=real,
                dir=self.dir,
                pid_file=cluster.state_dir / "run" / "slurmctld.pid",
                conf=cluster.slurm_conf,
                job_state=cluster.state_dir / "ctld" / "job_state",
                ctld_log=cluster.state_dir / "log" / "slurmctld.log",
            )
        )
        wrapper.chmod(0o755)
        self.env = dict(cluster.env)
        self.env["PATH"] = f"{self.dir}:{path}"

    def arm(self, pattern: str) -> None:
        """Kill slurmctld at the next ``scontrol`` call matching ``pattern`` (ERE)."""
        (self.dir / "trigger").write_text(pattern)

    def fired_at(self) -> float | None:
        """When slurmctld was killed (unix s), None before."""
        try:
            return float((self.dir / "fired.at").read_text())
        except (OSError, ValueError):
            return None

    def lost_a_job_end(self) -> bool:
        """The kill came before a save of slurmctld's last job end (both tries failed)."""
        return (self.dir / "unsaved-end").exists()

    def saves(self) -> str:
        """Each try's save time and last job end time (unix s), one line per try."""
        return (self.dir / "saves").read_text()

    def state(self) -> str:
        """Where the wrapper is (for a failure message): armed or matched, and its tries."""
        files = sorted(p.name for p in self.dir.iterdir())
        saves = self.saves() if (self.dir / "saves").exists() else "no try yet\n"
        return f"wrapper files: {', '.join(files)}\n{saves}"

    def fired_text(self) -> str:
        """The command the daemon was sending when slurmctld died."""
        return (self.dir / "fired.text").read_text()


class CrashRun:
    """One daemon (metrics, decision log, the wrapper on its PATH) and its jobs, for one test."""

    def __init__(self, cluster: MiniCluster, tmp_path: Path, policy: str, **options: float) -> None:
        self.cluster = cluster
        self.port = free_port()
        self.killer = CtldKiller(cluster, tmp_path / "bin")
        cfg = write_config(
            tmp_path / "config.toml",
            cluster,
            policy=policy,
            metrics_port=self.port,
            policy_options=options or None,
            clients_from_path=True,
        )
        self.daemon = DaemonProcess(cfg, tmp_path, env=self.killer.env)
        self.log = tmp_path / "decisions.jsonl"
        self.out = tmp_path / "out"
        self.ids: list[str] = []
        self.defs: list[JobDef] = []
        self.ctld_down = False

    def arm(self, pattern: str) -> None:
        self.killer.arm(pattern)
        self.ctld_down = True  # from now on, maybe: close() starts it again if it is not up

    def submit(self, defs: list[JobDef]) -> list[str]:
        ids = submit(self.cluster, defs, self.out)
        self.ids += ids
        self.defs += defs
        return ids

    def count(self, **match: Any) -> int:
        """Decision-log lines with these fields."""
        return sum(1 for r in self.decisions() if all(r.get(k) == v for k, v in match.items()))

    def decisions(self) -> list[dict[str, Any]]:
        return read_decisions(self.log) if self.log.exists() else []

    def errors(self) -> float:
        return metric(self.port, "slurm_sched_errors_total")

    def ride_out(self, outage_s: float) -> dict[str, float]:
        """Wait for the kill, keep slurmctld down ``outage_s`` and until the daemon has counted
        a failed cycle (the client call in flight blocks while Slurm's clients retry the dead
        controller, up to ``command_timeout_s``), start it again and wait until every job is
        final. Returns the figures."""
        # the matching call comes when the jobs running now end; from it the wrapper's tries
        # take about 12 s
        try:
            killed = wait_for(self.killer.fired_at, 90, "slurmctld killed by the wrapper")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.killer.state()}\n"
                                 f"{self.daemon.logs()[-3000:]}") from None
        # a job end slurmctld never saved leaves the job RUNNING after the restart: Slurm's loss
        assert not self.killer.lost_a_job_end(), (
            f"slurmctld was killed before it saved a job end:\n{self.killer.saves()}"
        )
        wait_for(lambda: self.errors() >= 1, 60, "a failed cycle while slurmctld is down")
        assert self.daemon.alive, self.daemon.logs()[-3000:]
        # the outage length is the experiment's parameter, not a state to poll
        time.sleep(max(0.0, killed + outage_s - time.time()))
        self.cluster.start_ctld()
        self.ctld_down = False
        up = time.time()
        try:
            wait_for(lambda: all_final(self.cluster, self.ids), 120, "every job final", step_s=0.5)
        except AssertionError as exc:
            view = f"{self.slurm_view()}\n{self.daemon.logs()[-3000:]}"
            raise AssertionError(f"{exc}\n{view}") from None
        assert self.daemon.alive, self.daemon.logs()[-3000:]
        jobs = squeue_jobs(self.cluster)
        # Slurm's start times have 1 s resolution
        restarted = [float(jobs[j].start_time_s) for j in self.ids
                     if float(jobs[j].start_time_s) > killed]  # fmt: skip
        figures = {
            "outage_s": up - killed,
            "failed_cycles": self.errors(),
            "cycles": metric(self.port, "slurm_sched_cycle_latency_seconds_count"),
            "first_start_after_restart_s": min(restarted, default=float("nan")) - up,
            "taken_back": self.count(event="start_taken_back"),
            # slurmctld restarted lists the nodes UNKNOWN until their slurmds register again
            "nodes_unavailable": self.count(event="node_unavailable"),
            "suspends_after": sum(
                1
                for r in self.decisions()
                if r.get("kind") == "suspend" and r["ok"] and r["t"] > killed
            ),
        }
        assert self.daemon.terminate() == 0, self.daemon.logs()[-3000:]
        return figures

    def slurm_view(self) -> str:
        """This test's jobs as Slurm sees them, the ones not final first with their full
        record, and the nodes (for a failure message)."""
        states = final_states(self.cluster, self.ids)
        open_ids = [j for j in self.ids if states.get(j) not in FINAL]
        out = [f"not final: {', '.join(f'{j}={states.get(j)}' for j in open_ids)}"]
        argvs = [["scontrol", "show", "job", j] for j in open_ids]
        argvs += [
            ["squeue", "--states=all", f"--jobs={','.join(self.ids)}", "-o", "%i %T %r %S %N"],
            ["scontrol", "show", "nodes"],
        ]
        for argv in argvs:
            proc = subprocess.run(
                argv, env=self.cluster.env, capture_output=True, text=True, check=False
            )
            out.append(proc.stdout + proc.stderr)
        return "\n".join(out)

    def close(self) -> None:
        if self.daemon.alive:
            self.daemon.kill()
        (self.killer.dir / "trigger").unlink(missing_ok=True)
        if self.ctld_down:
            self.cluster.start_ctld()
        cancel_and_wait(self.cluster, self.ids)
        # Slurm 22.05.8 may leak the GPUs of jobs that ended while it was down: clear that for
        # the tests that come after
        self.cluster.reconfigure()

    def check(self, figures: dict[str, float]) -> None:
        logs = self.daemon.logs()
        assert figures["failed_cycles"] >= 1, logs[-3000:]
        assert "Traceback" not in logs, logs
        check_done_once(self.cluster, self.out, self.ids, self.defs)

    def started_by_slurm(self) -> list[str]:
        """Jobs whose last run no decision of the daemon placed: Slurm started them itself
        (a lease ran out, or a pin whose go was cut by the crash)."""
        placed: dict[str, int] = {}
        for r in self.decisions():
            if r.get("ok") and (r.get("action") or {}).get("placement") is not None:
                placed[r["job_id"]] = placed.get(r["job_id"], 0) + 1
        out = []
        for jid in self.ids:
            starts = [f for e, f in job_log(self.out, jid) if e == "start"]
            if len(starts) > placed.get(jid, 0):
                out.append(jid)
        return out


def test_ctld_killed_between_pin_and_go_with_leases_running_out(
    slurm_cluster: MiniCluster, tmp_path: Path
) -> None:
    run = CrashRun(slurm_cluster, tmp_path, "fifo")
    # a first wave fills the 16 GPUs; the second waits under the daemon's lease and is pinned
    # and let go when the first wave ends: the go is where slurmctld dies. The first wave runs
    # long enough that it is still running when the trap is armed, however slow squeue is.
    first = run.submit([JobDef(4, 10.0)] * 4)
    second = run.submit([JobDef(2, 3.0)] * 8)
    try:
        run.daemon.start()

        def first_running_second_leased() -> bool:
            jobs = squeue_jobs(slurm_cluster)
            now = time.time()
            return all(jobs[j].state == "RUNNING" for j in first) and all(
                jobs[j].state == "PENDING" and float(jobs[j].eligible_time_s) <= now + LEASE_S + 2
                for j in second
            )

        wait_for(first_running_second_leased, 30, "first wave running, second under the lease")
        run.arm(GO)
        jobs = squeue_jobs(slurm_cluster)
        assert all(jobs[j].state == "PENDING" for j in second), (
            "the second wave was let go before the trap was armed: "
            f"{ {j: jobs[j].state for j in second} }")
        figures = run.ride_out(outage_s=LEASE_S + 4)
        m = re.search(r"JobId=([0-9,]+) StartTime=now", run.killer.fired_text())
        pinned = [j for j in (m.group(1).split(",") if m else []) if j in second]
    finally:
        run.close()
    by_slurm = run.started_by_slurm()
    print(
        f"\nslurmctld killed at the go of {len(pinned)} pinned start(s): down "
        f"{figures['outage_s']:.1f} s (lease {LEASE_S} s), {figures['failed_cycles']:.0f} failed "
        f"cycles of {figures['cycles']:.0f}, {figures['taken_back']:.0f} pinned start(s) "
        f"taken back, {figures['nodes_unavailable']:.0f} node(s) unavailable after the restart, "
        f"first job started {figures['first_start_after_restart_s']:.0f} s after the restart; "
        f"started by Slurm itself: {len(by_slurm)} of {len(second)}"
    )
    assert pinned, run.killer.fired_text()
    # every pending job's lease (renewed every lease/2 at most) ran out while slurmctld was down
    assert figures["outage_s"] > LEASE_S, figures
    run.check(figures)


def test_ctld_killed_with_a_suspend_in_flight(slurm_cluster: MiniCluster, tmp_path: Path) -> None:
    run = CrashRun(slurm_cluster, tmp_path, "gandiva-fair", quantum_s=2.0)
    # 20 one-GPU jobs on 16 GPUs: four GPUs are time-sliced, a suspend at every quantum
    run.submit([JobDef(1, 6.0, shard=True)] * 20)
    try:
        run.arm(SUSPEND)
        run.daemon.start()
        figures = run.ride_out(outage_s=10)
        suspended = run.killer.fired_text().split()
        assert "suspend" in suspended, suspended
    finally:
        run.close()
    print(
        f"\nslurmctld killed at a batch of {suspended.count('suspend')} suspend(s): down "
        f"{figures['outage_s']:.1f} s, "
        f"{figures['failed_cycles']:.0f} failed cycles of {figures['cycles']:.0f}, first job "
        f"started {figures['first_start_after_restart_s']:.0f} s after the restart, "
        f"{figures['suspends_after']:.0f} suspends after the kill; started by Slurm itself: "
        f"{len(run.started_by_slurm())} of {len(run.ids)}"
    )
    run.check(figures)
