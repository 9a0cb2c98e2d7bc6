"""SJF-BSBF's performance model and the simulated world of its experiments.

Paper: Luo et al., "Scheduling Deep Learning Jobs in Multi-Tenant GPU Clusters via Wise Resource
Sharing" (spec ``sjf-bsbf.md`` sections 2.1, 2.5, 2.8 A6/A10 and 5).

Iteration time (eq. 3, 4, 7)
----------------------------
``t_comp(b) = alpha_c + beta_c * b`` (eq. 3, per-GPU sub-batch ``b``);
``t_comm = 0`` for one replica, ``alpha_r + beta_r * max(K - 2, eps)`` when the ``K`` replicas sit
on one node and ``alpha_n + beta_n * max(K - 2, eps)`` when they span nodes (eq. 4 in Pollux's
placement-aware form, spec 2.1); with ``s`` accumulation steps (eq. 7)::

    t_iter = (s - 1) * t_comp(b) + (t_comp(b) ** delta + t_comm ** delta) ** (1 / delta)

Fitted per application from the Pollux measurements (``data/pollux/models/<app>/placements.csv``
and ``scalability.csv``: placement, local batch, step time, sync time): ``alpha_c, beta_c`` by
least squares of ``log(step - sync)`` (the compute-only time of a micro-step), then ``alpha_r,
beta_r, alpha_n, beta_n >= 0`` and ``delta`` in [1, 10] (Pollux's bound) by least squares of
``log(step)``. Median relative error of the fit: 4-7 % per application (``fit_report``).

GPU memory (spec A6: ``mem(b) = m0 + m1 * b`` GB per GPU)
--------------------------------------------------------
No public source gives memory footprints for these runs; :data:`APP_MEMORY` derives them:
``m0`` = 0.5 GB CUDA context + 16 bytes per parameter (fp32 weights, gradients and two optimizer
moments) from the models' published parameter counts. ``m1``: for the four applications whose
largest profiled per-GPU batch is plausibly memory-bound (BERT 12, YOLOv3 8, DeepSpeech2 80,
ImageNet 200), that batch is taken to need 12 GB (:data:`MAX_BATCH_FILL_GB`; anchor: Google's
BERT README gives 12 as the largest BERT-Base batch at sequence length 384 on a 12 GB GPU,
exactly Pollux's largest BERT batch): ``m1 = (12 - m0) / max_local``. ResNet-18/CIFAR-10 (1024)
and NeuMF (32768) are not memory-bound there, so their ``m1`` is an activation estimate (about
5 MB and 0.01 MB per sample). The budget is the T4's 16 GB (:data:`GPU_MEMORY_GB`) because every
timing comes from T4s; the paper's 2080 Ti has 11 GB but no timing data here. This is an
*estimate*, stated as one; ``docs/reproductions/sjf-bsbf.md`` reports how the results move
without a memory limit.

Interference xi (spec A10)
--------------------------
:class:`UniformXi` (the paper's Fig. 6b injection), :class:`GavelXi` (pairs measured by Gavel on
V100, ``data/gavel/simulation_throughputs.json``: ``xi = alone steps/s / co-located steps/s``
for single-GPU jobs; the job's sub-batch picks the nearest measured batch-size variant, so xi
depends on b. Only CIFAR-10 (ResNet-18) and ImageNet (ResNet-50) are models Gavel measured,
:data:`GAVEL_APP_MAP`; :data:`GAVEL_ANALOGUES` adds looser analogues (NCF ~ Recommendation,
BERT ~ Transformer, DeepSpeech2 ~ LM) as a variant. An unknown pair or an out-of-memory (0.0)
measurement uses the configurable default, the median of Gavel's measured ratios, 1.474) and
:class:`CallableXi`.

The world that runs jobs by this model is :mod:`slurm_sched.perf.sjf_bsbf_world`.
"""

from __future__ import annotations

import ast
import csv
import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Protocol

import numpy as np
from scipy.optimize import least_squares

from slurm_sched.model import JobSettings, JobSpec, JobView
from slurm_sched.traces.pollux_workload import (
    GPUS_PER_NODE,
    available_applications,
    default_models_dir,
    load_application,
)

#: GPU memory of the simulated GPU (NVIDIA T4, the GPU of the Pollux measurements), GB.
GPU_MEMORY_GB = 16.0
#: Default interference ratio of a pair nothing is known about: the median (1.474) of all 636
#: single-GPU pair ratios Gavel measured on V100 (``gavel_median_xi()`` recomputes it).
DEFAULT_XI = 1.474
#: Uniform xi values of the interference sweep (paper Fig. 6b).
SWEEP_XI: tuple[float, ...] = (1.0, 1.25, 1.5, 1.75, 2.0)
#: Environment variables read by the ``sjf-bsbf`` world and policy factories.
ENV_UNIFORM_XI = "SJF_BSBF_XI"
ENV_DEFAULT_XI = "SJF_BSBF_XI_DEFAULT"

#: Model names accepted for each Pollux application (``JobSpec.model`` or hints).
APP_ALIASES: dict[str, str] = {
    "bert": "bert", "bert-base": "bert",
    "cifar10": "cifar10", "resnet18": "cifar10", "resnet-18": "cifar10",
    "deepspeech2": "deepspeech2", "deepspeech": "deepspeech2",
    "imagenet": "imagenet", "resnet50": "imagenet", "resnet-50": "imagenet",
    "ncf": "ncf", "neumf": "ncf",
    "yolov3": "yolov3", "yolo": "yolov3",
}


# ---------------------------------------------------------------------------------- eq. 3/4/7
@dataclass(frozen=True)
class IterModel:
    """Fitted iteration-time parameters of one application (seconds, per-GPU samples)."""

    alpha_c: float
    beta_c: float
    alpha_r: float
    beta_r: float
    alpha_n: float
    beta_n: float
    delta: float

    def t_comp(self, b: float) -> float:
        """Eq. (3): compute time of one micro-batch of ``b`` samples per GPU."""
        return self.alpha_c + self.beta_c * b

    def t_comm(self, num_nodes: int, replicas: int) -> float:
        """Eq. (4), placement-aware: all-reduce time of ``replicas`` GPUs on ``num_nodes``."""
        if replicas <= 1:
            return 0.0
        k = max(replicas - 2, 1e-8)
        if num_nodes > 1:
            return self.alpha_n + self.beta_n * k
        return self.alpha_r + self.beta_r * k

    def t_iter(self, b: float, steps: int, num_nodes: int, replicas: int) -> float:
        """Eq. (7): one optimizer step with ``steps`` micro-batches of ``b`` samples per GPU."""
        return overlap_time(self.t_comp(b), self.t_comm(num_nodes, replicas), self.delta, steps)


def overlap_time(t_comp: float, t_comm: float, delta: float, steps: int = 1) -> float:
    """Eq. (7) on given times: only the last micro-batch overlaps with the all-reduce."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if delta < 1:
        raise ValueError(f"delta must be >= 1, got {delta}")
    if t_comm <= 0:
        last = t_comp
    else:
        # factor out the larger term so a large delta does not overflow
        hi, lo = max(t_comp, t_comm), min(t_comp, t_comm)
        last = hi * (1.0 + (lo / hi) ** delta) ** (1.0 / delta)
    return (steps - 1) * t_comp + last


def _measurements(app_dir: Path) -> np.ndarray:
    rows: list[tuple[float, float, float, float, float]] = []
    with open(app_dir / "placements.csv", newline="") as f:
        for r in csv.DictReader(f):
            p = r["placement"]
            rows.append((len(p), sum(int(c) for c in p), float(r["local_bsz"]),
                         float(r["step_time"]), float(r["sync_time"])))
    scal = app_dir / "scalability.csv"
    if scal.exists():
        with open(scal, newline="") as f:
            for r in csv.DictReader(f):
                rows.append((int(r["num_nodes"]), int(r["num_replicas"]), float(r["local_bsz"]),
                             float(r["step_time"]), float(r["sync_time"])))
    if not rows:
        raise ValueError(f"no measurements in {app_dir}")
    return np.array(rows, dtype=float)


@lru_cache(maxsize=32)
def fit_iter_model(app: str, models_dir: Path | None = None) -> IterModel:
    """Fit eq. (7) to the Pollux measurements of ``app`` (cached)."""
    base = (models_dir or default_models_dir()).resolve()
    data = _measurements(base / app)
    nodes, reps, bsz, step, sync = data.T
    comp = np.maximum(step - sync, 1e-6)

    def res_comp(p: np.ndarray) -> np.ndarray:
        return np.log(p[0] + p[1] * bsz) - np.log(comp)

    pc = least_squares(res_comp, [0.01, 0.001], bounds=([1e-6, 0.0], [100.0, 100.0])).x
    tc = pc[0] + pc[1] * bsz
    multi = nodes > 1
    k = np.maximum(reps - 2, 1e-8)

    def predict(q: np.ndarray) -> np.ndarray:
        ar, br, an, bn, d = q
        net = np.where(multi, an + bn * k, ar + br * k)
        net = np.where(reps > 1, net, 0.0)
        hi = np.maximum(tc, net)
        lo = np.minimum(tc, net)
        return hi * (1.0 + (lo / hi) ** d) ** (1.0 / d)

    q = least_squares(lambda q: np.log(predict(q)) - np.log(step),
                      [0.01, 0.001, 0.05, 0.01, 2.0],
                      bounds=([0, 0, 0, 0, 1.0], [100, 100, 100, 100, 10.0])).x
    return IterModel(float(pc[0]), float(pc[1]), *(float(v) for v in q))


def fit_report(app: str, models_dir: Path | None = None) -> dict[str, float]:
    """Fitted parameters and the median / 90th-percentile relative error of the step time."""
    base = (models_dir or default_models_dir()).resolve()
    m = fit_iter_model(app, models_dir)
    data = _measurements(base / app)
    pred = np.array([m.t_iter(b, 1, int(n), int(r)) for n, r, b, _, _ in data])
    err = np.abs(pred / data[:, 3] - 1.0)
    out = dict(m.__dict__)
    out.update(median_rel_err=float(np.median(err)), p90_rel_err=float(np.percentile(err, 90)))
    return out


# ---------------------------------------------------------------------------------- memory (A6)
@dataclass(frozen=True)
class MemoryModel:
    """``mem(b) = m0_gb + m1_gb * b`` GB on each GPU (spec A6)."""

    m0_gb: float
    m1_gb: float

    def mem_gb(self, b: float) -> float:
        return self.m0_gb + self.m1_gb * b


_CONTEXT_GB = 0.5
_BYTES_PER_PARAM = 16.0
#: Memory the largest profiled per-GPU batch of a memory-bound application is taken to need:
#: Google's BERT README reports 12 as the largest BERT-Base batch at sequence length 384 on a
#: 12 GB GPU, and 12 is exactly Pollux's largest BERT batch (SQuAD, sequence length 384).
MAX_BATCH_FILL_GB = 12.0


def _static_gb(params_millions: float) -> float:
    return _CONTEXT_GB + params_millions * 1e6 * _BYTES_PER_PARAM / 1e9


def _memory_table() -> dict[str, MemoryModel]:
    # (published parameter count in millions, largest per-GPU batch that needs
    #  MAX_BATCH_FILL_GB or None,
    #  per-sample activation estimate in GB when that batch is not memory-bound)
    raw: dict[str, tuple[float, int | None, float]] = {
        "bert": (110.0, 12, 0.0),          # BERT-base, SQuAD seq 384
        "yolov3": (61.9, 8, 0.0),          # Pollux caps YOLOv3 at 8 per GPU for memory
        "deepspeech2": (38.0, 80, 0.0),
        "imagenet": (25.6, 200, 0.0),      # ResNet-50
        "cifar10": (11.2, None, 0.005),    # ResNet-18 on 32x32 images
        "ncf": (1.0, None, 0.00001),       # NeuMF
    }
    out = {}
    for app, (params, full_at, per_sample) in raw.items():
        m0 = _static_gb(params)
        m1 = (MAX_BATCH_FILL_GB - m0) / full_at if full_at else per_sample
        out[app] = MemoryModel(m0, m1)
    return out


#: Memory model per application (see the module docstring for the derivation).
APP_MEMORY: dict[str, MemoryModel] = _memory_table()


# ---------------------------------------------------------------------------------- job profiles
def application_of(spec: JobSpec) -> str | None:
    """The Pollux application a job runs, from ``attrs['application']`` or ``model``."""
    app = spec.attrs.get("application") if spec.attrs else None
    if not app and spec.model:
        app = APP_ALIASES.get(spec.model.strip().lower())
    if app and app in _known_apps():
        return str(app)
    return None


@lru_cache(maxsize=1)
def _known_apps() -> frozenset[str]:
    return frozenset(available_applications())


@dataclass(frozen=True)
class JobProfile:
    """What SJF-BSBF knows about one job (spec 1.3): its model, batch and iteration time.

    ``local_bsz`` is B (per-GPU batch, A11), ``solo_b`` the largest sub-batch that fits alone
    (the requested configuration's micro-batch); ``ref_time_s`` = t_iter at the requested
    configuration (packed placement, ``solo_b``).
    """

    app: str
    num_gpus: int
    batch_size: int
    local_bsz: int
    solo_b: int
    iterations: int
    iter_model: IterModel
    memory: MemoryModel

    @property
    def solo_steps(self) -> int:
        return self.steps_for(self.solo_b)

    @property
    def packed_nodes(self) -> int:
        return math.ceil(self.num_gpus / GPUS_PER_NODE)

    @cached_property
    def ref_time_s(self) -> float:
        return self.iter_model.t_iter(self.solo_b, self.solo_steps, self.packed_nodes,
                                      self.num_gpus)

    @cached_property
    def _slowdowns(self) -> dict[tuple[int, int | None], float]:
        """Memo of :meth:`slowdown` (a pure function of the profile): schedulers ask for the
        same few values for thousands of jobs."""
        return {}

    def steps_for(self, b: int) -> int:
        """Accumulation steps s = ceil(B / b) (spec F5): s * b >= B, global batch unchanged."""
        return -(-self.local_bsz // b)

    def t_iter(self, b: int, num_nodes: int | None = None) -> float:
        nodes = self.packed_nodes if num_nodes is None else num_nodes
        return self.iter_model.t_iter(b, self.steps_for(b), nodes, self.num_gpus)

    def slowdown(self, b: int, num_nodes: int | None = None) -> float:
        """t_iter with sub-batch ``b`` over t_iter of the requested configuration (>= 1 when
        placed packed: a smaller b only adds accumulation overhead)."""
        memo = self._slowdowns
        got = memo.get((b, num_nodes))
        if got is None:
            got = memo[(b, num_nodes)] = self.t_iter(b, num_nodes) / self.ref_time_s
        return got

    def mem_gb(self, b: int) -> float:
        return self.memory.mem_gb(b)

    def sub_batches(self) -> list[int]:
        """Candidate sub-batches, largest first: the solo micro-batch, then every
        ``ceil(B / 2^k)`` below it, down to 1 (spec F3/F5). Never above the solo micro-batch:
        it is the largest per-GPU batch the profile measured (Pollux's ``max_local_bsz``),
        so the model knows nothing beyond it; with B within that limit the set is exactly
        ``{B, ceil(B/2), ..., 1}``."""
        out = {self.solo_b}
        b = self.local_bsz
        while True:
            if b <= self.solo_b:
                out.add(b)
            if b == 1:
                break
            b = -(-b // 2)
        return sorted(out, reverse=True)

    def settings_for(self, b: int) -> JobSettings:
        return JobSettings(accumulation_steps=self.steps_for(b), sub_batch_size=b)


@lru_cache(maxsize=4096)
def application_profile(app: str, num_gpus: int, batch_size: int) -> JobProfile:
    """The profile of ``num_gpus`` GPUs running application ``app`` at global batch
    ``batch_size`` (memoised: profiles are values)."""
    run = load_application(default_models_dir().resolve() / app).isolated_run(num_gpus, batch_size)
    return JobProfile(
        app=app,
        num_gpus=num_gpus,
        batch_size=batch_size,
        local_bsz=run.local_bsz,
        solo_b=run.atomic_bsz,
        iterations=run.iterations,
        iter_model=fit_iter_model(app),
        memory=APP_MEMORY[app],
    )


def job_profile(spec: JobSpec) -> JobProfile | None:
    """The profile of a job, or None when its application or batch size is unknown."""
    app = application_of(spec)
    if app is None or not spec.batch_size:
        return None
    return application_profile(app, spec.num_gpus, spec.batch_size)


def current_sub_batch(job: JobView, profile: JobProfile | None) -> int | None:
    """The sub-batch a job runs with (its settings, else the solo micro-batch)."""
    if profile is None:
        return job.settings.sub_batch_size
    if job.settings.sub_batch_size is not None:
        return job.settings.sub_batch_size
    if job.settings.accumulation_steps > 1:
        return -(-profile.local_bsz // job.settings.accumulation_steps)
    return profile.solo_b


# ---------------------------------------------------------------------------------- xi (A10)
class Interference(Protocol):
    """xi(job | co-runner): slow-down factor of ``app`` at sub-batch ``b`` next to ``co_app``."""

    @property
    def default(self) -> float:
        """The xi assumed for a pair the model knows nothing about."""
        ...

    def xi(self, app: str | None, b: int | None, co_app: str | None, co_b: int | None) -> float:
        ...


@dataclass(frozen=True)
class UniformXi:
    """The same xi for every pair (paper Fig. 6b)."""

    value: float

    def __post_init__(self) -> None:
        if not (self.value >= 1.0 and math.isfinite(self.value)):
            raise ValueError(f"xi must be a finite number >= 1, got {self.value}")

    @property
    def default(self) -> float:
        return self.value

    def xi(self, app: str | None, b: int | None, co_app: str | None, co_b: int | None) -> float:
        return self.value


@dataclass(frozen=True)
class CallableXi:
    """xi from a user function ``f(app, b, co_app, co_b)``."""

    fn: Callable[[str | None, int | None, str | None, int | None], float]
    default: float = DEFAULT_XI

    def xi(self, app: str | None, b: int | None, co_app: str | None, co_b: int | None) -> float:
        return max(1.0, float(self.fn(app, b, co_app, co_b)))


#: Pollux application -> Gavel job type, where Gavel measured the same model on the same data.
GAVEL_APP_MAP: dict[str, str] = {
    "cifar10": "ResNet-18",       # ResNet-18 on CIFAR-10 in both
    "imagenet": "ResNet-50",      # ResNet-50 on ImageNet in both
}
#: Looser architecture analogues (a sensitivity variant: ``GavelXi(app_map=...)``).
GAVEL_ANALOGUES: dict[str, str] = {
    **GAVEL_APP_MAP,
    "ncf": "Recommendation",      # both recommendation models on MovieLens (Gavel: autoencoder)
    "bert": "Transformer",        # both Transformers (Gavel: translation)
    "deepspeech2": "LM",          # both recurrent sequence models (Gavel: LSTM language model)
}


def gavel_path() -> Path:
    return Path(__file__).resolve().parent.parent / "data" / "gavel" / "simulation_throughputs.json"


@lru_cache(maxsize=4)
def _gavel_pairs(gpu_type: str) -> dict[str, dict[int, dict[tuple[str, int], float]]]:
    """{type: {batch: {(co type, co batch): xi}}} from Gavel's single-GPU pair measurements."""
    with open(gavel_path()) as f:
        table = json.load(f)[gpu_type]

    def parse(key: str) -> tuple[str, int] | None:
        name, scale = ast.literal_eval(key)
        if scale != 1:
            return None
        if "(batch size " in name:
            base, rest = name.split(" (batch size ")
            return base, int(rest.rstrip(")"))
        return name, 0

    out: dict[str, dict[int, dict[tuple[str, int], float]]] = {}
    for key, entry in table.items():
        me = parse(key)
        if me is None:
            continue
        alone = float(entry.get("null", 0.0))
        pairs: dict[tuple[str, int], float] = {}
        for other, vals in entry.items():
            if other == "null":
                continue
            co = parse(other)
            if co is None or alone <= 0 or vals[0] <= 0:
                continue  # 0.0 = Gavel could not co-locate them (out of memory): not measured
            pairs[co] = max(1.0, alone / float(vals[0]))
        out.setdefault(me[0], {})[me[1]] = pairs
    return out


def gavel_median_xi(gpu_type: str = "v100") -> float:
    """The median of every measured single-GPU pair ratio in the Gavel table."""
    values = [x for rows in _gavel_pairs(gpu_type).values() for row in rows.values()
              for x in row.values()]
    return float(np.median(values))


def _nearest(options: Sequence[int], b: int | None) -> int:
    """The measured batch-size variant nearest to ``b`` in ratio (0 = a type without one)."""
    sized = [o for o in options if o > 0]
    if not sized:
        return 0
    if b is None or b <= 0:
        return max(sized)
    return min(sized, key=lambda o: (abs(math.log(o / b)), -o))


@dataclass(frozen=True)
class GavelXi:
    """Pairwise xi from Gavel's co-location measurements, a default for unknown pairs."""

    default: float = DEFAULT_XI
    gpu_type: str = "v100"
    app_map: tuple[tuple[str, str], ...] = tuple(GAVEL_APP_MAP.items())

    def __post_init__(self) -> None:
        if not (self.default >= 1.0 and math.isfinite(self.default)):
            raise ValueError(f"default xi must be a finite number >= 1, got {self.default}")

    def xi(self, app: str | None, b: int | None, co_app: str | None, co_b: int | None) -> float:
        return _gavel_xi(self, app, b, co_app, co_b)


@lru_cache(maxsize=65536)
def _gavel_xi(model: GavelXi, app: str | None, b: int | None, co_app: str | None,
              co_b: int | None) -> float:
    mapping = dict(model.app_map)
    me, co = mapping.get(app or ""), mapping.get(co_app or "")
    if me is None or co is None:
        return model.default
    pairs = _gavel_pairs(model.gpu_type)
    mine = pairs.get(me)
    if not mine:
        return model.default
    row = mine[_nearest(list(mine), b)]
    co_batches = [cb for (t, cb) in row if t == co]
    if not co_batches:
        return model.default
    return row[(co, _nearest(co_batches, co_b))]


def default_interference() -> Interference:
    """The interference model of the ``sjf-bsbf`` world (env vars, see module docstring)."""
    uniform = os.environ.get(ENV_UNIFORM_XI)
    if uniform:
        return UniformXi(_env_float(ENV_UNIFORM_XI, uniform))
    default = os.environ.get(ENV_DEFAULT_XI)
    return GavelXi(default=_env_float(ENV_DEFAULT_XI, default) if default else DEFAULT_XI)


def _env_float(name: str, raw: str) -> float:
    try:
        v = float(raw)
    except ValueError:
        raise ValueError(f"${name} must be a number >= 1, got {raw!r}") from None
    if not (v >= 1.0 and math.isfinite(v)):
        raise ValueError(f"${name} must be a number >= 1, got {raw!r}")
    return v
