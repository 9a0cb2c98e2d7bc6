"""A long run with chaos: the production daemon schedules hundreds of short jobs on a private mini
cluster while a fault hits every minute; afterwards Slurm's accounting and the decision log are
audited (``tests/soak/chaos_audit.py``). Too long for the default test run; its last results are
in ``docs/reliability.md`` ("A long run with chaos")::

    MINI_SLURM_PREFIX=/usr .venv/bin/python -m tests.soak.chaos_run \\
        --minutes 30 --jobs 500 --out tests/soak/results/chaos-22.05.json

The policy is Muri-S with a 60 s rescheduling interval: it shares GPUs (one-GPU jobs with stage
profiles run as groups on one GPU through gres/shard) and preempts (a job not in a new round's
groups is requeued). The faults, one at a random moment of every minute, each undone later:

- ``node_crash``: a node's slurmd, slurmstepds and job processes SIGKILLed (a node with running
  jobs when there is one); Slurm marks it DOWN after ``SlurmdTimeout``; slurmd restarted 50 s on;
- ``ctld_kill``: slurmctld SIGKILLed, restarted from its state dir 5-25 s later;
- ``drain``: a node drained, resumed 40 s later;
- ``partition_down``: the managed partition set DOWN, UP 20 s later;
- ``admin_hold``: a pending job held by an operator, released 30 s later;
- ``daemon_kill``: the daemon SIGKILLed, restarted 0-5 s later.

Every job must end exactly once (``sacct``: one final record, completed unless it was submitted
with ``--no-requeue`` and its node crashed; its log: the work done once, every restart resuming
from the checkpoint before), the daemon must never die on its own, and every run start and stop in
the accounting must be explained by the decision log or a fault (``chaos_audit``). The exit code
is 0 when nothing is unexplained. Reported apart: a job that finished and was run again from its
final checkpoint (Slurm never learned of its end), and a submission slurmctld accepted and lost
in a crash (``sbatch`` later returns its id again). The decision log, the job logs and the raw
``sacct -D`` output stay in ``--workdir``. Uses its own cluster (``--state``, ports 46817/47001).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slurm_sched.service.decision_log import read_decisions
from slurm_sched.slurm.cluster import MiniCluster
from tests.contract.slurm_jobs import (
    STEP_S,
    JobDef,
    assert_resumes_in_order,
    job_log,
    submit_sleep_job,
)
from tests.integration.daemon_run import DaemonProcess, free_port, holder, metric
from tests.soak.chaos_audit import audit, parse_sacct

POLICY = "muri-s"
POLICY_OPTIONS = {"interval_s": 60.0}
FAULTS = ("node_crash", "ctld_kill", "drain", "partition_down", "admin_hold", "daemon_kill")
#: stage profiles (ms per iteration: storage, CPU, GPU, network) that Muri groups on one GPU
PROFILES = [(10, 60, 20, 10), (60, 10, 10, 20), (10, 10, 60, 20), (20, 10, 10, 60)]
SCHED_INTERVAL_S = 10.0  # the mini cluster's sched_interval (MINI_SLURM_SCHED_INTERVAL default)


@dataclass
class Planned:
    """One job of the workload: when it is submitted and what it asks for."""

    at_s: float
    job: JobDef
    hints: dict[str, object]
    job_id: str | None = None
    #: Slurm gave its id to a later submission: slurmctld crashed before saving this one
    lost: bool = False


@dataclass
class Fault:
    kind: str
    at_s: float
    target: str = ""
    undo_at_s: float | None = None
    undone_at_s: float | None = None
    note: str = ""

    def as_dict(self, t0: float) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "at_s": round(self.at_s - t0, 1),
            "target": self.target,
            "undone_at_s": None if self.undone_at_s is None else round(self.undone_at_s - t0, 1),
            **({"note": self.note} if self.note else {}),
        }


@dataclass
class Chaos:
    """The run's state: the cluster, the daemon, the workload, the faults and their undo list."""

    cluster: MiniCluster
    daemon: DaemonProcess
    workdir: Path
    rng: random.Random
    lease_s: float
    faults: list[Fault] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    ctld_down: bool = False
    daemon_down: bool = False
    submit_errors: int = 0

    # ------------------------------------------------------------------ Slurm helpers
    def client(self, *argv: str, timeout_s: float = 30) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), env=self.cluster.env, capture_output=True, text=True,
                              timeout=timeout_s, check=False)

    def node_jobs(self, ids: list[str]) -> dict[str, list[str]]:
        """Running jobs of ours per node (empty while slurmctld does not answer)."""
        if self.ctld_down or not ids:
            return {}
        out = self.client("squeue", "-h", "-t", "R", "-o", "%i %N", "-j", ",".join(ids))
        per: dict[str, list[str]] = {}
        for line in out.stdout.splitlines():
            jid, _, nodes = line.partition(" ")
            for n in nodes.split(","):
                per.setdefault(n, []).append(jid)
        return per

    def pending(self, ids: list[str]) -> list[str]:
        if self.ctld_down or not ids:
            return []
        out = self.client("squeue", "-h", "-t", "PD", "-o", "%i", "-j", ",".join(ids))
        return out.stdout.split()

    # ------------------------------------------------------------------ faults
    def inject(self, kind: str, now: float, ids: list[str]) -> Fault:
        f = Fault(kind, now)
        nodes = [s.split(":")[0] for s in self.cluster.exported()["MINI_SLURM_NODES"].split()]
        if kind == "node_crash":
            busy = self.node_jobs(ids)
            f.target = self.rng.choice(sorted(busy) or nodes)
            f.note = f"{len(busy.get(f.target, []))} running job(s)"
            self.cluster.kill_node(f.target)
            f.undo_at_s = now + 50
        elif kind == "ctld_kill":
            self.cluster.kill_ctld()
            self.ctld_down = True
            f.undo_at_s = now + self.rng.uniform(5, 25)
        elif kind == "drain":
            f.target = self.rng.choice(nodes)
            self.client("scontrol", "update", f"nodename={f.target}", "state=drain",
                        "reason=chaos")
            f.undo_at_s = now + 40
        elif kind == "partition_down":
            f.target = self.cluster.managed_partitions[0]
            self.client("scontrol", "update", f"partitionname={f.target}", "state=down")
            f.undo_at_s = now + 20
        elif kind == "admin_hold":
            waiting = self.pending(ids)
            if waiting:
                f.target = self.rng.choice(waiting)
                res = self.client("scontrol", "hold", f.target)
                f.note = "held" if res.returncode == 0 else f"hold failed: {res.stderr.strip()}"
            f.undo_at_s = now + 30
        elif kind == "daemon_kill":
            self.daemon.kill()
            self.daemon_down = True
            f.undo_at_s = now + self.rng.uniform(0, 5)
        self.faults.append(f)
        return f

    def undo(self, f: Fault, now: float) -> None:
        """Undo a fault; an admin command slurmctld refuses (it may be restarting) is tried
        again 5 s later."""
        res: subprocess.CompletedProcess[str] | None = None
        if f.kind == "node_crash":
            self.cluster.start_node(f.target)
        elif f.kind == "ctld_kill":
            self.cluster.start_ctld()
            self.ctld_down = False
        elif f.kind == "drain":
            res = self.client("scontrol", "update", f"nodename={f.target}", "state=resume")
        elif f.kind == "partition_down":
            res = self.client("scontrol", "update", f"partitionname={f.target}", "state=up")
        elif f.kind == "admin_hold" and f.note == "held":
            res = self.client("scontrol", "release", f.target)
            if res.returncode != 0 and "already completed" in res.stderr + res.stdout:
                res = None  # cancelled or ended meanwhile: nothing to release
        elif f.kind == "daemon_kill":
            self.daemon.start()
            self.daemon_down = False
        if res is not None and res.returncode != 0:
            f.note = f"undo retried: {res.stderr.strip()}"
            f.undo_at_s = now + 5
            return
        f.undone_at_s = now

    def undo_due(self, now: float, everything: bool = False) -> None:
        # slurmctld first: the other undos need it (and wait while it is down)
        due = [f for f in self.faults if f.undone_at_s is None and f.undo_at_s is not None
               and (everything or f.undo_at_s <= now)]
        for f in sorted(due, key=lambda f: (f.kind != "ctld_kill", f.at_s)):
            if f.kind != "ctld_kill" and self.ctld_down:
                continue
            self.undo(f, time.time())
        if everything:
            for _ in range(24):  # admin undos slurmctld refused: a last try for 2 minutes
                left = [f for f in self.faults if f.undone_at_s is None and f.undo_at_s]
                if not left:
                    break
                time.sleep(5)
                for f in left:
                    self.undo(f, time.time())

    def fail_open_windows(self, t_end: float) -> list[tuple[float, float]]:
        """When Slurm, not the daemon, may start a managed job: from a daemon kill or a
        slurmctld kill until its undo plus a lease renewal and a scheduling pass."""
        slack = self.lease_s / 2 + 2 * SCHED_INTERVAL_S
        return [
            (f.at_s, (f.undone_at_s or t_end) + slack)
            for f in self.faults
            if f.kind in ("daemon_kill", "ctld_kill")
        ]


def workload(rng: random.Random, n: int, spread_s: float) -> list[Planned]:
    """``n`` jobs arriving uniformly over ``spread_s``: 60% one-GPU shard jobs with stage
    profiles (Muri groups them), the rest 2, 4 or 8 GPUs; 6-40 s of work; one in ten with
    ``--no-requeue``."""
    plan = []
    for _ in range(n):
        r = rng.random()
        gpus = 1 if r < 0.6 else 2 if r < 0.85 else 4 if r < 0.95 else 8
        duration_s = float(rng.randint(6, 40))
        hints: dict[str, object] = {}
        if gpus == 1:
            hints["stage_times_ms"] = list(rng.choice(PROFILES))
        at_s, requeue = rng.uniform(0, spread_s), rng.random() >= 0.1
        job = JobDef(gpus=gpus, duration_s=duration_s, shard=gpus == 1, requeue=requeue)
        plan.append(Planned(at_s, job, hints))
    return sorted(plan, key=lambda p: p.at_s)


def submit(cluster: MiniCluster, p: Planned, out: Path) -> str:
    """sbatch one planned ``checkpointed_sleep`` job (30-minute limit: a job may be preempted
    and restarted many times)."""
    return submit_sleep_job(cluster, holder(cluster), p.job, out, extra_hints=p.hints,
                            time_limit_min=30, timeout_s=60)


def write_config(path: Path, cluster: MiniCluster, lease_s: float, metrics_port: int) -> Path:
    options = "".join(f"{k} = {v}\n" for k, v in POLICY_OPTIONS.items())
    path.write_text(
        f'policy = "{POLICY}"\n'
        "period_s = 1.0\n"
        f"lease_s = {lease_s}\n"
        f'mini_cluster = "{cluster.state_dir}"\n'
        f'managed_partitions = ["{cluster.managed_partitions[0]}"]\n'
        f'state_dir = "{path.parent / "state"}"\n'
        "command_timeout_s = 20\n"
        "start_timeout_s = 20\n"
        "node_refresh_s = 10\n"
        f"[policy_options]\n{options}"
        "[safety]\nmin_runtime_before_preempt_s = 5\n"
        "[observability]\n"
        f'decision_log = "{path.parent / "decisions.jsonl"}"\n'
        f"metrics_port = {metrics_port}\n"
        'log_level = "INFO"\n'
    )
    return path


def sacct(chaos: Chaos, ids: list[str], *, all_runs: bool) -> str:
    argv = ["sacct", "-X", "-n", "-P", "-o", "JobIDRaw,State,Start,End,NodeList",
            "-S", "now-1days", "-j", ",".join(ids)]
    if all_runs:
        argv.insert(2, "-D")
    res = chaos.client(*argv, timeout_s=60)
    if res.returncode != 0:
        raise RuntimeError(f"sacct failed: {res.stderr.strip()}")
    return res.stdout


def finished(chaos: Chaos, ids: list[str]) -> int:
    """How many of ``ids`` have a final latest record in sacct."""
    if chaos.ctld_down:
        return -1
    try:
        runs = parse_sacct(sacct(chaos, ids, all_runs=False), epoch)
    except (RuntimeError, subprocess.TimeoutExpired):
        return -1
    return sum(1 for r in runs if r.state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT",
                                               "NODE_FAIL", "OUT_OF_MEMORY"))


def epoch(text: str) -> float:
    """Slurm's local ``YYYY-MM-DDTHH:MM:SS`` as unix seconds."""
    return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))


def check_logs(out: Path, planned: list[Planned], final: dict[str, str], jobcomp: Path
               ) -> tuple[list[str], list[str]]:
    """(problems, reruns): a completed job did its work once (one completion record in
    ``jobcomp``) and resumed in order; a failed one never finished. A job that finished and was
    run again from its final checkpoint (no iteration done twice: Slurm never learned of the
    first end, e.g. its node crashed before reporting it) is a rerun, not a problem."""
    problems: list[str] = []
    reruns: list[str] = []
    records = jobcomp.read_text().splitlines() if jobcomp.exists() else []
    for p in planned:
        jid = p.job_id
        assert jid is not None
        events = job_log(out, jid)
        dones = [f for e, f in events if e == "done"]
        want = str(max(1, round(p.job.duration_s / STEP_S)))
        first_done = next((i for i, (e, _) in enumerate(events) if e == "done"), None)
        after = events[first_done + 1:] if first_done is not None else []
        rerun = bool(after) and all(f.get("resume_from") == want for e, f in after
                                    if e == "start")
        if rerun:
            reruns.append(jid)
        if final.get(jid) == "COMPLETED":
            if not dones or any(d != {"iterations": want} for d in dones) or (
                    len(dones) > 1 and not rerun):
                problems.append(f"job {jid}: done lines {dones}, expected one of {want} iterations")
            n = sum(1 for r in records if re.search(rf"\bJobId={jid}\b.*JobState=COMPLETED", r))
            if n != 1 and not rerun:
                problems.append(f"job {jid}: {n} COMPLETED records in jobcomp.txt")
        elif dones and not rerun:
            problems.append(f"job {jid}: {final.get(jid)} but its log says done {dones}")
        try:
            assert_resumes_in_order(jid, events)
        except AssertionError:
            problems.append(f"job {jid}: a restart did not resume from the checkpoint before")
    return problems, reruns


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30.0, help="faults for this long")
    ap.add_argument("--jobs", type=int, default=500)
    ap.add_argument("--fault-every-s", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--lease-s", type=float, default=30.0)
    ap.add_argument("--state", default="/tmp/slurm-sched-cluster-chaos")
    ap.add_argument("--workdir", default="/tmp/slurm-sched-chaos-run")
    ap.add_argument("--out", type=Path, default=None, help="write the result as JSON here")
    ap.add_argument("--keep", action="store_true", help="leave the cluster up afterwards")
    args = ap.parse_args(argv)

    rng = random.Random(args.seed)
    workdir = Path(args.workdir)
    if workdir.exists():
        subprocess.run(["rm", "-rf", str(workdir)], check=True)
    workdir.mkdir(parents=True)
    cluster = MiniCluster(args.state, ctld_port=46817, slurmd_port=47001,
                          lease_s=int(args.lease_s),
                          slurm_prefix=os.environ.get("MINI_SLURM_PREFIX") or None)
    cluster.down(purge=True)
    cluster.up()
    version = subprocess.run(["scontrol", "--version"], env=cluster.env, capture_output=True,
                             text=True, check=True).stdout.strip()
    port = free_port()
    daemon = DaemonProcess(write_config(workdir / "config.toml", cluster, args.lease_s, port),
                           workdir)
    chaos = Chaos(cluster, daemon, workdir, rng, args.lease_s)
    out = workdir / "out"
    span_s = args.minutes * 60
    planned = workload(rng, args.jobs, max(60.0, span_s - 300))
    ids: list[str] = []
    lost_submissions: list[str] = []
    t0 = time.time()
    daemon.start()
    next_fault = t0 + rng.uniform(30, args.fault_every_s)
    last_progress = 0.0
    done = 0
    print(f"chaos: {version}, {POLICY} {POLICY_OPTIONS}, {args.jobs} jobs, a fault every "
          f"{args.fault_every_s:.0f} s for {args.minutes:.0f} min", flush=True)
    try:
        queue = list(planned)
        while True:
            now = time.time()
            chaos.undo_due(now)
            while queue and queue[0].at_s <= now - t0 and not chaos.ctld_down:
                p = queue[0]
                try:
                    p.job_id = submit(cluster, p, out)
                except subprocess.CalledProcessError as exc:
                    chaos.submit_errors += 1
                    print(f"  sbatch failed: {exc.stderr.strip()}; retrying", flush=True)
                    break
                except subprocess.TimeoutExpired:
                    chaos.submit_errors += 1
                    print("  sbatch timed out; retrying", flush=True)
                    break
                queue.pop(0)
                if p.job_id in ids:
                    # slurmctld had accepted the earlier job but crashed before saving it
                    earlier = next(q for q in planned if q.job_id == p.job_id and q is not p)
                    earlier.lost = True
                    lost_submissions.append(p.job_id)
                    print(f"  job id {p.job_id} given again: Slurm lost the earlier "
                          "submission in a slurmctld crash", flush=True)
                    continue
                ids.append(p.job_id)
            if now >= next_fault and now - t0 < span_s:
                kind = rng.choice(FAULTS)
                if {"ctld_kill": chaos.ctld_down, "daemon_kill": chaos.daemon_down}.get(kind):
                    kind = "drain"  # that one is still down
                f = chaos.inject(kind, now, ids)
                print(f"  {now - t0:6.0f}s fault {f.kind} {f.target} {f.note}", flush=True)
                minute_end = t0 + (int((now - t0) // args.fault_every_s) + 2) * args.fault_every_s
                next_fault = minute_end - rng.uniform(0, args.fault_every_s)
            if not chaos.daemon_down and not daemon.alive:
                rc = daemon.proc.returncode if daemon.proc else None
                chaos.problems.append(f"the daemon exited on its own (rc {rc}) at "
                                      f"{now - t0:.0f} s")
                daemon.start()
            if now - last_progress >= 30 and ids:
                last_progress = now
                done = finished(chaos, ids) if not queue else done
                print(f"  {now - t0:6.0f}s submitted {len(ids)}/{len(planned)}, "
                      f"final {done if done >= 0 else '?'}, faults {len(chaos.faults)}",
                      flush=True)
                if not queue and done == len(ids) and now - t0 >= span_s:
                    break
            if now - t0 > span_s + 900:
                chaos.problems.append("not every job was final 15 minutes after the faults "
                                      "stopped")
                break
            time.sleep(0.5)
    finally:
        chaos.undo_due(time.time(), everything=True)
        errors = metric(port, "slurm_sched_errors_total")
        if daemon.alive:
            rc = daemon.terminate()
            if rc != 0:
                chaos.problems.append(f"the daemon exited with {rc} on SIGTERM")
    t_end = time.time()
    raw_runs = sacct(chaos, ids, all_runs=True)
    (workdir / "sacct-runs.txt").write_text(raw_runs)  # kept with the decision log and job logs
    runs = parse_sacct(raw_runs, epoch)
    latest = {r.job_id: r.state for r in parse_sacct(sacct(chaos, ids, all_runs=False), epoch)}
    decisions = read_decisions(workdir / "decisions.jsonl")
    result = audit(
        ids, runs, decisions,
        windows=chaos.fail_open_windows(t_end),
        crashes=[(f.target, f.at_s) for f in chaos.faults if f.kind == "node_crash"],
        daemon_kills=[f.at_s for f in chaos.faults if f.kind == "daemon_kill"],
        ctld_crashes=[(f.at_s, (f.undone_at_s or t_end) + 2 * SCHED_INTERVAL_S)
                      for f in chaos.faults if f.kind == "ctld_kill"],
        no_requeue=frozenset(p.job_id for p in planned if p.job_id and not p.job.requeue),
    )
    log_problems, reruns = check_logs(out, [p for p in planned if p.job_id and not p.lost],
                                      latest, cluster.state_dir / "log" / "jobcomp.txt")
    traceback = "Traceback" in daemon.logs()
    problems = chaos.problems + result.problems + log_problems
    if traceback:
        problems.append("a Traceback in the daemon's log")
    kinds = Counter(d.get("kind") or d.get("event") for d in decisions)
    doc = {
        "command": "python -m tests.soak.chaos_run " + " ".join(argv or sys.argv[1:]),
        "slurm": version,
        "policy": POLICY,
        "policy_options": POLICY_OPTIONS,
        "jobs": len(ids),
        "minutes_of_faults": args.minutes,
        "wall_s": round(t_end - t0, 1),
        "faults": Counter(f.kind for f in chaos.faults),
        "fault_list": [f.as_dict(t0) for f in chaos.faults],
        "daemon_starts": daemon.starts,
        "daemon_failed_cycles": errors,
        "sbatch_retries": chaos.submit_errors,
        "decision_log": dict(sorted((str(k), v) for k, v in kinds.items())),
        "audit": result.as_dict(),
        "finished_again_from_final_checkpoint": reruns,
        "submissions_lost_by_slurm": lost_submissions,
        "problems": problems,
    }
    text = json.dumps(doc, indent=2, default=dict)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(json.dumps({k: doc[k] for k in ("slurm", "jobs", "wall_s", "faults", "daemon_starts",
                                          "daemon_failed_cycles")}, default=dict))
    print(json.dumps(result.as_dict() | {"problems": problems[:40]}, indent=1))
    if not args.keep:
        cluster.down(purge=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
