"""What the two ``sacct`` readers share: Slurm's job states, the GPU count of a TRES list, host
lists, hints in the comment, and the rules that decide which records are usable jobs.

A reader parses each record's cells into values (raising :class:`Malformed` for a cell it cannot
read) and hands them to :meth:`Collector.add`, which applies the set-aside rules of
``docs/accounting-input.md`` in this order: pending, requeued (earlier runs), still running,
cancelled before start, ended without starting, no GPU, duplicate job id.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from slurm_sched.errors import TraceFormatError
from slurm_sched.protocol.hints import HintError, parse_hints
from slurm_sched.traces.sacct_records import AccountedJob, Accounting

# Slurm's base job states (job_state_string), grouped by what they mean for a finished record.
#: The job ran and is over: usable when it started.
ENDED_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "TIMEOUT",
        "CANCELLED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "REVOKED",
    }
)
#: The job holds (or is giving back) its allocation.
ACTIVE_STATES = frozenset(
    {
        "RUNNING",
        "SUSPENDED",
        "COMPLETING",
        "CONFIGURING",
        "STOPPED",
        "RESIZING",
        "SIGNALING",
        "STAGE_OUT",
    }
)
#: The job waits to start (again).
WAITING_STATES = frozenset(
    {"PENDING", "REQUEUE_HOLD", "REQUEUE_FED", "SPECIAL_EXIT", "RESV_DEL_HOLD"}
)
#: An earlier run of a requeued job (``sacct --duplicates``); its last run is another record.
REQUEUED = "REQUEUED"
KNOWN_STATES = ENDED_STATES | ACTIVE_STATES | WAITING_STATES | {REQUEUED}

# Set-aside reasons, as they appear in Accounting.set_aside.
PENDING = "pending"
REQUEUED_EARLIER = "requeued (earlier runs)"
STILL_RUNNING = "still running"
CANCELLED_BEFORE_START = "cancelled before start"
ENDED_WITHOUT_START = "ended without starting"
NO_GPU = "no GPU"
DUPLICATE = "duplicate job id"
MALFORMED = "malformed"


class Malformed(Exception):
    """A cell a reader cannot read: the record is skipped with one warning."""

    def __init__(self, field: str, value: object, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.value = value
        self.message = message


def base_state(words: Iterable[str], field: str, raw: object) -> str:
    """The first known state among ``words`` (upper-cased); Slurm adds flags or ``by <uid>``
    after it. Raises :class:`Malformed` when none is known."""
    for word in words:
        state = word.upper()
        if state in KNOWN_STATES:
            return state
    raise Malformed(field, raw, "not a Slurm job state")


# ------------------------------------------------------------------------------------ GPUs


class GpuTres:
    """Accumulates the GPU entries of one TRES list: ``gres/gpu`` (the total) and
    ``gres/gpu:<type>`` (per type; when the total is present it already counts them)."""

    __slots__ = ("total", "typed")

    def __init__(self) -> None:
        self.total: int | None = None
        self.typed: dict[str, int] = {}

    def add(self, name: str, count: int) -> None:
        """``name`` is the part after ``gres/``: ``gpu`` or ``gpu:<type>``."""
        if name == "gpu":
            self.total = count
        else:
            kind = name[4:]
            self.typed[kind] = self.typed.get(kind, 0) + count

    def count(self) -> int | None:
        """GPUs listed, ``None`` when the list names no GPU at all."""
        if self.total is not None:
            return self.total
        if self.typed:
            return sum(self.typed.values())
        return None

    def kind(self) -> str | None:
        """The GPU type when exactly one type is listed with a count above zero."""
        kinds = [k for k, n in self.typed.items() if n > 0]
        return kinds[0] if len(kinds) == 1 else None


def is_gpu_name(name: str) -> bool:
    """``gpu`` or ``gpu:<type>``, not ``gpumem``/``gpuutil`` (other GRES some sites count)."""
    return name == "gpu" or (name.startswith("gpu:") and len(name) > 4)


#: (GPUs listed, ``None`` when the TRES list names none; the GPU type or ``None``)
Gpus = tuple[int | None, str | None]


def choose_gpus(alloc: Gpus, req: Gpus) -> tuple[int, str | None]:
    """GPUs from the allocation when it lists any, else from the request; the type only from
    the request: Slurm's AllocTRES names the type a job got (``gres/gpu:a100=2`` for a plain
    ``--gres=gpu:2`` that landed on A100s), which the job did not ask for and a replay must
    not require."""
    count = alloc[0] if alloc[0] is not None else req[0]
    return count or 0, req[1]


# ------------------------------------------------------------------------------ host lists

_NO_NODES = frozenset({"", "None assigned", "(null)", "None"})
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


@functools.lru_cache(maxsize=4096)
def expand_nodes(text: str, field: str) -> tuple[str, ...]:
    """Slurm's compressed host list (``gpu[01-03,07],login``) as host names, zero padding
    kept; ``None assigned`` and the empty string give ``()``. Cached: jobs share nodes."""
    text = text.strip()
    if text in _NO_NODES:
        return ()
    if "[" not in text:
        return tuple(text.split(","))
    out: list[str] = []
    for part in _split_outside_brackets(text, field):
        out.extend(_expand_one(part, text, field))
    return tuple(out)


def _split_outside_brackets(text: str, field: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    begin = 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise Malformed(field, text, "not a host list (unbalanced ']')")
        elif ch == "," and depth == 0:
            parts.append(text[begin:i])
            begin = i + 1
    if depth:
        raise Malformed(field, text, "not a host list (unbalanced '[')")
    parts.append(text[begin:])
    return parts


def _expand_one(name: str, whole: str, field: str) -> list[str]:
    """One host name with any number of ``[..]`` groups, expanded left to right."""
    open_at = name.find("[")
    if open_at < 0:
        return [name]
    close_at = name.find("]", open_at)
    prefix, body, rest = name[:open_at], name[open_at + 1 : close_at], name[close_at + 1 :]
    tails = _expand_one(rest, whole, field)
    out: list[str] = []
    for item in body.split(","):
        m = _RANGE.match(item)
        if m is None:
            raise Malformed(field, whole, f"not a host list (range {item!r})")
        lo_text, hi_text = m.group(1), m.group(2) or m.group(1)
        width = len(lo_text)
        lo, hi = int(lo_text), int(hi_text)
        if hi < lo or hi - lo > 100_000:
            raise Malformed(field, whole, f"not a host list (range {item!r})")
        for i in range(lo, hi + 1):
            head = f"{prefix}{i:0{width}d}"
            out.extend(head + tail for tail in tails)
    return out


# ----------------------------------------------------------------------------------- hints


def read_hints(comment: str | None, where: str) -> tuple[dict[str, object], str | None]:
    """Hints of a job comment and a warning when they cannot be read.

    Only a comment that starts with ``{`` is taken for hints (the format of
    ``protocol/hints.py``): any other comment is the user's free text, not a hint, and gives no
    warning. Returns the set hints without the schema version ``v`` (a new dict each call).
    """
    if not comment or not comment.lstrip().startswith("{"):
        return {}, None
    hints, problem = _parse_hints(comment)
    if problem is not None:
        return {}, f"{where}: {problem} (job kept without hints)"
    return dict(hints), None


@functools.lru_cache(maxsize=4096)
def _parse_hints(comment: str) -> tuple[dict[str, object], str | None]:
    """Cached: the tasks of an array, and resubmitted jobs, carry the same comment."""
    try:
        hints = parse_hints(comment)
    except HintError as exc:
        return {}, exc.one_line()
    data = hints.model_dump(exclude_none=True)
    data.pop("v", None)
    return data, None


# ------------------------------------------------------------------------------- collector


class Collector:
    """Applies the set-aside rules to the records of one file and builds the Accounting."""

    def __init__(self, source: str, fmt: str) -> None:
        self.source = source
        self.fmt = fmt
        self.jobs: list[AccountedJob] = []
        self.set_aside: dict[str, int] = {}
        self.warnings: list[str] = []
        self.steps_ignored = 0
        self.records = 0
        self._seen: set[str] = set()

    def skip(self, reason: str) -> None:
        """Count one record set aside for ``reason``."""
        self.set_aside[reason] = self.set_aside.get(reason, 0) + 1

    def malformed(self, where: str, exc: Malformed) -> None:
        """Skip one record with a warning naming where it is, the field and the value."""
        self.warnings.append(f"{where}: field '{exc.field}' = {exc.value!r}: {exc.message}")
        self.skip(MALFORMED)

    def add(
        self,
        job_id: str,
        user: str,
        account: str,
        partition: str,
        qos: str,
        state: str,
        exit_code: int | None,
        submit_s: float,
        eligible_s: float | None,
        start_s: float | None,
        end_s: float | None,
        time_limit_s: float | None,
        gpus: tuple[int, str | None],
        nodes: tuple[str, ...],
        hints: dict[str, object],
        line: int,
    ) -> None:
        """One parsed record: kept as a job, or counted under the first rule that sets it
        aside (pending, requeued, still running, cancelled before start, ended without
        starting, no GPU, duplicate job id)."""
        reason = self._reason(job_id, state, start_s, end_s, gpus[0])
        if reason is not None:
            self.skip(reason)
            return
        assert start_s is not None and end_s is not None  # _reason checked both
        self._seen.add(job_id)
        self.jobs.append(
            AccountedJob(
                job_id,
                user,
                account,
                partition,
                qos,
                state,
                exit_code,
                submit_s,
                submit_s if eligible_s is None else eligible_s,
                start_s,
                end_s,
                time_limit_s,
                gpus[0],
                gpus[1],
                nodes,
                hints,
                line,
            )
        )

    def _reason(
        self,
        job_id: str,
        state: str,
        start_s: float | None,
        end_s: float | None,
        num_gpus: int,
    ) -> str | None:
        if state in WAITING_STATES or "[" in job_id:
            return PENDING
        if state == REQUEUED:
            return REQUEUED_EARLIER
        if state in ACTIVE_STATES or end_s is None:
            return STILL_RUNNING
        if state == "CANCELLED" and (start_s is None or start_s >= end_s):
            return CANCELLED_BEFORE_START
        if start_s is None:
            return ENDED_WITHOUT_START
        if num_gpus <= 0:
            return NO_GPU
        if job_id in self._seen:
            return DUPLICATE
        return None

    def finish(
        self, data_parser: str | None = None, slurm_version: str | None = None
    ) -> Accounting:
        """The Accounting, jobs sorted by (submit time, job id).

        Raises :class:`TraceFormatError` naming the file and the counts when no job is usable.
        """
        if not self.jobs:
            counts = ", ".join(f"{k} {n}" for k, n in sorted(self.set_aside.items())) or "none"
            first = f"; first warning: {self.warnings[0]}" if self.warnings else ""
            steps = f", {self.steps_ignored} step line(s) ignored" if self.steps_ignored else ""
            # a site that does not account GPUs shows every job without one
            hint = (" (sacct shows GPUs only where slurm.conf's AccountingStorageTRES names "
                    "gres/gpu)" if self.set_aside.get(NO_GPU) else "")
            raise TraceFormatError(
                f"no usable job in {self.records} record(s){steps}; set aside: {counts}{first}"
                f"{hint}",
                source=self.source,
            )
        self.jobs.sort(key=lambda j: (j.submit_s, j.job_id))
        return Accounting(
            jobs=self.jobs,
            set_aside=dict(self.set_aside),
            warnings=self.warnings,
            source=self.source,
            format=self.fmt,
            data_parser=data_parser,
            slurm_version=slurm_version,
            steps_ignored=self.steps_ignored,
        )
