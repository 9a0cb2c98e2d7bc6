"""Progress-model registry: the simulated "world" a comparison runs in.

A progress model is a property of the world (GPU generations, co-location interference,
interleaving, execution plans), not of a policy: every policy in one comparison must run in the
same world. Modules of :mod:`slurm_sched.perf` declare ``PROGRESS_MODELS = {name: factory}``;
they are discovered on first use. ``identity`` (every job at its isolated speed) is built in.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable

from slurm_sched.errors import InputError
from slurm_sched.perf.progress import ProgressModel

ProgressFactory = Callable[[], ProgressModel]

_MODELS: dict[str, ProgressFactory] = {}


def _load() -> None:
    if _MODELS:
        return
    _MODELS["identity"] = ProgressModel
    import slurm_sched.perf as pkg

    for m in sorted(pkgutil.walk_packages(pkg.__path__, prefix=pkg.__name__ + "."),
                    key=lambda m: m.name):
        if m.name.endswith(".registry"):
            continue
        mod = importlib.import_module(m.name)
        for name, factory in getattr(mod, "PROGRESS_MODELS", {}).items():
            if name in _MODELS:
                raise ValueError(f"progress model {name!r} registered twice")
            _MODELS[name] = factory


def names() -> list[str]:
    _load()
    return list(_MODELS)


def create(name: str) -> ProgressModel:
    _load()
    factory = _MODELS.get(name)
    if factory is None:
        raise InputError(f"unknown progress model; known: {', '.join(_MODELS)}",
                         field="progress-model", value=name)
    return factory()
