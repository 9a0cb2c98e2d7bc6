"""Baselines against hand-computed schedules.

The 3-job case on one 4-GPU node (no restart overhead):
  A: t=0, 2 GPUs, 100 s;  B: t=10, 4 GPUs, 50 s;  C: t=20, 2 GPUs, 30 s.
- FIFO: B blocks the head of the queue, C waits behind it:
  A 0-100, B 100-150, C 150-180 -> JCT 100, 140, 160.
- SJF: at 20 C (30 s) fits beside A and runs; B runs when A ends:
  A 0-100, C 20-50, B 100-150 -> JCT 100, 140, 30.
- SRTF: at 10 B (50 left) beats A (90 left) and preempts it. At 20 C (30) first; B needs 4 and
  does not fit beside C, so it is preempted and A (90 left) runs beside C. At 50 B (40 left)
  preempts A (60 left): B 50-90, then A 90-150 -> JCT 150, 80, 30.
- Tiresias (threshold never reached): FIFO by entry, skipping misfits: same as SJF here.
"""

import pytest

from slurm_sched.model import parse_cluster_spec
from slurm_sched.policy.tiresias import Tiresias
from slurm_sched.sim.runner import simulate
from tests.builders import job

JOBS = [job("A", 0, 2, 100), job("B", 10, 4, 50), job("C", 20, 2, 30)]
ONE_NODE = parse_cluster_spec("1x4")


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("fifo", {"A": (0, 100), "B": (100, 150), "C": (150, 180)}),
        ("sjf", {"A": (0, 100), "B": (100, 150), "C": (20, 50)}),
        ("srtf", {"A": (0, 150), "B": (10, 90), "C": (20, 50)}),
        ("tiresias", {"A": (0, 100), "B": (100, 150), "C": (20, 50)}),
    ],
)
def test_hand_computed_three_job_schedule(policy, expected):
    res = simulate(JOBS, ONE_NODE, policy, restart_overhead_s=0)
    got = {c.spec.job_id: (c.first_start_s, c.finish_s) for c in res.completed}
    assert got == pytest.approx(expected)


def test_srtf_preemptions_counted_and_overhead_delays_restart():
    res = simulate(JOBS, ONE_NODE, "srtf", restart_overhead_s=0)
    assert {c.spec.job_id: c.preemptions for c in res.completed} == {"A": 2, "B": 1, "C": 0}
    slow = simulate(JOBS, ONE_NODE, "srtf", restart_overhead_s=5)
    assert slow.metrics.avg_jct_s > res.metrics.avg_jct_s


def test_tiresias_demotes_at_the_exact_threshold():
    """Threshold 100 GPU-s, so demotions happen and queue-entry order matters.

    C (t=20, 2 GPUs) runs 20-50 beside A and gathers only 60 GPU-s. At 50 A (2 GPUs) reaches
    100 GPU-s and drops to Q1; B (Q0, waiting since 10) preempts it. B (4 GPUs) reaches 100 GPU-s
    at 75 and drops to Q1 behind A (entered Q1 at 50): A resumes 75-125 (50 s left), then B
    finishes its last 25 s 125-150.
    """
    res = simulate(JOBS, ONE_NODE, Tiresias(thresholds_gpu_s=[100.0]), restart_overhead_s=0)
    got = {c.spec.job_id: (c.first_start_s, c.finish_s, c.preemptions) for c in res.completed}
    assert got == {"A": (0, 125, 1), "B": (50, 150, 1), "C": (20, 50, 0)}


def test_sjf_beats_fifo_on_the_tiresias_60_job_trace():
    from slurm_sched import traces

    jobs = traces.read_trace(traces.bundled("tiresias/60_job.csv"))
    cluster = parse_cluster_spec("4x8")
    fifo = simulate(jobs, cluster, "fifo")
    sjf = simulate(jobs, cluster, "sjf")
    assert fifo.metrics.jobs == sjf.metrics.jobs == 60
    assert sjf.metrics.avg_jct_s <= fifo.metrics.avg_jct_s


def test_fifo_head_of_line_blocks_but_sjf_skips():
    jobs = [job("big", 0, 4, 10), job("big2", 1, 4, 10), job("small", 2, 1, 5)]
    c = parse_cluster_spec("1x4")
    fifo = {x.spec.job_id: x.first_start_s for x in simulate(jobs, c, "fifo").completed}
    assert fifo["small"] == 20  # waits behind big2
    sjf = {x.spec.job_id: x.first_start_s for x in simulate(jobs, c, "sjf").completed}
    assert sjf["small"] == 10  # shorter, so it goes before big2 once 'big' ends
    assert sjf["big2"] == 15
