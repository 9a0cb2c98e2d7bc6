"""The ``pollux-artifact`` profile: the world of Pollux's OSDI'21 simulator.

Reference numbers: ``benchmarks/peer/pollux/<policy>-<load>.json`` (the artifact's
``simulator/results-jobload/``: Tiresias, Pollux and Optimus on ``workloads-<load>/workload-
{1..8}.csv``, 16 nodes x 4 GPUs). What that simulator assumes, and where it is here:

- Fixed 60 s scheduling rounds (``round_s``): a job that arrives or a GPU that frees
  mid-round waits for the next round; a job that completes mid-round completes then.
- A 30 s dead time at *every* allocation change, the first start included
  (``restart_overhead_s``, ``start_overhead_s``), plus 1 s at the first start: a measured
  offset, not a documented rule. In the published results (Tiresias, Pollux and Optimus
  alike) 3,933 of the 4,563 NCF job-runs complete exactly 77 s after the first round after
  their arrival (the others start later), where 30 s plus the step model gives 75.96 s; YOLOv3
  at a measured step time is 1.2 s later than the model too. Charging the extra second at the
  first start raises the jobs whose JCT is within 1 % of the artifact's on the tuning set
  (loads 0.5 and 1.5, workloads 1-2) from 364/640 to 448/640 for Tiresias and from 167/640 to
  298/640 for Pollux (``docs/reproductions/crosscheck.md``, the one-change table).
- Job speed from Pollux's measured data for the job's actual placement and batch: the
  ``pollux-artifact`` progress model (:mod:`slurm_sched.perf.pollux_artifact_world`: steps to
  completion from statistical progress, step times from ``placements.csv``).
- A job's batch is re-picked at every step on the GPUs it holds, without a restart (its
  ``Job.update_local_bsz`` at the end of every ``Job.step``; AdaptDL does it in process): this
  profile changes settings in place (``in_place_settings``) and runs ``pollux`` with
  ``rebatch=True``, which re-picks the batch of every job that keeps its GPUs at each round.
- Its search (``Problem`` in its ``pollux.py``) measures each job's speedup against the job's
  goodput on its fair share, ``ceil(GPUs / active jobs)`` replicas, not on one GPU: this
  profile runs ``pollux`` with ``speedup_base="fair"``. On the tuning set, the jobs whose end
  is within 1 % of the artifact's code run with our search are 88.6 % with it and 83.4 %
  against one GPU; against the published runs the JCTs within 1 % are level (298/640 and
  299/640).
- Its policy predicts a job's goodput with the gradient statistics the job measured at its
  last step, i.e. at the batch it trains at now (``Job.update_params`` keeps them for
  ``get_speedup_fn``): this profile runs ``pollux`` with ``grad_stats="current"``. Chosen on
  the tuning set against the artifact's code run with our search
  (``benchmarks/pollux_search.py``, deterministic): the jobs whose end is within 1 % of those
  runs go from 88.0 % to 88.6 % and whose JCT is, from 347/640 to 382/640; against the
  published runs the JCTs within 1 % stay level (298/640 with it, 299/640 without).
- No co-location (its interference knob is off in the published runs).
- Its Tiresias places a job by taking all it still needs from the node with the most free
  GPUs: this profile runs ``tiresias`` with the policy option ``placement="node-chunks"``.

``python benchmarks/crosscheck.py --artifacts pollux`` compares our policies in this profile
with those numbers job by job.
"""

from slurm_sched.sim.profile import Profile

PROFILE = Profile(
    name="pollux-artifact",
    summary="Pollux's OSDI'21 simulator: 60 s rounds, 30 s per (re)start (31 s the first), "
            "job speed from Pollux's measured throughput and statistical progress, 16x4",
    progress_model="pollux-artifact",
    restart_overhead_s=30.0,
    start_overhead_s=31.0,
    round_s=60.0,
    cluster="16x4",
    in_place_settings=True,
    policy_options={"tiresias": {"placement": "node-chunks"},
                    "pollux": {"rebatch": True, "speedup_base": "fair",
                               "grad_stats": "current"}},
)
