"""Measured job profiles: the JSON file ``slurm-sched profile`` writes and the models read.

Format (``format: slurm_sched.profile``, ``version: 1``; documented in ``docs/runtime.md``)::

    {
      "format": "slurm_sched.profile", "version": 1,
      "provenance": {"created_at": "...Z", "host": "...", "device": "cpu" | "cuda",
                     "device_name": "...", "torch": "2.13.0+cpu", "threads": 2,
                     "warmup": 3, "iters": 10, "command": "slurm-sched profile ..."},
      "models": {
        "<model>": {
          "device": "cpu", "params": 123456, "memory_kind": "cpu_peak_rss" | "cuda_max_allocated",
          "samples": [{"batch_size": 8, "iter_time_s": 0.012, "iter_time_std_s": 0.0004,
                       "mem_gb": 0.21, "repeats": 10}, ...],
          "compute": {"alpha_s": 0.003, "beta_s": 0.0011, "max_rel_err": 0.04},
          "memory": {"m0_gb": 0.19, "m1_gb": 0.0025}
        }
      },
      "interference": [
        {"model": "a", "batch_size": 8, "co_model": "b", "co_batch_size": 8,
         "solo_iter_time_s": 0.012, "shared_iter_time_s": 0.019, "xi": 1.58}, ...
      ]
    }

``iter_time_s`` is one optimizer step of one (sub-)batch of ``batch_size`` samples on one device
(forward, backward, optimizer step; synthetic data already on the device), the quantity of
SJF-BSBF's eq. (3) ``t_comp(b) = alpha + beta * b``; ``compute`` is that line fitted by
non-negative least squares on *relative* errors. ``mem_gb`` is the peak memory of the step
(``torch.cuda.max_memory_allocated`` on CUDA; the process's peak resident set on CPU), ``memory``
its line ``mem(b) = m0 + m1 * b`` (SJF-BSBF spec A6). ``xi`` = co-located iteration time / solo
iteration time of ``model`` while ``co_model`` runs beside it on the same device (>= 1 expected;
measured values below 1 are kept, the SJF-BSBF adapter clamps them).

How it plugs into SJF-BSBF (``slurm_sched/perf/sjf_bsbf_model.py``): :func:`iter_model` gives an
``IterModel`` (alpha_c, beta_c from ``compute``; no communication terms: the profile is of one
device), :func:`memory_model` a ``MemoryModel``, :func:`interference` a ``CallableXi`` over the
measured pairs, and :func:`write_pollux_placements` writes the samples as a Pollux
``placements.csv`` (placement ``"1"``, ``sync_time`` 0) that ``fit_iter_model(app, models_dir)``
fits like the bundled Pollux data.

This module needs numpy/scipy only; measuring (torch) is in :mod:`slurm_sched.runtime.measure`.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import nnls

from slurm_sched.errors import InputError
from slurm_sched.perf.sjf_bsbf_model import CallableXi, IterModel, MemoryModel

FORMAT = "slurm_sched.profile"
VERSION = 1


@dataclass(frozen=True)
class Sample:
    """One measured batch size."""

    batch_size: int
    iter_time_s: float
    iter_time_std_s: float = 0.0
    mem_gb: float | None = None
    repeats: int = 1


@dataclass(frozen=True)
class LinearFit:
    """``y = intercept + slope * b``, both >= 0, and the largest relative error of the fit."""

    intercept: float
    slope: float
    max_rel_err: float

    def __call__(self, b: float) -> float:
        return self.intercept + self.slope * b


def fit_linear(batch_sizes: Sequence[float], values: Sequence[float]) -> LinearFit:
    """Fit ``v = a + s*b`` with ``a, s >= 0``, minimising the squared *relative* error.

    Relative errors keep the small batch sizes (where the fixed cost ``a`` shows) from being
    swamped by the large ones. Needs two distinct batch sizes and positive values.
    """
    b = np.asarray(batch_sizes, dtype=float)
    v = np.asarray(values, dtype=float)
    if b.shape != v.shape or b.size < 2 or np.unique(b).size < 2:
        raise ValueError(f"need values at >= 2 distinct batch sizes, got {b.tolist()}")
    if not np.all(np.isfinite(v)) or np.any(v <= 0):
        raise ValueError(f"values must be finite and > 0, got {v.tolist()}")
    design = np.column_stack([np.ones_like(b), b]) / v[:, None]
    (a, s), _ = nnls(design, np.ones_like(v))
    pred = a + s * b
    return LinearFit(float(a), float(s), float(np.max(np.abs(pred / v - 1.0))))


@dataclass
class ModelProfile:
    """Measurements of one model on one device."""

    name: str
    device: str
    samples: list[Sample]
    params: int | None = None
    memory_kind: str | None = None

    def compute_fit(self) -> LinearFit:
        s = sorted(self.samples, key=lambda x: x.batch_size)
        return fit_linear([x.batch_size for x in s], [x.iter_time_s for x in s])

    def memory_fit(self) -> LinearFit | None:
        s = [x for x in sorted(self.samples, key=lambda x: x.batch_size) if x.mem_gb]
        if len({x.batch_size for x in s}) < 2:
            return None
        return fit_linear([x.batch_size for x in s], [float(x.mem_gb or 0.0) for x in s])

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "device": self.device,
            "params": self.params,
            "memory_kind": self.memory_kind,
            "samples": [asdict(x) for x in sorted(self.samples, key=lambda x: x.batch_size)],
        }
        if len({x.batch_size for x in self.samples}) >= 2:
            c = self.compute_fit()
            out["compute"] = {
                "alpha_s": c.intercept,
                "beta_s": c.slope,
                "max_rel_err": c.max_rel_err,
            }
            m = self.memory_fit()
            if m is not None:
                out["memory"] = {
                    "m0_gb": m.intercept,
                    "m1_gb": m.slope,
                    "max_rel_err": m.max_rel_err,
                }
        return out


@dataclass(frozen=True)
class InterferencePair:
    """``model`` at ``batch_size`` measured alone and beside ``co_model`` at ``co_batch_size``."""

    model: str
    batch_size: int
    co_model: str
    co_batch_size: int
    solo_iter_time_s: float
    shared_iter_time_s: float

    @property
    def xi(self) -> float:
        return self.shared_iter_time_s / self.solo_iter_time_s


@dataclass
class Profile:
    """A whole profile file."""

    models: dict[str, ModelProfile] = field(default_factory=dict)
    interference: list[InterferencePair] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "provenance": self.provenance,
            "models": {name: m.to_json() for name, m in sorted(self.models.items())},
            "interference": [{**asdict(p), "xi": p.xi} for p in self.interference],
        }

    def write(self, path: str | os.PathLike[str]) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f".{p.name}.tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2, sort_keys=False) + "\n")
        os.replace(tmp, p)
        return p

    def merge(self, other: Profile) -> Profile:
        """Models of ``other`` replace ours by name; its pairs are added."""
        out = Profile(dict(self.models), list(self.interference), dict(self.provenance))
        out.models.update(other.models)
        out.interference.extend(other.interference)
        return out


def _require(data: Mapping[str, Any], key: str, source: str, where: str) -> Any:
    if key not in data:
        raise InputError("missing key", source=source, field=f"{where}{key}")
    return data[key]


def from_json(data: Mapping[str, Any], source: str = "profile") -> Profile:
    """Parse a profile document; :class:`InputError` naming the bad field otherwise."""
    if data.get("format") != FORMAT:
        raise InputError(
            f"not a {FORMAT} file", source=source, field="format", value=data.get("format")
        )
    if data.get("version") != VERSION:
        raise InputError(
            f"unsupported version (this reader knows {VERSION})",
            source=source,
            field="version",
            value=data.get("version"),
        )
    prof = Profile(provenance=dict(data.get("provenance") or {}))
    for name, m in dict(_require(data, "models", source, "")).items():
        samples = []
        for i, s in enumerate(_require(m, "samples", source, f"models.{name}.")):
            where = f"models.{name}.samples[{i}]."
            try:
                sample = Sample(
                    batch_size=int(_require(s, "batch_size", source, where)),
                    iter_time_s=float(_require(s, "iter_time_s", source, where)),
                    iter_time_std_s=float(s.get("iter_time_std_s") or 0.0),
                    mem_gb=float(s["mem_gb"]) if s.get("mem_gb") is not None else None,
                    repeats=int(s.get("repeats") or 1),
                )
            except (TypeError, ValueError):
                raise InputError(
                    "not a number", source=source, field=where.rstrip("."), value=s
                ) from None
            if sample.batch_size < 1 or not (
                sample.iter_time_s > 0 and math.isfinite(sample.iter_time_s)
            ):
                raise InputError(
                    "batch_size must be >= 1 and iter_time_s > 0",
                    source=source,
                    field=where.rstrip("."),
                    value=s,
                )
            samples.append(sample)
        prof.models[name] = ModelProfile(
            name, str(m.get("device") or "unknown"), samples, m.get("params"), m.get("memory_kind")
        )
    for i, p in enumerate(data.get("interference") or []):
        where = f"interference[{i}]."
        try:
            pair = InterferencePair(
                model=str(_require(p, "model", source, where)),
                batch_size=int(_require(p, "batch_size", source, where)),
                co_model=str(_require(p, "co_model", source, where)),
                co_batch_size=int(_require(p, "co_batch_size", source, where)),
                solo_iter_time_s=float(_require(p, "solo_iter_time_s", source, where)),
                shared_iter_time_s=float(_require(p, "shared_iter_time_s", source, where)),
            )
        except (TypeError, ValueError):
            raise InputError(
                "not a number", source=source, field=where.rstrip("."), value=p
            ) from None
        if pair.solo_iter_time_s <= 0 or pair.shared_iter_time_s <= 0:
            raise InputError(
                "iteration times must be > 0", source=source, field=where.rstrip("."), value=p
            )
        prof.interference.append(pair)
    return prof


def read_profile(path: str | os.PathLike[str]) -> Profile:
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except ValueError as exc:
        raise InputError(f"not valid JSON ({exc})", source=str(p)) from None
    if not isinstance(data, dict):
        raise InputError("must be a JSON object", source=str(p))
    return from_json(data, source=str(p))


def bundled_profiles_dir() -> Path:
    """``slurm_sched/data/profiles``: measured profiles shipped with the package."""
    return Path(__file__).resolve().parent.parent / "data" / "profiles"


# ---------------------------------------------------------------------------------- SJF-BSBF
def iter_model(model: ModelProfile) -> Any:
    """SJF-BSBF's ``IterModel`` for a single-device profile (eq. 3; no all-reduce terms, delta
    1). Multi-GPU jobs need communication parameters the profile does not measure."""
    fit = model.compute_fit()
    return IterModel(
        alpha_c=fit.intercept,
        beta_c=fit.slope,
        alpha_r=0.0,
        beta_r=0.0,
        alpha_n=0.0,
        beta_n=0.0,
        delta=1.0,
    )


def memory_model(model: ModelProfile) -> Any | None:
    """SJF-BSBF's ``MemoryModel`` (``mem(b) = m0 + m1*b`` GB), or None without memory data."""
    fit = model.memory_fit()
    return None if fit is None else MemoryModel(m0_gb=fit.intercept, m1_gb=fit.slope)


def xi_table(
    pairs: Iterable[InterferencePair],
) -> dict[tuple[str, str], list[tuple[int, int, float]]]:
    """``{(model, co_model): [(batch_size, co_batch_size, xi), ...]}``."""
    table: dict[tuple[str, str], list[tuple[int, int, float]]] = {}
    for p in pairs:
        table.setdefault((p.model, p.co_model), []).append((p.batch_size, p.co_batch_size, p.xi))
    return table


def interference(profile: Profile, default: float = 1.5) -> Any:
    """SJF-BSBF's ``CallableXi`` over the measured pairs: the pair's measurement whose batch
    sizes are nearest (in log ratio) to the asked ones; ``default`` for unmeasured pairs."""
    table = xi_table(profile.interference)

    def xi(app: str | None, b: int | None, co_app: str | None, co_b: int | None) -> float:
        rows = table.get((app or "", co_app or ""))
        if not rows:
            return default

        def dist(row: tuple[int, int, float]) -> float:
            d = 0.0
            if b:
                d += abs(math.log(row[0] / b))
            if co_b:
                d += abs(math.log(row[1] / co_b))
            return d

        return min(rows, key=dist)[2]

    return CallableXi(xi, default=default)


def write_pollux_placements(model: ModelProfile, models_dir: str | os.PathLike[str]) -> Path:
    """Write ``<models_dir>/<name>/placements.csv`` in the Pollux layout (placement, local_bsz,
    step_time, sync_time) so ``sjf_bsbf_model.fit_iter_model(name, models_dir)`` can fit it."""
    out = Path(models_dir) / model.name / "placements.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["placement", "local_bsz", "step_time", "sync_time"])
        for s in sorted(model.samples, key=lambda x: x.batch_size):
            w.writerow(["1", s.batch_size, repr(s.iter_time_s), 0.0])
    return out
