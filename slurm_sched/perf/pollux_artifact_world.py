"""The world of Pollux's simulator (OSDI'21 artifact): job speed from its measured data.

A job of a Pollux workload (application, global batch B) trains until its *statistical
progress* reaches the end of its last epoch: every step at global batch M adds
``gain(M) = (var + sqr) / (var / scale + sqr)`` (``scale = M / init_batch``) progress, with the
gradient statistics ``sqr, var`` of the current epoch interpolated linearly in M between the
validation runs around it, and epoch ``e`` ends when progress reaches the least of the runs'
``progress`` at ``e`` (the artifact's ``get_grad_stats`` and ``get_progress``). At a fixed
batch the number of steps is therefore ``S(M) = sum_e (p_e - p_{e-1}) / gain_e(M)``, slightly
more or less than the ``iteration`` count that our trace reader counts (e.g. YOLOv3 at 64:
15,970 vs 14,577 steps). A fixed batch B on R GPUs trains at M = R x micro-batch x (accumulation
steps + 1), the rounded-up share of every GPU (128 on 6 GPUs: 132).

A step's wall time comes from ``placements.csv`` for the job's *actual* placement (GPUs per node
as a digit string, named by its lexicographically smallest rotation as in that file; placements
the file lacks use ``scalability.csv`` by node and replica count, as the trace reader does),
interpolated in the per-GPU micro-batch: ``local = ceil(B / R)`` on R GPUs,
``accum = ceil(local / max_local) - 1`` extra accumulation steps, at least one when a 1-GPU job's
batch exceeds the application's smallest validated batch (the artifact's rule; NCF at 32,768
on one GPU runs two micro-batches of 16,384), ``atomic = ceil(local / (accum + 1))`` (at
most ``max_batch / (R (accum + 1))``), and ``t = step(atomic) + accum * (step(atomic) -
sync(atomic))``.

Rate (isolated seconds of ``JobSpec.duration_s`` per wall second) at the fixed batch B of the
trace: ``duration_s / (S(M) * t)``, so a job at a fixed placement finishes after exactly
``S(M) * t`` seconds of running. When an elastic policy sets the micro-batch and steps (global
batch M), the work done is the share of the statistical progress made: each step adds
``gain_e(M)`` of it in the job's current epoch ``e``, so the rate is ``duration_s * gain_e(M) /
(p_end * t)`` and changes at every epoch end (:meth:`PolluxArtifactWorld.rate_holds_until`; the
simulator asks again there). A job that keeps M from its start therefore ends after
``S(M) * t``, and one that changes M carries its progress over, as in the artifact's ``Job.step``.
Jobs without Pollux data run at rate 1. No co-location slowdown (the artifact's interference
is off in its published runs).

Registered as ``pollux-artifact``; the ``pollux-artifact`` simulation profile uses it.
"""

from __future__ import annotations

import bisect
import csv
from functools import lru_cache

from slurm_sched.model import JobView, Placement
from slurm_sched.perf.pollux_goodput import (
    gain,
    init_batch,
    max_batch,
    stats_at,
    validated_batches,
)
from slurm_sched.perf.progress import ProgressModel
from slurm_sched.traces.pollux_workload import (
    PolluxApplication,
    _Curve,
    available_applications,
    default_models_dir,
    load_application,
)


def _app_data(app: str) -> PolluxApplication:
    return load_application(default_models_dir().resolve() / app)


@lru_cache(maxsize=64)
def _known_apps() -> frozenset[str]:
    return frozenset(available_applications())


@lru_cache(maxsize=64)
def _epoch_ends(app: str) -> tuple[float, ...]:
    """Progress at which each epoch of ``app`` ends: the least of its validation runs'
    ``progress`` at that epoch (the artifact's ``get_progress``)."""
    runs = []
    for b in validated_batches(app):
        with open(default_models_dir().resolve() / app / f"validation-{b}.csv", newline="") as f:
            runs.append([float(r["progress"]) for r in csv.DictReader(f)])
    return tuple(min(at_epoch) for at_epoch in zip(*runs, strict=False))


@lru_cache(maxsize=4096)
def _epoch_gains(app: str, batch_size: int) -> tuple[float, ...]:
    """Progress one step at global ``batch_size`` adds in each epoch: the gain at ``scale =
    batch_size / init_batch`` with the epoch's gradient statistics interpolated linearly in the
    batch size between the validation runs around it (the artifact's ``get_grad_stats``)."""
    scale = batch_size / init_batch(app)
    return tuple(gain(*stats_at(app, batch_size, e), scale)
                 for e in range(len(_epoch_ends(app))))


def _epoch_at(app: str, done: float) -> int:
    """The epoch a job is in once it has made the share ``done`` of its statistical progress
    (the first whose end lies beyond it; the last at the end)."""
    ends = _epoch_ends(app)
    at = done * ends[-1]
    # an end within rounding of ``at`` is reached: the job is in the next epoch
    return min(bisect.bisect_right(ends, at * (1 + 1e-12)), len(ends) - 1)


@lru_cache(maxsize=4096)
def statistical_steps(app: str, batch_size: int) -> float:
    """Steps Pollux's simulator takes to finish ``app`` at a fixed global ``batch_size``:
    ``sum_e (p_e - p_{e-1}) / gain_e`` (epoch ends :func:`_epoch_ends`, gains
    :func:`_epoch_gains`)."""
    total, prev = 0.0, 0.0
    for p, g in zip(_epoch_ends(app), _epoch_gains(app, batch_size), strict=True):
        total += (p - prev) / g
        prev = p
    return total


def _micro_batch(app: str, replicas: int, batch_size: int) -> tuple[int, int]:
    """(micro-batch per GPU, extra accumulation steps) of a fixed global ``batch_size`` on
    ``replicas`` GPUs (the artifact's ``update_local_bsz``; see the module docstring)."""
    data = _app_data(app)
    local = -(-batch_size // replicas)
    accum = -(-local // data.max_local_bsz) - 1
    if replicas == 1 and batch_size > init_batch(app):
        accum = max(1, accum)
    atomic = -(-local // (accum + 1))
    atomic = min(atomic, max_batch(app) // (replicas * (accum + 1)))
    return atomic, accum


def effective_batch(app: str, replicas: int, batch_size: int) -> int:
    """The global batch a fixed ``batch_size`` really trains at on ``replicas`` GPUs: every GPU
    takes the rounded-up share, so 128 on 6 GPUs is 6 x 22 = 132."""
    atomic, accum = _micro_batch(app, replicas, batch_size)
    return replicas * atomic * (accum + 1)


def placement_key(per_node: tuple[int, ...]) -> str:
    """GPUs per node as ``placements.csv`` names them: the smallest rotation of the digits."""
    digits = [d for d in per_node if d > 0]
    if not digits:
        raise ValueError("empty placement")
    rotations = ["".join(str(d) for d in digits[i:] + digits[:i]) for i in range(len(digits))]
    return min(rotations)


def _curve(data: PolluxApplication, per_node: tuple[int, ...]) -> _Curve:
    """The step/sync curve of a placement; ``scalability.csv`` when the placement is missing."""
    key = placement_key(per_node)
    curve = data.placements.get(key)
    if curve is None:
        replicas, nodes = sum(per_node), len(key)
        groups = dict(data.scalability) or {
            (len(k), sum(int(d) for d in k)): c for k, c in data.placements.items()}
        best = min(groups, key=lambda k: (abs(k[1] - replicas), abs(k[0] - nodes), k))
        curve = groups[best]
    return curve


@lru_cache(maxsize=65536)
def step_time(app: str, per_node: tuple[int, ...], batch_size: int) -> float:
    """Wall seconds of one step of ``app`` at global ``batch_size`` on ``per_node`` GPUs."""
    atomic, accum = _micro_batch(app, sum(per_node), batch_size)
    step, sync = _curve(_app_data(app), per_node).at(atomic)
    return step + accum * max(0.0, step - sync)


def _per_node(placement: Placement) -> tuple[int, ...]:
    return tuple(len(p.gpus) for p in placement.parts)


def _pollux_app(job: JobView) -> str | None:
    """The Pollux application whose data ``job`` runs by, ``None`` for a job without it."""
    spec = job.spec
    app = str(spec.attrs.get("application", spec.model))
    if app not in _known_apps() or spec.batch_size is None or spec.duration_s <= 0:
        return None
    return app


class PolluxArtifactWorld(ProgressModel):
    """Progress model of Pollux's simulator (see the module docstring)."""

    def plan_speed(self, job: JobView, placement: Placement) -> float:
        app = _pollux_app(job)
        if app is None:
            return 1.0
        spec = job.spec
        assert spec.batch_size is not None
        b0 = int(spec.batch_size)
        settings = job.settings
        if settings.sub_batch_size is None:
            # a fixed batch: its steps train at what the GPUs really take
            t = step_time(app, _per_node(placement), b0)
            trains_at = effective_batch(app, placement.num_gpus, b0)
            return spec.duration_s / (statistical_steps(app, trains_at) * t)
        # an elastic policy chose the micro-batch and steps: the global batch M follows, and
        # every step adds the gain of M in the job's current epoch to its statistical progress
        m = placement.num_gpus * settings.sub_batch_size * max(1, settings.accumulation_steps)
        t = configured_step_time(app, _per_node(placement), settings.sub_batch_size,
                                  max(1, settings.accumulation_steps))
        epoch = _epoch_at(app, job.work_done_s / spec.duration_s)
        return spec.duration_s * _epoch_gains(app, m)[epoch] / (_epoch_ends(app)[-1] * t)

    def rate_holds_until(self, job: JobView, placement: Placement) -> float | None:
        """An elastic job's rate holds to the end of its current epoch; a fixed batch's to the
        end of the job."""
        app = _pollux_app(job)
        if app is None or job.settings.sub_batch_size is None:
            return None
        ends = _epoch_ends(app)
        epoch = _epoch_at(app, job.work_done_s / job.spec.duration_s)
        return job.spec.duration_s * ends[epoch] / ends[-1]


def configured_step_time(app: str, per_node: tuple[int, ...], sub_batch: int,
                          steps: int) -> float:
    """Step time at an explicit micro-batch and accumulation steps (elastic policies)."""
    replicas = sum(per_node)
    total = replicas * sub_batch * steps
    if steps == 1:
        # no accumulation requested: the artifact's own rule decides (the 1-GPU quirk)
        return step_time(app, per_node, total)
    step, sync = _curve(_app_data(app), per_node).at(sub_batch)
    return step + (steps - 1) * max(0.0, step - sync)


PROGRESS_MODELS = {"pollux-artifact": PolluxArtifactWorld}
