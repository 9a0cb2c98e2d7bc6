"""Rubick's execution plans and performance model, the measured world it is evaluated in, and the
``rubick`` progress model.

Paper: Zhang et al., "Rubick: Exploiting Job Reconfigurability for Deep Learning Cluster
Scheduling" (arXiv; published at MLSys'25 as Morphling). Spec: ``shared/specs/rubick.md`` §2, §6.

What is here, in order:

1. **Models** (:data:`MODELS`): the seven Transformer models of the paper's Table 2 plus T5-3B
   (Fig. 8) and LLaMA-2-7B at batch 16 (Fig. 7), with their constants (P, b, s, h, l, heads).
2. **Plans** (:class:`Plan`): DP (``ga``: plain data parallel, gradient accumulation added when
   the micro-batch does not fit), ZeRO-2 (``zero-dp``), ZeRO-Offload (``zero-offload``), each with
   or without gradient checkpointing (``-gc``), and Megatron 3D ``PP-TP-DP`` (``2-4-4``, optionally
   ``-gc``). :func:`enumerate_plans` is the plan space of one placement with the memory rules of
   spec §2.6 (the analytic estimator, capped by the artifact's micro-batch limits).
3. **Performance model** (paper Eq. 1, spec §2.2): ``T_iter = T_cc + T_oo + k_const`` with the
   L^k overlap function, vectorised over configurations (:func:`predict_ms`), fitted with scipy
   on profiling samples by minimising the RMSLE (:func:`fit_model`).
4. **The measured world** (:class:`MeasuredCatalog`): the authors' measured iteration times per
   (plan, placement) (``data/rubick/traces``). The simulated cluster runs jobs at exactly these
   times; a configuration that was never measured counts as infeasible (out of memory or not
   run). CPU threads change only ZeRO-Offload plans, by the fitted model's ratio.
5. **Predictors**: :class:`OraclePredictor` (the measured tables; the micro-benchmarks of
   spec §8.17-18 use it) and :class:`FittedPredictor` (the paper's way: the fitted model, plus
   online refits as jobs report iteration times).
6. The ``rubick`` progress model (:data:`PROGRESS_MODELS`): a job's speed under its current
   plan, placement and CPUs relative to its requested configuration.

Units: the profiling data and the artifact's bandwidth constants use milliseconds, parameter
counts in Mi (2^20) and bandwidths in "GB/s" applied to MB (2^20 bytes) per ms; the model keeps
those units internally (``*_ms``) so the fitted k's are comparable with the artifact's. Public
predictors return seconds. Deviations from the paper are listed in ``docs/reproductions/rubick.md``.
"""

from __future__ import annotations

import abc
import csv
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from scipy.optimize import least_squares

from slurm_sched.model import JobSpec, JobView, Placement
from slurm_sched.perf.progress import ProgressModel

log = logging.getLogger(__name__)
_T = TypeVar("_T")
_MISS = object()  # memo miss marker (None is a remembered answer)

DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "rubick"
MIB = float(2**20)
BYTES_PER_ELEM = 4  # fp32 gradients / activations / offload traffic (spec §2.4)
GPU_MEM_GB = 80.0  # A800-80GB

Shape = tuple[int, ...]  # GPUs per node, sorted descending


def hash_once(cls: type[_T]) -> type[_T]:
    """Class decorator for frozen dataclasses: the generated ``__hash__`` (of the fields'
    tuple) computed once per object and kept. Models, plans, job infos and candidates key the
    schedulers' caches and are hashed hundreds of thousands of times a pass; their fields
    never change. The kept hash is left out of the pickled state: string hashes differ
    between processes, so a copy computes its own."""
    compute = cls.__hash__

    def __hash__(self: Any) -> int:
        h = self.__dict__.get("_hash")
        if h is None:
            h = compute(self)
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self: Any) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    cls.__hash__ = __hash__  # type: ignore[method-assign,assignment]
    cls.__getstate__ = __getstate__  # type: ignore[method-assign,assignment]
    return cls


# =============================================================================== models
@hash_once
@dataclass(frozen=True)
class ModelSpec:
    """One model type (jobs of the same architecture share one fitted model, paper §3)."""

    name: str
    params: int  # P, parameter count
    batch: int  # global batch b of the traces
    seq: int  # s
    hidden: int  # h
    layers: int  # l
    heads: int
    allow_3d: bool  # TP/PP allowed in the paper's traces (§7.3)
    table: str | None  # data/rubick/traces/<table>/placements.csv
    profile: str | None  # data/rubick/profile/<profile>/
    b_intra: float  # NVLink bandwidth constant (artifact units, §2.8)
    b_pcie: float  # PCIe (offload) bandwidth constant (artifact units, §2.8)
    fwd_1gpu_ms: float  # forward time of the whole global batch on one GPU (artifact, §5.2)
    #: (family, gc) -> largest per-GPU micro-batch that fits (artifact ``max_dp_atom_bsz``);
    #: 0 = infeasible. Families absent here fall back to the analytic estimator.
    max_micro: tuple[tuple[str, bool, int], ...] = ()

    @property
    def ps(self) -> float:
        """Parameter count in Mi (the artifact's ``parameter_size``)."""
        return self.params / MIB

    def micro_limit(self, family: str, gc: bool) -> int | None:
        for f, g, m in self.max_micro:
            if f == family and g == gc:
                return m
        return None


def _lim(dp: int, dp_gc: int, zero: int, off: int, off_gc: int = 0) -> tuple:
    return (
        ("dp", False, dp), ("dp", True, dp_gc), ("zero-dp", False, zero),
        ("zero-dp", True, 0), ("zero-offload", False, off), ("zero-offload", True, off_gc),
    )


# Constants: spec §5.2 (params, b, h/s/l), §2.8 (bandwidth constants), §2.6 (micro-batch
# limits, amended: LLaMA-2-7B ZeRO-DP and LLaMA-30B ZeRO-Offload are "/" (OOM) in Table 2 and
# absent from the measurements; ZeRO-Offload+GC exists for T5, GPT-2 and LLaMA-2-7B (§6.4)).
MODELS: dict[str, ModelSpec] = {
    m.name: m
    for m in (
        ModelSpec("vit", 85_952_456, 64, 512, 768, 12, 12, False, "vit", "vit",
                  34.057, 64.0, 40.0, _lim(64, 64, 64, 64)),
        ModelSpec("roberta", 355_412_057, 64, 512, 1024, 24, 16, False, "roberta", "roberta",
                  50.30364, 7.91074, 480.0, _lim(64, 64, 64, 64)),
        ModelSpec("bert", 336_297_858, 32, 512, 1024, 24, 16, False, "bert", "bert",
                  119.48791, 64.0, 225.0, _lim(32, 32, 32, 32)),
        ModelSpec("t5", 1_240_809_472, 16, 512, 1024, 32, 16, False, "t5", "t5",
                  88.56588, 64.0, 338.0, _lim(16, 16, 16, 16, 16)),
        ModelSpec("gpt2", 1_557_686_400, 16, 1024, 1600, 48, 25, True, "gpt2", "gpt2",
                  144.83764, 59.72096, 1100.0, _lim(16, 16, 16, 16, 16)),
        ModelSpec("llama7b", 6_738_423_808, 8, 2048, 4096, 32, 32, True, "llama7", "llama7b",
                  150.0, 0.96, 3000.0, _lim(0, 0, 0, 8, 8)),
        ModelSpec("llama30b", 33_170_309_120, 4, 2048, 5120, 40, 40, True, "llama30", None,
                  150.0, 0.96, 7400.0, _lim(0, 0, 0, 0, 0)),
        # Micro-benchmark models: T5-3B of Fig. 8 and LLaMA-2-7B at b = 16 of Fig. 7.
        ModelSpec("t5-3b", 3_338_423_808, 4, 512, 1024, 48, 32, True, "t5_3B", None,
                  88.56588, 64.0, 1300.0, _lim(0, 0, 0, 4, 4)),
        ModelSpec("llama7b-b16", 6_738_423_808, 16, 2048, 4096, 32, 32, True, "llama7b_bsz16",
                  None, 150.0, 0.96, 6000.0, _lim(0, 0, 0, 16, 16)),
    )
}

_ALIASES = {
    "llama7": "llama7b", "llama-7b": "llama7b", "llama-2-7b": "llama7b", "llama2-7b": "llama7b",
    "llama30": "llama30b", "llama-30b": "llama30b", "gpt-2": "gpt2", "t5_3b": "t5-3b",
    "t5-3B": "t5-3b", "t53b": "t5-3b", "llama7b_bsz16": "llama7b-b16",
}


def model_spec(name: str | None) -> ModelSpec | None:
    """The model of a job's ``model`` field (case-insensitive, common aliases), or None."""
    if not name:
        return None
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    return MODELS.get(key)


# =============================================================================== plans
DP_FAMILIES = ("dp", "zero-dp", "zero-offload")
_DP_CODES = {
    ("dp", False): "ga", ("dp", True): "gc",
    ("zero-dp", False): "zero-dp", ("zero-dp", True): "zero-dp-gc",
    ("zero-offload", False): "zero-offload", ("zero-offload", True): "zero-offload-gc",
}
_CODE_ALIASES = {
    "dp": ("dp", False), "ddp": ("dp", False), "ga": ("dp", False), "dp+ga": ("dp", False),
    "gc": ("dp", True), "dp+gc": ("dp", True), "dp-gc": ("dp", True),
    "zero-dp": ("zero-dp", False), "zero-dp+ga": ("zero-dp", False),
    "zero-dp-gc": ("zero-dp", True), "zero-dp+gc": ("zero-dp", True),
    "zero-offload": ("zero-offload", False), "zero-offload+ga": ("zero-offload", False),
    "zero-offload-gc": ("zero-offload", True), "zero-offload+gc": ("zero-offload", True),
}


@hash_once
@dataclass(frozen=True, order=True)
class Plan:
    """An execution plan. DP families use every GPU as a data-parallel rank (``dp`` = 0 means
    "all GPUs of the placement"); ``3d`` has explicit PP, TP and DP sizes with PP*TP*DP = GPUs.

    Gradient accumulation is not part of the plan: it follows from the placement (the smallest
    number of steps whose micro-batch fits, :func:`accumulation_steps`), as in the paper.
    """

    family: str
    gc: bool = False
    pp: int = 1
    tp: int = 1
    dp: int = 0

    def __post_init__(self) -> None:
        if self.family not in (*DP_FAMILIES, "3d"):
            raise ValueError(f"plan family must be one of dp, zero-dp, zero-offload, 3d; "
                             f"got {self.family!r}")
        if self.family == "3d" and min(self.pp, self.tp, self.dp) < 1:
            raise ValueError(f"3D plan needs PP, TP, DP >= 1, got {self.pp}-{self.tp}-{self.dp}")

    @property
    def is_3d(self) -> bool:
        return self.family == "3d"

    @property
    def offload(self) -> bool:
        return self.family == "zero-offload"

    @property
    def code(self) -> str:
        """The plan code carried by ``JobSettings.plan`` (``ga``, ``zero-dp-gc``, ``2-4-4``)."""
        if self.is_3d:
            return f"{self.pp}-{self.tp}-{self.dp}" + ("-gc" if self.gc else "")
        return _DP_CODES[(self.family, self.gc)]

    def gpus(self, shape_gpus: int) -> int:
        return self.pp * self.tp * self.dp if self.is_3d else shape_gpus

    def __str__(self) -> str:
        return self.code

    @classmethod
    def parse(cls, code: str, gpus: int | None = None) -> Plan:
        """Parse a plan code: ours (``zero-offload-gc``, ``2-4-4``), the artifact's (``ga``,
        ``zero-offload+gc``, 3-digit ``244`` = PP 2, TP 4, DP 4, ``tp+ga`` = TP over all
        ``gpus``) or the hint vocabulary (``dp``, ``2-2-1``).

        Raises:
            ValueError: naming the bad code.
        """
        c = code.strip().lower()
        if c in _CODE_ALIASES:
            fam, gc = _CODE_ALIASES[c]
            return cls(fam, gc)
        gc = False
        for suffix in ("-gc", "+gc"):
            if c.endswith(suffix):
                c, gc = c[: -len(suffix)], True
        if c in ("tp+ga", "tp"):
            if not gpus:
                raise ValueError(f"plan {code!r} needs the GPU count")
            return cls("3d", gc, 1, gpus, 1)
        parts = c.split("-") if "-" in c else (list(c) if c.isdigit() and len(c) == 3 else [])
        if len(parts) == 3 and all(p.isdigit() and int(p) >= 1 for p in parts):
            pp, tp, dp = (int(p) for p in parts)
            return cls("3d", gc, pp, tp, dp)
        raise ValueError(f"unknown plan code {code!r} (known: ga, gc, zero-dp, zero-offload, "
                         "their -gc variants, PP-TP-DP such as 2-4-4)")


def plan_order(plan: Plan) -> int:
    """Tie-break order of spec §3.6: DP < ZeRO-DP < DP+GC < ZeRO-DP+GC < 3D < ZeRO-Offload."""
    order = {("dp", False): 0, ("zero-dp", False): 1, ("dp", True): 2, ("zero-dp", True): 3,
             ("3d", False): 4, ("3d", True): 5, ("zero-offload", False): 6,
             ("zero-offload", True): 7}
    return order[(plan.family, plan.gc)]


# =============================================================================== shapes
def shape_of(placement: Placement) -> Shape:
    return tuple(sorted((len(p.gpus) for p in placement.parts), reverse=True))


def parse_shape(text: str) -> Shape:
    """Artifact placement string (one digit per node) -> shape."""
    if not text.isdigit() or "0" in text:
        raise ValueError(f"placement {text!r} must be digits 1-9, one per node")
    return tuple(sorted((int(c) for c in text), reverse=True))


def shape_key(shape: Shape) -> str:
    return "".join(str(k) for k in shape) if all(k < 10 for k in shape) else "x".join(
        map(str, shape))


def compact_shape(gpus: int, gpus_per_node: int = 8) -> Shape:
    """Most compact uniform shape: one node if it fits, else whole nodes."""
    if gpus <= gpus_per_node:
        return (gpus,)
    n = math.ceil(gpus / gpus_per_node)
    if gpus % n == 0:
        return (gpus // n,) * n
    return (gpus_per_node,) * (gpus // gpus_per_node) + ((gpus % gpus_per_node),)


# =============================================================================== memory
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


# =============================================================================== perf model
PARAM_NAMES = ("k_bwd", "k_sync", "k_opt", "k_opt_off", "k_const", "k_off", "k_swap")
#: Fit bounds of spec §2.9 (ms units).
LOWER = np.array([0.5, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0])
UPPER = np.array([10.0, 60.0, 10.0, 100.0, 1e4, 60.0, 60.0])
#: Defaults for unidentifiable parameters when fewer than 7 samples exist (spec §2.5 [R]).
DEFAULT_FIXED = {"k_sync": 2.0, "k_off": 2.0, "k_swap": 2.0}
#: Inter-node bandwidth constants in the artifact's units (§2.8: 2 for DP-family groups,
#: 20 for 3D groups); the profiling samples are all single-node, so these are not fitted.
B_INTER_DP = 2.0
B_INTER_3D = 20.0


def overlap(x: np.ndarray | float, y: np.ndarray | float, k: float) -> np.ndarray:
    """Pollux's overlap function f^k(x, y) = (x^k + y^k)^(1/k), computed without overflow."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    m = np.maximum(x, y)
    safe = np.where(m > 0, m, 1.0)
    r = (x / safe) ** k + (y / safe) ** k
    return np.where(m > 0, safe * r ** (1.0 / k), 0.0)


@dataclass(frozen=True)
class ForwardProfile:
    """Profiled forward times: (group, per-GPU micro-batch, ms) for one GPU holding every layer.

    Groups are ``offload`` (ZeRO-Offload plans, whose forward also fetches parameters) and
    ``dp`` (the others). A size that was not profiled scales linearly from the nearest profiled
    size of the same group (paper §4.1), or of the other group if it has none."""

    points: tuple[tuple[str, float, float], ...]

    def fwd_ms(self, micro: float, offload: bool = False) -> float:
        if not self.points:
            raise ValueError("empty forward profile")
        group = "offload" if offload else "dp"
        pts = [(mu, f) for g, mu, f in self.points if g == group] or [
            (mu, f) for _, mu, f in self.points]
        mu0, f0 = min(pts, key=lambda p: (abs(math.log(p[0] / micro)), p[0]))
        return f0 * micro / mu0


# Feature columns of one configuration (all ms unless noted).
_F_FWD, _F_A, _F_GC, _F_DP, _F_TPPP, _F_OPT, _F_OFFOPT, _F_TOFF, _F_ISOFF = range(9)
N_FEATURES = 9


def features(model: ModelSpec, plan: Plan, shape: Shape, cpus_per_gpu: float,
             fwd: ForwardProfile | float) -> np.ndarray | None:
    """The k-independent terms of Eq. 1 for one configuration, or None if the plan cannot run
    on the shape (batch split, GPU count). ``fwd`` is a profile or a measured T_fwd (ms) of
    this exact configuration (profiling samples)."""
    g = sum(shape)
    ps = model.ps
    multi_node = len(shape) > 1
    row = np.zeros(N_FEATURES)
    if plan.is_3d:
        t, p, d = plan.tp, plan.pp, plan.dp
        if t * p * d != g:
            return None
        steps = accumulation_steps(model, plan, g)
        if steps is None:
            return None
        m, mu = steps
        k_node = min(shape)
        if isinstance(fwd, ForwardProfile):
            # t_p * g_p / p * (m + p - 1) with time linear in layers, batch and TP shard
            t_fwd = fwd.fwd_ms(mu) / (t * p) * (m + p - 1)
        else:
            t_fwd = float(fwd)
        b_dp = model.b_intra if (not multi_node or t * d <= k_node) else B_INTER_3D
        b_pp = B_INTER_3D if multi_node else model.b_intra
        v_dp = BYTES_PER_ELEM * 2.0 * ps * (d - 1) / (d * t * p)
        sh = model.seq * model.hidden
        v_tp = BYTES_PER_ELEM * 4 * 2 * (t - 1) * model.batch * sh * model.layers / (d * t) / MIB
        v_pp = BYTES_PER_ELEM * 2 * p * model.batch * sh / (d * t) / MIB if p > 1 else 0.0
        row[_F_FWD] = t_fwd
        row[_F_A] = 1.0
        row[_F_DP] = v_dp / b_dp
        row[_F_TPPP] = v_tp / model.b_intra + v_pp / b_pp
        row[_F_OPT] = ps / (t * p)
        row[_F_ISOFF] = 0.0
    else:
        steps = accumulation_steps(model, plan, g)
        if steps is None:
            return None
        a, mu = steps
        t_f = fwd.fwd_ms(mu, plan.offload) if isinstance(fwd, ForwardProfile) else float(fwd)
        b_dp = B_INTER_DP if multi_node else model.b_intra
        row[_F_FWD] = t_f
        row[_F_A] = a
        row[_F_DP] = BYTES_PER_ELEM * 2.0 * ps * (g - 1) / g / b_dp
        row[_F_OPT] = ps if plan.family == "dp" else ps / g
        if plan.offload:
            row[_F_ISOFF] = 1.0
            row[_F_OFFOPT] = ps / (g * max(cpus_per_gpu, 1e-9))
            row[_F_TOFF] = BYTES_PER_ELEM * ps / (g * model.b_pcie)
    row[_F_GC] = 1.0 if plan.gc else 0.0
    return row


def predict_ms(theta: np.ndarray, feats: np.ndarray) -> np.ndarray:
    """Eq. 1 for every row of ``feats`` (shape (n, N_FEATURES)); theta in PARAM_NAMES order."""
    k_bwd, k_sync, k_opt, k_opt_off, k_const, k_off, k_swap = theta
    f = feats
    t_f = f[:, _F_FWD]
    a = f[:, _F_A]
    t_b = k_bwd * t_f + f[:, _F_GC] * t_f  # GC recomputes one forward (paper §4.1)
    t_dp = f[:, _F_DP]
    t_cc = a * t_f + (a - 1.0) * t_b + overlap(t_b, t_dp, k_sync) + f[:, _F_TPPP]
    is_off = f[:, _F_ISOFF] > 0.5
    t_opt = np.where(is_off, k_opt_off * f[:, _F_OFFOPT], k_opt * f[:, _F_OPT])
    t_off = f[:, _F_TOFF]
    t_oo = np.where(is_off, overlap(t_dp, t_off, k_off) + overlap(t_opt, t_off, k_swap), t_opt)
    return t_cc + t_oo + k_const


def _overlap_grads(x: np.ndarray, y: np.ndarray, k: float
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """f^k(x, y) of :func:`overlap` and its derivatives by x and by k (elementwise).

    With m = max(x, y), u = x/m, v = y/m and S = u^k + v^k: f = m S^(1/k),
    df/dx = u^(k-1) S^(1/k - 1) and df/dk = f (-ln S / k^2 + (u^k ln u + v^k ln v) / (k S)),
    taking 0 ln 0 = 0; all three are 0 where x = y = 0."""
    m = np.maximum(x, y)
    pos = m > 0
    safe = np.where(pos, m, 1.0)
    u, v = x / safe, y / safe
    uk, vk = u ** k, v ** k
    big_s = np.where(pos, uk + vk, 1.0)  # >= 1 where pos (the larger of u, v is 1)
    f = np.where(pos, safe * big_s ** (1.0 / k), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        d_x = np.where(pos, np.where(u > 0, u ** (k - 1.0), 0.0) * big_s ** (1.0 / k - 1.0), 0.0)
        ulog = np.where(u > 0, uk * np.log(np.where(u > 0, u, 1.0)), 0.0)
        vlog = np.where(v > 0, vk * np.log(np.where(v > 0, v, 1.0)), 0.0)
    d_k = np.where(pos, f * (-np.log(big_s) / k**2 + (ulog + vlog) / (k * big_s)), 0.0)
    return f, d_x, d_k


def predict_ms_jac(theta: np.ndarray, feats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`predict_ms` and its Jacobian by theta (shape (n, 7), columns in PARAM_NAMES
    order): the analytic gradient that spares the fit's least squares a finite-difference
    Jacobian (7 extra model evaluations per step)."""
    k_bwd, k_sync, k_opt, k_opt_off, k_const, k_off, k_swap = theta
    f = feats
    t_f = f[:, _F_FWD]
    a = f[:, _F_A]
    t_b = k_bwd * t_f + f[:, _F_GC] * t_f
    t_dp = f[:, _F_DP]
    sync, sync_dx, sync_dk = _overlap_grads(t_b, t_dp, k_sync)
    t_cc = a * t_f + (a - 1.0) * t_b + sync + f[:, _F_TPPP]
    is_off = f[:, _F_ISOFF] > 0.5
    t_opt = np.where(is_off, k_opt_off * f[:, _F_OFFOPT], k_opt * f[:, _F_OPT])
    t_off = f[:, _F_TOFF]
    off, _, off_dk = _overlap_grads(t_dp, t_off, k_off)
    swap, swap_dx, swap_dk = _overlap_grads(t_opt, t_off, k_swap)
    t_oo = np.where(is_off, off + swap, t_opt)
    jac = np.zeros((len(f), 7))
    jac[:, 0] = (a - 1.0) * t_f + sync_dx * t_f
    jac[:, 1] = sync_dk
    jac[:, 2] = np.where(is_off, 0.0, f[:, _F_OPT])
    jac[:, 3] = np.where(is_off, swap_dx * f[:, _F_OFFOPT], 0.0)
    jac[:, 4] = 1.0
    jac[:, 5] = np.where(is_off, off_dk, 0.0)
    jac[:, 6] = np.where(is_off, swap_dk, 0.0)
    return t_cc + t_oo + k_const, jac


@dataclass(frozen=True)
class ProfileSample:
    """One profiled run: configuration, measured forward (ms, None if unknown) and T_iter (ms)."""

    plan: Plan
    shape: Shape
    cpus_per_gpu: float
    iter_ms: float
    fwd_ms: float | None = None


class InsufficientProfileError(ValueError):
    """Fewer than 7 samples, or fewer than 3 with ZeRO-Offload (paper §4.3)."""


@dataclass
class FitResult:
    theta: np.ndarray
    mode: str  # "full": all 7 k's fitted; "defaults": some fixed at DEFAULT_FIXED
    message: str
    rmsle: float
    train_rel_err: tuple[float, ...] = ()

    @property
    def params(self) -> dict[str, float]:
        return {n: float(v) for n, v in zip(PARAM_NAMES, self.theta, strict=True)}


def fit_model(model: ModelSpec, samples: Sequence[ProfileSample], fwd: ForwardProfile, *,
              strict: bool = True, restarts: int = 20, seed: int = 0,
              start: np.ndarray | None = None, quiet: bool = False) -> FitResult:
    """Fit the 7 k's by minimising the RMSLE of T_iter (paper §4.3) with scipy's bounded
    least squares from several deterministic starting points (spec §2.9: RMSLE has flat
    directions).

    With fewer than 7 samples or fewer than 3 ZeRO-Offload samples, ``strict`` raises
    :class:`InsufficientProfileError`; otherwise k_sync, k_off and k_swap are fixed at 2 and the
    rest fitted (spec §2.5 [R]); the result's ``mode`` and ``message`` say so.
    """
    n_off = sum(s.plan.offload for s in samples)
    enough = len(samples) >= 7 and n_off >= 3
    if not enough and strict:
        raise InsufficientProfileError(
            f"model {model.name!r}: {len(samples)} profiling samples ({n_off} with ZeRO-Offload); "
            "the paper needs >= 7 with >= 3 ZeRO-Offload"
        )
    rows = []
    meas = []
    for s in samples:
        own = sample_forward(model, s, fwd)
        row = features(model, s.plan, s.shape, s.cpus_per_gpu, own if own else fwd)
        if row is None:
            raise ValueError(f"profiling sample {s.plan.code}@{shape_key(s.shape)} cannot run")
        rows.append(row)
        meas.append(s.iter_ms)
    feats = np.array(rows)
    log_meas = np.log(np.array(meas))
    free = np.ones(7, dtype=bool)
    fixed = np.zeros(7)
    if not enough:
        for name, val in DEFAULT_FIXED.items():
            i = PARAM_NAMES.index(name)
            free[i] = False
            fixed[i] = val
        if n_off == 0:  # k_opt_off cannot be identified at all
            i = PARAM_NAMES.index("k_opt_off")
            free[i], fixed[i] = False, 1.0
    lo, hi = LOWER[free], UPPER[free]

    def full(x: np.ndarray) -> np.ndarray:
        th = fixed.copy()
        th[free] = x
        return th

    def resid(x: np.ndarray) -> np.ndarray:
        return np.log(np.maximum(predict_ms(full(x), feats), 1e-9)) - log_meas

    def jac(x: np.ndarray) -> np.ndarray:
        # d log(max(P, 1e-9)) = dP / P, and 0 where the floor holds
        pred, d = predict_ms_jac(full(x), feats)
        return np.where((pred > 1e-9)[:, None], d[:, free] / np.maximum(pred, 1e-9)[:, None],
                        0.0)

    rng = np.random.default_rng(seed)
    starts = []
    if start is not None:
        starts.append(np.clip(np.asarray(start, dtype=float)[free], lo + 1e-9, hi - 1e-9))
    base = np.array([1.5, 2.0, 0.01, 1.0, 10.0, 2.0, 2.0])[free]
    starts.append(np.clip(base, lo + 1e-9, hi - 1e-9))
    for _ in range(max(0, restarts - len(starts))):
        u = rng.random(len(lo))
        # log-uniform over the positive part of each interval (the scales differ by 1e4)
        lo_pos = np.maximum(lo, 1e-3)
        x = np.exp(np.log(lo_pos) + u * (np.log(hi) - np.log(lo_pos)))
        starts.append(np.clip(x, lo + 1e-9, hi - 1e-9))
    best = None
    for x0 in starts:
        r = least_squares(resid, x0, jac=jac, bounds=(lo, hi), method="trf",
                          x_scale="jac", max_nfev=400)
        if best is None or r.cost < best.cost - 1e-12:
            best = r
    assert best is not None
    theta = full(best.x)
    pred = predict_ms(theta, feats)
    rel = tuple(float(abs(p - m) / m) for p, m in zip(pred, meas, strict=True))
    rmsle = float(np.sqrt(np.mean((np.log(pred) - log_meas) ** 2)))
    if enough:
        mode, msg = "full", f"fitted 7 parameters on {len(samples)} samples"
    else:
        fixed_names = [n for n, f in zip(PARAM_NAMES, free, strict=True) if not f]
        mode = "defaults"
        msg = (f"model {model.name!r}: only {len(samples)} samples ({n_off} ZeRO-Offload); "
               f"fixed {', '.join(fixed_names)} at defaults and fitted the rest")
        (log.debug if quiet else log.warning)(msg)
    return FitResult(theta, mode, msg, rmsle, rel)


# ------------------------------------------------------------------------ profiling data
def _read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8-sig", newline="") as f:
        return list(csv.DictReader(f))


_ZERO_TYPES = {"0": "dp", "1": "zero-offload", "2": "zero-dp"}
#: Two TP/PP points per 3D model added to its profile (spec §2.5 [R]: "for models that need 3D,
#: add two TP/PP points"), taken from the measured tables. LLaMA-30B has no profile of its own
#: in the artifact (its folder is a copy of LLaMA-2-7B's), so its profile is three 3D points.
EXTRA_3D_SAMPLES: dict[str, tuple[tuple[str, str], ...]] = {
    "gpt2": (("151", "5"), ("451", "5555")),
    "llama7b": (("182", "88"), ("244", "8888")),
    "llama30b": (("442", "8888"), ("344", "888888"), ("641", "444444")),
}


@cache
def load_profile(name: str) -> tuple[ProfileSample, ...]:
    """The profiling samples of a model (spec §6.2) plus its extra 3D points."""
    model = MODELS[name]
    out: list[ProfileSample] = []
    if model.profile:
        folder = DATA_DIR / "profile" / model.profile
        for cfg, dat in zip(_read_csv(folder / "config.csv"), _read_csv(folder / "data.csv"),
                            strict=True):
            g = int(cfg["gpus"]) * int(cfg["nodes"])
            fam = _ZERO_TYPES[cfg["zero_type"].strip()]
            digits = dat["strategy"].strip()
            gc = digits[0] == "2"
            out.append(ProfileSample(Plan(fam, gc), (int(cfg["gpus"]),) * int(cfg["nodes"]),
                                     float(cfg["num_cpu_threads"]), float(dat["iter_time"]),
                                     float(dat["forward_time"]) or None))
            assert sum(out[-1].shape) == g
    table = measured_catalog()
    for code, place in EXTRA_3D_SAMPLES.get(name, ()):
        shape = parse_shape(place)
        plan = Plan.parse(code, sum(shape))
        t = table.table_s(name, plan, shape)
        if t is None:
            raise ValueError(f"extra 3D sample {code}@{place} of {name} is not measured")
        out.append(ProfileSample(plan, shape, 4.0, t * 1000.0, None))
    return tuple(out)


def forward_profile(name: str) -> ForwardProfile:
    """The forward time of one sample on one GPU holding every layer, from the profiling
    samples: the median of forward / per-GPU batch over the DP-family samples, scaled linearly
    with the micro-batch (paper §4.1: "linearly with the per-GPU batch"; a per-size lookup was
    tried and predicts the held-out points worse, see docs/reproductions/rubick.md).

    A sample whose forward time disagrees with that median by more than 3x is ignored (the
    artifact's T5 row "4 GPUs, forward 4 ms" is a typo, spec §2.9). Models without DP-family
    samples use the model's one-GPU forward constant."""
    model = MODELS[name]
    per = [s.fwd_ms / (model.batch / sum(s.shape)) for s in load_profile(name)
           if not s.plan.is_3d and s.fwd_ms]
    if per:
        med = float(np.median(per))
        kept = [x for x in per if 1 / 3 <= x / med <= 3]
        return ForwardProfile((("dp", 1.0, float(np.median(kept))),))
    return ForwardProfile((("dp", float(model.batch), model.fwd_1gpu_ms),))


def sample_forward(model: ModelSpec, s: ProfileSample, fwd: ForwardProfile) -> float | None:
    """A sample's own measured forward if it is plausible (within 3x of the profile), else
    None (use the profile)."""
    if not s.fwd_ms or s.plan.is_3d:
        return None
    est = fwd.fwd_ms(model.batch / sum(s.shape), s.plan.offload)
    return s.fwd_ms if 1 / 3 <= s.fwd_ms / est <= 3 else None


_NO_ROW = object()  # PerfModel.rows: not computed yet (None is an answer)


@dataclass
class PerfModel:
    """A fitted model of one model type: predicts T_iter (ms) of any configuration."""

    model: ModelSpec
    fwd: ForwardProfile
    fit: FitResult
    #: :func:`features` by configuration: they do not depend on the fit, so a refitted model
    #: of the same model and forward profile shares them (see :meth:`refitted`)
    rows: dict[Config, np.ndarray | None] = field(default_factory=dict, repr=False,
                                                   compare=False)

    def refitted(self, fit: FitResult) -> PerfModel:
        """The same model with another fit (the feature rows carry over)."""
        return PerfModel(self.model, self.fwd, fit, self.rows)

    def _row(self, plan: Plan, shape: Shape, cpus_per_gpu: float) -> np.ndarray | None:
        key = (plan, shape, float(cpus_per_gpu))
        got = self.rows.get(key, _NO_ROW)
        if got is _NO_ROW:
            got = self.rows[key] = features(self.model, plan, shape, cpus_per_gpu, self.fwd)
        return got  # type: ignore[return-value]

    def iter_ms(self, plan: Plan, shape: Shape, cpus_per_gpu: float) -> float | None:
        row = self._row(plan, shape, cpus_per_gpu)
        if row is None:
            return None
        return float(predict_ms(self.fit.theta, row[None, :])[0])

    def iter_ms_many(self, configs: Sequence[tuple[Plan, Shape, float]]) -> list[float | None]:
        rows = [self._row(p, s, c) for p, s, c in configs]
        ok = [r for r in rows if r is not None]
        if not ok:
            return [None] * len(rows)
        pred = iter(predict_ms(self.fit.theta, np.array(ok)).tolist())
        return [next(pred) if r is not None else None for r in rows]


@cache
def profiled_model(name: str) -> PerfModel:
    """The model fitted on the model's own profiling samples (strict when enough samples)."""
    model = MODELS[name]
    samples = load_profile(name)
    fwd = forward_profile(name)
    fit = fit_model(model, samples, fwd, strict=False)
    return PerfModel(model, fwd, fit)


# ----------------------------------------------------------------- held-out measurements
#: Table 2's unseen configurations (spec §6.4), T_iter in ms on 1, 2, 4, 8 GPUs of one node.
#: (model, set name, plan code, CPU threads per GPU) -> times; GPT-2 ZeRO-DP uses GA.
HELD_OUT_DP: dict[tuple[str, str, str], tuple[float, ...]] = {
    ("vit", "DP", "ga"): (153.97, 88, 62, 49),
    ("vit", "GC", "gc"): (195, 112, 73, 54.005),
    ("vit", "ZeRO-DP(+GA)", "zero-dp"): (144.93, 85, 65.97, 51),
    ("vit", "ZeRO-Offload", "zero-offload"): (233, 139, 99, 83.99),
    ("roberta", "DP", "ga"): (705.5, 705, 389, 234.15),
    ("roberta", "GC", "gc"): (1760, 926, 503, 296),
    ("roberta", "ZeRO-DP(+GA)", "zero-dp"): (707.9, 698, 374, 234),
    ("roberta", "ZeRO-Offload", "zero-offload"): (1130, 921.2, 544, 365),
    ("bert", "DP", "ga"): (654.5, 365, 225.65, 157),
    ("bert", "GC", "gc"): (868, 481, 279.65, 180),
    ("bert", "ZeRO-DP(+GA)", "zero-dp"): (668, 382, 228.65, 155),
    ("bert", "ZeRO-Offload", "zero-offload"): (1019.7, 580, 376, 271.64),
    ("t5", "ZeRO-DP(+GA)", "zero-dp"): (1132.8, 721, 536, 463),
    ("t5", "ZeRO-Offload+GC", "zero-offload-gc"): (2411, 1431, 886, 653),
    ("gpt2", "ZeRO-DP(+GA)", "zero-dp"): (3617, 1880, 982, 496.76),
    ("gpt2", "ZeRO-Offload+GC", "zero-offload-gc"): (5230, 2995, 1567.3, 1203),
    ("llama7b", "ZeRO-Offload+GC", "zero-offload-gc"): (57879, 30072, 16098, 9400),
}
HELD_OUT_GPUS = (1, 2, 4, 8)
#: 3D held-out points (spec §6.4): (model, set, PP, TP, nodes, GPUs per node, T_iter ms).
HELD_OUT_3D: tuple[tuple[str, str, int, int, int, int, float], ...] = (
    ("t5", "TP+PP", 1, 8, 1, 8, 615), ("t5", "TP+PP", 2, 8, 2, 8, 710),
    ("t5", "TP+PP", 4, 8, 4, 8, 815), ("t5", "TP+PP", 4, 4, 4, 4, 976.9),
    ("t5", "TP+PP", 8, 2, 8, 2, 1711),
    ("gpt2", "TP+PP", 1, 5, 1, 5, 1052.5), ("gpt2", "TP+PP", 2, 5, 2, 5, 1080.7),
    ("gpt2", "TP+PP", 3, 5, 3, 5, 1066), ("gpt2", "TP+PP", 4, 5, 4, 5, 1070),
    ("gpt2", "TP+PP", 6, 5, 6, 5, 1078), ("gpt2", "TP+PP", 4, 1, 4, 1, 3089.3),
    ("gpt2", "TP+PP", 8, 1, 8, 1, 3120),
    ("llama7b", "DP+TP+PP", 1, 8, 2, 8, 1130), ("llama7b", "DP+TP+PP", 1, 8, 4, 8, 945),
    ("llama7b", "DP+TP+PP", 1, 8, 8, 8, 859), ("llama7b", "DP+TP+PP", 2, 4, 4, 4, 1648),
    ("llama7b", "TP+PP", 2, 8, 2, 8, 1569), ("llama7b", "TP+PP", 8, 8, 8, 8, 1871),
    ("llama7b", "TP+PP", 4, 8, 4, 8, 1665.7), ("llama7b", "TP+PP", 4, 4, 4, 4, 2641),
    ("llama7b", "TP+PP", 8, 2, 8, 2, 4817),
    ("llama30b", "DP+TP+PP", 5, 2, 5, 8, 2661), ("llama30b", "DP+TP+PP", 5, 4, 5, 8, 2741),
    ("llama30b", "DP+TP+PP", 4, 4, 4, 8, 2758), ("llama30b", "DP+TP+PP", 4, 4, 8, 8, 2017),
    ("llama30b", "TP+PP", 6, 4, 6, 4, 5296), ("llama30b", "TP+PP", 6, 4, 6, 8, 2741),
)
#: Sets the spec lists as well-behaved in paper mode (§2.9): average error <= 10% expected.
WELL_BEHAVED = {
    ("vit", "DP"), ("vit", "GC"), ("vit", "ZeRO-DP(+GA)"), ("vit", "ZeRO-Offload"),
    ("roberta", "DP"), ("roberta", "ZeRO-DP(+GA)"), ("roberta", "ZeRO-Offload"),
    ("bert", "DP"), ("bert", "GC"), ("bert", "ZeRO-DP(+GA)"), ("bert", "ZeRO-Offload"),
    ("t5", "ZeRO-DP(+GA)"), ("t5", "ZeRO-Offload+GC"),
}


def held_out_errors(name: str, pm: PerfModel | None = None) -> dict[str, tuple[float, float]]:
    """(average, maximum) relative error of T_iter per held-out set of one model."""
    pm = pm or profiled_model(name)
    out: dict[str, list[float]] = {}
    for (m, set_name, code), times in HELD_OUT_DP.items():
        if m != name:
            continue
        plan = Plan.parse(code)
        for g, meas in zip(HELD_OUT_GPUS, times, strict=True):
            pred = pm.iter_ms(plan, (g,), 4.0)
            if pred is not None:
                out.setdefault(set_name, []).append(abs(pred - meas) / meas)
    for m, set_name, pp, tp, nodes, per_node, meas in HELD_OUT_3D:
        if m != name:
            continue
        g = nodes * per_node
        plan = Plan("3d", False, pp, tp, g // (pp * tp))
        pred = pm.iter_ms(plan, (per_node,) * nodes, 4.0)
        if pred is not None:
            out.setdefault(set_name, []).append(abs(pred - meas) / meas)
    return {k: (float(np.mean(v)), float(np.max(v))) for k, v in out.items()}


# =============================================================================== world
@dataclass
class MeasuredCatalog:
    """The authors' measured iteration times (seconds) per (plan, shape), per model.

    ``rows[model][(plan, shape)] = seconds`` at the table's CPU threads (4 per GPU: the
    profiling convention; the Fig. 7 table carries its own thread counts in ``cpu_rows``).
    Uneven placements (e.g. ``233``) are stored by their sorted shape.
    """

    rows: dict[str, dict[tuple[Plan, Shape], float]] = field(default_factory=dict)
    cpu_rows: dict[str, dict[tuple[Plan, Shape], dict[float, float]]] = field(
        default_factory=dict)
    table_cpus: float = 4.0

    @classmethod
    def load(cls) -> MeasuredCatalog:
        cat = cls()
        for name, model in MODELS.items():
            if not model.table:
                continue
            rows: dict[tuple[Plan, Shape], float] = {}
            cpu_rows: dict[tuple[Plan, Shape], dict[float, float]] = {}
            for r in _read_csv(DATA_DIR / "traces" / model.table / "placements.csv"):
                t = float(r["iter_time"])
                if t <= 0:
                    continue  # 0 = OOM or not run
                shape = parse_shape(r["placement"].strip())
                plan = Plan.parse(r["exec_plan"], sum(shape))
                if plan.gpus(sum(shape)) != sum(shape):
                    raise ValueError(f"{name}: plan {plan} does not use placement {shape}")
                if r.get("cpu_threads"):
                    cpu_rows.setdefault((plan, shape), {})[float(r["cpu_threads"])] = t
                    rows.setdefault((plan, shape), t)
                else:
                    rows.setdefault((plan, shape), t)  # first row wins for uneven duplicates
            cat.rows[name] = rows
            cat.cpu_rows[name] = cpu_rows
        return cat

    def configs(self, name: str) -> list[tuple[Plan, Shape, float]]:
        return [(p, s, t) for (p, s), t in self.rows.get(name, {}).items()]

    def table_s(self, name: str, plan: Plan, shape: Shape) -> float | None:
        return self.rows.get(name, {}).get((plan, shape))

    def time_s(self, name: str, plan: Plan, shape: Shape, cpus_per_gpu: float) -> float | None:
        """Measured iteration time, CPU-adjusted for ZeRO-Offload; None if never measured."""
        base = self.table_s(name, plan, shape)
        if base is None:
            return None
        if not plan.offload:
            return base
        pts = self.cpu_rows.get(name, {}).get((plan, shape))
        if pts and len(pts) >= 2:
            # T(c) = A + B / c through the two measured thread counts closest to c
            (c1, t1), (c2, t2) = sorted(pts.items(), key=lambda kv: abs(kv[0] - cpus_per_gpu))[:2]
            bb = (t1 - t2) / (1 / c1 - 1 / c2)
            return max(1e-6, t1 - bb / c1 + bb / max(cpus_per_gpu, 1e-9))
        if pts:
            (c_ref, base), = pts.items()
        else:
            c_ref = self.table_cpus
        if cpus_per_gpu == c_ref or name not in _CPU_MODEL_NAMES:
            return base
        pm = profiled_model(_CPU_MODEL_NAMES[name])
        now = pm.iter_ms(plan, shape, cpus_per_gpu)
        ref = pm.iter_ms(plan, shape, c_ref)
        if now is None or ref is None:
            return base
        return base * now / ref


#: Whose fitted model gives the CPU sensitivity of ZeRO-Offload rows in the world.
_CPU_MODEL_NAMES = {"vit": "vit", "roberta": "roberta", "bert": "bert", "t5": "t5",
                    "gpt2": "gpt2", "llama7b": "llama7b"}


@cache
def measured_catalog() -> MeasuredCatalog:
    return MeasuredCatalog.load()


# =============================================================================== predictors
Config = tuple[Plan, Shape, float]  # plan, shape, CPUs per GPU


class Predictor(abc.ABC):
    """Iteration time (s) of a model type in a configuration, as a scheduler believes it.

    ``model_version(name)`` changes whenever that model's predictions may have changed (refit,
    new observation), so callers can cache derived curves."""

    def model_version(self, name: str) -> int:
        return 0

    @abc.abstractmethod
    def iter_time_s(self, model: ModelSpec, plan: Plan, shape: Shape,
                    cpus_per_gpu: float) -> float | None:
        """Predicted iteration time, or None where the configuration is infeasible."""

    def iter_times_s(self, model: ModelSpec, configs: Sequence[tuple[Plan, Shape]],
                     cpus_per_gpu: float) -> list[float | None]:
        """Batch form of :meth:`iter_time_s`."""
        return [self.iter_time_s(model, p, s, cpus_per_gpu) for p, s in configs]

    def observe(self, model: ModelSpec, plan: Plan, shape: Shape, cpus_per_gpu: float,
                iter_s: float) -> None:
        """A running job reported its iteration time (ignored by default)."""
        return None


def cpu_key(plan: Plan, cpus_per_gpu: float) -> float:
    """CPUs matter only to ZeRO-Offload (paper §4.1): other plans share one key (0)."""
    return float(cpus_per_gpu) if plan.offload else 0.0


class OraclePredictor(Predictor):
    """The measured world itself (micro-benchmarks, and the baselines' throughput source)."""

    def __init__(self, catalog: MeasuredCatalog | None = None) -> None:
        self.catalog = catalog or measured_catalog()

    def iter_time_s(self, model: ModelSpec, plan: Plan, shape: Shape,
                    cpus_per_gpu: float) -> float | None:
        return self.catalog.time_s(model.name, plan, shape, cpus_per_gpu)


class FittedPredictor(Predictor):
    """The paper's predictor: the 7-parameter model fitted on the profiling samples, refitted
    online when a job's reported iteration time is off by more than ``refit_threshold``
    (paper §4.3; spec §2.5 [R]: 10%, at most one refit per model per scheduling round).

    A configuration a job has actually run is predicted by its latest report ([R]: a
    measurement beats a prediction); the refit carries the information to the others.

    An online refit starts from the model's current parameters only (``online_restarts`` = 1;
    the profile's own fit used 20 starts): more starts found better minima by at most 3e-3 of
    the cost on the Table 4 runs and tripled the refit time (docs/reproductions/rubick.md).
    """

    def __init__(self, refit_threshold: float = 0.10, online_restarts: int = 1) -> None:
        self.refit_threshold = refit_threshold
        self.online_restarts = online_restarts
        self._versions: dict[str, int] = {}
        self._models: dict[str, PerfModel] = {}
        self._observed: dict[str, dict[tuple[Plan, Shape, float], float]] = {}
        self._dirty: set[str] = set()
        self.refits = 0

    def model_version(self, name: str) -> int:
        return self._versions.get(name, 0)

    def perf_model(self, model: ModelSpec) -> PerfModel:
        pm = self._models.get(model.name)
        if pm is None:
            pm = profiled_model(model.name)
            if pm.model.batch != model.batch:
                pm = PerfModel(model, pm.fwd, pm.fit)
            self._models[model.name] = pm
        return pm

    def iter_time_s(self, model: ModelSpec, plan: Plan, shape: Shape,
                    cpus_per_gpu: float) -> float | None:
        return self.iter_times_s(model, [(plan, shape)], cpus_per_gpu)[0]

    def iter_times_s(self, model: ModelSpec, configs: Sequence[tuple[Plan, Shape]],
                     cpus_per_gpu: float) -> list[float | None]:
        obs = self._observed.get(model.name, {})
        c = float(cpus_per_gpu)
        pred = self.perf_model(model).iter_ms_many([(p, s, c) for p, s in configs])
        out: list[float | None] = []
        for (p, s), ms in zip(configs, pred, strict=True):
            hit = obs.get((p, s, cpu_key(p, c)))
            out.append(hit if hit is not None else (None if ms is None else ms / 1000.0))
        return out

    def observe(self, model: ModelSpec, plan: Plan, shape: Shape, cpus_per_gpu: float,
                iter_s: float) -> None:
        key = (plan, shape, cpu_key(plan, cpus_per_gpu))
        obs = self._observed.setdefault(model.name, {})
        old = obs.get(key)
        if old is not None and abs(old - iter_s) <= 1e-6 * iter_s:
            return
        pred = self.perf_model(model).iter_ms(plan, shape, cpus_per_gpu)
        obs[key] = iter_s
        self._versions[model.name] = self.model_version(model.name) + 1
        if pred is None or abs(pred / 1000.0 - iter_s) > self.refit_threshold * iter_s:
            self._dirty.add(model.name)

    def refit_pending(self) -> list[str]:
        """Refit every model whose reports disagreed with it (at most once per call, i.e. per
        scheduling round); returns their names."""
        done = []
        for name in sorted(self._dirty):
            model = self._models[name].model
            pm = self.perf_model(model)
            samples = list(load_profile(name)) + [
                ProfileSample(p, s, c or 1.0, t * 1000.0) for (p, s, c), t in
                sorted(self._observed.get(name, {}).items(), key=lambda kv: repr(kv[0]))
            ]
            try:
                fit = fit_model(model, samples, pm.fwd, strict=False, quiet=True,
                                restarts=self.online_restarts, start=pm.fit.theta)
            except ValueError as e:
                log.warning("online refit of %s failed: %s", name, e)
                continue
            self._models[name] = pm.refitted(fit)
            self._versions[name] = self.model_version(name) + 1
            self.refits += 1
            done.append(name)
        self._dirty.clear()
        return done


# =============================================================================== job info
@hash_once
@dataclass(frozen=True)
class JobInfo:
    """What Rubick knows about a job with a known model (spec §1.4)."""

    model: ModelSpec
    orig_plan: Plan
    ref_shape: Shape  # the requested placement
    req_gpus: int
    req_cpus_per_gpu: float
    allowed: frozenset[str] | None  # plan codes the job supports (hints), None = all
    guaranteed: bool
    tenant: str


def job_info(spec: JobSpec, memo: dict[tuple, JobInfo | None] | None = None
             ) -> JobInfo | None:
    """Rubick's view of a job: None if its model is unknown (the job is then rigid).

    The original plan is ``attrs["exec_plan"]`` (Rubick traces) or the first of
    ``attrs["plans"]`` (hints); default plain DP, or the fastest measured 3D plan on the
    requested GPUs for models that cannot run DP. Class: ``attrs["guaranteed"]`` or
    ``attrs["is_sla"]``.

    ``memo`` (the caller's, e.g. one scheduler's): jobs of one kind (same model, batch, GPUs,
    CPUs, tenant, plans and class) get one shared :class:`JobInfo` from it; a big cluster's
    first pass reads thousands of them.
    """
    attrs = spec.attrs or {}
    plans = attrs.get("plans")
    code = attrs.get("exec_plan")
    guaranteed = bool(attrs.get("guaranteed", attrs.get("is_sla", False)))
    args = (spec.model, spec.batch_size, spec.num_gpus, spec.num_cpus, spec.user, code)
    if memo is not None and (plans is None or type(plans) in (list, tuple)) and (
            code is None or type(code) is str):
        key = (*args, None if plans is None else tuple(plans), guaranteed)
        try:
            got = memo.get(key, _MISS)
        except TypeError:  # an unhashable plan entry: read it without the memo
            got = _job_info(*args, plans, guaranteed)
        else:
            if got is _MISS:
                got = memo[key] = _job_info(*key)
        return got  # type: ignore[return-value]
    return _job_info(*args, plans, guaranteed)


def _job_info(model_name: str | None, batch_size: int | None, g: int, num_cpus: int | None,
              user: str, code: object, plans: Sequence[object] | None,
              guaranteed: bool) -> JobInfo | None:
    model = model_spec(model_name)
    if model is None:
        return None
    if batch_size is not None and batch_size != model.batch:
        model = _with_batch(model, batch_size)
    code = code or (plans[0] if plans else None)
    plan, ref = _requested_plan(model, str(code) if code else None, g)
    cat = measured_catalog()
    cpus = (num_cpus / g) if num_cpus else cat.table_cpus
    allowed = None
    if plans:
        allowed_set = set()
        for c in plans:
            try:
                allowed_set.add(Plan.parse(str(c), g).code)
            except ValueError:
                continue
        allowed = frozenset(allowed_set) or None
    return JobInfo(model, plan, ref, g, float(cpus), allowed, guaranteed, user)


@lru_cache(maxsize=1 << 16)
def _requested_plan(model: ModelSpec, code: str | None, gpus: int) -> tuple[Plan, Shape]:
    """A job's original plan (``code``, else the default) and requested placement on
    ``gpus`` GPUs; memoised: schedulers ask for thousands of jobs of a few kinds."""
    try:
        plan = Plan.parse(code, gpus) if code else None
    except ValueError:
        plan = None
    cat = measured_catalog()
    if plan is None or (plan.is_3d and plan.gpus(gpus) != gpus):
        plan = _default_plan(model, gpus, cat)
    return plan, _ref_shape(model, plan, gpus, cat)


@cache
def _with_batch(model: ModelSpec, batch: int) -> ModelSpec:
    from dataclasses import replace

    return replace(model, batch=batch)


def _default_plan(model: ModelSpec, gpus: int, cat: MeasuredCatalog) -> Plan:
    if accumulation_steps(model, Plan("dp"), gpus) is not None and (
        model.micro_limit("dp", False) or 0) > 0:
        return Plan("dp")
    best = None
    for p, s, t in cat.configs(model.name):
        if sum(s) == gpus and (best is None or t < best[1]):
            best = (p, t)
    return best[0] if best else Plan("zero-offload")


def _ref_shape(model: ModelSpec, plan: Plan, gpus: int, cat: MeasuredCatalog) -> Shape:
    """The requested placement: the fastest measured placement of the plan with that many GPUs
    (3D plans have fixed shapes), else the most compact one."""
    best = None
    for p, s, t in cat.configs(model.name):
        if p == plan and sum(s) == gpus and (best is None or t < best[1]
                                             or (t == best[1] and len(s) < len(best[0]))):
            best = (s, t)
    if best is not None and (plan.is_3d or best[0] == compact_shape(gpus)):
        return best[0]
    return compact_shape(gpus)


# =============================================================================== world speed
def world_time_s(info: JobInfo, plan: Plan, shape: Shape, cpus_per_gpu: float,
                 catalog: MeasuredCatalog | None = None) -> float:
    """Iteration time of a job in the simulated world; never fails.

    Measured configurations use the tables. A configuration that was never measured (another
    policy may place a job on an odd split) runs at the slowest measured time of the same plan
    family on as many GPUs; failing that, at its requested configuration's time scaled by the
    GPU ratio (as if linear); the penalty keeps such placements unattractive.
    """
    cat = catalog or measured_catalog()
    name = info.model.name
    t = cat.time_s(name, plan, shape, cpus_per_gpu)
    if t is not None:
        return t
    g = sum(shape)
    same = [tt for p, s, tt in cat.configs(name)
            if sum(s) == g and p.family == plan.family and p.gc == plan.gc]
    if same:
        return max(same)
    ref = cat.time_s(name, info.orig_plan, info.ref_shape, cat.table_cpus)
    if ref is None:
        ref = 1.0
    return ref * info.req_gpus / max(1, g) * 1.5


class RubickProgress(ProgressModel):
    """The ``rubick`` world: a job advances at ``T_ref / T_now``, where ``T_ref`` is the
    measured iteration time of its requested configuration (the trace's duration was derived
    from it) and ``T_now`` that of its current plan, placement and CPUs (``JobSettings.plan``,
    ``cpus``). Jobs of unknown models run at their isolated speed."""

    def __init__(self, catalog: MeasuredCatalog | None = None) -> None:
        self.catalog = catalog or measured_catalog()
        self._infos: dict[str, JobInfo | None] = {}

    def _info(self, spec: JobSpec) -> JobInfo | None:
        if spec.job_id not in self._infos:
            self._infos[spec.job_id] = job_info(spec)
        return self._infos[spec.job_id]

    def plan_speed(self, job: JobView, placement: Placement) -> float:
        info = self._info(job.spec)
        if info is None:
            return 1.0
        return speed_of(info, job.settings.plan, job.settings.cpus, placement, self.catalog)


def speed_of(info: JobInfo, plan_code: str | None, cpus: int | None, placement: Placement,
             catalog: MeasuredCatalog | None = None) -> float:
    """Speed of a job relative to its requested configuration in the measured world."""
    cat = catalog or measured_catalog()
    shape = shape_of(placement)
    g = sum(shape)
    plan = info.orig_plan
    if plan_code:
        try:
            plan = Plan.parse(plan_code, g)
        except ValueError:
            plan = info.orig_plan
    if plan.is_3d and plan.gpus(g) != g:
        plan = info.orig_plan if info.orig_plan.gpus(g) == g else Plan("dp")
    c = (cpus / g) if cpus else info.req_cpus_per_gpu
    t_ref = world_time_s(info, info.orig_plan, info.ref_shape, cat.table_cpus, cat)
    t_now = world_time_s(info, plan, shape, c, cat)
    return t_ref / t_now


def observed_iter_time_s(job: JobView, now_s: float, warmup_s: float = 30.0) -> float | None:
    """The iteration time a running job reports: its measured per-iteration time on the
    requested configuration (``duration / iterations``) divided by its current speed; None until
    it has run ``warmup_s`` past its restart."""
    if job.rate <= 0 or not job.spec.iterations or job.placement is None:
        return None
    if now_s < job.stall_until_s + warmup_s:
        return None
    base = job.spec.iteration_time_s
    return None if base is None else base / job.rate


PROGRESS_MODELS = {"rubick": RubickProgress}
