"""Launcher: one training worker per GPU of the node, preemption signals forwarded.

::

    python -m slurm_sched.runtime.launch [--nproc-per-node N] -- train.py --lr 0.1
    python -m slurm_sched.runtime.launch -- -m slurm_sched.runtime.train --model mlp

Use it as the last command of a batch script, with ``exec`` so that the launcher *is* the batch
shell and receives the signals the backend sends with ``scancel --batch``::

    exec python -m slurm_sched.runtime.launch -- train.py

Workers get the usual ``torch.distributed`` environment (``RANK``, ``LOCAL_RANK``,
``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``) that
:class:`~slurm_sched.runtime.session.TrainingSession` reads, and ``OMP_NUM_THREADS`` (unless
set) = the CPUs Slurm allocated on the node / workers, so a job keeps to its CPU allocation.

Workers per node: ``--nproc-per-node``, else the GPUs Slurm gave this node (the entries of
``CUDA_VISIBLE_DEVICES``; a shard job sees one GPU), else ``SLURM_GPUS_ON_NODE``, else 1. A job
on several nodes (``SLURM_NNODES > 1``) re-runs the launcher once per node with ``srun``; node
``i`` takes global ranks after the workers of nodes ``0..i-1`` (per-node counts from the
scheduler's settings file when it has them, else equal counts). The rendezvous is on the first
node of the allocation (its ``NodeAddr``), at a port derived from the job id.

SIGUSR1, SIGTERM and SIGINT are forwarded to every worker. The launcher exits with the first
non-zero worker status (workers that stopped for preemption exit 143), else 0; when one worker
fails, the others get SIGTERM, then SIGKILL after ``--grace-s``.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from types import FrameType

from slurm_sched.runtime.job import load_job_context

log = logging.getLogger("slurm_sched.runtime.launch")

NODE_MARK_ENV = "SLURM_SCHED_LAUNCH_NODE"
FORWARDED = (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT)


def visible_gpus(env: Mapping[str, str]) -> int | None:
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is None or cvd.strip() in ("", "NoDevFiles"):
        return None
    return len([d for d in cvd.split(",") if d.strip()])


def workers_per_node(env: Mapping[str, str], requested: int | None = None) -> int:
    if requested is not None:
        if requested < 1:
            raise ValueError(f"--nproc-per-node must be >= 1, got {requested}")
        return requested
    n = visible_gpus(env)
    if n:
        return n
    try:
        return max(1, int(env.get("SLURM_GPUS_ON_NODE", "1")))
    except ValueError:
        return 1


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def worker_threads(env: Mapping[str, str], workers: int) -> int:
    """CPU threads per worker: the CPUs Slurm allocated on this node (``SLURM_CPUS_ON_NODE``,
    which follows a Rubick reconfiguration's ``NumCPUs``), at most the usable cores, shared
    evenly by the workers."""
    cpus = usable_cpus()
    with contextlib.suppress(ValueError):
        cpus = min(cpus, int(env.get("SLURM_CPUS_ON_NODE", "") or cpus))
    return max(1, cpus // workers)


def program_argv(args: Sequence[str]) -> list[str]:
    """``train.py a b`` -> ``python train.py a b``; ``-m mod a`` -> ``python -m mod a``;
    anything else is run as given."""
    if not args:
        raise ValueError("no program given (usage: launch [options] -- <script.py|-m module> ...)")
    if args[0] == "-m" or args[0].endswith(".py"):
        return [sys.executable, *args]
    return list(args)


def _scontrol(*argv: str) -> str | None:
    try:
        proc = subprocess.run(
            ["scontrol", *argv], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def job_nodes(env: Mapping[str, str]) -> list[str]:
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        return []
    out = _scontrol("show", "hostnames", nodelist)
    return out.split() if out else [nodelist.split(",")[0]]


def node_address(node: str) -> str:
    """The ``NodeAddr`` Slurm uses for ``node`` (mini cluster: 127.0.0.1), else its name."""
    out = _scontrol("show", "node", "-o", node) or ""
    for word in out.split():
        if word.startswith("NodeAddr="):
            return word.split("=", 1)[1]
    return node


def master_port(env: Mapping[str, str]) -> int:
    """Same on every node of a job: from the job id; else a free local port."""
    job = env.get("SLURM_JOB_ID")
    if job and job.isdigit():
        return 20000 + int(job) % 20000
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rank_layout(
    env: Mapping[str, str], node_rank: int, local: int, nodes: list[str]
) -> tuple[int, int]:
    """``(world size, global rank of this node's first worker)`` of a multi-node job: from the
    scheduler's per-node GPU counts when its settings file covers every node, else equal
    counts on every node."""
    counts: dict[str, int] = {}
    try:
        ctx = load_job_context(env=env, query_slurm=False)
        counts = {k: int(v) for k, v in dict(ctx.settings_doc.get("gpus_per_node") or {}).items()}
    except Exception as exc:  # the settings are advisory here
        log.debug("no per-node counts: %s", exc)
    if nodes and all(n in counts for n in nodes) and counts.get(nodes[node_rank]) == local:
        return sum(counts[n] for n in nodes), sum(counts[n] for n in nodes[:node_rank])
    return local * int(env.get("SLURM_NNODES", "1") or 1), node_rank * local


def _worker_preexec() -> None:
    """In the worker, before exec: ignore SIGUSR1 until the runtime handles it, and die with
    the launcher (Linux ``PR_SET_PDEATHSIG``): a launcher killed by Slurm must not leave
    orphaned workers that Slurm's process tracking may no longer find."""
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class _Forwarder:
    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.received: list[int] = []

    def __call__(self, signum: int, _frame: FrameType | None) -> None:
        self.received.append(signum)
        for p in self.procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signum)


def _srun_per_node(env: Mapping[str, str], argv: Sequence[str]) -> int:
    nnodes = env["SLURM_NNODES"]
    cmd = [
        "srun",
        f"--nodes={nnodes}",
        f"--ntasks={nnodes}",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=1",
        sys.executable,
        "-m",
        "slurm_sched.runtime.launch",
        *argv,
    ]
    child_env = dict(env)
    child_env[NODE_MARK_ENV] = "1"
    fwd = _Forwarder()
    for sig in FORWARDED:
        signal.signal(sig, fwd)
    proc = subprocess.Popen(cmd, env=child_env)
    fwd.procs.append(proc)
    return proc.wait()


def launch(
    program: Sequence[str],
    *,
    nproc: int | None = None,
    env: Mapping[str, str] | None = None,
    grace_s: float = 30.0,
) -> int:
    """Run ``program`` once per local worker and wait; returns the exit status (see module)."""
    base = dict(os.environ if env is None else env)
    local = workers_per_node(base, nproc)
    nnodes = int(base.get("SLURM_NNODES", "1") or 1)
    node_rank = int(base.get("SLURM_NODEID", "0") or 0) if nnodes > 1 else 0
    nodes = job_nodes(base) if nnodes > 1 else []
    world, offset = rank_layout(base, node_rank, local, nodes) if nnodes > 1 else (local, 0)
    addr = base.get("MASTER_ADDR") or (node_address(nodes[0]) if nodes else "127.0.0.1")
    port = base.get("MASTER_PORT") or str(master_port(base))
    argv = program_argv(program)
    threads = worker_threads(base, local)

    fwd = _Forwarder()
    old = {sig: signal.signal(sig, fwd) for sig in FORWARDED}
    try:
        for i in range(local):
            wenv = dict(base)
            wenv.update(
                RANK=str(offset + i),
                LOCAL_RANK=str(i),
                WORLD_SIZE=str(world),
                LOCAL_WORLD_SIZE=str(local),
                GROUP_RANK=str(node_rank),
                MASTER_ADDR=addr,
                MASTER_PORT=str(port),
            )
            if "OMP_NUM_THREADS" not in base:
                wenv["OMP_NUM_THREADS"] = str(threads)
            # SIGUSR1 ("checkpoint now") is ignored until the worker installs its handler (a
            # disposition of SIG_IGN survives exec): a worker still importing torch would
            # otherwise die of it; the runtime's handler replaces it
            fwd.procs.append(subprocess.Popen(argv, env=wenv, preexec_fn=_worker_preexec))
        log.info(
            "launched %d worker(s) (ranks %d..%d of %d, rendezvous %s:%s): %s",
            local,
            offset,
            offset + local - 1,
            world,
            addr,
            port,
            " ".join(argv),
        )
        status = _wait_all(fwd, grace_s)
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    return status


def _wait_all(fwd: _Forwarder, grace_s: float) -> int:
    status = 0
    killed_at: float | None = None
    pending = list(fwd.procs)
    while pending:
        for p in list(pending):
            rc = p.poll()
            if rc is None:
                continue
            pending.remove(p)
            if rc != 0 and status == 0:
                status = rc if rc > 0 else 128 - rc  # -N: killed by signal N
                if pending and killed_at is None and not fwd.received:
                    log.error("worker pid %d exited %d; stopping the others", p.pid, rc)
                    for q in pending:
                        q.terminate()
                    killed_at = time.monotonic()
        if killed_at is not None and time.monotonic() - killed_at > grace_s:
            for q in pending:
                q.kill()
        time.sleep(0.05)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if "--" in args_in:
        cut = args_in.index("--")
        opts, program = args_in[:cut], args_in[cut + 1 :]
    else:
        opts, program = [], args_in
    parser = argparse.ArgumentParser(
        prog="python -m slurm_sched.runtime.launch",
        usage="%(prog)s [options] -- <script.py|-m module> [args]",
    )
    parser.add_argument("--nproc-per-node", type=int, default=None)
    parser.add_argument(
        "--grace-s",
        type=float,
        default=30.0,
        help="seconds between SIGTERM and SIGKILL when a worker fails",
    )
    ns = parser.parse_args(opts)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    env = os.environ
    if int(env.get("SLURM_NNODES", "1") or 1) > 1 and env.get(NODE_MARK_ENV) != "1":
        return _srun_per_node(env, args_in)
    try:
        return launch(program, nproc=ns.nproc_per_node, grace_s=ns.grace_s)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
