"""Slurm job and node states as enums, read from every form Slurm 22.05-25.11 prints.

Job state (``job_state``):

- 22.05-23.02: one string, Slurm's ``job_state_string()``: a flag wins over the base state
  (a completing job prints ``COMPLETING``, a job being requeued ``REQUEUED``);
- 23.11 on: a list, the base state first, then the flags (``["PENDING", "REQUEUED"]``,
  ``["COMPLETED", "COMPLETING"]``).

:func:`job_state` reads both into a :class:`JobStatus`: ``state`` is what 22.05 would print
(the same precedence), ``base`` the base state and ``flags`` every flag, so code written against
one form reads the other the same way.

Node state:

- 22.05: ``"state": "idle"`` (lower case; ``"drained"``/``"draining"`` stand for a drain flag
  on an idle/busy node) plus ``"state_flags": ["DRAIN", ...]``;
- 23.02 on: ``"state": ["IDLE", "DRAIN"]`` (base first, then flags, upper case); ``sinfo``'s
  node groups carry it under ``node.state``.

:class:`NodeStatus` says whether a new job can start on the node (:attr:`NodeStatus.available`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class SlurmJobState(StrEnum):
    """A Slurm job state or state flag (the upper-case names Slurm prints)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUSPENDED = "SUSPENDED"
    COMPLETED = "COMPLETED"
    CANCELLED = "CANCELLED"
    FAILED = "FAILED"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"
    PREEMPTED = "PREEMPTED"
    BOOT_FAIL = "BOOT_FAIL"
    DEADLINE = "DEADLINE"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    # flags (22.05 prints the first one set, in this order, instead of the base state)
    COMPLETING = "COMPLETING"
    STAGE_OUT = "STAGE_OUT"
    CONFIGURING = "CONFIGURING"
    RESIZING = "RESIZING"
    REQUEUED = "REQUEUED"
    REQUEUE_FED = "REQUEUE_FED"
    REQUEUE_HOLD = "REQUEUE_HOLD"
    SPECIAL_EXIT = "SPECIAL_EXIT"
    STOPPED = "STOPPED"
    REVOKED = "REVOKED"
    RESV_DEL_HOLD = "RESV_DEL_HOLD"
    SIGNALING = "SIGNALING"
    RECONFIG_FAIL = "RECONFIG_FAIL"
    POWER_UP_NODE = "POWER_UP_NODE"
    LAUNCH_FAILED = "LAUNCH_FAILED"
    UPDATE_DB = "UPDATE_DB"
    UNKNOWN = "UNKNOWN"


BASE_JOB_STATES = frozenset(
    {
        SlurmJobState.PENDING,
        SlurmJobState.RUNNING,
        SlurmJobState.SUSPENDED,
        SlurmJobState.COMPLETED,
        SlurmJobState.CANCELLED,
        SlurmJobState.FAILED,
        SlurmJobState.TIMEOUT,
        SlurmJobState.NODE_FAIL,
        SlurmJobState.PREEMPTED,
        SlurmJobState.BOOT_FAIL,
        SlurmJobState.DEADLINE,
        SlurmJobState.OUT_OF_MEMORY,
    }
)
#: The flags that 22.05's single-string form prints instead of the base state, first wins.
_DISPLAY_FLAGS = (
    SlurmJobState.COMPLETING,
    SlurmJobState.STAGE_OUT,
    SlurmJobState.CONFIGURING,
    SlurmJobState.RESIZING,
    SlurmJobState.REQUEUED,
    SlurmJobState.REQUEUE_FED,
    SlurmJobState.REQUEUE_HOLD,
    SlurmJobState.SPECIAL_EXIT,
    SlurmJobState.STOPPED,
    SlurmJobState.REVOKED,
    SlurmJobState.RESV_DEL_HOLD,
    SlurmJobState.SIGNALING,
    SlurmJobState.RECONFIG_FAIL,
    SlurmJobState.POWER_UP_NODE,
    SlurmJobState.LAUNCH_FAILED,
)
#: Job states after which a job never runs again: every base state but the three of a live
#: job, and the two flags 22.05 prints for a finished job.
FINAL_JOB_STATES = (
    BASE_JOB_STATES - {SlurmJobState.PENDING, SlurmJobState.RUNNING, SlurmJobState.SUSPENDED}
) | {SlurmJobState.SPECIAL_EXIT, SlurmJobState.REVOKED}
#: The base state behind a flag that 22.05 prints instead of it (requeue phases: pending;
#: configuring: running); any other flag hides an unknown base state.
_BASE_BEHIND_FLAG = {
    SlurmJobState.REQUEUED: SlurmJobState.PENDING,
    SlurmJobState.REQUEUE_FED: SlurmJobState.PENDING,
    SlurmJobState.REQUEUE_HOLD: SlurmJobState.PENDING,
    SlurmJobState.CONFIGURING: SlurmJobState.RUNNING,
}


@dataclass(frozen=True)
class JobStatus:
    """A job's state: what 22.05 prints (``state``), the base state and the flags."""

    state: SlurmJobState
    base: SlurmJobState
    flags: frozenset[SlurmJobState] = frozenset()


def _job_name(text: str) -> SlurmJobState:
    try:
        return SlurmJobState(text.strip().upper())
    except ValueError:
        return SlurmJobState.UNKNOWN


def job_state(value: object) -> JobStatus:
    """Read ``job_state`` in either form (string, or list of base state and flags).

    Raises:
        ValueError: the value is neither a string nor a list of strings, or it is empty.
    """
    if isinstance(value, str):
        names = [value]
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        names = list(value)
    else:
        raise ValueError(f"job_state must be a string or a list of strings, got {value!r}")
    if not names or not any(n.strip() for n in names):
        raise ValueError("job_state is empty")
    states = [_job_name(n) for n in names if n.strip()]
    bases = [s for s in states if s in BASE_JOB_STATES]
    flags = frozenset(s for s in states if s not in BASE_JOB_STATES)
    display = next((f for f in _DISPLAY_FLAGS if f in flags), None)
    if bases:
        base = bases[0]
    elif display is not None:
        # 22.05's one string: the base state hides behind the flag
        base = _BASE_BEHIND_FLAG.get(display, SlurmJobState.UNKNOWN)
    else:
        base = states[0]
    return JobStatus(state=display or base, base=base, flags=flags)


class SlurmNodeState(StrEnum):
    """A node's base state."""

    IDLE = "IDLE"
    MIXED = "MIXED"
    ALLOCATED = "ALLOCATED"
    DOWN = "DOWN"
    ERROR = "ERROR"
    FUTURE = "FUTURE"
    UNKNOWN = "UNKNOWN"


#: Base states on which no job can start.
UNAVAILABLE_NODE_STATES = frozenset(
    {SlurmNodeState.DOWN, SlurmNodeState.ERROR, SlurmNodeState.FUTURE, SlurmNodeState.UNKNOWN}
)
#: Node flags under which no new job can start on the node.
UNAVAILABLE_NODE_FLAGS = frozenset(
    {
        "DRAIN",
        "DRAINING",
        "DRAINED",
        "FAIL",
        "FAILING",
        "MAINTENANCE",
        "REBOOT_REQUESTED",
        "REBOOT_ISSUED",
        "POWERED_DOWN",
        "POWER_DOWN",
        "POWERING_DOWN",
        "POWERING_UP",
        "NOT_RESPONDING",
        "INVALID_REG",
        "INVALID",
        "FUTURE",
        "BLOCKED",
    }
)
#: 22.05's lower-case names that are not base states: (base, flag) they stand for.
_COMPOSITE_NODE_STATES = {
    "DRAINED": (SlurmNodeState.IDLE, "DRAIN"),
    "DRAINING": (SlurmNodeState.MIXED, "DRAIN"),
    "FAIL": (SlurmNodeState.ALLOCATED, "FAIL"),
    "FAILING": (SlurmNodeState.ALLOCATED, "FAIL"),
    "MAINT": (SlurmNodeState.IDLE, "MAINTENANCE"),
    "REBOOT": (SlurmNodeState.IDLE, "REBOOT_REQUESTED"),
    "POWER_DOWN": (SlurmNodeState.IDLE, "POWER_DOWN"),
    "INVAL": (SlurmNodeState.UNKNOWN, "INVALID_REG"),
    "ALLOC": (SlurmNodeState.ALLOCATED, ""),
}


@dataclass(frozen=True)
class NodeStatus:
    """A node's base state and flags (upper case)."""

    state: SlurmNodeState
    flags: tuple[str, ...] = ()

    @property
    def available(self) -> bool:
        """Whether a new job can start here (not down, drained, draining, powered down...)."""
        if self.state in UNAVAILABLE_NODE_STATES:
            return False
        return not any(f in UNAVAILABLE_NODE_FLAGS for f in self.flags)

    def __str__(self) -> str:
        return "+".join([self.state.value, *self.flags])


def node_state(value: object, flags: Iterable[object] = ()) -> NodeStatus:
    """Read a node state: ``"idle"`` plus ``state_flags`` (22.05), or ``["IDLE", "DRAIN"]``.

    Raises:
        ValueError: the value is neither a string nor a list of strings.
    """
    if isinstance(value, str):
        names = [p for p in value.split("+") if p]
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        names = list(value)
    else:
        raise ValueError(f"node state must be a string or a list of strings, got {value!r}")
    base: SlurmNodeState | None = None
    out: list[str] = []
    for raw in [*names, *(str(f) for f in flags)]:
        name = raw.strip().upper().rstrip("*~#!%$@^-")
        if not name:
            continue
        if base is None and name in SlurmNodeState.__members__:
            base = SlurmNodeState(name)
            continue
        if base is None and name in _COMPOSITE_NODE_STATES:
            base, flag = _COMPOSITE_NODE_STATES[name]
            name = flag
            if not name:
                continue
        if name not in out:
            out.append(name)
    # sinfo's text suffix ``*`` on a state name (``idle*``) means not responding
    if any(n.strip().endswith("*") for n in names) and "NOT_RESPONDING" not in out:
        out.append("NOT_RESPONDING")
    return NodeStatus(base or SlurmNodeState.UNKNOWN, tuple(out))
