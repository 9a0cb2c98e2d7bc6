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
from tests.approx import approx_nested
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
    assert got == approx_nested(expected)


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


# ------------------------------------------------------------------ indexed placement helpers
# The placement helpers use indexes instead of per-job scans of every node. These references
# are the plain scans; the indexed versions must choose the same GPUs.
def _ref_consolidated(free: dict[str, list[int]], num_gpus: int) -> dict[str, list[int]] | None:
    if num_gpus <= 0 or sum(len(g) for g in free.values()) < num_gpus:
        return None
    best, best_free = None, 1 << 30
    for node, gpus in free.items():
        if num_gpus <= len(gpus) < best_free:
            best, best_free = node, len(gpus)
    if best is not None:
        return {best: free[best][:num_gpus]}
    alloc: dict[str, list[int]] = {}
    need = num_gpus
    for node in sorted((n for n in free if free[n]), key=lambda n: -len(free[n])):
        alloc[node] = free[node][:need]
        need -= len(alloc[node])
        if need == 0:
            break
    return alloc


def _ref_most_free(free: dict[str, list[int]], num_gpus: int) -> dict[str, list[int]] | None:
    if num_gpus <= 0 or sum(len(g) for g in free.values()) < num_gpus:
        return None
    counts = {n: len(g) for n, g in free.items()}
    alloc: dict[str, list[int]] = {}
    order = list(free)
    for _ in range(num_gpus):
        node = min((n for n in order if counts[n] > 0), key=lambda n: (-counts[n], order.index(n)))
        taken = alloc.setdefault(node, [])
        taken.append(free[node][len(taken)])
        counts[node] -= 1
    return alloc


def _take_ref(free: dict[str, list[int]], alloc: dict[str, list[int]] | None) -> None:
    for node, gpus in (alloc or {}).items():
        for g in gpus:
            free[node].remove(g)


@pytest.mark.parametrize("seed", range(40))
def test_packers_and_free_index_match_the_plain_scans(seed):
    import random

    from slurm_sched.policy.placement import FreeIndex, pack_consolidated, pack_most_free

    rng = random.Random(seed)
    gpn = rng.choice([2, 4, 8])
    types = {f"n{k}": rng.choice("ab") for k in range(rng.randint(1, 12))}
    start = {n: sorted(rng.sample(range(gpn), rng.randint(0, gpn))) for n in types}
    ref = {n: list(g) for n, g in start.items()}
    plain = {n: list(g) for n, g in start.items()}
    indexed = {n: list(g) for n, g in start.items()}
    index = FreeIndex(indexed, types)
    for _ in range(10):
        need = rng.randint(1, 2 * gpn)
        gpu_type = rng.choice([None, "a", "b"])
        most = rng.random() < 0.5
        view = ref if gpu_type is None else {n: g for n, g in ref.items() if types[n] == gpu_type}
        pview = plain if gpu_type is None else {
            n: g for n, g in plain.items() if types[n] == gpu_type}
        want = (_ref_most_free if most else _ref_consolidated)(view, need)
        _take_ref(ref, want)
        got_plain = (pack_most_free if most else pack_consolidated)(pview, need)
        got_index = (index.most_free if most else index.consolidated)(need, gpu_type)
        for got in (got_plain, got_index):
            assert (None if got is None else {p.node: list(p.gpus) for p in got.parts}) == want
        assert plain == ref and indexed == ref
        assert index.total(None) == sum(len(g) for g in ref.values())


def test_count_index_queries_match_sorting():
    import random

    from slurm_sched.policy.placement import CountIndex

    rng = random.Random(5)
    for _ in range(200):
        counts = {f"n{k}": rng.randint(0, 8) for k in range(rng.randint(1, 15))}
        index = CountIndex(counts)
        for _ in range(5):
            node = rng.choice(list(counts))
            counts[node] = rng.randint(0, 8)
            index.set(node, counts[node])
        order = list(counts)
        need = rng.randint(0, 9)
        skip = set(rng.sample(order, rng.randint(0, len(order))))
        fits = [n for n in order if counts[n] >= need and n not in skip]
        assert index.best_fit(need, skip) == (
            min(fits, key=lambda n: (counts[n], order.index(n))) if fits else None)
        by_most = sorted(order, key=lambda n: (-counts[n], order.index(n)))
        assert index.by_most(empty=True) == by_most
        assert index.by_most() == [n for n in by_most if counts[n] > 0]
        assert index.most() == by_most[0]
        assert index.total == sum(counts.values())


def test_tiresias_node_chunks_takes_whole_nodes_first() -> None:
    from slurm_sched.policy.placement import pack_most_free
    from slurm_sched.policy.tiresias import Tiresias, pack_most_free_chunks

    free = {f"n{i}": [0, 1, 2, 3] for i in range(4)}
    p = pack_most_free_chunks(free, 6)
    assert p is not None and p.as_dict == {"n0": (0, 1, 2, 3), "n1": (0, 1)}
    assert free["n1"] == [2, 3]
    # the most-free node first: n2 and n3 have 4, n1 has 2
    p = pack_most_free_chunks(free, 5)
    assert p is not None and p.as_dict == {"n2": (0, 1, 2, 3), "n3": (0,)}
    assert pack_most_free_chunks(free, 8) is None and free["n3"] == [1, 2, 3]
    spread = pack_most_free({f"n{i}": [0, 1, 2, 3] for i in range(4)}, 6)
    assert spread is not None and len(spread.parts) == 4  # the default spreads
    with pytest.raises(ValueError, match="placement"):
        Tiresias(placement="packed")


def test_tiresias_sim_queue_order_keeps_a_running_job_ahead_of_an_older_waiting_one() -> None:
    """Threshold 10 GPU-s, 2 GPUs. X (2 GPUs) reaches Q1 at 5 and is preempted for Z (Q0, 1
    GPU, 5-25); Y (1 GPU, from 5.5) reaches Q1 at 15.5 while X still does not fit beside Z.
    When Z ends at 25, ordering Q1 by entry puts X (entered 5) first: X takes both GPUs and Y
    is preempted. The simulator's lists put Y (running) ahead of X (still waiting, moved back
    after every pass): Y keeps running and X waits for it."""
    jobs = [job("X", 0, 2, 100), job("Z", 4, 1, 20), job("Y", 5.5, 1, 50)]
    two = parse_cluster_spec("1x2")
    by_entry = simulate(jobs, two, Tiresias((10.0,)), restart_overhead_s=0)
    sim = simulate(jobs, two, Tiresias((10.0,), queue_order="sim"), restart_overhead_s=0)
    pre = {c.spec.job_id: c.preemptions for c in by_entry.completed}
    assert pre["Y"] >= 1
    done = {c.spec.job_id: (c.preemptions, c.finish_s) for c in sim.completed}
    assert done["Y"] == (0, 55.5)
    assert done["X"][1] == pytest.approx(55.5 + 95)


def test_tiresias_jump_events_wake_at_crossings_even_when_nobody_waits() -> None:
    snap_jobs = [job("A", 0, 1, 100)]
    res = simulate(snap_jobs, parse_cluster_spec("1x2"), Tiresias((10.0, 20.0), jump_events=True),
                   restart_overhead_s=0)
    quiet = simulate(snap_jobs, parse_cluster_spec("1x2"), Tiresias((10.0, 20.0)),
                     restart_overhead_s=0)
    assert res.stats.cycles == quiet.stats.cycles + 2  # the crossings at 10 and 20
