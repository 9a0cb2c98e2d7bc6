"""What the scheduler decided for *this* job, as the job sees it when it (re)starts.

Sources, first found wins (each one is read once, at start: the scheduler changes a job's
settings only by restarting it):

1. the per-job settings file the Slurm backend writes before it starts, restarts or
   reconfigures a job: ``<settings dir>/<SLURM_JOB_ID>.json``
   (:class:`slurm_sched.protocol.settings_file.SettingsStore`); the directory is
   ``$SLURM_SCHED_SETTINGS_DIR``, else ``$MINI_SLURM_STATE/job-settings`` (the mini cluster's).
   Of its documents, the newest made for this run's nodes counts (this node, ``SLURMD_NODENAME``,
   among them and ``SLURM_JOB_NUM_NODES`` of them); when none is, Slurm started the job where
   the scheduler did not place it, and the file is ignored with a warning;
2. the job's hints (``sbatch --comment``, :mod:`slurm_sched.protocol.hints`): from
   ``$SLURM_SCHED_HINTS`` if set, else read back from Slurm with ``squeue``; they give the plan
   the job was submitted with (``plans[0]``), its global batch and iteration count;
3. defaults: ``JobSettings()`` (no accumulation, plan ``dp``, no interleaving).

This module does not import torch.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from slurm_sched.errors import InputError
from slurm_sched.model import JobSettings
from slurm_sched.protocol.hints import JobHints, parse_hints
from slurm_sched.protocol.settings_file import (
    SETTINGS_DIR_ENV,
    SettingsStore,
    settings_entries,
    settings_entry_for,
    settings_from_document,
)

log = logging.getLogger(__name__)

HINTS_ENV = "SLURM_SCHED_HINTS"
MINI_CLUSTER_STATE_ENV = "MINI_SLURM_STATE"


def settings_dir(env: Mapping[str, str] | None = None) -> Path | None:
    """Where the backend's per-job files live, or None when this job has no scheduler."""
    env = os.environ if env is None else env
    if env.get(SETTINGS_DIR_ENV):
        return Path(env[SETTINGS_DIR_ENV])
    if env.get(MINI_CLUSTER_STATE_ENV):
        return Path(env[MINI_CLUSTER_STATE_ENV]) / "job-settings"
    return None


def job_id_from_env(env: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if env is None else env
    return env.get("SLURM_JOB_ID") or None


def read_comment(job_id: str, timeout_s: float = 10.0) -> str | None:
    """The job's comment as Slurm stores it (``squeue -h -j ID -o %k``), None if unavailable."""
    try:
        proc = subprocess.run(
            ["squeue", "-h", "-j", job_id, "-o", "%k"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.info("cannot read the comment of job %s: %s", job_id, exc)
        return None
    if proc.returncode != 0:
        log.info("squeue for job %s exited %d: %s", job_id, proc.returncode, proc.stderr.strip())
        return None
    text = proc.stdout.strip()
    return None if text in ("", "(null)") else text


@dataclass(frozen=True)
class JobContext:
    """The scheduler's decisions and the user's hints for one job."""

    job_id: str | None
    settings: JobSettings = field(default_factory=JobSettings)
    hints: JobHints = field(default_factory=JobHints)
    settings_source: str = "default"  # "file", "hints" or "default"
    settings_path: Path | None = None
    settings_doc: dict[str, Any] = field(default_factory=dict)
    directory: Path | None = None
    warnings: tuple[str, ...] = ()

    @property
    def plan(self) -> str | None:
        """The plan to run: the scheduler's choice, else the submitted one (``plans[0]``)."""
        if self.settings.plan:
            return self.settings.plan
        return self.hints.plans[0] if self.hints.plans else None

    @property
    def store(self) -> SettingsStore | None:
        return SettingsStore(self.directory) if self.directory is not None else None

    @property
    def progress_path(self) -> Path | None:
        if self.directory is None or self.job_id is None:
            return None
        return SettingsStore(self.directory).progress_path(self.job_id)

    def describe(self) -> str:
        s = self.settings
        parts = [f"settings from {self.settings_source}"]
        if self.settings_path is not None and self.settings_source == "file":
            parts[0] += f" {self.settings_path}"
        parts.append(f"plan={self.plan or 'dp'}")
        parts.append(f"accumulation_steps={s.accumulation_steps}")
        if s.sub_batch_size is not None:
            parts.append(f"sub_batch_size={s.sub_batch_size}")
        if s.group_id is not None:
            parts.append(f"group={s.group_id} slot={s.slot}")
        return ", ".join(parts)


def _entry_for_this_run(
    doc: dict[str, Any] | None, env: Mapping[str, str], path: Path, warnings: list[str]
) -> dict[str, Any] | None:
    """The settings document made for the nodes this run is on (see the module docstring)."""
    if doc is None:
        return None
    node = env.get("SLURMD_NODENAME")
    count = env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES")
    node_count = int(count) if count and count.isdigit() else None
    entry = settings_entry_for(doc, nodes=[node] if node else [], node_count=node_count)
    if entry is None:
        placed = [sorted(e.get("gpus_per_node") or {}) for e in settings_entries(doc)]
        warnings.append(
            f"{path}: no settings for this run on {node} ({node_count or '?'} node(s)); the "
            f"scheduler placed the job on {placed}; ignored"
        )
    return entry


def load_job_context(
    job_id: str | None = None,
    *,
    directory: str | os.PathLike[str] | None = None,
    hints: JobHints | str | None = None,
    env: Mapping[str, str] | None = None,
    query_slurm: bool = True,
) -> JobContext:
    """Resolve this job's settings (see the module docstring). Never raises for bad inputs from
    the scheduler or the comment: it warns and falls back to the next source."""
    env = os.environ if env is None else env
    job_id = job_id if job_id is not None else job_id_from_env(env)
    d = Path(directory) if directory is not None else settings_dir(env)
    warnings: list[str] = []

    parsed_hints = JobHints()
    if isinstance(hints, JobHints):
        parsed_hints = hints
    else:
        comment = hints if isinstance(hints, str) else env.get(HINTS_ENV)
        if comment is None and job_id is not None and query_slurm:
            comment = read_comment(job_id)
        if comment:
            try:
                parsed_hints = parse_hints(comment, source=f"job {job_id}")
            except InputError as exc:
                warnings.append(f"ignoring hints: {exc}")

    if d is not None and job_id is not None:
        store = SettingsStore(d)
        path = store.settings_path(job_id)
        doc = _entry_for_this_run(store.read_settings(job_id), env, path, warnings)
        if doc is not None:
            try:
                return JobContext(
                    job_id,
                    settings_from_document(doc),
                    parsed_hints,
                    "file",
                    path,
                    dict(doc),
                    d,
                    tuple(warnings),
                )
            except ValidationError as exc:
                first = exc.errors()[0]
                warnings.append(
                    f"{path}: field '{'.'.join(map(str, first['loc']))}' = "
                    f"{json.dumps(first.get('input'), default=str)}: {first['msg']}; ignored"
                )
    source = "hints" if parsed_hints != JobHints() else "default"
    return JobContext(job_id, JobSettings(), parsed_hints, source, None, {}, d, tuple(warnings))
