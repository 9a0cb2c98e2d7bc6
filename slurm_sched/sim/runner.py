"""Run one policy over a trace in the simulator: wires backend, clock and controller."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from slurm_sched.controller import Controller, ControllerStats
from slurm_sched.model import ActionResult, Cluster, CompletedJob, JobSpec
from slurm_sched.perf import registry as perf_registry
from slurm_sched.perf.progress import ProgressModel
from slurm_sched.policy import registry
from slurm_sched.policy.base import Policy
from slurm_sched.sim import profile as profiles
from slurm_sched.sim.backend import SimulatedBackend
from slurm_sched.sim.clock import RoundClock, SimulatedClock
from slurm_sched.sim.metrics import RunMetrics, compute_metrics

#: Called with (jobs completed so far, total jobs) after every cycle that finished a job.
ProgressCallback = Callable[[int, int], None]


@dataclass
class SimulationResult:
    metrics: RunMetrics
    completed: list[CompletedJob]
    stats: ControllerStats
    rejected: list[tuple[JobSpec, str]]


def simulate(
    jobs: Sequence[JobSpec],
    cluster: Cluster,
    policy: str | Policy,
    *,
    restart_overhead_s: float | None = None,
    max_jobs_per_gpu: int | None = None,
    progress_model: ProgressModel | str | None = None,
    on_progress: ProgressCallback | None = None,
    profile: profiles.Profile | str = "default",
    policy_options: Mapping[str, object] | None = None,
) -> SimulationResult:
    """Simulate ``policy`` (a registry name or an instance) on ``jobs`` over ``cluster``.

    ``profile`` (an instance or a registry name) supplies what the other arguments leave open
    and when the policy may act: ``progress_model`` (an instance or a registry name) defaults to
    the profile's, then the policy's own ``progress_model``; ``restart_overhead_s`` to the
    profile's, then :data:`~slurm_sched.sim.profile.DEFAULT_RESTART_OVERHEAD_S`;
    ``max_jobs_per_gpu`` to the policy's sharing capacity. The profile's ``start_overhead_s``
    (dead time at first starts) always applies. A policy given by name is created with the
    profile's options for it (``Profile.policy_options``), each overridden by
    ``policy_options``; an instance is used as is (``policy_options`` must then be empty). The
    profile's ``event_overhead_s`` switches on the backend's per-event overhead, its
    ``in_place_settings`` settings changes without a restart.
    """
    w = profiles.get(profile) if isinstance(profile, str) else profile
    if isinstance(policy, str):
        pol = registry.create(policy, w.options_for(policy, policy_options))
    elif policy_options:
        raise ValueError("policy_options apply to a policy given by name, not to an instance")
    else:
        pol = policy
    if progress_model is None:
        progress_model = w.progress_model or pol.progress_model or "identity"
    if restart_overhead_s is None:
        restart_overhead_s = (w.restart_overhead_s if w.restart_overhead_s is not None
                              else profiles.DEFAULT_RESTART_OVERHEAD_S)
    if isinstance(progress_model, str):
        progress_model = perf_registry.create(progress_model)
    backend = SimulatedBackend(
        cluster,
        jobs,
        progress=progress_model,
        restart_overhead_s=restart_overhead_s,
        max_jobs_per_gpu=max_jobs_per_gpu or max(1, pol.max_jobs_per_gpu),
        start_overhead_s=w.start_overhead_s,
        event_overhead=w.event_overhead if w.event_overhead_s is not None else None,
        in_place_settings=w.in_place_settings,
    )
    total = backend.total_jobs
    hook = None
    if on_progress is not None:
        seen = [0]

        def hook(_now: float, _results: list[ActionResult]) -> None:
            done = backend.completed_count
            if done != seen[0]:
                seen[0] = done
                on_progress(done, total)

    clock = SimulatedClock(backend) if w.round_s is None else RoundClock(backend, w.round_s)
    stats = Controller(backend, pol, clock, on_cycle=hook).run()
    completed = backend.completed()
    if on_progress is not None:
        on_progress(len(completed), total)  # the last completions end the run without a cycle
    metrics = compute_metrics(
        pol.name,
        completed,
        total_gpus=cluster.total_gpus,
        busy_gpu_s=backend.busy_gpu_s,
        rejected_jobs=len(backend.rejected),
    )
    return SimulationResult(metrics, completed, stats, list(backend.rejected))
