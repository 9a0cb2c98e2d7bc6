"""GPU generations: per-job-type speed-ups on K80 / P40 / P100 / V100 and the progress model of a
heterogeneous cluster (Gandiva_fair's world).

Two measured sources, both relative to a K80 (speed-up = K80 time per mini-batch / time on the
other GPU):

- :data:`SLIDE_SPEEDUPS`: the table of the Gandiva_fair slides (Chaudhary et al., EuroSys'20),
  seven job types, columns P40 / P100 / V100, verbatim; :data:`SLIDE_K80_MS` holds its K80 time
  per mini-batch.
- :func:`gavel_speedups`: Gavel's measured single-GPU throughputs
  (``data/gavel/simulation_throughputs.json``, scale factor 1, "null" = the job alone), 26 job
  types such as ``ResNet-50 (batch size 64)``; speed-up = throughput on the GPU / on the K80.
  Gavel has no P40: its P40 entry is set to its P100 one (on the slides' table the mean P40/P100
  ratio is 0.98, so this is the closest single number).

Mapping a job to a job type (:func:`job_type_of`), first match wins:

1. ``JobSpec.attrs["job_type"]`` (a string), else ``JobSpec.model``, else
   :data:`DEFAULT_JOB_TYPE` (``ResNet50`` of the slides: a mid-range CNN, 3.34x on P100, 5.14x on
   V100).
2. The name is resolved (:func:`resolve_job_type`) case- and punctuation-insensitively: a Gavel
   key as written (``ResNet-50 (batch size 64)``); a slide job type (``dcgan``, ``resnet50``,
   ``ResNeXt50``...); a Gavel family (``resnet-18``, ``transformer``, ``lm``,
   ``recommendation``, ``a3c``, ``cyclegan``) with the batch size of the job
   (``JobSpec.batch_size``, nearest measured one, ties to the smaller) or the family's smallest;
   an alias of the model names the bundled traces use (:data:`MODEL_ALIASES`, e.g. Pollux's
   ``cifar10`` -> ``ResNet-18``, ``imagenet`` -> ``ResNet-50``, ``bert`` -> ``Transformer``).
   Anything else falls back to :data:`DEFAULT_JOB_TYPE`.

GPU types are matched lower-case. A GPU type that neither source knows (``a100``, the default
``gpu``...) runs at the reference speed: there is no measurement to say otherwise.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence
from functools import cache

from slurm_sched.model import Cluster, JobSpec, JobView, Placement
from slurm_sched.perf.progress import ProgressModel
from slurm_sched.traces import bundled

#: Generations of the slides' table, slowest first.
GENERATIONS: tuple[str, ...] = ("k80", "p40", "p100", "v100")

#: K80 time per mini-batch (ms) of the slides' table.
SLIDE_K80_MS: dict[str, float] = {
    "VAE": 11.5,
    "SuperResolution": 207.5,
    "DCGAN": 183.4,
    "GRU": 48.4,
    "LSTM": 48.9,
    "ResNet50": 134.0,
    "ResNeXt50": 2005.7,
}

#: Speed-up over a K80 per job type and generation (slides' table, verbatim; k80 = 1).
SLIDE_SPEEDUPS: dict[str, dict[str, float]] = {
    "VAE": {"k80": 1.0, "p40": 1.17, "p100": 1.19, "v100": 1.25},
    "SuperResolution": {"k80": 1.0, "p40": 1.43, "p100": 1.73, "v100": 1.87},
    "DCGAN": {"k80": 1.0, "p40": 4.34, "p100": 4.31, "v100": 6.42},
    "GRU": {"k80": 1.0, "p40": 3.00, "p100": 2.58, "v100": 4.81},
    "LSTM": {"k80": 1.0, "p40": 3.10, "p100": 3.58, "v100": 4.81},
    "ResNet50": {"k80": 1.0, "p40": 3.17, "p100": 3.34, "v100": 5.14},
    "ResNeXt50": {"k80": 1.0, "p40": 3.70, "p100": 4.12, "v100": 6.33},
}

DEFAULT_JOB_TYPE = "ResNet50"
DEFAULT_REFERENCE_GPU = "k80"

#: Model names used by the bundled traces -> a job type of the tables.
MODEL_ALIASES: dict[str, str] = {
    "cifar10": "ResNet-18",
    "resnet18": "ResNet-18",
    "imagenet": "ResNet-50",
    "bert": "Transformer",
    "deepspeech2": "LM",
    "ncf": "Recommendation",
    "yolov3": "ResNet-50",
    "vgg16": "ResNet-50",
    "vgg19": "ResNet-50",
    "gpt2": "Transformer",
}

_GAVEL_FILE = "gavel/simulation_throughputs.json"
_BATCH = re.compile(r"^(?P<family>.+?) \(batch size (?P<bs>\d+)\)$")


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


@cache
def gavel_speedups() -> dict[str, dict[str, float]]:
    """Gavel job type -> {gpu type: speed-up over K80} (single GPU, job alone)."""
    raw = json.loads(bundled(_GAVEL_FILE).read_text())
    out: dict[str, dict[str, float]] = {}
    for key, entry in raw["k80"].items():
        job_type, scale = ast.literal_eval(key)
        if scale != 1:
            continue
        k80 = float(entry["null"])
        if k80 <= 0:
            raise ValueError(f"{_GAVEL_FILE}: k80 throughput of {key} is {k80}, must be > 0")
        sp = {"k80": 1.0}
        for gpu in ("p100", "v100"):
            sp[gpu] = float(raw[gpu][key]["null"]) / k80
        sp["p40"] = sp["p100"]  # Gavel measured no P40 (module docstring)
        out[job_type] = sp
    return out


@cache
def _gavel_families() -> dict[str, dict[int, str]]:
    """Normalised family name -> {batch size (0 = none): Gavel job type}."""
    fam: dict[str, dict[int, str]] = {}
    for jt in gavel_speedups():
        m = _BATCH.match(jt)
        if m:
            fam.setdefault(_norm(m["family"]), {})[int(m["bs"])] = jt
        else:
            fam.setdefault(_norm(jt), {})[0] = jt
    return fam


def all_speedups() -> dict[str, dict[str, float]]:
    """Every job type of both sources -> {gpu type: speed-up over K80}."""
    return {**gavel_speedups(), **SLIDE_SPEEDUPS}


def resolve_job_type(name: str | None, batch_size: int | None = None) -> str:
    """The table job type a job-type or model name stands for (module docstring, step 2)."""
    if not name:
        return DEFAULT_JOB_TYPE
    if name in SLIDE_SPEEDUPS or name in gavel_speedups():
        return name
    key = _norm(name)
    for slide in SLIDE_SPEEDUPS:
        if _norm(slide) == key:
            return slide
    alias = MODEL_ALIASES.get(key)
    if alias is not None:
        key = _norm(alias)
    family = _gavel_families().get(key)
    if family is None:
        return DEFAULT_JOB_TYPE
    if 0 in family:
        return family[0]
    sizes = sorted(family)
    if batch_size is None:
        return family[sizes[0]]
    best = min(sizes, key=lambda b: (abs(b - batch_size), b))
    return family[best]


def job_type_of(spec: JobSpec) -> str:
    """The job type of a job: ``attrs["job_type"]``, else ``model``, else the default."""
    declared = spec.attrs.get("job_type")
    name = declared if isinstance(declared, str) and declared else spec.model
    return resolve_job_type(name, spec.batch_size)


def speedup(job_type: str, gpu_type: str, reference: str = DEFAULT_REFERENCE_GPU) -> float:
    """Speed of ``job_type`` on ``gpu_type`` relative to ``reference`` (1.0 when either GPU type
    is unknown to the tables: no measurement to say otherwise)."""
    table = all_speedups().get(job_type) or all_speedups()[DEFAULT_JOB_TYPE]
    g, r = table.get(gpu_type.lower()), table.get(reference.lower())
    if g is None or r is None:
        return 1.0
    return g / r


def generation_rank(gpu_types: Sequence[str]) -> list[str]:
    """GPU types ordered fastest first by the mean speed-up over the slides' job types (unknown
    types count as a K80); ties by name. Used only to order trading pairs, never for a job."""

    def mean_speed(t: str) -> float:
        return sum(speedup(jt, t) for jt in SLIDE_SPEEDUPS) / len(SLIDE_SPEEDUPS)

    return sorted(gpu_types, key=lambda t: (-mean_speed(t), t))


class GpuGenerations(ProgressModel):
    """Progress model: a job runs ``speedup(type, placement GPU) / speedup(type, reference)``
    times its isolated speed (``JobSpec.duration_s`` is measured on the reference GPU type).

    A gang spread over several generations runs at its slowest GPU (synchronous training). Jobs
    RUNNING together on one GPU time-share it: each gets ``1 / (1 + co-located)`` of it (the
    policies of this world suspend co-holders, so this only guards against double-running).
    """

    def __init__(
        self,
        reference: str = DEFAULT_REFERENCE_GPU,
        overrides: Mapping[str, Mapping[str, float]] | None = None,
    ) -> None:
        self.reference = reference.lower()
        self.overrides = {k: dict(v) for k, v in (overrides or {}).items()}

    def job_speedup(self, spec: JobSpec, gpu_type: str) -> float:
        jt = job_type_of(spec)
        table = self.overrides.get(jt)
        if table is not None and gpu_type.lower() in table and self.reference in table:
            return table[gpu_type.lower()] / table[self.reference]
        return speedup(jt, gpu_type, self.reference)

    def gpu_speed(self, job: JobView, placement: Placement, cluster: Cluster) -> float:
        by_name = cluster.by_name
        return min(self.job_speedup(job.spec, by_name[n].gpu_type) for n in placement.nodes)

    def sharing_slowdown(
        self, job: JobView, placement: Placement, co_located: Sequence[JobView]
    ) -> float:
        return 1.0 + len(co_located)


PROGRESS_MODELS = {"gpu-generations": GpuGenerations}
