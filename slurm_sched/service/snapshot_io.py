"""Snapshot files: capture the state a policy decides on, write it, read it back, replay it.

A snapshot file is one JSON object (``FORMAT``, ``VERSION`` 1)::

    {"format": "slurm-sched-snapshot", "version": 1,
     "captured_at_s": 1718000000.1, "captured_at": "2024-06-10T06:13:20Z",
     "source": "slurm:/etc/slurm/slurm.conf", "slurm_version": "22.05.8",
     "partitions": ["sched"], "notes": {...},
     "now_s": 1718000000.1, "cluster": {...}, "free_gpus": {"a100-1": [2, 3], ...},
     "jobs": [{"spec": {...}, "state": "running", "placement": {...}, "settings": {...},
               "first_start_s": ..., "accounted_at_s": ..., "executed_s": ..., ...}, ...]}

``now_s``, ``cluster`` and ``jobs`` are the :class:`~slurm_sched.model.ClusterSnapshot` (every
:class:`~slurm_sched.model.JobView` field, progress included); ``free_gpus`` is the snapshot's
free-GPU map, which on Slurm also leaves out GPUs held by jobs of other partitions and GPUs of
unavailable nodes. Reading a written file gives back an equal snapshot (values in
``JobSpec.attrs`` included: tuples there are written as ``{"$tuple": [...]}``).

Live capture (:func:`capture_live`) takes ONE ``snapshot()`` of a
:class:`~slurm_sched.slurm.backend.SlurmBackend` in dry-run mode: only read-only commands reach
Slurm and no file is written (a fresh backend's snapshot would otherwise renew leases, hand jobs
it cannot understand to Slurm and write ledgers next to the running daemon). What it would have
run is listed in ``notes["not_run"]``.

Replay (:func:`simulate_from`, over :meth:`SimulatedBackend.from_state
<slurm_sched.sim.backend.SimulatedBackend.from_state>`) continues a snapshot offline in the
simulator: running and suspended jobs keep their placements and progress, pending jobs queue
with the progress they had. GPUs the snapshot shows neither free nor held by a managed job stay
unavailable for the whole replay (their holders are not in the snapshot, so nobody knows when
they end).
"""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from slurm_sched.backend.placement_check import missing_gpu
from slurm_sched.controller import Controller, ControllerStats
from slurm_sched.errors import InputError, SimulationStalledError
from slurm_sched.model import Cluster, ClusterSnapshot, CompletedJob, JobState, JobView, Resume
from slurm_sched.perf import registry as perf_registry
from slurm_sched.perf.progress import ProgressModel
from slurm_sched.policy.base import Policy
from slurm_sched.sim.backend import SimulatedBackend
from slurm_sched.sim.clock import SimulatedClock
from slurm_sched.sim.metrics import RunMetrics, compute_metrics
from slurm_sched.slurm.backend import SlurmBackend
from slurm_sched.slurm.recorded import RecordedCluster, RecordedRunner

log = logging.getLogger(__name__)

FORMAT = "slurm-sched-snapshot"
VERSION = 1
_TUPLE_TAG = "$tuple"


@dataclass(frozen=True)
class SnapshotFile:
    """A snapshot plus where and when it was taken."""

    snapshot: ClusterSnapshot
    #: wall-clock time of the capture (epoch seconds); ``snapshot.now_s`` is the backend's time
    captured_at_s: float
    #: where it came from, e.g. ``slurm:/etc/slurm/slurm.conf`` or ``simulator``
    source: str
    slurm_version: str | None = None
    partitions: tuple[str, ...] = ()
    #: free-form facts of the capture (jobs in flight, jobs left to Slurm, commands not run)
    notes: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------ encoding
def _encode(value: Any, where: str) -> Any:
    """JSON value of an ``attrs`` entry; tuples are tagged so they read back as tuples."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InputError("not a finite number; cannot be written", field=where, value=value)
        return value
    if isinstance(value, tuple):
        return {_TUPLE_TAG: [_encode(v, where) for v in value]}
    if isinstance(value, list):
        return [_encode(v, where) for v in value]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise InputError("non-text key cannot be written as JSON", field=where, value=k)
            out[k] = _encode(v, f"{where}.{k}")
        return out
    raise InputError(
        f"value of type {type(value).__name__} cannot be written as JSON", field=where, value=value
    )


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, dict):
        if len(value) == 1 and _TUPLE_TAG in value and isinstance(value[_TUPLE_TAG], list):
            return tuple(_decode(v) for v in value[_TUPLE_TAG])
        return {k: _decode(v) for k, v in value.items()}
    return value


def _job_document(view: JobView, index: int) -> dict[str, Any]:
    doc = view.model_dump(mode="json", exclude={"spec": {"attrs"}})
    doc["spec"]["attrs"] = _encode(dict(view.spec.attrs), f"jobs[{index}].spec.attrs")
    return doc


def snapshot_document(sf: SnapshotFile) -> dict[str, Any]:
    """The JSON object of a snapshot file (see the module docstring)."""
    snap = sf.snapshot
    captured = datetime.fromtimestamp(sf.captured_at_s, UTC)
    return {
        "format": FORMAT,
        "version": VERSION,
        "captured_at_s": sf.captured_at_s,
        "captured_at": captured.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "source": sf.source,
        "slurm_version": sf.slurm_version,
        "partitions": list(sf.partitions),
        "notes": _encode(sf.notes, "notes"),
        "now_s": snap.now_s,
        "cluster": snap.cluster.model_dump(mode="json"),
        "free_gpus": {n: list(g) for n, g in snap.free_gpus.items()},
        "jobs": [_job_document(v, i) for i, v in enumerate(snap.jobs)],
    }


def write_snapshot(sf: SnapshotFile, path: str | os.PathLike[str]) -> Path:
    """Write ``sf`` as JSON (atomically: a temporary file renamed into place)."""
    p = Path(path)
    text = json.dumps(snapshot_document(sf), indent=1, ensure_ascii=False, allow_nan=False)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text + "\n", encoding="utf-8")
        os.replace(tmp, p)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(f"cannot write snapshot: {exc.strerror or exc}", source=str(p)) from None
    return p


# ------------------------------------------------------------------ decoding
def _validation_error(exc: ValidationError, source: str, prefix: str) -> InputError:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    where = f"{prefix}.{loc}" if loc else prefix
    return InputError(err["msg"].removeprefix("Value error, "), source=source, field=where,
                      value=err.get("input") if err["type"] != "missing" else None)


def _require(doc: dict[str, Any], key: str, kinds: type | tuple[type, ...], source: str) -> Any:
    if key not in doc:
        raise InputError("missing key", source=source, field=key)
    value = doc[key]
    is_bool = isinstance(value, bool) and bool not in _as_tuple(kinds)  # True is an int too
    if not isinstance(value, kinds) or is_bool:
        raise InputError("wrong type", source=source, field=key, value=_short(value))
    return value


def _as_tuple(kinds: type | tuple[type, ...]) -> tuple[type, ...]:
    return kinds if isinstance(kinds, tuple) else (kinds,)


def _short(value: Any, limit: int = 60) -> Any:
    text = repr(value)
    return value if len(text) <= limit else text[: limit - 3] + "..."


def snapshot_from_document(doc: Any, source: str = "<snapshot>") -> SnapshotFile:
    """Validate a snapshot file's JSON object.

    Raises:
        InputError: naming the file and the first bad key (e.g. ``jobs[3].placement``).
    """
    if not isinstance(doc, dict):
        raise InputError("not a snapshot file: the JSON is not an object", source=source)
    if doc.get("format") != FORMAT:
        raise InputError(f"not a snapshot file (expected format {FORMAT!r})", source=source,
                         field="format", value=_short(doc.get("format")))
    version = doc.get("version")
    if type(version) is not int or version != VERSION:
        raise InputError(f"unsupported snapshot version (this slurm-sched reads {VERSION})",
                         source=source, field="version", value=_short(version))
    captured = _require(doc, "captured_at_s", (int, float), source)
    now_s = _require(doc, "now_s", (int, float), source)
    for key, value in (("captured_at_s", captured), ("now_s", now_s)):
        if not math.isfinite(value):
            raise InputError("not a finite number", source=source, field=key, value=value)
    src = _require(doc, "source", str, source)
    version_text = doc.get("slurm_version")
    if version_text is not None and not isinstance(version_text, str):
        raise InputError("wrong type", source=source, field="slurm_version",
                         value=_short(version_text))
    partitions = _require(doc, "partitions", list, source)
    if not all(isinstance(p, str) for p in partitions):
        raise InputError("must be a list of names", source=source, field="partitions",
                         value=_short(partitions))
    notes = doc.get("notes") or {}
    if not isinstance(notes, dict):
        raise InputError("wrong type", source=source, field="notes", value=_short(notes))
    try:
        cluster = Cluster.model_validate(_require(doc, "cluster", dict, source))
    except ValidationError as exc:
        raise _validation_error(exc, source, "cluster") from None
    jobs = _jobs(_require(doc, "jobs", list, source), cluster, source)
    free = _free_gpus(_require(doc, "free_gpus", dict, source), cluster, jobs, source)
    snapshot = ClusterSnapshot(now_s=float(now_s), cluster=cluster, jobs=tuple(jobs),
                               known_free_gpus=free)
    return SnapshotFile(snapshot=snapshot, captured_at_s=float(captured), source=src,
                        slurm_version=version_text, partitions=tuple(partitions),
                        notes=_decode(notes))


def _jobs(raw: list[Any], cluster: Cluster, source: str) -> list[JobView]:
    jobs: list[JobView] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        where = f"jobs[{i}]"
        if not isinstance(item, dict):
            raise InputError("not an object", source=source, field=where, value=_short(item))
        spec = item.get("spec")
        if isinstance(spec, dict) and "attrs" in spec:
            item = {**item, "spec": {**spec, "attrs": _decode(spec["attrs"])}}
        try:
            view = JobView.model_validate(item)
        except ValidationError as exc:
            raise _validation_error(exc, source, where) from None
        if view.job_id in seen:
            raise InputError("duplicate job id", source=source, field=f"{where}.spec.job_id",
                             value=view.job_id)
        seen.add(view.job_id)
        _check_placement(view, cluster, source, where)
        jobs.append(view)
    return jobs


def _check_placement(view: JobView, cluster: Cluster, source: str, where: str) -> None:
    if view.state is JobState.COMPLETED:
        raise InputError("a snapshot holds unfinished jobs only", source=source,
                         field=f"{where}.state", value=view.state.value)
    if view.state is JobState.PENDING:
        if view.placement is not None:
            raise InputError("a pending job holds no GPUs", source=source,
                             field=f"{where}.placement", value=str(view.placement))
        return
    if view.placement is None:
        raise InputError(f"a {view.state.value} job needs a placement", source=source,
                         field=f"{where}.placement")
    missing = missing_gpu(cluster, view.placement)
    if missing is not None:
        raise InputError("no such GPU in the cluster", source=source,
                         field=f"{where}.placement", value=f"{missing[0]}:{missing[1]}")


def _free_gpus(raw: dict[str, Any], cluster: Cluster, jobs: Sequence[JobView],
               source: str) -> dict[str, tuple[int, ...]]:
    held = {s for v in jobs if v.placement is not None for s in v.placement.slots()}
    free: dict[str, tuple[int, ...]] = {}
    for node in cluster.nodes:
        gpus = raw.get(node.name, [])
        where = f"free_gpus.{node.name}"
        if not isinstance(gpus, list) or not all(type(g) is int for g in gpus):
            raise InputError("must be a list of GPU indices", source=source, field=where,
                             value=_short(gpus))
        for g in gpus:
            if not 0 <= g < node.num_gpus or (node.name, g) in held:
                raise InputError("not a free GPU of this node", source=source, field=where,
                                 value=g)
        free[node.name] = tuple(sorted(set(gpus)))
    unknown = sorted(set(raw) - set(cluster.by_name))
    if unknown:
        raise InputError("no such node in the cluster", source=source, field="free_gpus",
                         value=unknown[0])
    return free


def load_snapshot(path: str | os.PathLike[str]) -> SnapshotFile:
    """Read a snapshot file.

    Raises:
        InputError: one line naming the file and what is wrong with it.
    """
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("no such snapshot file", source=source) from None
    except OSError as exc:
        raise InputError(f"cannot read snapshot: {exc.strerror or exc}", source=source) from None
    except UnicodeDecodeError:
        raise InputError("not a snapshot file: not UTF-8 text", source=source) from None
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"not a snapshot file: not valid JSON ({detail})", source=source) from None
    return snapshot_from_document(doc, source)


# ------------------------------------------------------------------ live capture (read-only)
def capture_live(backend: SlurmBackend, source: str) -> SnapshotFile:
    """One ``snapshot()`` of a live backend, with its context (version, jobs in flight...).

    Build the backend with ``dry_run=True``: a fresh backend's snapshot would otherwise renew
    leases, hand jobs it cannot understand to Slurm and write ledgers; in dry-run mode those
    commands only reach ``notes["not_run"]``.
    """
    snap = backend.snapshot()
    captured = time.time()
    notes: dict[str, Any] = {
        "in_flight": sorted(backend.in_flight),
        "left_to_slurm": dict(sorted(backend.left_to_slurm.items())),
        "not_run": list(backend.dry_commands),
    }
    return SnapshotFile(
        snapshot=snap,
        captured_at_s=captured,
        source=source,
        slurm_version=str(backend.slurm_version()),
        partitions=tuple(sorted(backend.partitions)),
        notes=notes,
    )


def capture_recorded(
    jobs_path: str | os.PathLike[str],
    nodes_path: str | os.PathLike[str],
    *,
    partitions: Sequence[str] = (),
    settings_dir: str | os.PathLike[str] | None = None,
    now_s: float | None = None,
) -> SnapshotFile:
    """The snapshot the daemon would take of a cluster recorded in two JSON files.

    ``jobs_path`` holds ``squeue --json`` (``--states=all`` from 23.02 on, so that finished jobs
    are in), ``scontrol show job --json`` or slurmrestd's ``/jobs``; ``nodes_path`` holds
    ``sinfo --json``, ``scontrol show node --json`` or slurmrestd's ``/nodes``; of any supported
    release. The backend runs in dry-run mode over them (:class:`RecordedRunner`).
    ``partitions`` defaults to every partition of the recorded nodes; ``now_s`` to the newest
    time in the jobs (the recording was made no earlier).

    Raises:
        InputError: a file that is missing, not JSON, or of another release than the other.
        ClusterMisreadError: an unsupported release, a document without a field the scheduler
            needs, or no node in ``partitions``.
    """
    recorded = RecordedCluster.from_files(jobs_path, nodes_path)
    if not partitions:
        partitions = sorted({p for n in recorded.nodes for p in n.partitions})
    now = recorded.newest_time_s() if now_s is None else now_s
    with tempfile.TemporaryDirectory(prefix="slurm-sched-recorded-") as tmp:
        backend = SlurmBackend(
            RecordedRunner(recorded=recorded),
            partitions=list(partitions),
            settings_dir=settings_dir or tmp,
            clock=lambda: now,
            dry_run=True,
        )
        sf = capture_live(backend, f"recorded:{jobs_path},{nodes_path}")
    # the recording's time, not this run's; and no command of a recorded cluster is "not run"
    return replace(sf, captured_at_s=now, notes={**sf.notes, "not_run": []})


# ------------------------------------------------------------------ offline replay
@dataclass
class ReplayResult:
    """A replay run: the metrics of the continuation and the records they come from."""

    metrics: RunMetrics
    completed: list[CompletedJob]
    stats: ControllerStats
    blocked_gpus: tuple[tuple[str, int], ...]
    #: suspended jobs the replay resumed because the policy never did (see simulate_from)
    resumed_jobs: tuple[str, ...] = ()


def simulate_from(
    snapshot: ClusterSnapshot,
    policy: Policy,
    *,
    restart_overhead_s: float = 30.0,
    progress_model: ProgressModel | str | None = None,
) -> ReplayResult:
    """Continue ``snapshot`` offline under ``policy`` until every job has finished.

    The simulated GPUs hold up to the policy's sharing capacity, or more where the snapshot
    already shows more jobs on one GPU. Metrics: JCT and queueing time run from each job's
    submission (what happened before the
    snapshot counts as the snapshot recorded it); makespan and GPU utilisation cover the replay
    only, from the snapshot time to the last completion.

    A job the snapshot shows suspended stays suspended until the policy resumes it; if the
    policy never does (most policies never suspend) and nothing else can happen, the replay
    resumes it (listed in ``resumed_jobs``).

    Raises:
        SimulationStalledError: jobs that can never start (e.g. too big once the unavailable
            GPUs are taken out).
    """
    if progress_model is None:
        progress_model = policy.progress_model or "identity"
    if isinstance(progress_model, str):
        progress_model = perf_registry.create(progress_model)
    # jobs already sharing a GPU (gres/shard on Slurm) stay there, whatever the policy does
    shared = max((len(h) for h in snapshot.occupancy.values()), default=1)
    backend = SimulatedBackend.from_state(snapshot, progress=progress_model,
                                          restart_overhead_s=restart_overhead_s,
                                          max_jobs_per_gpu=max(1, policy.max_jobs_per_gpu, shared))
    start_s = backend.now_s
    controller = Controller(backend, policy, SimulatedClock(backend))
    resumed: list[str] = []
    while True:
        try:
            stats = controller.run()
            break
        except SimulationStalledError:
            # A job suspended in the snapshot by someone else (another policy, an admin) that
            # this policy never resumes would hold its GPUs for ever: resume it once nothing
            # else can happen. Any other stall is the policy's and is raised.
            suspended = [j.job_id for j in backend.snapshot().suspended]
            if not suspended:
                raise
            backend.apply([Resume(job_id=j, reason="replay: resumed, nothing else can run")
                           for j in suspended])
            resumed.extend(suspended)
    completed = backend.completed()
    metrics = compute_metrics(policy.name, completed, total_gpus=snapshot.cluster.total_gpus,
                              busy_gpu_s=backend.busy_gpu_s, rejected_jobs=len(backend.rejected))
    if completed:
        window = max(c.finish_s for c in completed) - start_s
        util = backend.busy_gpu_s / (snapshot.cluster.total_gpus * window) if window > 0 else 0.0
        metrics = metrics.model_copy(update={"makespan_s": window, "gpu_util": util})
    return ReplayResult(metrics, completed, stats, backend.blocked_gpus, tuple(resumed))
