"""Benchmark: 500 ``Start`` actions applied to a real Slurm mini cluster in one ``apply()``.

Run as root; it starts and stops its OWN cluster (/tmp/slurm-sched-bench, ports 46817, 47001+)::

    python benchmarks/bench_slurm_start.py            # -> benchmarks/results/slurm_start.json
    python benchmarks/bench_slurm_start.py --jobs 100 --out /tmp/x.json

What it does, honestly: 8 fake nodes x 64 fake GPUs (512 GPUs, 128 CPUs each) so that all 500
one-GPU ``sleep 30`` jobs can run at once; the jobs are submitted under the submit plugin's
fail-open lease (begin time 120 s ahead, so Slurm does not start them itself); one
``snapshot()``; then ONE ``apply()`` with 500 Starts (job i on node i // 64, GPU i % 64, where
Slurm also puts it). Reported:

- ``apply_s``: wall time of that ``apply()`` (validation, settings files, the pin batch: ONE
  ``scontrol`` process fed on stdin, then the go batch: ``StartTime=now`` as five job-list
  updates of 100 jobs);
- ``bulk_release_to_running_*``: per job, from the command that lets it start (the last batch of
  the ``apply()``: the go; estimated: the batch runs its jobs one after the other, so job k is
  taken to be let go at start + (k + 0.5) / n of the batch) to the first ``squeue`` poll (every
  50 ms) that shows it RUNNING;
- ``probe_release_to_running_*``: afterwards, with the 500 jobs cancelled, ``--probe`` (20) jobs
  started one ``apply()`` at a time, 1 s apart: from ``apply()`` returning (the pin is its last
  command) to the first poll that shows the job RUNNING. This is the latency a single start
  sees;
- how many placements Slurm made differently (GPU index), and the machine's load average (the
  numbers are only comparable between runs on an otherwise idle machine).

Afterwards every job is cancelled and the cluster is stopped and deleted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from slurm_sched.model import Placement, Start
from slurm_sched.slurm.backend import SlurmBackend
from slurm_sched.slurm.cluster import MiniCluster
from slurm_sched.slurm.runner import CommandResult, CommandRunner

HERE = Path(__file__).resolve().parent
GPUS_PER_NODE = 64


class TimedRunner(CommandRunner):
    """Records when each scontrol batch ran (the release batch is the last one of apply)."""

    batches: list[tuple[float, float, int]]

    def __post_init__(self) -> None:
        super().__post_init__()
        self.batches = []

    def run_scontrol_batch(self, lines: Sequence[Sequence[str]]) -> list[CommandResult]:
        t0 = time.monotonic()
        out = super().run_scontrol_batch(lines)
        self.batches.append((t0, time.monotonic(), len(lines)))
        return out


def submit(cluster: MiniCluster, n: int) -> list[str]:
    def one(_: int) -> str:
        proc = subprocess.run(
            ["sbatch", "--parsable", "-p", "sched", "--gres=gpu:1", "-o", "/dev/null",
             "--wrap", "sleep 30"],
            env=cluster.env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        return proc.stdout.strip().split(";")[0]

    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(one, range(n)))


def running_ids(cluster: MiniCluster) -> set[str]:
    out = subprocess.run(
        ["squeue", "-h", "-t", "R", "-o", "%i"],
        env=cluster.env, capture_output=True, text=True, check=False,
    ).stdout  # fmt: skip
    return set(out.split())


def wait_until_empty(cluster: MiniCluster, timeout_s: float) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        out = subprocess.run(
            ["squeue", "-h", "-t", "R,CG,S", "-o", "%i"],
            env=cluster.env, capture_output=True, text=True, check=False,
        ).stdout  # fmt: skip
        if not out.strip():
            return
        time.sleep(0.2)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=500)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "slurm_start.json")
    ap.add_argument("--state", default="/tmp/slurm-sched-bench")
    ap.add_argument("--wait-s", type=float, default=120.0, help="limit for all jobs to run")
    ap.add_argument("--probe", type=int, default=20, help="jobs for the latency probe")
    ap.add_argument("--ctld-port", type=int, default=46817)
    ap.add_argument("--slurmd-port", type=int, default=47001)
    args = ap.parse_args(argv)
    n_nodes = -(-args.jobs // GPUS_PER_NODE)
    # every job takes 1 CPU and 1 GiB: nodes advertise enough for 64 jobs each
    os.environ["MINI_SLURM_NODE_CPUS"] = "128"
    os.environ["MINI_SLURM_NODE_MEM_MB"] = str(128 * 1024 + 4096)
    cluster = MiniCluster(
        args.state,
        nodes=" ".join(f"bench-{i + 1}:a100:{GPUS_PER_NODE}" for i in range(n_nodes)),
        shards_per_gpu=0,
        ctld_port=args.ctld_port,
        slurmd_port=args.slurmd_port,
    )
    load_before = os.getloadavg()[0]
    up_s = cluster.up()
    ids: list[str] = []
    probe_ids: list[str] = []
    try:
        t0 = time.monotonic()
        ids = submit(cluster, args.jobs)
        submit_s = time.monotonic() - t0
        runner = TimedRunner(env=cluster.env)
        backend = SlurmBackend.for_mini_cluster(cluster, runner=runner, start_timeout_s=600)
        t0 = time.monotonic()
        snap = backend.snapshot()
        snapshot_s = time.monotonic() - t0
        assert len(snap.pending) == args.jobs, f"{len(snap.pending)} pending of {args.jobs}"
        actions = [
            Start(
                job_id=jid,
                placement=Placement.of({f"bench-{i // GPUS_PER_NODE + 1}": [i % GPUS_PER_NODE]}),
            )
            for i, jid in enumerate(ids)
        ]
        t0 = time.monotonic()
        results = backend.apply(actions)
        apply_s = time.monotonic() - t0
        failed = [r for r in results if not r.ok]
        bulk_batches = list(runner.batches)
        rel_start, rel_end, _ = runner.batches[-1]
        n_ok = len(ids) - len(failed)
        released_at = {
            jid: rel_start + (k + 0.5) / len(ids) * (rel_end - rel_start)
            for k, jid in enumerate(ids)
        }
        seen: dict[str, float] = {}
        deadline = time.monotonic() + args.wait_s
        while len(seen) < n_ok and time.monotonic() < deadline:
            now = time.monotonic()
            for jid in running_ids(cluster) - seen.keys():
                seen[jid] = now
            time.sleep(0.05)
        bulk = sorted(max(0.0, t - released_at[j]) for j, t in seen.items() if j in released_at)
        all_running_after_apply_s = max(seen.values()) - rel_end if seen else None
        t0 = time.monotonic()
        final = backend.snapshot()
        snapshot_busy_s = time.monotonic() - t0
        mismatches = len(backend.mismatches)
        load_after_bulk = os.getloadavg()[0]
        # latency probe: one start at a time on an otherwise empty cluster
        subprocess.run(["scancel", *ids], env=cluster.env, capture_output=True, check=False)
        wait_until_empty(cluster, 60)
        probe_ids = submit(cluster, args.probe)
        backend.snapshot()
        probe: list[float] = []
        for k, jid in enumerate(probe_ids):
            slot = {f"bench-{k % n_nodes + 1}": [k // n_nodes]}
            [r] = backend.apply([Start(job_id=jid, placement=Placement.of(slot))])
            t_rel = time.monotonic()
            if not r.ok:
                continue
            end = t_rel + 30
            while time.monotonic() < end:
                if jid in running_ids(cluster):
                    probe.append(time.monotonic() - t_rel)
                    break
                time.sleep(0.02)
            time.sleep(1.0)
            backend.snapshot()
        probe.sort()

        def pct(xs: list[float], q: float) -> float | None:
            return round(xs[min(len(xs) - 1, int(q * len(xs)))], 3) if xs else None

        result = {
            "benchmark": "bench_slurm_start",
            "command": "python benchmarks/bench_slurm_start.py",
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "machine": {
                "cpus": os.cpu_count(),
                "platform": platform.platform(),
                "python": sys.version.split()[0],
                "load_avg_1m_before": round(load_before, 1),
                "load_avg_1m_after_bulk": round(load_after_bulk, 1),
            },
            "cluster": {"nodes": n_nodes, "gpus_per_node": GPUS_PER_NODE, "up_s": round(up_s, 2)},
            "jobs": args.jobs,
            "submit_s": round(submit_s, 2),
            "snapshot_s": round(snapshot_s, 3),
            "apply_s": round(apply_s, 3),
            "apply_target_s": 5.0,
            "apply_ms_per_start": round(1000 * apply_s / args.jobs, 3),
            "apply_batches": [{"commands": k, "s": round(b - a, 3)} for a, b, k in bulk_batches],
            "actions_failed": len(failed),
            "first_failures": [f"{r.action.job_id}: {r.error}" for r in failed[:3]],
            "running_within_wait": len(seen),
            "bulk_release_to_running_median_s": pct(bulk, 0.5),
            "bulk_release_to_running_p90_s": pct(bulk, 0.9),
            "bulk_all_running_after_apply_s": round(all_running_after_apply_s, 3)
            if all_running_after_apply_s is not None
            else None,
            "gpu_index_mismatches": mismatches,
            "snapshot_with_all_running_s": round(snapshot_busy_s, 3),
            "jobs_running_in_snapshot": len(final.running),
            "probe_jobs": len(probe),
            "probe_release_to_running_median_s": pct(probe, 0.5),
            "probe_release_to_running_p90_s": pct(probe, 0.9),
            "probe_release_to_running_min_s": pct(probe, 0.0),
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result, indent=2))
    finally:
        if ids or probe_ids:
            subprocess.run(
                ["scancel", *ids, *probe_ids], env=cluster.env, capture_output=True, check=False
            )
        cluster.down(purge=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
