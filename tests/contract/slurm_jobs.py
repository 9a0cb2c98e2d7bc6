"""Helpers for tests that run ``checkpointed_sleep`` jobs on the real mini cluster."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from slurm_sched.slurm.backend import SlurmBackend
from slurm_sched.slurm.cluster import MiniCluster
from slurm_sched.slurm.document_errors import SlurmJsonError
from slurm_sched.slurm.parse import SlurmJob, read_jobs

REPO = Path(__file__).resolve().parents[2]
JOB_SCRIPT = REPO / "sbatch_templates" / "checkpointed_sleep.sh"
#: one "iteration" of a test job, seconds
STEP_S = 0.25
T = TypeVar("T")


@dataclass(frozen=True)
class JobDef:
    """A test job: ``gpus`` GPUs (``shard``: one shard-GRES GPU) for ``duration_s`` seconds;
    ``requeue=False`` submits it ``--no-requeue`` (a node failure ends it ``NODE_FAIL``)."""

    gpus: int
    duration_s: float
    gpu_type: str | None = None
    shard: bool = False
    requeue: bool = True


def submit_sleep_job(
    cluster: MiniCluster,
    backend: SlurmBackend,
    d: JobDef,
    out_dir: Path,
    *,
    step_s: float = STEP_S,
    extra_hints: dict[str, object] | None = None,
    time_limit_min: int = 10,
    timeout_s: float | None = None,
) -> str:
    """sbatch one held ``checkpointed_sleep`` job with hints (Slurm time limit
    ``time_limit_min``; ``sbatch`` itself given ``timeout_s``); returns its id."""
    iterations = max(1, round(d.duration_s / step_s))
    hints: dict[str, object] = {"v": 1, "iterations": iterations, "duration_s": d.duration_s}
    hints.update(extra_hints or {})
    per_node, nodes = gres_shape(d.gpus)
    typ = f"{d.gpu_type}:" if d.gpu_type else ""
    gres = f"--gres=shard:{typ}1" if d.shard else f"--gres=gpu:{typ}{per_node}"
    out_dir.mkdir(parents=True, exist_ok=True)
    argv = [
        "sbatch",
        "--parsable",
        "-p",
        backend_partition(backend),
        "-N",
        str(nodes),
        gres,
        "-t",
        str(time_limit_min),
        "-o",
        str(out_dir / "%j.out"),
        "--open-mode=append",
        f"--export=ALL,SLURM_SCHED_SETTINGS_DIR={backend.store.directory}",
        f"--comment={json.dumps(hints, separators=(',', ':'))}",
        *([] if d.requeue else ["--no-requeue"]),
        str(JOB_SCRIPT),
        str(iterations),
        str(step_s),
    ]
    proc = subprocess.run(argv, env=cluster.env, capture_output=True, text=True, check=True,
                          timeout=timeout_s)
    return proc.stdout.strip().split(";")[0]


def gres_shape(gpus: int, per_node_max: int = 4) -> tuple[int, int]:
    """(GPUs per node, nodes) of a job of ``gpus`` GPUs on 4-GPU nodes."""
    nodes = -(-gpus // per_node_max)
    if gpus % nodes:
        raise ValueError(f"{gpus} GPUs cannot be split evenly over {nodes} nodes")
    return gpus // nodes, nodes


def backend_partition(backend: SlurmBackend) -> str:
    return sorted(backend.partitions)[0]


def cancel_and_wait(cluster: MiniCluster, job_ids: Sequence[str], timeout_s: float = 15) -> None:
    """scancel the jobs and wait until none of them holds resources any more."""
    if not job_ids:
        return
    subprocess.run(["scancel", *job_ids], env=cluster.env, capture_output=True, check=False)
    end = time.monotonic() + timeout_s
    wanted = set(job_ids)
    while time.monotonic() < end:
        try:
            jobs = squeue_jobs(cluster)
        except (subprocess.CalledProcessError, ValueError, SlurmJsonError):
            jobs = {}
        busy = [
            j
            for jid, j in jobs.items()
            if jid in wanted and j.state in ("RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING")
        ]
        if not busy:
            return
        time.sleep(0.1)


def squeue_jobs(cluster: MiniCluster) -> dict[str, SlurmJob]:
    """Every job Slurm still lists (finished ones included, on every release), parsed, by id."""
    out = subprocess.run(
        ["squeue", "--json", "--states=all"],
        env=cluster.env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    _, jobs = read_jobs(json.loads(out), "squeue --json --states=all")
    return {j.job_id: j for j in jobs}


_LOG = re.compile(r"\[ckpt-sleep (?P<job>\S+) [^\]]*\] (?P<what>\w+) ?(?P<rest>.*)$")


def _fields(rest: str) -> dict[str, str]:
    """The ``key=value`` words of a log line's rest."""
    return dict(kv.split("=", 1) for kv in rest.split() if "=" in kv)


def job_log(out_dir: Path, job_id: str) -> list[tuple[str, dict[str, str]]]:
    """The ``checkpointed_sleep`` log lines of a job: (event, {key: value}) in order."""
    path = out_dir / f"{job_id}.out"
    if not path.exists():
        return []
    events = []
    for line in path.read_text().splitlines():
        m = _LOG.match(line)
        if not m:
            continue
        events.append((m["what"], _fields(m["rest"])))
    return events


def settings_read_at_starts(out_dir: Path, job_id: str) -> list[tuple[str, dict[str, Any] | None]]:
    """For each start of a ``checkpointed_sleep`` job: (its node, the settings file as the job
    read it then, None when there was none)."""
    path = out_dir / f"{job_id}.out"
    runs: list[tuple[str, dict[str, Any] | None]] = []
    for line in path.read_text().splitlines() if path.exists() else []:
        m = _LOG.match(line)
        if m and m["what"] == "start":
            runs.append((_fields(m["rest"])["node"], None))
        elif m and m["what"] == "settings" and runs:
            runs[-1] = (runs[-1][0], json.loads(m["rest"]))
    return runs


def assert_resumes_in_order(job_id: str, events: list[tuple[str, dict[str, str]]]) -> None:
    """Every run of the job after the first resumed where the last checkpoint left it."""
    saved = "0"
    for e, f in events:
        if e == "start":
            assert f["resume_from"] == saved, (job_id, events)
        elif e in ("checkpoint", "done"):
            saved = f["iterations"]


def wait_for(cond: Callable[[], T], timeout_s: float, what: str, step_s: float = 0.2) -> T:
    """Poll ``cond()`` until it returns a truthy value; raise AssertionError on timeout."""
    end = time.monotonic() + timeout_s
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(step_s)
