"""The production daemon (``slurm-sched run``) as a child process on the mini cluster: its
config, the jobs it schedules, and the checks that every job ran exactly once. Shared by the
integration tests that drive the real daemon (faults, operator actions)."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

from slurm_sched.slurm.backend import SlurmBackend
from slurm_sched.slurm.cluster import MiniCluster
from tests.contract.slurm_jobs import (
    STEP_S,
    JobDef,
    assert_resumes_in_order,
    job_log,
    squeue_jobs,
    submit_sleep_job,
)

REPO = Path(__file__).resolve().parents[2]
LEASE_S = 12
PERIOD_S = 0.5
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class DaemonProcess:
    """``slurm-sched run`` as a child process; its log goes to ``<dir>/daemon-<n>.log``.
    ``env``: its whole environment (default: the test's)."""

    def __init__(self, config: Path, log_dir: Path, env: dict[str, str] | None = None) -> None:
        self.config = config
        self.log_dir = log_dir
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        log = (self.log_dir / f"daemon-{self.starts}.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "slurm_sched.cli", "run", "--config", str(self.config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            env=self.env,
        )
        log.close()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no cleanup at all, as a crash or the OOM killer."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(timeout=10)

    def terminate(self, timeout_s: float = 30) -> int:
        """SIGTERM and wait: a clean shutdown; returns the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout_s)

    def reconciled(self) -> bool:
        """The running instance has finished its start-up reconciliation."""
        log = self.log_dir / f"daemon-{self.starts}.log"
        return "reconcile (did)" in log.read_text(errors="replace")

    def logs(self) -> str:
        return "".join(
            p.read_text(errors="replace") for p in sorted(self.log_dir.glob("daemon-*.log"))
        )


def write_config(
    path: Path,
    cluster: MiniCluster,
    *,
    policy: str = "fifo",
    metrics_port: int | None = None,
    node_refresh_s: float | None = None,
    start_timeout_s: float = 15,
    policy_options: dict[str, float] | None = None,
    clients_from_path: bool = False,
    lease_s: float = LEASE_S,
) -> Path:
    """The daemon's TOML config for ``cluster``. ``clients_from_path``: name the cluster by its
    ``slurm_conf`` and settings dir instead of ``mini_cluster``, so that the Slurm clients the
    daemon runs are the first on its own ``PATH`` (a mini cluster's ``env.sh`` would put its
    Slurm's ``bin`` first)."""
    where = (
        f'slurm_conf = "{cluster.slurm_conf}"\n'
        f'settings_dir = "{cluster.state_dir / "job-settings"}"\n'
        if clients_from_path
        else f'mini_cluster = "{cluster.state_dir}"\n'
    )
    options = "".join(f"{k} = {v!r}\n" for k, v in (policy_options or {}).items())
    path.write_text(
        f'policy = "{policy}"\n'
        f"period_s = {PERIOD_S}\n"
        f"lease_s = {lease_s}\n"
        + where
        + f'managed_partitions = ["{cluster.managed_partitions[0]}"]\n'
        f'state_dir = "{path.parent / "state"}"\n'
        "command_timeout_s = 15\n"
        f"start_timeout_s = {start_timeout_s}\n"
        + (f"node_refresh_s = {node_refresh_s}\n" if node_refresh_s is not None else "")
        + "[safety]\n"
        "min_runtime_before_preempt_s = 2\n"
        "[observability]\n"
        f'decision_log = "{path.parent / "decisions.jsonl"}"\n'
        f"metrics_port = {metrics_port if metrics_port is not None else 0}\n"
        'log_level = "INFO"\n' + ("[policy_options]\n" + options if options else "")
    )
    return path


def holder(cluster: MiniCluster) -> SlurmBackend:
    """A backend used only for its partition and settings dir (what the jobs are told)."""
    return SlurmBackend.for_mini_cluster(cluster)


def submit(cluster: MiniCluster, defs: list[JobDef], out: Path) -> list[str]:
    b = holder(cluster)
    return [submit_sleep_job(cluster, b, d, out) for d in defs]


def final_states(cluster: MiniCluster, ids: list[str]) -> dict[str, str]:
    jobs = squeue_jobs(cluster)
    return {j: str(jobs[j].state) for j in ids if j in jobs}


def all_final(cluster: MiniCluster, ids: list[str]) -> bool:
    states = final_states(cluster, ids)
    return len(states) == len(ids) and all(s in FINAL for s in states.values())


def check_done_once(cluster: MiniCluster, out: Path, ids: list[str], defs: list[JobDef]) -> None:
    """Each job COMPLETED in Slurm, one completion record, its work done exactly once."""
    states = final_states(cluster, ids)
    bad = {j: s for j, s in states.items() if s != "COMPLETED"}
    assert not bad and len(states) == len(ids), bad
    records = (cluster.state_dir / "log" / "jobcomp.txt").read_text().splitlines()
    for jid, d in zip(ids, defs, strict=True):
        completed = [r for r in records if re.search(rf"\bJobId={jid}\b.*JobState=COMPLETED", r)]
        assert len(completed) == 1, (jid, completed)
        events = job_log(out, jid)
        iterations = str(max(1, round(d.duration_s / STEP_S)))
        dones = [f for e, f in events if e == "done"]
        assert dones == [{"iterations": iterations}], (jid, events)
        assert_resumes_in_order(jid, events)


def metric(port: int, name: str) -> float:
    """Sum of a metric family on the daemon's /metrics (-1 while it does not answer yet)."""
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    except OSError:
        return -1.0
    total = 0.0
    for line in body.decode().splitlines():
        if line.startswith(name) and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total
