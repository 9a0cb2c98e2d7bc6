"""Memory rules of spec ``shared/specs/rubick.md`` §2.6: gradient accumulation steps, GPU and host
memory of a plan, and the plan space of one placement (:func:`enumerate_plans`: the analytic
estimator, capped by the artifact's micro-batch limits).
"""

from __future__ import annotations

from functools import lru_cache

from slurm_sched.perf.rubick.models import ModelSpec
from slurm_sched.perf.rubick.plans import DP_FAMILIES, Plan
from slurm_sched.perf.rubick.shapes import Shape

GPU_MEM_GB = 80.0  # A800-80GB


@lru_cache(maxsize=65_536)  # a pure function, asked for every action and feature row
def accumulation_steps(model: ModelSpec, plan: Plan, gpus: int) -> tuple[int, int] | None:
    """(a, micro-batch) of a DP-family plan on ``gpus`` GPUs: the smallest a >= 1 with
    b / (g a) a positive integer that fits GPU memory; None if no a works.

    For 3D plans: (m, micro-batch) with micro-batch 1 and m = b / DP (spec §2.3 [R]: the largest
    micro-batch that fits is not measured; 1 keeps the pipeline bubble smallest).
    """
    b = model.batch
    if plan.is_3d:
        if b % plan.dp:
            return None
        return b // plan.dp, 1
    if b % gpus:
        return None  # the artifact rejects DP plans when b / g is not an integer
    per_gpu = b // gpus
    limit = max_micro_batch(model, plan, (gpus,))
    if limit < 1:
        return None
    for a in range(1, per_gpu + 1):
        if per_gpu % a == 0 and per_gpu // a <= limit:
            return a, per_gpu // a
    return None


def gpu_memory_gb(model: ModelSpec, plan: Plan, shape: Shape, micro: int) -> float:
    """Analytic per-GPU memory estimate (spec §2.6 [R]; ZeRO paper and Korthikanti et al.):
    model states + activations of the layers held + 3 GB context, with a 10% margin."""
    psi = float(model.params)
    g = sum(shape)
    s, h, heads = model.seq, model.hidden, model.heads
    t = plan.tp if plan.is_3d else 1
    p = plan.pp if plan.is_3d else 1
    d = plan.dp if plan.is_3d else g
    if plan.family == "dp":
        states = 16 * psi
    elif plan.family == "zero-dp":
        states = 2 * psi + 14 * psi / d
    elif plan.family == "zero-offload":
        states = 4 * psi  # fp16 parameters + transient gradient buckets
    else:
        states = 16 * psi / (t * p)
    layers = model.layers / p
    if plan.gc:
        act_layer = 2.0 * s * micro * h
        act = act_layer * layers + s * micro * h * (10 + 24 / t + 5 * heads * s / (h * t))
    else:
        act = layers * s * micro * h * (10 + 24 / t + 5 * heads * s / (h * t))
    if plan.is_3d:
        act *= min(p, max(1, model.batch // (d * micro)))  # 1F1B: first stage holds p batches
    return 1.1 * (states + act) / 1e9 + 3.0


def host_memory_gb(model: ModelSpec, plan: Plan, gpus_on_node: int, total_gpus: int) -> float:
    """Host memory one node needs (spec §2.6 [R]): 8 GB per process; ZeRO-Offload adds the fp32
    parameters, Adam states and fp16 gradients of the node's shards (14 Psi / d per rank) plus
    pinned buffers (2 Psi / d)."""
    per_proc = 8.0
    if plan.offload:
        per_proc += 16.0 * model.params / total_gpus / 1e9
    return per_proc * gpus_on_node


def max_micro_batch(model: ModelSpec, plan: Plan, shape: Shape) -> int:
    """Largest per-GPU micro-batch that fits: the analytic estimate, capped by the artifact's
    measured limit for the family when it has one."""
    limit = model.micro_limit(plan.family, plan.gc) if not plan.is_3d else None
    if limit == 0:
        return 0
    best = 0
    mu = 1
    while mu <= model.batch and gpu_memory_gb(model, plan, shape, mu) <= GPU_MEM_GB:
        best = mu
        mu *= 2
    return min(best, limit) if limit is not None else best


def enumerate_plans(model: ModelSpec, shape: Shape, *, allow_3d: bool | None = None,
                    gpu_mem_gb: float = GPU_MEM_GB) -> list[Plan]:
    """The plan space of one placement (spec §3.6 GET_BEST_PLAN lines 1-9).

    DP, ZeRO-DP and ZeRO-Offload, each with or without GC (GA implied by memory); and, when
    allowed, every 3D (PP, TP, DP) with PP*TP*DP = g, TP dividing the heads and the GPUs of every
    node (TP stays inside a node), PP dividing the layers, DP dividing b, and memory fitting.
    """
    g = sum(shape)
    out: list[Plan] = []
    for fam in DP_FAMILIES:
        for gc in (False, True):
            plan = Plan(fam, gc)
            if accumulation_steps(model, plan, g) is not None:
                out.append(plan)
    if allow_3d if allow_3d is not None else model.allow_3d:
        for t in range(1, min(shape) + 1):
            if model.heads % t or any(k % t for k in shape):
                continue
            for p in range(1, g // t + 1):
                if (g // t) % p or g % (t * p) or model.layers % p:
                    continue
                d = g // (t * p)
                if model.batch % d or (t == 1 and p == 1):
                    continue  # t = p = 1 is plain DP, listed above
                for gc in (False, True):
                    plan = Plan("3d", gc, p, t, d)
                    if gpu_memory_gb(model, plan, shape, 1) <= gpu_mem_gb:
                        out.append(plan)
                        break  # GC only when the plain variant does not fit
    return out
