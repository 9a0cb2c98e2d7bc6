"""The ``pollux-artifact`` profile: the world of Pollux's OSDI'21 simulator.

Reference numbers: ``shared/data/peer-results/pollux/<policy>-<load>.json`` (the artifact's
``simulator/results-jobload/``: Tiresias, Pollux and Optimus on ``workloads-<load>/workload-
{1..8}.csv``, 16 nodes x 4 GPUs). What that simulator assumes, and where it is here:

- Fixed 60 s scheduling rounds (``round_s``): a job that arrives or a GPU that frees
  mid-round waits for the next round; a job that completes mid-round completes then.
- A 30 s dead time at *every* allocation change, the first start included
  (``restart_overhead_s``, ``start_overhead_s``).
- Job speed from Pollux's measured data for the job's actual placement and batch: the
  ``pollux-artifact`` progress model (:mod:`slurm_sched.perf.pollux_artifact_world`: steps to
  completion from statistical progress, step times from ``placements.csv``).
- No co-location (its interference knob is off in the published runs).

``python benchmarks/crosscheck_pollux.py`` compares our policies in this profile with those
numbers job by job.
"""

from slurm_sched.sim.profile import Profile

PROFILE = Profile(
    name="pollux-artifact",
    summary="Pollux's OSDI'21 simulator: 60 s rounds, 30 s per (re)start including the first, "
            "job speed from Pollux's measured throughput and statistical progress, 16x4",
    progress_model="pollux-artifact",
    restart_overhead_s=30.0,
    start_overhead_s=30.0,
    round_s=60.0,
    cluster="16x4",
)
