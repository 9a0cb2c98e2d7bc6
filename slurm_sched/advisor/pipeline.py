"""The whole advice, in order: select the jobs, replay each policy, measure, validate, resample."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from slurm_sched.advisor.cluster_shape import ClusterShape
from slurm_sched.advisor.metrics import ScheduleMetrics, summarise
from slurm_sched.advisor.observed import observed_outcomes
from slurm_sched.advisor.outcomes import JobOutcome
from slurm_sched.advisor.records import AccountingLike
from slurm_sched.advisor.replay import PolicyRun, ReplayProgress, replay, validate_names
from slurm_sched.advisor.resample import Recommendation, ResampleProgress, Resampling, resample
from slurm_sched.advisor.sources import in_partition
from slurm_sched.advisor.validation import TOLERANCE_S, Validation, validate
from slurm_sched.errors import InputError

OBSERVED = "observed"


@dataclass
class Advice:
    """Everything the reports show. ``rows`` holds the observed row first, then one row per
    policy that ran (in ``policies`` order); ``runs`` every policy, failed ones included."""

    source: str
    input_format: str
    partition: str | None
    jobs: int
    set_aside: dict[str, int]
    warnings: list[str]
    shape: ClusterShape
    baseline: str
    policies: list[str]
    origin_s: float
    observed: list[JobOutcome]
    runs: dict[str, PolicyRun]
    rows: list[ScheduleMetrics]
    validation: Validation | None
    resampling: Resampling | None
    notes: list[str] = field(default_factory=list)

    @property
    def recommendation(self) -> Recommendation:
        if self.resampling is not None:
            return self.resampling.recommendation
        why = self.runs[self.baseline].error if self.baseline in self.runs else None
        return Recommendation(None, 0.0, 0.0,
                              f"no recommendation: the baseline {self.baseline} did not run "
                              f"({why})")


def advise(
    accounting: AccountingLike,
    shape: ClusterShape,
    *,
    policies: Sequence[str],
    baseline: str,
    partition: str | None = None,
    resamples: int = 200,
    seed: int = 0,
    block: str = "day",
    tolerance_s: float = TOLERANCE_S,
    restart_overhead_s: float = 30.0,
    options: Mapping[str, Mapping[str, object]] | None = None,
    on_replay: ReplayProgress | None = None,
    on_resample: ResampleProgress | None = None,
) -> Advice:
    """Replay ``accounting``'s jobs (those of ``partition`` when given) on ``shape`` under
    ``baseline`` and ``policies`` (the baseline runs first even if not listed), each with its
    ``options`` (by policy name; e.g. ``slurm-backfill``'s from ``scontrol show config``).

    Raises:
        UnknownPolicyError: a name that is not registered.
        InputError: no job left to replay.
    """
    names = validate_names([baseline, *policies])
    baseline = names[0]
    jobs, other = in_partition(accounting.jobs, partition)
    set_aside = dict(accounting.set_aside)
    if other:
        set_aside[f"other partition than {partition}"] = other
    if not jobs:
        raise InputError("no usable job to replay", source=accounting.source,
                         field="partition" if partition else None, value=partition)
    origin = min(j.submit_s for j in jobs)
    specs = [j.to_spec(origin) for j in jobs]
    observed = observed_outcomes(jobs, origin)
    total = shape.cluster.total_gpus
    runs = replay(names, specs, shape.cluster, options=options,
                  restart_overhead_s=restart_overhead_s, on_progress=on_replay)
    notes: list[str] = []
    obs_row = summarise(OBSERVED, "observed", observed, total_gpus=total)
    if obs_row.utilisation > 1.0:
        notes.append(f"the observed history used {obs_row.utilisation:.0%} of the cluster's "
                     "GPUs: the cluster given is smaller than the one the jobs ran on")
    rows = [obs_row]
    for name, run in runs.items():
        if run.ok:
            rows.append(summarise(name, "simulated", run.outcomes, total_gpus=total,
                                  busy_gpu_s=run.busy_gpu_s))
    base = runs[baseline]
    validation = resampling = None
    if base.ok:
        validation = validate(baseline, observed, base.outcomes, tolerance_s=tolerance_s)
        ok = {n: r.outcomes for n, r in runs.items() if r.ok}
        resampling = resample(ok, baseline, origin_s=origin,
                              clairvoyant={n for n, r in runs.items() if r.clairvoyant},
                              block=block, resamples=resamples, seed=seed,
                              on_progress=on_resample)
    return Advice(
        source=accounting.source, input_format=accounting.format, partition=partition,
        jobs=len(jobs), set_aside=set_aside, warnings=list(accounting.warnings), shape=shape,
        baseline=baseline, policies=names, origin_s=origin, observed=observed, runs=runs,
        rows=rows, validation=validation, resampling=resampling, notes=notes,
    )
