"""Recurring mixed-parallel workloads for the A-SRPT reproduction (spec sections 4.2 and 5.3).

The paper replays the Alibaba PAI trace (group ids for recurring jobs, users, GPU requests,
durations) with nine profiled models. That trace is not bundled; this generator builds the
closest equivalent from the bundled data, deterministically from a seed:

1. **Base trace.** ``philly`` (default): ``data/pollux/philly.csv`` (82,247 jobs), sorted by
   submission; user = Philly virtual cluster. ``muri``: ``data/muri/trace1.csv`` (1,494 jobs,
   model names, no users: user = ``default``). Arrival times, GPU requests and durations are
   the trace's.
2. **Recurring groups (SYNTHETIC; the traces have no group id).** A job's class is (user, GPU
   request) for Philly and (model name, GPU request) for Muri. Inside a class, a group is a band
   of durations a factor ``bucket_factor`` (2) wide on a log scale, with a per-class random
   offset of the band edges: recurring runs of one script with the same data and arguments take
   similar times. Then a share ``noise_share`` (10%) of jobs is moved to the group of a random
   other job of the same class: runs stopped early, failed or re-tuned that keep the meta-data
   of their group. Evidence that Philly has such recurrence: 62% of its jobs share (virtual
   cluster, GPUs, exact duration in seconds) with at least four other jobs.
3. **Model and configuration per group (reading B13).** A group asking for 1 GPU gets a random
   model that fits one GPU in its 1-GPU (DP) configuration. Otherwise a random configuration of
   the synthetic table (``slurm_sched.perf.asrpt_model.MODELS``) whose GPU count equals the
   request; if none exists (12, 24, 64, 128 GPUs) one with the nearest count (log ratio, ties to
   the smaller). For Muri the model name picks the family (``MURI_MODELS``) when that family has
   a matching configuration. The job's GPU count is its configuration's.
4. **Single-GPU share (Fig. 7).** With ``single_gpu_share`` = s set, each group is made single-
   GPU with probability s (a random 1-GPU model) and distributed otherwise (it keeps its
   configuration, or, if it was a 1-GPU group, gets a GPU count drawn from the trace's
   multi-GPU requests and a configuration by rule 3). The paper assigns per job; per group keeps
   a group's jobs identical, which recurrence requires.
5. **Iterations.** ``n = max(1, round(duration / alpha~_min))`` with alpha~_min of the group's
   configuration on ``gpus_per_server``-GPU servers (paper: "dividing the job duration in the
   trace by its approximate minimum per-iteration time"); the job's ``duration_s`` becomes
   ``n * alpha~_min`` (its run time on a consolidated placement).
6. **Split.** The first ``train_fraction`` (80%) of jobs in submission order is the predictor's
   history (group, user, n); simulation job sets are consecutive jobs of the rest (reading B14),
   arrival times shifted so the set starts at 0.

Jobs carry ``attrs``: ``group``, ``asrpt_profile`` (configuration name), ``trace_gpus``,
``trace_duration_s``. Command line::

    python -m slurm_sched.workloads.a_srpt --out jobs.jsonl --seed 1 [--jobs 2000] \\
        [--offset 0] [--base philly] [--single-gpu-share 0.5] [--history-out history.json]

``--history-out`` writes the training part in the random-forest predictor's state format
(``RandomForestPredictor(path=...)`` loads it).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from slurm_sched.model import JobSpec
from slurm_sched.perf.asrpt_model import (
    MODELS,
    JobProfile,
    Network,
    alpha_min_est,
    synthetic_profiles,
)
from slurm_sched.perf.iteration_predictor import FORMAT, FORMAT_VERSION, Record
from slurm_sched.traces import bundled, read_trace, write_canonical

Base = Literal["philly", "muri"]
BASE_FILES: dict[str, str] = {"philly": "pollux/philly.csv", "muri": "muri/trace1.csv"}

#: Muri model name -> synthetic model family.
MURI_MODELS: dict[str, str] = {
    "vgg16": "vgg19", "vgg19": "vgg19", "resnet18": "resnet152",
    "shufflenet_v2_x1_0": "inception-v3", "bert": "bert-large", "gpt2": "gpt-6.7b",
    "a2c": "inception-v3", "dqn": "resnet152",
}


@dataclass(frozen=True)
class WorkloadConfig:
    base: Base = "philly"
    seed: int = 1
    gpus_per_server: int = 8
    bucket_factor: float = 2.0
    noise_share: float = 0.1
    single_gpu_share: float | None = None
    train_fraction: float = 0.8
    net: Network = field(default_factory=Network)

    def __post_init__(self) -> None:
        if self.base not in BASE_FILES:
            raise ValueError(f"base must be one of {sorted(BASE_FILES)}, got {self.base!r}")
        if not self.bucket_factor > 1:
            raise ValueError(f"bucket_factor must be > 1, got {self.bucket_factor}")
        if not 0 <= self.noise_share <= 1:
            raise ValueError(f"noise_share must be in [0, 1], got {self.noise_share}")
        if self.single_gpu_share is not None and not 0 <= self.single_gpu_share <= 1:
            raise ValueError(f"single_gpu_share must be in [0, 1], got {self.single_gpu_share}")
        if not 0 < self.train_fraction < 1:
            raise ValueError(f"train_fraction must be in (0, 1), got {self.train_fraction}")


@dataclass
class Workload:
    """Every job of the trace (annotated) and the train/test split point."""

    config: WorkloadConfig
    jobs: list[JobSpec]
    split: int

    @property
    def train(self) -> list[JobSpec]:
        return self.jobs[: self.split]

    @property
    def test(self) -> list[JobSpec]:
        return self.jobs[self.split:]

    def history(self) -> list[Record]:
        """(group, user, iterations) of the training jobs, in submission order."""
        return [(str(j.attrs["group"]), j.user, float(j.iterations or 0)) for j in self.train]

    def job_set(self, num_jobs: int, offset: int = 0) -> list[JobSpec]:
        """``num_jobs`` consecutive test jobs from ``offset``, arrivals shifted to start at 0."""
        if num_jobs < 1 or offset < 0 or offset + num_jobs > len(self.test):
            raise ValueError(f"job set [{offset}, {offset + num_jobs}) outside the "
                             f"{len(self.test)} test jobs")
        chunk = self.test[offset: offset + num_jobs]
        t0 = chunk[0].submit_time_s
        return [j.model_copy(update={"submit_time_s": j.submit_time_s - t0}) for j in chunk]


def _configs_by_gpus() -> dict[int, list[str]]:
    out: dict[int, list[str]] = defaultdict(list)
    for name, p in synthetic_profiles().items():
        out[p.num_gpus].append(name)
    return dict(out)


def _single_gpu_configs() -> list[str]:
    return [f"{m.name}/dp1" for m in MODELS if m.fits_one_gpu]


def _nearest_count(counts: Sequence[int], want: int) -> int:
    return min(counts, key=lambda c: (abs(math.log(c / want)), c))


def _choose_config(rng: np.random.Generator, gpus: int, family: str | None) -> str:
    if gpus <= 1:
        singles = _single_gpu_configs()
        if family is not None and f"{family}/dp1" in singles:
            return f"{family}/dp1"
        return singles[int(rng.integers(len(singles)))]
    by_g = _configs_by_gpus()
    multi = sorted(g for g in by_g if g > 1)
    g = gpus if gpus in by_g else _nearest_count(multi, gpus)
    names = sorted(by_g[g])
    if family is not None:
        fam = [n for n in names if n.split("/")[0] == family]
        if fam:
            names = fam
    return names[int(rng.integers(len(names)))]


def build(config: WorkloadConfig = WorkloadConfig()) -> Workload:
    """Build the annotated workload (every job of the base trace) as described above."""
    rng = np.random.default_rng(config.seed)
    raw = read_trace(bundled(BASE_FILES[config.base]))
    # 1-2: classes and duration bands
    cls_of: list[tuple[str, ...]] = []
    for j in raw:
        if config.base == "philly":
            cls_of.append((j.user, str(j.num_gpus)))
        else:
            cls_of.append((j.model or "-", str(j.num_gpus)))
    offsets: dict[tuple[str, ...], float] = {}
    for c in sorted(set(cls_of)):
        offsets[c] = float(rng.random())
    log_f = math.log(config.bucket_factor)
    groups: list[str] = []
    for j, c in zip(raw, cls_of, strict=True):
        band = math.floor(math.log(max(j.duration_s, 1.0)) / log_f + offsets[c])
        groups.append("|".join((*c, f"b{band}")))
    members: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for i, c in enumerate(cls_of):
        members[c].append(i)
    noisy = rng.random(len(raw)) < config.noise_share
    picks = rng.random(len(raw))
    true_groups = list(groups)
    for i in map(int, np.flatnonzero(noisy)):
        peers = members[cls_of[i]]
        groups[i] = true_groups[peers[int(picks[i] * len(peers))]]
    # 3-4: configuration per group
    group_gpus: dict[str, int] = {}
    group_family: dict[str, str | None] = {}
    for j, g in zip(raw, groups, strict=True):
        if g not in group_gpus:
            group_gpus[g] = j.num_gpus
            group_family[g] = MURI_MODELS.get(j.model or "") if config.base == "muri" else None
    multi_requests = [j.num_gpus for j in raw if j.num_gpus > 1] or [8]
    group_cfg: dict[str, str] = {}
    for g in sorted(group_gpus):
        want = group_gpus[g]
        if config.single_gpu_share is not None:
            if rng.random() < config.single_gpu_share:
                want = 1
            elif want == 1:
                want = int(multi_requests[int(rng.integers(len(multi_requests)))])
        group_cfg[g] = _choose_config(rng, want, group_family[g])
    # 5: iterations and durations
    table = synthetic_profiles()
    amin_cache: dict[str, float] = {}

    def amin(name: str) -> float:
        if name not in amin_cache:
            amin_cache[name] = alpha_min_est(table[name], config.gpus_per_server, config.net)
        return amin_cache[name]

    jobs: list[JobSpec] = []
    for idx, (j, g) in enumerate(zip(raw, groups, strict=True)):
        name = group_cfg[g]
        prof: JobProfile = table[name]
        a = amin(name)
        n = max(1, round(j.duration_s / a))
        jobs.append(JobSpec(
            job_id=f"as{idx}", submit_time_s=j.submit_time_s, num_gpus=prof.num_gpus,
            duration_s=n * a, user=j.user, model=name.split("/")[0], iterations=n,
            attrs={"group": g, "asrpt_profile": name, "trace_gpus": j.num_gpus,
                   "trace_duration_s": j.duration_s, "trace_job_id": j.job_id},
        ))
    split = int(len(jobs) * config.train_fraction)
    return Workload(config=config, jobs=jobs, split=split)


def history_state(records: Sequence[Record]) -> dict[str, object]:
    """The random-forest predictor's state file content for ``records``."""
    return {"format": FORMAT, "version": FORMAT_VERSION, "kind": "random-forest",
            "params": {"n_estimators": 100, "seed": 0},
            "history": [[g, u, n] for g, u, n in records]}


def describe(w: Workload) -> dict[str, object]:
    """Summary statistics (recurrence, GPU mix) of a workload."""
    sizes = Counter(str(j.attrs["group"]) for j in w.jobs)
    rec5 = sum(1 for j in w.jobs if sizes[str(j.attrs["group"])] >= 5) / len(w.jobs)
    return {
        "jobs": len(w.jobs), "groups": len(sizes), "train_jobs": w.split,
        "share_in_groups_of_5_or_more": rec5,
        "single_gpu_share": sum(1 for j in w.jobs if j.num_gpus == 1) / len(w.jobs),
        "configs": len({j.attrs["asrpt_profile"] for j in w.jobs}),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m slurm_sched.workloads.a_srpt",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="job set file (canonical CSV or JSONL)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--base", choices=sorted(BASE_FILES), default="philly")
    ap.add_argument("--jobs", type=int, default=2000, help="consecutive test jobs")
    ap.add_argument("--offset", type=int, default=0, help="first test job of the set")
    ap.add_argument("--single-gpu-share", type=float, default=None)
    ap.add_argument("--gpus-per-server", type=int, default=8)
    ap.add_argument("--history-out", default=None,
                    help="write the training jobs as a random-forest predictor state (JSON)")
    args = ap.parse_args(argv)
    cfg = WorkloadConfig(base=args.base, seed=args.seed, single_gpu_share=args.single_gpu_share,
                         gpus_per_server=args.gpus_per_server)
    w = build(cfg)
    jobs = w.job_set(min(args.jobs, len(w.test) - args.offset), args.offset)
    write_canonical(jobs, args.out)
    if args.history_out:
        Path(args.history_out).write_text(json.dumps(history_state(w.history())),
                                          encoding="utf-8")
    print(json.dumps({**describe(w), "written_jobs": len(jobs), "out": args.out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
