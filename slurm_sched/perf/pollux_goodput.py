"""Pollux's goodput model over the Pollux measurements (spec ``sjf-bsbf.md`` section 3).

Paper: Qiao et al., "Pollux: Co-adaptive Cluster Scheduling for Goodput-Optimized Deep
Learning", OSDI'21. Goodput = throughput x statistical efficiency:

- Throughput: the eq. (7) iteration-time model fitted from the Pollux step/sync times
  (:func:`slurm_sched.perf.sjf_bsbf_model.fit_iter_model`), for K replicas on ``nodes`` nodes,
  per-GPU micro-batch b and s accumulation steps (global batch M = K * b * s).
- Statistical efficiency: ``gain(M) = (var + sqr) / (var / scale + sqr)`` with
  ``scale = M / init_batch`` (``init_batch`` = the smallest batch Pollux validated for the
  application), where ``sqr`` and ``var`` are the gradient statistics of the job's own run
  (``validation-<batch>.csv`` nearest the requested batch) at its current epoch. ``gain`` is the
  progress of one step in init-batch steps, so goodput in init-batch steps per second is
  ``gain(M) / t_iter``.

Deviations (documented): Pollux fits the throughput parameters online from the job's own
profile and reads the gradient statistics online; here both come from the offline fit of the
same measurements, i.e. Pollux after its profiling has converged. Batch sizes are searched on a
grid (:data:`BATCH_GRID_POINTS` values, geometric between the smallest and the largest
validated batch) instead of Pollux's continuous optimiser.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from slurm_sched.perf.sjf_bsbf_model import JobProfile, application_profile
from slurm_sched.traces.pollux_workload import GPUS_PER_NODE, default_models_dir, load_application

#: Number of global batch sizes tried per allocation.
BATCH_GRID_POINTS = 12
#: Pollux caps NCF at one replica (its artifact's workloads run it with batch 32768).
SINGLE_REPLICA_APPS = frozenset({"ncf"})
#: Absolute cap on replicas per job (Pollux artifact).
MAX_REPLICAS_CAP = 64


@dataclass(frozen=True)
class GradStats:
    """Per-epoch gradient statistics of one validation run (``grad_sqr``, ``grad_var``)."""

    batch_size: int
    sqr: tuple[float, ...]
    var: tuple[float, ...]

    def at(self, fraction: float) -> tuple[float, float]:
        n = len(self.sqr)
        i = min(max(int(fraction * n), 0), n - 1)
        return self.sqr[i], self.var[i]


@lru_cache(maxsize=64)
def _grad_stats(app: str, batch_size: int, models_dir: Path | None = None) -> GradStats:
    base = (models_dir or default_models_dir()).resolve()
    path = base / app / f"validation-{batch_size}.csv"
    sqr: list[float] = []
    var: list[float] = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            sqr.append(max(float(r["grad_sqr"]), 1e-30))
            var.append(max(float(r["grad_var"]), 0.0))
    if not sqr:
        raise ValueError(f"no rows in {path}")
    return GradStats(batch_size, tuple(sqr), tuple(var))


@lru_cache(maxsize=64)
def validated_batches(app: str) -> tuple[int, ...]:
    return tuple(sorted(load_application(default_models_dir().resolve() / app).final_iteration))


def init_batch(app: str) -> int:
    """Pollux's initial (smallest validated) batch size of ``app``."""
    return validated_batches(app)[0]


def max_batch(app: str) -> int:
    return validated_batches(app)[-1]


@lru_cache(maxsize=4096)
def grad_stats(app: str, requested_batch: int) -> GradStats:
    """Gradient statistics of the validation run nearest (in ratio) to ``requested_batch``."""
    batches = validated_batches(app)
    nearest = min(batches, key=lambda b: (abs(math.log(b / requested_batch)), -b))
    return _grad_stats(app, nearest)


@lru_cache(maxsize=65536)
def stats_at(app: str, batch_size: float, epoch: int) -> tuple[float, float]:
    """``(sqr, var)`` of ``epoch`` at global ``batch_size``, interpolated linearly in the batch
    between the validation runs around it (the first or last run outside their range): what a
    job training at that batch measures, as Pollux's simulator reads it (``get_grad_stats``)."""
    batches = validated_batches(app)
    lo = max((b for b in batches if b <= batch_size), default=batches[0])
    hi = min((b for b in batches if b >= batch_size), default=batches[-1])
    w = 0.0 if hi == lo else (batch_size - lo) / (hi - lo)
    below, above = _grad_stats(app, lo), _grad_stats(app, hi)
    return ((1 - w) * below.sqr[epoch] + w * above.sqr[epoch],
            (1 - w) * below.var[epoch] + w * above.var[epoch])


def gain(sqr: float, var: float, scale: float) -> float:
    """Pollux's statistical gain of a batch ``scale`` times the initial one (<= scale)."""
    if scale <= 0:
        raise ValueError(f"scale must be > 0, got {scale}")
    return (var + sqr) / (var / scale + sqr)


def efficiency_ratio(profile: JobProfile, global_batch: float, fraction: float) -> float:
    """gain(global_batch) / gain(requested batch) at the job's current training fraction."""
    sqr, var = grad_stats(profile.app, profile.batch_size).at(fraction)
    m0 = init_batch(profile.app)
    return gain(sqr, var, global_batch / m0) / gain(sqr, var, profile.batch_size / m0)


@dataclass(frozen=True)
class Config:
    """A job configuration Pollux may choose: replicas, nodes, micro-batch, steps."""

    replicas: int
    nodes: int
    sub_batch: int
    steps: int
    goodput: float  # init-batch steps per second

    @property
    def global_batch(self) -> int:
        return self.replicas * self.sub_batch * self.steps


@lru_cache(maxsize=64)
def _local_bounds(app: str) -> tuple[int, int]:
    appdata = load_application(default_models_dir().resolve() / app)
    lo = min(min(c.local_bsz) for c in appdata.placements.values())
    return max(1, int(lo)), appdata.max_local_bsz


def max_replicas(app: str, max_profiled: int) -> int:
    """Pollux's per-job cap: min(max(2 * profiled, 1), 64, max_batch / min_local_bsz)."""
    if app in SINGLE_REPLICA_APPS:
        return 1
    lo, _ = _local_bounds(app)
    return max(1, min(max(2 * max_profiled, 1), MAX_REPLICAS_CAP, max_batch(app) // lo))


@lru_cache(maxsize=262144)
def _best(app: str, num_gpus: int, batch_size: int, replicas: int, nodes: int,
          epoch: int, stats_batch: int | None = None) -> Config:
    profile = application_profile(app, num_gpus, batch_size)
    if stats_batch is None:
        stats = grad_stats(app, batch_size)
        sqr, var = stats.sqr[epoch], stats.var[epoch]
    else:
        sqr, var = stats_at(app, stats_batch, epoch)
    m0, m_max = init_batch(app), max_batch(app)
    lo_local, hi_local = _local_bounds(app)
    if app in SINGLE_REPLICA_APPS:
        grid = [batch_size]  # Pollux runs NCF at its target batch
    else:
        ratio = (m_max / m0) ** (1.0 / (BATCH_GRID_POINTS - 1))
        grid = sorted({round(m0 * ratio**i) for i in range(BATCH_GRID_POINTS)}
                      | {batch_size})
    best: Config | None = None
    for m in grid:
        local = -(-m // replicas)
        if local < lo_local and best is not None:
            continue
        steps = -(-local // hi_local)
        b = -(-local // steps)
        t = profile.iter_model.t_iter(b, steps, nodes, replicas)
        g = gain(sqr, var, replicas * b * steps / m0) / t
        if best is None or g > best.goodput:
            best = Config(replicas, nodes, b, steps, g)
    assert best is not None
    return best


@lru_cache(maxsize=4096)
def _num_epochs(app: str, batch_size: int) -> int:
    return len(grad_stats(app, batch_size).sqr)


def epoch_index(profile: JobProfile, fraction: float) -> int:
    n = _num_epochs(profile.app, profile.batch_size)
    return min(max(int(fraction * n), 0), n - 1)


def best_config(profile: JobProfile, replicas: int, fraction: float,
                nodes: int | None = None, stats_batch: int | None = None) -> Config:
    """The goodput-maximising batch configuration on ``replicas`` GPUs (packed by default).

    The gradient statistics are those of the validation run nearest the job's requested batch,
    or, with ``stats_batch``, those a job training at that global batch measures
    (:func:`stats_at`)."""
    if replicas < 1:
        raise ValueError(f"replicas must be >= 1, got {replicas}")
    n = -(-replicas // GPUS_PER_NODE) if nodes is None else nodes
    return _best(profile.app, profile.num_gpus, profile.batch_size, replicas, n,
                 epoch_index(profile, fraction), stats_batch)


@lru_cache(maxsize=262144)
def _speedup(app: str, num_gpus: int, batch_size: int, replicas: int, epoch: int,
             stats_batch: int | None) -> float:
    nodes = -(-replicas // GPUS_PER_NODE)
    return (_best(app, num_gpus, batch_size, replicas, nodes, epoch, stats_batch).goodput
            / _best(app, num_gpus, batch_size, 1, 1, epoch, stats_batch).goodput)


def speedup(profile: JobProfile, replicas: int, fraction: float,
            stats_batch: int | None = None) -> float:
    """Goodput on ``replicas`` packed GPUs over goodput on one GPU (Pollux's speedup), with
    the gradient statistics of :func:`best_config`."""
    if replicas <= 0:
        return 0.0
    return _speedup(profile.app, profile.num_gpus, profile.batch_size, replicas,
                    epoch_index(profile, fraction), stats_batch)


def replica_options(limit: int, gpus_per_node: int = GPUS_PER_NODE) -> list[int]:
    """GPU counts Pollux-style allocations use here: 1..gpus_per_node, then whole nodes."""
    opts = list(range(1, min(limit, gpus_per_node) + 1))
    k = 2 * gpus_per_node
    while k <= limit:
        opts.append(k)
        k += gpus_per_node
    return opts
