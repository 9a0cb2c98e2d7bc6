"""Progress reports from the job to the scheduler.

The file and its three required keys are the Slurm backend's
(:class:`slurm_sched.protocol.settings_file.SettingsStore`, ``<dir>/<jobid>.progress.json``):
``iterations_done``, ``iteration_time_s`` (recent seconds per optimizer step), ``timestamp``.
The scheduler turns them into work done and rate, which A-SRPT's predictor, Rubick's model refit
and SJF-BSBF's iteration model learn from. The runtime adds keys the backend ignores::

    "iterations_total", "state" ("running" | "checkpointed" | "preempted" | "completed"),
    "world_size", "plan_requested", "plan_applied", "plan_notes", "global_batch_size",
    "sub_batch_sizes", "accumulation_steps", "samples_per_s", "restarts", "resumed_from",
    "interleave_group", "interleave_slot", "interleave_wait_s", "host", "pid"

Writes are atomic (the backend's ``atomic_write_json``) and throttled to one per
``every_s`` seconds, except forced ones (start, checkpoint, end).
"""

from __future__ import annotations

import collections
import os
import socket
import statistics
import time
from pathlib import Path
from typing import Any

from slurm_sched.protocol.settings_file import atomic_write_json


class IterationTimer:
    """Recent iteration time: the median of the last ``window`` steps, leaving out the first
    step after a (re)start (lazy initialisation, allocator warm-up) once others exist."""

    def __init__(self, window: int = 20) -> None:
        self.window = window
        self._times: collections.deque[float] = collections.deque(maxlen=window)
        self._first: float | None = None

    def add(self, seconds: float) -> None:
        if self._first is None:
            self._first = seconds
        else:
            self._times.append(seconds)

    def recent_s(self) -> float | None:
        if self._times:
            return statistics.median(self._times)
        return self._first


class ProgressReporter:
    """Writes ``path`` (None: reporting disabled, e.g. outside Slurm)."""

    def __init__(
        self, path: Path | None, *, every_s: float = 1.0, static: dict[str, Any] | None = None
    ) -> None:
        self.path = path
        self.every_s = every_s
        self.static: dict[str, Any] = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            **(static or {}),
        }
        self._last_s = float("-inf")
        self.reports = 0

    def report(
        self,
        iterations_done: int,
        iteration_time_s: float | None,
        *,
        state: str = "running",
        force: bool = False,
        **extra: Any,
    ) -> bool:
        """Write a report if due (or ``force``); returns whether it wrote."""
        if self.path is None:
            return False
        now = time.monotonic()
        if not force and now - self._last_s < self.every_s:
            return False
        doc = {
            **self.static,
            **extra,
            "iterations_done": int(iterations_done),
            "iteration_time_s": iteration_time_s,
            "timestamp": time.time(),
            "state": state,
        }
        atomic_write_json(self.path, doc)
        self._last_s = now
        self.reports += 1
        return True
