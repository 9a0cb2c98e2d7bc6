"""A node crash on the mini Slurm cluster while the production daemon (``slurm-sched run``,
SJF-BSBF: it shares GPUs) schedules ``checkpointed_sleep`` jobs
(``tests/integration/daemon_run.py``).

The node chosen holds running jobs of both kinds (exclusive GPUs and a GPU shared by two shard
jobs), some submitted ``--requeue`` (the job script's default), some ``--no-requeue``. The
requeue-able ones save a checkpoint (SIGUSR1, the scheduler's "checkpoint now"); then
``cluster.sh node kill`` SIGKILLs the node's slurmd, slurmstepds and job processes at once. The
test checks that:

1. Slurm marks the node DOWN after ``SlurmdTimeout`` (the cluster's, default 30 s) and ends the
   ``--no-requeue`` jobs ``NODE_FAIL`` (never started again) and requeues the others;
2. the daemon logs ``node_unavailable`` for the node no later than the cycle whose squeue shows
   the jobs lost, that cycle being the one in flight when the test saw the node DOWN or the
   next (it may see the node earlier: Slurm flags a node that misses its pings
   ``NOT_RESPONDING`` before it marks it DOWN), and places nothing there from the cycle after
   that event until the node is back;
3. the daemon places the requeued jobs on other nodes, where they resume from their checkpoint
   and complete exactly once;
4. after ``cluster.sh node start`` (``ReturnToService=2`` puts the node back) the daemon logs
   ``node_available`` and places a job there again;

with no failed cycle and every other job completed once. Every wait polls a state with a
deadline. Run it on a private cluster (``-s`` prints the figures)::

    MINI_SLURM_PREFIX=/usr MINI_SLURM_STATE=/tmp/slurm-sched-cluster-nodeloss \\
    MINI_SLURM_CTLD_PORT=26917 MINI_SLURM_SLURMD_PORT=27101 \\
    python -m pytest tests/integration/test_node_loss.py -s
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path
from typing import Any

from slurm_sched.service.decision_log import read_decisions
from slurm_sched.slurm.cluster import MiniCluster
from tests.contract.slurm_jobs import (
    JobDef,
    cancel_and_wait,
    job_log,
    squeue_jobs,
    wait_for,
)
from tests.integration.daemon_run import (
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

#: the daemon's node_refresh_s, left at its default: the node list is read this often, and with
#: every cycle while shard jobs run (as on the node killed here) or when a job is lost with its
#: node (tests/unit/slurm/test_node_loss.py covers a node without shard jobs)
NODE_REFRESH_S = 30.0
#: long enough to be running still when ``cluster.sh node kill`` has found and killed the node's
#: processes, a few seconds after the jobs' first progress reports on a busy 2-core machine
DURATION_S = 16.0


def node_state(cluster: MiniCluster, name: str) -> str:
    """The node's state as ``sinfo -o %T`` prints it (``mixed``, ``allocated*``, ``down*``...)."""
    proc = subprocess.run(
        ["sinfo", "-h", "-n", name, "-o", "%T"],
        env=cluster.env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return proc.stdout.strip()


def slurmd_timeout_s(cluster: MiniCluster) -> int:
    m = re.search(r"^SlurmdTimeout=(\d+)", cluster.slurm_conf.read_text(), re.MULTILINE)
    return int(m[1]) if m else 300


def nodes_of(decision: dict[str, Any]) -> set[str]:
    return {p["node"] for p in decision["action"]["placement"]["parts"]}


def test_node_crash_requeues_or_fails_its_jobs_and_the_daemon_places_around_it(
    slurm_cluster: MiniCluster, tmp_path: Path
) -> None:
    cluster = slurm_cluster
    port = free_port()
    cfg = write_config(tmp_path / "config.toml", cluster, policy="sjf-bsbf", metrics_port=port)
    daemon = DaemonProcess(cfg, tmp_path)
    log_path, out = tmp_path / "decisions.jsonl", tmp_path / "out"

    def decisions() -> list[dict[str, Any]]:
        return read_decisions(log_path) if log_path.exists() else []

    def events(name: str, **match: Any) -> list[dict[str, Any]]:
        return [
            r for r in decisions()
            if r.get("event") == name and all(r.get(k) == v for k, v in match.items())
        ]  # fmt: skip

    def starts() -> list[dict[str, Any]]:
        return [
            r for r in decisions()
            if r.get("ok") and (r.get("action") or {}).get("placement") is not None
        ]  # fmt: skip

    b = holder(cluster)
    # SJF-BSBF starts equal jobs in submit order on free GPUs first, node by node: each node
    # gets two shard jobs (GPUs 0 and 1), an exclusive --requeue job and an exclusive
    # --no-requeue one; the 8 shard jobs left pair with a GPU running one shard job (where the
    # backend can make Slurm 22.05 put the shard: GPU 0) or wait for a free GPU
    per_node = [
        JobDef(1, DURATION_S, shard=True),
        JobDef(1, DURATION_S, shard=True),
        JobDef(1, DURATION_S),
        JobDef(1, DURATION_S, requeue=False),
    ]
    defs = per_node * 4 + [JobDef(1, DURATION_S, shard=True)] * 8
    ids = submit(cluster, defs, out)
    excl = [j for j, d in zip(ids, defs, strict=True) if not d.shard]
    requeue_of = {j: d.requeue for j, d in zip(ids, defs, strict=True)}
    late: list[str] = []
    late_defs = [JobDef(4, 1.0) for _ in range(4)]  # one per node: the node back gets one
    node, killed, restarted = "", False, False
    try:
        daemon.start()
        wait_for(daemon.reconciled, 60, "the daemon's start-up reconciliation")

        def running_by_node() -> dict[str, set[str]]:
            jobs = squeue_jobs(cluster)
            by_node: dict[str, set[str]] = {}
            for j in ids:
                if jobs[j].state == "RUNNING":
                    for n in jobs[j].nodes:
                        by_node.setdefault(n, set()).add(j)
            return by_node

        def mix(n: str, here: set[str]) -> tuple[int, int, int, int]:
            """(shared GPUs, exclusive jobs, --requeue jobs, --no-requeue jobs) of node n."""
            jobs = squeue_jobs(cluster)
            per_gpu: dict[int, int] = {}
            for j in here:
                for g in jobs[j].gpu_slots().get(n, ()):
                    per_gpu[g] = per_gpu.get(g, 0) + 1
            return (
                sum(1 for c in per_gpu.values() if c >= 2),
                len(here & set(excl)),
                sum(requeue_of[j] for j in here),
                sum(not requeue_of[j] for j in here),
            )

        def choose() -> str | None:
            """A node running a shared GPU, an exclusive job, a --requeue and a --no-requeue
            job."""
            fits = [n for n, here in sorted(running_by_node().items()) if min(mix(n, here)) >= 1]
            return fits[0] if fits else None

        node = wait_for(choose, 30, "a node running both kinds of jobs", step_s=0.5)
        there = running_by_node()[node]
        lost_requeue = sorted((j for j in there if requeue_of[j]), key=int)
        # RUNNING in Slurm, but is the job script running yet? It handles SIGUSR1 once its loop
        # runs (its first progress report)
        wait_for(
            lambda: all(b.store.progress_path(j).exists() for j in there),
            15, "the jobs on the node in their loop",
        )  # fmt: skip
        # the requeue-able jobs save a checkpoint, as a training job does every so often
        subprocess.run(
            ["scancel", "--batch", "--signal=USR1", *lost_requeue], env=cluster.env, check=True
        )

        def checkpoints() -> dict[str, str] | None:
            """job -> the iteration its SIGUSR1 checkpoint holds, once every job has one."""
            found = {}
            for j in lost_requeue:
                its = [f["iterations"] for e, f in job_log(out, j)
                       if e == "checkpoint" and f.get("signal") == "USR1"]  # fmt: skip
                if not its:
                    return None
                found[j] = its[-1]
            return found

        saved = wait_for(checkpoints, 10, "a checkpoint of every requeue-able job on the node")
        assert all(int(v) > 0 for v in saved.values()), saved
        kill_asked = time.time()
        cluster.kill_node(node)
        killed = True
        # cluster.sh finds the node's processes first (most of its run time), then SIGKILLs them
        # and waits until they are gone: the crash is at most this late
        killed_at = time.time()
        # what runs there now (Slurm shows it RUNNING until DOWN): a job may have ended or
        # started there since the checkpoint
        on_node = sorted(running_by_node()[node], key=int)
        counts = mix(node, set(on_node))
        assert min(counts) >= 1, (node, on_node, counts)
        lost_fail = [j for j in on_node if not requeue_of[j]]
        lost_requeue = [j for j in on_node if requeue_of[j]]
        # Slurm: NOT_RESPONDING after a missed ping, DOWN after SlurmdTimeout
        not_responding_at: float | None = None
        while True:
            state = node_state(cluster, node)
            if state.startswith("down"):
                break
            if state.endswith("*") and not_responding_at is None:
                not_responding_at = time.time()
            assert time.time() - killed_at < slurmd_timeout_s(cluster) + 60, state
            time.sleep(0.2)
        cycles_at_down = metric(port, "slurm_sched_cycle_latency_seconds_count")
        after = wait_for(
            lambda: all_final(cluster, lost_fail) and squeue_jobs(cluster),
            10, "the --no-requeue jobs final",
        )  # fmt: skip
        assert {j: str(after[j].state) for j in lost_fail} == dict.fromkeys(lost_fail, "NODE_FAIL")
        for j in lost_requeue:  # requeued: pending again, or placed again already
            assert after[j].restart_cnt == 1, (j, after[j])
        # Slurm's own time of the DOWN (1 s resolution): it ends the jobs in the same step
        down_at = after[lost_fail[0]].end_time_s
        seen = wait_for(
            lambda: [r for r in events("node_unavailable", node=node) if r["t"] >= kill_asked],
            NODE_REFRESH_S + 10, f"the daemon to see {node} lost",
        )[0]  # fmt: skip
        # the first cycle whose squeue showed the loss (the daemon logs the job's end there)
        failed = wait_for(
            lambda: events("job_end", job_id=lost_fail[0]), 10, "the NODE_FAIL in the log"
        )[0]
        replaced = wait_for(
            lambda: all(any(r["job_id"] == j and r["t"] > kill_asked for r in starts())
                        for j in lost_requeue)
            and {j: min((r for r in starts() if r["job_id"] == j and r["t"] > kill_asked),
                        key=lambda r: r["t"]) for j in lost_requeue},
            30, "the requeued jobs placed again",
        )  # fmt: skip
        # the node comes back; the daemon sees it and places there again
        cluster.start_node(node)
        restarted = True
        started_at = time.time()
        wait_for(
            lambda: not node_state(cluster, node).startswith("down"), 30, f"{node} back in Slurm"
        )
        back_at = time.time()
        avail = wait_for(
            lambda: [r for r in events("node_available", node=node) if r["t"] >= started_at - 1],
            NODE_REFRESH_S + 10, f"the daemon to see {node} back",
        )[0]  # fmt: skip
        late = submit(cluster, late_defs, out)
        wait_for(
            lambda: all_final(cluster, ids + late), 60, "every job final", step_s=0.5
        )
        logs = daemon.logs()
        assert daemon.alive, logs[-3000:]
        assert metric(port, "slurm_sched_errors_total") == 0, logs[-3000:]
        assert "Traceback" not in logs, logs
        assert daemon.terminate() == 0, daemon.logs()[-3000:]
    finally:
        if daemon.alive:
            daemon.kill()
        if killed and not restarted:
            cluster.start_node(node)  # the cluster is shared by the session's other tests
        cancel_and_wait(cluster, ids + late)
        if killed:
            wait_for(lambda: not node_state(cluster, node).startswith("down"), 30, f"{node} back")
    # 1. what Slurm did with the node's jobs
    states = final_states(cluster, lost_fail)
    assert states == dict.fromkeys(lost_fail, "NODE_FAIL"), states
    for j in lost_fail:  # (a job placed there during the kill may not have started at all)
        assert [e for e, _ in job_log(out, j)].count("start") <= 1, job_log(out, j)
        assert not [r for r in starts() if r["job_id"] == j and r["t"] > kill_asked]
    ends = {r["job_id"]: r["state"] for r in events("job_end")}
    assert {j: ends.get(j) for j in lost_fail} == dict.fromkeys(lost_fail, "NODE_FAIL"), ends
    # 2. the daemon saw Slurm's DOWN in the cycle in flight or the next one (the test read the
    # cycle count after it saw DOWN), had the node out of its view by that cycle at the latest,
    # and placed nothing there from the cycle after it noticed until the node was back
    assert failed["state"] == "NODE_FAIL" and failed["cycle"] <= cycles_at_down + 2, failed
    assert seen["cycle"] <= failed["cycle"], (seen, failed)
    during = [
        r for r in starts()
        if seen["cycle"] < r["cycle"] <= avail["cycle"] and node in nodes_of(r)
    ]  # fmt: skip
    assert not during, during
    # 3. the requeued jobs ran again elsewhere, from their checkpoint, and completed once
    rest = [(j, d) for j, d in zip(ids, defs, strict=True) if j not in lost_fail]
    check_done_once(
        cluster, out, [j for j, _ in rest] + late, [d for _, d in rest] + late_defs
    )
    for j in lost_requeue:
        runs = [f for e, f in job_log(out, j) if e == "start"]
        assert len(runs) <= 2 and runs[-1]["resume_from"] == saved.get(j, "0"), (j, runs)
        assert runs[-1]["node"] != node and runs[-1]["restart"] == "1", (j, runs)
    # 4. placed on the node again once it was back
    jobs = squeue_jobs(cluster)
    assert any(node in jobs[j].nodes for j in late), {j: jobs[j].nodes for j in late}
    again = min(r["t"] for r in starts() if r["t"] > started_at and node in nodes_of(r))
    kind = ", ".join(f"{n} {what}" for n, what in zip(
        counts, ("shared GPU(s)", "exclusive job(s)", "--requeue", "--no-requeue"), strict=True
    ))  # fmt: skip
    print(
        f"\nnode {node} crashed ({len(on_node)} jobs: {kind}; cluster.sh node kill "
        f"{killed_at - kill_asked:.1f} s), SlurmdTimeout {slurmd_timeout_s(cluster)} s: "
        "NOT_RESPONDING seen "
        + (f"{not_responding_at - killed_at:.1f} s" if not_responding_at else "never")
        + f", DOWN (Slurm's time, 1 s resolution) {down_at - killed_at:.1f} s after the kill; "
        f"the daemon's node_unavailable ({seen['state']}) {seen['t'] - down_at:+.1f} s from "
        f"DOWN, cycle {seen['cycle'] - failed['cycle']:+d} from the cycle that saw the jobs "
        f"lost, {failed['t'] - down_at:+.1f} s from DOWN (period {PERIOD_S:g} s, node_refresh_s "
        f"{NODE_REFRESH_S:g} s); the requeued jobs placed elsewhere "
        + ", ".join(f"{r['t'] - down_at:+.1f} s" for r in replaced.values())
        + " from DOWN (cycle "
        + ", ".join(f"{r['cycle'] - failed['cycle']:+d}" for r in replaced.values())
        + f"), resumed from iterations {sorted(saved.values(), key=int)}; node back in Slurm "
        f"{back_at - started_at:.1f} s after slurmd start, node_available "
        f"{avail['t'] - started_at:.1f} s, a job placed there {again - started_at:.1f} s after"
    )
