"""Rubick's predictors of iteration time, in seconds: :class:`OraclePredictor` (the measured
tables; the micro-benchmarks of spec §8.17-18 use it) and :class:`FittedPredictor` (the paper's
way: the fitted model, plus online refits as jobs report iteration times).
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Sequence

from slurm_sched.perf.rubick.measured import (
    MeasuredCatalog,
    PerfModel,
    load_profile,
    measured_catalog,
    profiled_model,
)
from slurm_sched.perf.rubick.models import ModelSpec
from slurm_sched.perf.rubick.perf_model import ProfileSample, fit_model
from slurm_sched.perf.rubick.plans import Plan
from slurm_sched.perf.rubick.shapes import Shape

log = logging.getLogger(__name__)


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

    def __init__(self, refit_threshold: float = 0.10, online_restarts: int = 1,
                 loss: str = "iter") -> None:
        self.refit_threshold = refit_threshold
        self.online_restarts = online_restarts
        #: the fit's loss (:func:`fit_model`): "iter" (T_iter) or "components" (+ T_cc, T_oo)
        self.loss = loss
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
            pm = profiled_model(model.name, self.loss)
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
                                restarts=self.online_restarts, start=pm.fit.theta,
                                loss=self.loss)
            except ValueError as e:
                log.warning("online refit of %s failed: %s", name, e)
                continue
            self._models[name] = pm.refitted(fit)
            self._versions[name] = self.model_version(name) + 1
            self.refits += 1
            done.append(name)
        self._dirty.clear()
        return done
