"""Replay the jobs under each policy in the simulator, and which policies to replay by default.

Every policy runs in the identity world (``progress_model="identity"``): a job runs exactly its
observed run time, whatever GPUs it gets, because the accounting says nothing about how a job
would speed up elsewhere. A policy evaluated in another world, or one that reads model hints the
jobs lack, runs with its documented defaults, and its :attr:`PolicyRun.notes` say so. A policy
that raises on the trace is reported (:attr:`PolicyRun.error`), not fatal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from slurm_sched.advisor.outcomes import JobOutcome, from_completed
from slurm_sched.model import Cluster, JobSpec
from slurm_sched.policy import registry
from slurm_sched.policy.base import Policy
from slurm_sched.sim.runner import simulate

#: The policy that stands for Slurm's own scheduling (priority + EASY backfill).
BASELINE = "slurm-backfill"

#: Called with (policy, jobs completed so far, total jobs).
ReplayProgress = Callable[[str, int, int], None]


@dataclass
class PolicyRun:
    """One policy's replay: its outcomes, or the error that stopped it."""

    name: str
    outcomes: list[JobOutcome] = field(default_factory=list)
    busy_gpu_s: float = 0.0
    rejected: int = 0
    clairvoyant: bool = False
    notes: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def _plain(policy: Policy) -> bool:
    """Whether a policy decides from what Slurm records of a plain GPU job, in the world where
    a job runs its observed time: not clairvoyant, and evaluated in the identity world."""
    return not policy.clairvoyant and policy.progress_model is None


def default_policies(baseline: str = BASELINE) -> list[str]:
    """``baseline`` first, then every registered policy that :func:`_plain` accepts, in
    registry order. Clairvoyant policies read true run times no live scheduler has; policies
    evaluated in another world credit speed-ups (interleaving, elasticity, GPU generations) the
    accounting cannot confirm; both can still be named with ``--policies``."""
    names = [baseline]
    for info in registry.available():
        if info.name != baseline and _plain(info.factory()):
            names.append(info.name)
    return names


def validate_names(names: Sequence[str]) -> list[str]:
    """``names`` without duplicates, each checked against the registry
    (:class:`~slurm_sched.errors.UnknownPolicyError` lists the known ones)."""
    out: list[str] = []
    for n in names:
        key = registry.info(n).name
        if key not in out:
            out.append(key)
    return out


def _notes(policy: Policy, specs: Sequence[JobSpec]) -> list[str]:
    notes = []
    if policy.clairvoyant:
        notes.append("reads each job's true run time (here the observed one), which no live "
                     "scheduler knows: a reference, not a choice to deploy")
    if policy.progress_model is not None:
        notes.append(f"evaluated in the '{policy.progress_model}' world; run here with the "
                     "observed run times, so its speed-up model is not credited")
        lacking = sum(1 for s in specs if s.model is None or s.batch_size is None)
        if lacking:
            notes.append(f"{lacking} of {len(specs)} jobs give no model/batch-size hints; "
                         "the policy used its documented defaults for them")
    return notes


def replay_one(
    name: str,
    specs: Sequence[JobSpec],
    cluster: Cluster,
    *,
    options: Mapping[str, object] | None = None,
    restart_overhead_s: float = 30.0,
    on_progress: ReplayProgress | None = None,
) -> PolicyRun:
    """Simulate ``name`` (with ``options``) on ``specs``; an exception of the policy or the
    simulator becomes :attr:`PolicyRun.error` (one line)."""
    policy = registry.create(name, dict(options or {}))
    run = PolicyRun(name, clairvoyant=policy.clairvoyant, notes=_notes(policy, specs))
    hook = None
    if on_progress is not None:
        def hook(done: int, total: int) -> None:
            on_progress(name, done, total)
    try:
        res = simulate(specs, cluster, policy, restart_overhead_s=restart_overhead_s,
                       progress_model="identity", on_progress=hook)
    except Exception as e:  # any failure of one policy is a finding of the report, not a crash
        run.error = f"{type(e).__name__}: {e}".splitlines()[0]
        return run
    run.outcomes = from_completed(res.completed)
    makespan = res.metrics.makespan_s
    run.busy_gpu_s = res.metrics.gpu_util * cluster.total_gpus * makespan
    run.rejected = len(res.rejected)
    if res.rejected:
        spec, why = res.rejected[0]
        run.notes.append(f"{len(res.rejected)} job(s) can never fit the cluster and were not "
                         f"run, e.g. {spec.job_id}: {why}")
    return run


def replay(
    names: Sequence[str],
    specs: Sequence[JobSpec],
    cluster: Cluster,
    *,
    options: Mapping[str, Mapping[str, object]] | None = None,
    restart_overhead_s: float = 30.0,
    on_progress: ReplayProgress | None = None,
) -> dict[str, PolicyRun]:
    """:func:`replay_one` for each name, in order; ``options`` per policy name."""
    opts = options or {}
    return {n: replay_one(n, specs, cluster, options=opts.get(n),
                          restart_overhead_s=restart_overhead_s, on_progress=on_progress)
            for n in names}
