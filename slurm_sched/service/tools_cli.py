"""``slurm-sched snapshot | replay | explain``: look at the live state and try policies on it.

- ``snapshot --out FILE``: one read-only snapshot of the live cluster, written as a versioned
  JSON file (:mod:`slurm_sched.service.snapshot_io`).
- ``replay FILE --policy NAME [--simulate]``: the actions the policy would take on that state
  now; with ``--simulate``, the rest of the run in the simulator and its metrics.
- ``explain JOBID``: why a job waits and what it would need, from a snapshot file or live.

User docs: ``docs/service-tools.md``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click

from slurm_sched.cli_options import with_options
from slurm_sched.errors import InputError
from slurm_sched.model import ACTION_ADAPTER, Action, ClusterSnapshot, JobState, JobView
from slurm_sched.perf import registry as perf_registry
from slurm_sched.policy import registry
from slurm_sched.policy.base import Policy
from slurm_sched.service.config import SafetyConfig, load_config
from slurm_sched.service.safety import SafePolicy
from slurm_sched.service.snapshot_io import (
    SnapshotFile,
    capture_live,
    capture_recorded,
    load_snapshot,
    simulate_from,
    write_snapshot,
)
from slurm_sched.sim.report import format_table
from slurm_sched.slurm.backend import SlurmBackend
from slurm_sched.slurm.cluster import MiniCluster
from slurm_sched.slurm.runner import CommandRunner

# ------------------------------------------------------------------ live capture options
_live_options = [
    click.option("--mini-cluster", is_flag=True,
                 help="The local mini cluster (MINI_SLURM_STATE, default "
                      "/tmp/slurm-sched-cluster) instead of the cluster of SLURM_CONF."),
    click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
                 help="Daemon config (TOML): managed partitions, settings dir, slurm.conf."),
    click.option("--partition", "partitions", multiple=True,
                 help="A managed partition (repeatable; default: from the config)."),
    click.option("--settings-dir", type=click.Path(file_okay=False), default=None,
                 help="The daemon's job-settings dir, read for ledgers and progress reports."),
    click.option("--slurm-conf", type=click.Path(dir_okay=False), default=None,
                 help="slurm.conf of the cluster (default: SLURM_CONF or Slurm's own)."),
]


def capture(
    *,
    mini_cluster: bool,
    config_path: str | None,
    partitions: Sequence[str],
    settings_dir: str | None,
    slurm_conf: str | None,
) -> SnapshotFile:
    """A read-only live snapshot: the backend the daemon would build from the same config
    (``--config``, else defaults and ``SLURM_SCHED_*``), in dry-run mode."""
    cfg = load_config(config_path)
    env: dict[str, str] = {}
    source = "slurm:$SLURM_CONF"
    settings = cfg.job_settings_dir
    cluster_dir = cfg.mini_cluster
    if mini_cluster and cluster_dir is None:
        cluster_dir = MiniCluster().state_dir  # MINI_SLURM_STATE or the default
    if cluster_dir is not None:
        cluster = MiniCluster(cluster_dir)
        env.update(cluster.exported())
        env["SLURM_CONF"] = str(cluster.slurm_conf)
        source = f"mini-cluster:{cluster.state_dir}"
        if cfg.settings_dir is None:
            settings = cluster.state_dir / "job-settings"
        if not partitions and config_path is None:
            partitions = cluster.managed_partitions
    conf = slurm_conf or (str(cfg.slurm_conf) if cfg.slurm_conf else None)
    if conf:
        env["SLURM_CONF"] = conf
        source = f"slurm:{conf}"
    runner = CommandRunner(env=env, timeout_s=cfg.command_timeout_s)
    backend = SlurmBackend(
        runner,
        partitions=list(partitions) or list(cfg.managed_partitions),
        settings_dir=settings_dir or settings,
        start_timeout_s=cfg.start_timeout_s,
        lease_s=cfg.lease_s,
        dry_run=True,
    )
    return capture_live(backend, source)


# ------------------------------------------------------------------ snapshot
@click.command("snapshot")
@click.option("--out", required=True, type=click.Path(dir_okay=False),
              help="Where to write the snapshot (JSON).")
@click.option("--from-json", "jobs_json", type=click.Path(dir_okay=False), default=None,
              help="Instead of the live cluster: its jobs as recorded (squeue --json "
                   "--states=all, scontrol show job --json or slurmrestd /jobs).")
@click.option("--nodes", "nodes_json", type=click.Path(dir_okay=False), default=None,
              help="With --from-json: its nodes as recorded (sinfo --json, scontrol show "
                   "node --json or slurmrestd /nodes).")
@click.option("--now", "now_s", type=float, default=None,
              help="With --from-json: the recording's time, epoch seconds (default: the "
                   "newest time in the jobs).")
@with_options(_live_options)
def snapshot_cmd(out: str, jobs_json: str | None, nodes_json: str | None, now_s: float | None,
                 mini_cluster: bool, config_path: str | None, partitions: tuple[str, ...],
                 settings_dir: str | None, slurm_conf: str | None) -> None:
    """Capture the live state (read-only), or what the scheduler would see of a cluster
    recorded in JSON files (--from-json, --nodes), into a snapshot file for replay and explain."""
    if (jobs_json is None) != (nodes_json is None):
        raise InputError("--from-json and --nodes go together (the jobs and the nodes)",
                         field="--nodes" if nodes_json is None else "--from-json")
    if jobs_json is not None and nodes_json is not None:
        if mini_cluster or slurm_conf:
            raise InputError("a recorded cluster is read from files, not from Slurm",
                             field="--mini-cluster" if mini_cluster else "--slurm-conf")
        if not partitions and config_path is not None:
            partitions = tuple(load_config(config_path).managed_partitions)
        sf = capture_recorded(jobs_json, nodes_json, partitions=partitions,
                              settings_dir=settings_dir, now_s=now_s)
    else:
        if now_s is not None:
            raise InputError("--now goes with --from-json", field="--now", value=now_s)
        sf = capture(mini_cluster=mini_cluster, config_path=config_path, partitions=partitions,
                     settings_dir=settings_dir, slurm_conf=slurm_conf)
    path = write_snapshot(sf, out)
    click.echo(f"{_summary(sf)}; written to {path}", err=True)
    for line in sf.notes.get("not_run", []):
        click.echo(f"note: read-only, not run: {line}", err=True)


def _summary(sf: SnapshotFile) -> str:
    snap = sf.snapshot
    return (f"{len(snap.jobs)} job(s): {len(snap.running)} running, {len(snap.suspended)} "
            f"suspended, {len(snap.pending)} pending; {snap.num_free_gpus} of "
            f"{snap.cluster.total_gpus} GPUs free ({sf.source}"
            f"{', Slurm ' + sf.slurm_version if sf.slurm_version else ''})")


# ------------------------------------------------------------------ replay
def _policy(name: str, config_path: str | None, safety: bool, clock_start_s: float) -> Policy:
    pol = registry.create(name)
    if not (safety or config_path):
        return pol

    limits = load_config(config_path).safety if config_path else SafetyConfig()
    return SafePolicy(pol, limits, clock_start_s=clock_start_s)


def _action_row(a: Action) -> tuple[str, str, str, str]:
    where = str(getattr(a, "placement", "") or "")
    with_jobs = getattr(a, "with_jobs", ())
    if with_jobs:
        where += f" with {','.join(with_jobs)}"
    return a.kind, a.job_id, where, a.reason


def _action_lines(actions: Sequence[Action]) -> list[str]:
    rows = [_action_row(a) for a in actions]
    if not rows:
        return ["  (none)"]
    w = [max(len(r[i]) for r in rows) for i in range(3)]
    return ["  " + "  ".join(c.ljust(w[i]) if i < 3 else c for i, c in enumerate(r)).rstrip()
            for r in rows]


@click.command("replay")
@click.argument("snapshot_file", type=click.Path(dir_okay=False))
@click.option("--policy", "policy_name", required=True,
              help="Policy name (see `slurm-sched policies`).")
@click.option("--simulate", is_flag=True,
              help="Continue offline in the simulator until every job finished; print metrics.")
@click.option("--format", "out_format", type=click.Choice(["table", "json"]), default="table",
              show_default=True)
@click.option("--restart-overhead-s", type=click.FloatRange(min=0), default=30.0,
              show_default=True, help="Dead time after a restart in the simulation.")
@click.option("--progress-model", default=None,
              help="Simulated world (default: the one the policy was evaluated in).")
@click.option("--safety", is_flag=True,
              help="Wrap the policy in the daemon's safety limits (defaults, or --config's).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="Daemon config whose [safety] limits wrap the policy (implies --safety).")
def replay_cmd(snapshot_file: str, policy_name: str, simulate: bool, out_format: str,
               restart_overhead_s: float, progress_model: str | None, safety: bool,
               config_path: str | None) -> None:
    """What a policy would do on a captured state now (and, with --simulate, afterwards)."""
    sf = load_snapshot(snapshot_file)
    snap = sf.snapshot
    if progress_model is not None:
        perf_registry.create(progress_model)  # validates the name
    # a replay trusts the recorded first starts: there is no daemon start to protect jobs from
    pol = _policy(policy_name, config_path, safety, clock_start_s=float("-inf"))
    actions = pol.decide(snap, snap.now_s)
    refusals = list(getattr(pol, "refusals", []))
    result = None
    if simulate:
        fresh = _policy(policy_name, config_path, safety, clock_start_s=float("-inf"))
        result = simulate_from(snap, fresh, restart_overhead_s=restart_overhead_s,
                               progress_model=progress_model)
    if out_format == "json":
        doc: dict[str, Any] = {
            "snapshot": {"file": snapshot_file, "source": sf.source,
                         "captured_at_s": sf.captured_at_s, "now_s": snap.now_s,
                         "jobs": len(snap.jobs)},
            "policy": pol.name,
            "actions": [ACTION_ADAPTER.dump_python(a, mode="json") for a in actions],
            "refusals": [{"action": ACTION_ADAPTER.dump_python(a, mode="json"), "why": why}
                         for a, why in refusals],
        }
        if result is not None:
            doc["metrics"] = result.metrics.model_dump()
            doc["unavailable_gpus"] = [f"{n}:{g}" for n, g in result.blocked_gpus]
            doc["resumed_jobs"] = list(result.resumed_jobs)
        click.echo(json.dumps(doc, indent=2))
        return
    click.echo(f"snapshot {snapshot_file}: {_summary(sf)}")
    click.echo(f"{pol.name} would now take {len(actions)} action(s):")
    for line in _action_lines(actions):
        click.echo(line)
    if refusals:
        click.echo(f"the safety limits refused {len(refusals)} action(s):")
        for a, why in refusals:
            click.echo(f"  {a.kind} {a.job_id}: {why}")
    if result is not None:
        click.echo("")
        click.echo("simulated from the snapshot to the last completion (JCT from submission; "
                   "makespan and GPU util over the replay):")
        click.echo(format_table([result.metrics]))
        if result.blocked_gpus:
            click.echo(f"note: {len(result.blocked_gpus)} GPU(s) held outside the snapshot stayed "
                       "unavailable: " + " ".join(f"{n}:{g}" for n, g in result.blocked_gpus))
        if result.resumed_jobs:
            click.echo(f"note: {pol.name} never resumed the suspended job(s) "
                       f"{', '.join(result.resumed_jobs)}; the replay resumed them when nothing "
                       "else could run")


# ------------------------------------------------------------------ explain
def _dur(seconds: float) -> str:
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def queue_order(policy: Policy, snapshot: ClusterSnapshot, now_s: float
                ) -> tuple[list[str], str] | None:
    """The pending jobs in the order the policy serves them, if it exposes one, and how.

    A policy exposes its order with a ``queue_order(snapshot, now_s) -> list[job id]`` method;
    a multi-level-queue policy (Tiresias) with ``queue_of(job, now_s) -> int``, then the order
    is by queue, then submission (Tiresias orders a queue by entry time, which the snapshot
    does not show). None when the policy exposes neither.
    """
    base = getattr(policy, "inner", policy)
    order_fn = getattr(base, "queue_order", None)
    if callable(order_fn):
        return [str(j) for j in order_fn(snapshot, now_s)], f"{policy.name}'s queue order"
    queue_of = getattr(base, "queue_of", None)
    if callable(queue_of):
        ranked = sorted(snapshot.pending, key=lambda j: (
            int(queue_of(j, now_s)), j.spec.submit_time_s, j.job_id))
        return [j.job_id for j in ranked], f"{policy.name}'s queues (Q0 first), then submission"
    return None


def _usable_nodes(snapshot: ClusterSnapshot, job: JobView) -> list[str]:
    t = job.spec.gpu_type
    return [n.name for n in snapshot.cluster.nodes if n.num_gpus and (t is None or n.gpu_type == t)]


def _free_by_type(snapshot: ClusterSnapshot) -> str:
    per: dict[str, int] = {}
    for n in snapshot.cluster.nodes:
        if n.num_gpus:
            per[n.gpu_type] = per.get(n.gpu_type, 0) + len(snapshot.free_gpus.get(n.name, ()))
    cap = snapshot.cluster.capacity_by_type
    return ", ".join(f"{t} {k}/{cap[t]}" for t, k in per.items())


def _what_would_free(snapshot: ClusterSnapshot, job: JobView, short: int) -> list[str]:
    """The fewest running/suspended jobs whose end would free ``short`` usable GPUs."""
    usable = set(_usable_nodes(snapshot, job))
    occ = snapshot.occupancy
    held: dict[str, set[tuple[str, int]]] = {}
    for slot, holders in occ.items():
        if slot[0] in usable:
            for h in holders:
                held.setdefault(h, set()).add(slot)
    now = snapshot.now_s
    candidates = sorted(held, key=lambda j: (-len(held[j]), j))
    chosen: list[str] = []
    freed: set[tuple[str, int]] = set()
    for jid in candidates:
        chosen.append(jid)
        freed = {s for j in chosen for s in held[j]
                 if all(h in chosen for h in occ.get(s, ()))}
        if len(freed) >= short:
            break
    if len(freed) < short:
        return []
    out = []
    for jid in chosen:
        v = snapshot.by_id[jid]
        since = v.first_start_s
        ran = f", executed {_dur(v.executed_at(now))}" if since is not None else ""
        out.append(f"job {jid} ({v.state.value}, {len(held[jid])} GPU(s) on "
                   f"{' '.join(sorted({n for n, _ in held[jid]}))}{ran})")
    return out


def explain_job(snapshot: ClusterSnapshot, policy: Policy, job_id: str) -> list[str]:
    """The lines of ``slurm-sched explain`` for one job."""
    job = snapshot.by_id.get(job_id)
    if job is None:
        raise InputError("not an active job of the snapshot (finished, unknown, or outside the "
                         "managed partitions)", field="job_id", value=job_id)
    now = snapshot.now_s
    spec = job.spec
    kind = f" of type {spec.gpu_type}" if spec.gpu_type else " of any type"
    lines = [f"job {job_id}: {job.state.value}; asks for {spec.num_gpus} GPU(s){kind}; "
             f"user {spec.user}{'; model ' + spec.model if spec.model else ''}; "
             f"submitted {_dur(now - spec.submit_time_s)} ago"]
    if job.state is not JobState.PENDING:
        lines.append(f"runs on {job.placement}; executed {_dur(job.executed_at(now))} in all, "
                     f"{job.preemptions} preemption(s)")
    else:
        if job.preemptions:
            lines.append(f"preempted {job.preemptions} time(s); executed "
                         f"{_dur(job.executed_at(now))} so far")
        pending = [j.job_id for j in snapshot.pending]
        order = queue_order(policy, snapshot, now)
        if order is not None and job_id in order[0]:
            ids, how = order
            lines.append(f"queue position {ids.index(job_id) + 1} of {len(ids)} waiting "
                         f"job(s) by {how}")
        else:
            lines.append(f"queue position {pending.index(job_id) + 1} of {len(pending)} waiting "
                         f"job(s) by submission ({policy.name} exposes no queue order)")
        usable = _usable_nodes(snapshot, job)
        capacity = sum(snapshot.cluster.by_name[n].num_gpus for n in usable)
        free_usable = sum(len(snapshot.free_gpus.get(n, ())) for n in usable)
        lines.append(f"free GPUs (free/total per type): {_free_by_type(snapshot)}; "
                     f"usable by this job: {free_usable} free, {spec.num_gpus} needed")
        if spec.num_gpus > capacity:
            lines.append(f"never fits: the cluster has {capacity} GPU(s){kind}")
        elif free_usable >= spec.num_gpus:
            lines.append("fits now: enough usable GPUs are free; it waits for the policy's "
                         "choice (see below)")
        else:
            short = spec.num_gpus - free_usable
            held = {s for s, h in snapshot.occupancy.items() if s[0] in usable and h}
            elsewhere = capacity - free_usable - len(held)
            lines.append(f"does not fit now: {short} more usable GPU(s) needed")
            culprits = _what_would_free(snapshot, job, short)
            if culprits:
                lines.append("would fit if these ended or moved: " + "; ".join(culprits))
            if elsewhere > 0:
                lines.append(f"{elsewhere} usable GPU(s) are held outside the managed "
                             "partitions or are on unavailable nodes")
    decided = [a for a in policy.decide(snapshot, now) if a.job_id == job_id
               or job_id in getattr(a, "with_jobs", ())]
    if decided:
        lines.append(f"{policy.name} now: " + "; ".join(
            " ".join(x for x in _action_row(a)[:3] if x) for a in decided))
    else:
        lines.append(f"{policy.name} now: no action for this job")
    for a, why in getattr(policy, "refusals", []):
        if a.job_id == job_id:
            lines.append(f"safety refused {a.kind}: {why}")
    lines.append(f"{policy.name} says: {policy.explain(snapshot, job_id)}")
    return lines


@click.command("explain")
@click.argument("job_id")
@click.option("--policy", "policy_name", default=None,
              help="Policy to ask (default: the daemon config's policy).")
@click.option("--snapshot", "snapshot_file", type=click.Path(dir_okay=False), default=None,
              help="A snapshot file (default: a live, read-only snapshot).")
@with_options(_live_options)
def explain_cmd(job_id: str, policy_name: str | None, snapshot_file: str | None,
                mini_cluster: bool, config_path: str | None, partitions: tuple[str, ...],
                settings_dir: str | None, slurm_conf: str | None) -> None:
    """Why a job waits and what it would need (state, queue position, free GPUs, policy)."""
    name = policy_name or load_config(config_path).policy
    pol = registry.create(name)
    if snapshot_file is not None:
        sf = load_snapshot(snapshot_file)
    else:
        sf = capture(mini_cluster=mini_cluster, config_path=config_path, partitions=partitions,
                     settings_dir=settings_dir, slurm_conf=slurm_conf)
    for line in explain_job(sf.snapshot, pol, job_id):
        click.echo(line)
