"""Progress-model registry: the simulated "world" a comparison runs in.

A progress model is a property of the world (GPU generations, co-location interference,
interleaving, execution plans), not of a policy: every policy in one comparison must run in the
same world.

Contract: :data:`BUILTIN` lists every progress model and the module whose ``PROGRESS_MODELS =
{name: factory}`` declares it; a model's module is imported the first time the model is created
(``tests/unit/perf/test_registry.py`` checks that the table and the modules agree).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from slurm_sched.errors import InputError
from slurm_sched.perf.progress import ProgressModel

ProgressFactory = Callable[[], ProgressModel]

#: Every progress model: name -> the module whose ``PROGRESS_MODELS`` declares it, in listing order.
BUILTIN: dict[str, str] = {
    "identity": "slurm_sched.perf.progress",
    "a-srpt": "slurm_sched.perf.asrpt_model",
    "gpu-generations": "slurm_sched.perf.gpu_generations",
    "muri": "slurm_sched.perf.muri_stages",
    "muri-noblossom": "slurm_sched.perf.muri_stages",
    "pollux-artifact": "slurm_sched.perf.pollux_artifact_world",
    "rubick": "slurm_sched.perf.rubick.world_speed",
    "rubick-steps": "slurm_sched.perf.rubick.world_speed",
    "sjf-bsbf": "slurm_sched.perf.sjf_bsbf_world",
    "sjf-bsbf-xi1.0": "slurm_sched.perf.sjf_bsbf_world",
    "sjf-bsbf-xi1.25": "slurm_sched.perf.sjf_bsbf_world",
    "sjf-bsbf-xi1.5": "slurm_sched.perf.sjf_bsbf_world",
    "sjf-bsbf-xi1.75": "slurm_sched.perf.sjf_bsbf_world",
    "sjf-bsbf-xi2.0": "slurm_sched.perf.sjf_bsbf_world",
}


def names() -> list[str]:
    """Every progress model's name (imports nothing)."""
    return list(BUILTIN)


def factory(name: str) -> ProgressFactory:
    """The factory of progress model ``name``, importing only its module; an unknown name is an
    :class:`InputError` listing the known ones."""
    module = BUILTIN.get(name)
    if module is None:
        raise InputError(f"unknown progress model; known: {', '.join(BUILTIN)}",
                         field="progress-model", value=name)
    declared: dict[str, ProgressFactory] = importlib.import_module(module).PROGRESS_MODELS
    if name not in declared:
        raise ValueError(f"{module} does not declare the progress model {name!r}")
    return declared[name]


def create(name: str) -> ProgressModel:
    """A fresh progress model by name."""
    return factory(name)()
