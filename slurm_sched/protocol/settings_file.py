"""Files shared between the scheduler and the job runtime, one directory per cluster.

For the mini cluster the directory is ``<state>/job-settings/``; a site points both the
scheduler and its jobs (``SLURM_SCHED_SETTINGS_DIR``) at a shared filesystem path.

``<dir>/<jobid>.json`` — written by the scheduler (:meth:`SettingsStore.write_settings`) before
it starts, restarts or reconfigures a job; read by the job runtime when it (re)starts::

    {"job_id": "42", "accumulation_steps": 1, "sub_batch_size": null, "plan": null,
     "group_id": null, "slot": null, "cpus": null, "mem_gb": null,
     "gpus_per_node": {"a100-1": 2}, "gpu_indices": {"a100-1": [0, 1]},
     "shares_with": [], "written_at": 1795367504.1}

``gpu_indices`` is what the policy asked for; Slurm picks the real devices (the job's
``CUDA_VISIBLE_DEVICES`` is authoritative).

The file also keeps, under ``"earlier"``, up to :data:`EARLIER_KEPT` earlier documents for other
node sets written since the job's submission (newest first, without their own ``"earlier"``).
A pending job whose earlier start was let go may be started by Slurm on the earlier nodes at any
moment before a new pin lands, or after a scheduler killed between writing the file and
pinning: whichever nodes the job starts on, the file holds the decision made for them. Readers
take the newest document for their nodes (:func:`settings_entry_for`).

``<dir>/<jobid>.progress.json`` — written by the job runtime after every iteration (or every few
seconds); read by the scheduler into ``JobView.work_done_s``::

    {"iterations_done": 120, "iteration_time_s": 0.52, "timestamp": 1795367600.0}

``<dir>/<jobid>.sched.json`` — the scheduler's own per-job ledger (spec as first parsed, first
start, run time of earlier runs), so that a restarted scheduler keeps a job's history across
Slurm requeues (Slurm 22.05 without slurmdbd forgets earlier runs).

Every write is atomic (temporary file in the same directory + ``os.replace``), so a reader never
sees half a file.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurm_sched.model import JobSettings, JobSpec, Placement

log = logging.getLogger(__name__)

SETTINGS_DIR_ENV = "SLURM_SCHED_SETTINGS_DIR"
#: earlier settings documents (other node sets) a settings file keeps besides the newest
EARLIER_KEPT = 4


@dataclass(frozen=True)
class Progress:
    """A job's last progress report."""

    iterations_done: int
    iteration_time_s: float | None
    timestamp_s: float


@dataclass(frozen=True)
class Ledger:
    """What the scheduler remembers about a job across requeues and its own restarts."""

    spec: JobSpec
    first_start_s: float | None = None
    earlier_runs_s: float = 0.0
    run_key: float = 0.0  # start time of the run counted last
    run_executed_s: float = 0.0  # executed time of that run, last seen
    moves: int = 0  # requeues for Migrate/Reconfigure (Slurm counts them as restarts)


def atomic_write_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, separators=(",", ":"), sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _read_json(path: Path) -> Any | None:
    try:
        with path.open() as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("unreadable %s: %s", path, exc)
        return None


class SettingsStore:
    """The settings / progress / ledger files of one cluster (see the module docstring)."""

    def __init__(self, directory: str | os.PathLike[str], *, read_only: bool = False) -> None:
        self.directory = Path(directory)
        #: shadow mode: reads work, writes are skipped (another scheduler may own the files)
        self.read_only = read_only

    def settings_path(self, job_id: str) -> Path:
        return self.directory / f"{job_id}.json"

    def progress_path(self, job_id: str) -> Path:
        return self.directory / f"{job_id}.progress.json"

    def ledger_path(self, job_id: str) -> Path:
        return self.directory / f"{job_id}.sched.json"

    # ------------------------------------------------------------------ settings (scheduler -> job)
    @staticmethod
    def settings_document(
        job_id: str,
        settings: JobSettings,
        placement: Placement | None,
        shares_with: tuple[str, ...] = (),
        now_s: float | None = None,
    ) -> dict[str, Any]:
        doc: dict[str, Any] = {"job_id": job_id, **settings.model_dump()}
        doc["gpus_per_node"] = (
            {p.node: len(p.gpus) for p in placement.parts} if placement is not None else {}
        )
        doc["gpu_indices"] = (
            {p.node: list(p.gpus) for p in placement.parts} if placement is not None else {}
        )
        doc["shares_with"] = list(shares_with)
        doc["written_at"] = time.time() if now_s is None else now_s
        return doc

    def write_settings(
        self,
        job_id: str,
        settings: JobSettings,
        placement: Placement | None,
        shares_with: tuple[str, ...] = (),
        *,
        since_s: float | None = None,
    ) -> Path:
        """Write the job's settings for ``placement`` as the newest document, keeping the
        earlier ones of other node sets (see the module docstring) written at or after
        ``since_s`` (the job's submission: older ones belong to an earlier job that had the
        same id)."""
        path = self.settings_path(job_id)
        if self.read_only:
            return path
        doc = self.settings_document(job_id, settings, placement, shares_with)
        earlier: list[dict[str, Any]] = []
        seen = {_node_set(doc)}
        for entry in settings_entries(self.read_settings(job_id)):
            nodes = _node_set(entry)
            written = entry.get("written_at")
            if since_s is not None and not (
                isinstance(written, int | float) and written >= since_s
            ):
                continue
            if nodes not in seen and len(earlier) < EARLIER_KEPT:
                seen.add(nodes)
                earlier.append(entry)
        if earlier:
            doc["earlier"] = earlier
        atomic_write_json(path, doc)
        return path

    def read_settings(self, job_id: str) -> dict[str, Any] | None:
        data = _read_json(self.settings_path(job_id))
        return data if isinstance(data, dict) else None

    # ------------------------------------------------------------------ progress (job -> scheduler)
    def write_progress(
        self, job_id: str, iterations_done: int, iteration_time_s: float | None = None
    ) -> None:
        atomic_write_json(
            self.progress_path(job_id),
            {
                "iterations_done": iterations_done,
                "iteration_time_s": iteration_time_s,
                "timestamp": time.time(),
            },
        )

    def read_progress(self, job_id: str) -> Progress | None:
        data = _read_json(self.progress_path(job_id))
        if not isinstance(data, dict):
            return None
        try:
            done = int(data["iterations_done"])
            it = data.get("iteration_time_s")
            it_s = float(it) if it is not None else None
            ts = float(data.get("timestamp") or 0.0)
        except (KeyError, TypeError, ValueError):
            log.warning("malformed progress report for job %s: %r", job_id, data)
            return None
        if done < 0:
            return None
        return Progress(done, it_s if it_s is not None and it_s > 0 else None, ts)

    # ------------------------------------------------------------------ ledger (scheduler only)
    def write_ledger(self, job_id: str, ledger: Ledger) -> None:
        if self.read_only:
            return
        atomic_write_json(
            self.ledger_path(job_id),
            {
                "spec": ledger.spec.model_dump(mode="json"),
                "first_start_s": ledger.first_start_s,
                "earlier_runs_s": ledger.earlier_runs_s,
                "run_key": ledger.run_key,
                "run_executed_s": ledger.run_executed_s,
                "moves": ledger.moves,
            },
        )

    def read_ledger(self, job_id: str) -> Ledger | None:
        data = _read_json(self.ledger_path(job_id))
        if not isinstance(data, dict):
            return None
        try:
            spec = JobSpec.model_validate(data["spec"])
            return Ledger(
                spec=spec,
                first_start_s=data.get("first_start_s"),
                earlier_runs_s=float(data.get("earlier_runs_s") or 0.0),
                run_key=float(data.get("run_key") or 0.0),
                run_executed_s=float(data.get("run_executed_s") or 0.0),
                moves=int(data.get("moves") or 0),
            )
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("ignoring malformed ledger of job %s: %s", job_id, exc)
            return None


def _node_set(doc: Mapping[str, Any]) -> frozenset[str]:
    nodes = doc.get("gpus_per_node")
    return frozenset(nodes) if isinstance(nodes, dict) else frozenset()


def settings_entries(doc: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The documents of a settings file, newest first, each without ``"earlier"``."""
    if not isinstance(doc, Mapping):
        return []
    newest = {k: v for k, v in doc.items() if k != "earlier"}
    earlier = doc.get("earlier")
    rest = [e for e in earlier if isinstance(e, dict)] if isinstance(earlier, list) else []
    return [newest, *({k: v for k, v in e.items() if k != "earlier"} for e in rest)]


def settings_entry_for(
    doc: Mapping[str, Any] | None,
    *,
    nodes: Iterable[str] = (),
    node_count: int | None = None,
) -> dict[str, Any] | None:
    """The newest document of a settings file made for a run on ``nodes`` (each of them in its
    ``gpus_per_node``) spanning ``node_count`` nodes; a document without a placement fits any
    run. None when no document fits: the run is not on nodes the scheduler chose."""
    wanted = set(nodes)
    for entry in settings_entries(doc):
        placed = _node_set(entry)
        if not placed:
            return entry
        if wanted <= placed and (node_count is None or node_count == len(placed)):
            return entry
    return None


def settings_from_document(doc: Mapping[str, Any]) -> JobSettings:
    """The :class:`JobSettings` fields of a settings document (other keys ignored).

    Raises:
        pydantic.ValidationError: a field's value is not valid.
    """
    return JobSettings.model_validate({k: doc[k] for k in JobSettings.model_fields if k in doc})


def work_done_s(spec: JobSpec, progress: Progress | None, executed_s: float) -> float:
    """Isolated seconds of work done: ``iterations_done x duration_s / iterations`` when the job
    reports progress and its hints give ``iterations``; else its executed time. Capped at the
    job's duration."""
    if progress is not None and spec.iterations:
        done = progress.iterations_done * spec.duration_s / spec.iterations
    else:
        done = executed_s
    return max(0.0, min(spec.duration_s, done))


def progress_rate(spec: JobSpec, progress: Progress | None) -> float:
    """Work seconds per wall second from the last iteration time (1.0 when unknown)."""
    if progress is None or progress.iteration_time_s is None or not spec.iterations:
        return 1.0
    per_iter = spec.duration_s / spec.iterations
    return max(1e-6, per_iter / progress.iteration_time_s)
