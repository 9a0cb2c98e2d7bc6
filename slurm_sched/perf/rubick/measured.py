"""What the Rubick authors measured, and the models fitted on it: the profiling samples of each
model (:func:`load_profile`), the performance model fitted on them (:func:`profiled_model`) and
its held-out errors, and the measured world (:class:`MeasuredCatalog`): iteration times per
(plan, placement) from ``data/rubick/traces``. The simulated cluster runs jobs at exactly these
times; a configuration that was never measured counts as infeasible (out of memory or not run).
CPU threads change only ZeRO-Offload plans, by the fitted model's ratio.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np

from slurm_sched.perf.rubick.models import MODELS, ModelSpec
from slurm_sched.perf.rubick.perf_model import (
    FitResult,
    ForwardProfile,
    ProfileSample,
    features,
    fit_model,
    predict_ms,
)
from slurm_sched.perf.rubick.plans import Plan
from slurm_sched.perf.rubick.shapes import Shape, parse_shape

DATA_DIR = Path(__file__).resolve().parents[2] / "data" / "rubick"


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
                                     float(dat["forward_time"]) or None,
                                     float(dat.get("Tcc") or 0) or None,
                                     float(dat.get("Topt") or 0) or None))
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
    with the micro-batch (paper §4.1: "linearly with the per-GPU batch"; a per-size lookup
    predicts the held-out points worse, see docs/reproductions/rubick.md).

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


Config = tuple[Plan, Shape, float]  # plan, shape, CPUs per GPU


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
def profiled_model(name: str, loss: str = "iter") -> PerfModel:
    """The model fitted on the model's own profiling samples (strict when enough samples);
    ``loss`` as :func:`fit_model`'s."""
    model = MODELS[name]
    samples = load_profile(name)
    fwd = forward_profile(name)
    fit = fit_model(model, samples, fwd, strict=False, loss=loss)
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
