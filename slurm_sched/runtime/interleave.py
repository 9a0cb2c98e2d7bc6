"""Muri interleaving inside the jobs: members of a group on one node take turns per stage.

Muri (SIGCOMM'22, §4.1) co-locates up to k jobs on the same GPUs and shifts their iterations so
that, at any moment, each member uses a different resource: time is cut into *slots*; in slot j
the member at position q runs its stage ``(j + q) mod K`` (the paper's Eq. 3, K = number of
stages), and a barrier closes each slot (a member's next stage waits until every stage of the
current slot has finished). One group period is K slots, in which every member finishes one
iteration.

This module is the per-node coordinator that enforces that schedule across *processes of
different Slurm jobs*. It has no server: the coordinator is a small state file per group and
node, changed only under an ``flock`` and read lock-free (it is replaced atomically), so any
member may die at any time without taking the group down:

- ``<dir>/<node>/<group_id>.json``: ``{"slot": j, "members": {"<q>": {"pid", "arrived",
  "seen_at"}}}``; ``slot`` is the current global slot, ``arrived`` the last slot a member
  closed.
- The last member to close slot j advances ``slot`` to j + 1.
- Waiters drop members whose process is gone, and members that have not closed a slot for
  ``stall_timeout_s`` (a suspended job): the others go on without them; a dropped member that
  comes back re-joins at the current slot.

Deviations from the paper: Muri runs all members in one process and one CUDA context per GPU;
here members are separate jobs (Slurm allocates and accounts them separately), so turns are
taken through the state file instead of CUDA events. A member's stage names are whatever the
training loop annotates (default ``data``, ``compute``); a stage it never enters is an idle slot
for it.

The module does not import torch.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import socket
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_STAGES = ("data", "compute")
ENV_DIR = "SLURM_SCHED_INTERLEAVE_DIR"
_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def default_state_dir() -> Path:
    """``$SLURM_SCHED_INTERLEAVE_DIR``, else ``/dev/shm/slurm_sched-interleave`` (node-local,
    in memory), else ``<tmp>/slurm_sched-interleave``."""
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env)
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
    return base / "slurm_sched-interleave"


def node_name() -> str:
    """The Slurm node this process runs on (``SLURMD_NODENAME``), else the host name.

    Several mini-cluster "nodes" share one machine, so the node is part of the state path.
    """
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


@dataclass(frozen=True)
class StageRecord:
    """One stage a member ran: global slot, stage name, wall-clock start and end (time.time)."""

    slot: int
    stage: str
    start_s: float
    end_s: float


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


class StageInterleaver:
    """Turn-taking for one member (position ``slot``) of interleaving group ``group_id``.

    Use as a context manager (join on enter, leave on exit) and wrap each stage of an
    iteration in :meth:`stage`::

        with StageInterleaver("g1", slot=0) as turns:
            for step in range(n):
                with turns.stage("data"):
                    batch = load()
                with turns.stage("compute"):
                    train(batch)

    ``stages`` must be the same tuple, in iteration order, for every member of the group.
    Thread-unsafe: one interleaver per training process.
    """

    def __init__(
        self,
        group_id: str,
        slot: int,
        stages: Sequence[str] = DEFAULT_STAGES,
        *,
        state_dir: str | os.PathLike[str] | None = None,
        node: str | None = None,
        poll_s: float = 0.0005,
        stall_timeout_s: float = 60.0,
        record: bool = False,
    ) -> None:
        if not group_id:
            raise ValueError("group_id must be a non-empty string")
        if slot < 0:
            raise ValueError(f"slot must be >= 0, got {slot}")
        if not stages or len(set(stages)) != len(stages):
            raise ValueError(f"stages must be distinct names, got {list(stages)!r}")
        if slot >= len(stages):
            # Eq. 3 gives distinct stages per slot only for positions < K.
            raise ValueError(f"slot {slot} needs at least {slot + 1} stages, got {list(stages)!r}")
        self.group_id = group_id
        self.slot = slot
        self.stages = tuple(stages)
        self.poll_s = poll_s
        self.stall_timeout_s = stall_timeout_s
        root = Path(state_dir) if state_dir is not None else default_state_dir()
        self.dir = root / _SAFE.sub("_", node or node_name())
        base = _SAFE.sub("_", group_id)
        self.state_path = self.dir / f"{base}.json"
        self.lock_path = self.dir / f"{base}.lock"
        self._key = str(slot)
        self._pid = os.getpid()
        self._next: int | None = None  # the next global slot this member takes part in
        self.records: list[StageRecord] | None = [] if record else None
        self.waited_s = 0.0  # time spent waiting for turns (measurement)

    # ------------------------------------------------------------------ state file
    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        self.dir.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(PermissionError):
            # members may be jobs of different users
            os.chmod(self.dir, 0o1777)
            os.chmod(self.dir.parent, 0o1777)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            state = self._read() or {"slot": 0, "members": {}}
            yield state
            self._write(state)
        finally:
            os.close(fd)

    def _read(self) -> dict[str, Any] | None:
        try:
            return dict(json.loads(self.state_path.read_text()))
        except FileNotFoundError:
            return None
        except (ValueError, OSError) as exc:  # never half-written (rename), but be safe
            log.warning(
                "interleave state %s unreadable (%s); starting afresh", self.state_path, exc
            )
            return None

    def _write(self, state: dict[str, Any]) -> None:
        tmp = self.state_path.with_name(f".{self.state_path.name}.{self._pid}")
        tmp.write_text(json.dumps(state, sort_keys=True))
        with contextlib.suppress(PermissionError):
            os.chmod(tmp, 0o666)
        os.replace(tmp, self.state_path)

    @staticmethod
    def _maybe_advance(state: dict[str, Any]) -> None:
        """Close the current slot if every member has arrived at it."""
        slot = int(state["slot"])
        members = state["members"]
        while members and all(int(m["arrived"]) >= slot for m in members.values()):
            slot += 1
        if not members:
            return
        state["slot"] = slot

    def _prune(self, state: dict[str, Any], now_s: float) -> None:
        slot = int(state["slot"])
        for key, m in list(state["members"].items()):
            if key == self._key:
                continue
            dead = not _pid_alive(int(m["pid"]))
            idle_s = now_s - float(m["seen_at"])
            stalled = int(m["arrived"]) < slot and idle_s > self.stall_timeout_s
            if dead or stalled:
                log.warning(
                    "interleave group %s: dropping member %s (pid %s, %s)",
                    self.group_id,
                    key,
                    m["pid"],
                    "gone" if dead else "stalled",
                )
                del state["members"][key]
        self._maybe_advance(state)

    def _join_locked(self, state: dict[str, Any], now_s: float) -> None:
        other = state["members"].get(self._key)
        if other is not None and int(other["pid"]) != self._pid and _pid_alive(int(other["pid"])):
            raise RuntimeError(
                f"interleave group {self.group_id!r}: slot {self.slot} is already taken by "
                f"pid {other['pid']} on this node"
            )
        if not state["members"]:
            state["slot"] = int(state.get("slot", 0))
        slot = int(state["slot"])
        state["members"][self._key] = {"pid": self._pid, "arrived": slot - 1, "seen_at": now_s}
        self._next = slot

    # ------------------------------------------------------------------ public API
    def join(self) -> None:
        """Register this member; it takes part from the current slot on. Idempotent."""
        with self._locked() as state:
            self._prune(state, time.time())  # leftovers of dead members of an earlier run
            self._join_locked(state, time.time())

    def leave(self) -> None:
        """Deregister; the others no longer wait for this member. Idempotent."""
        with self._locked() as state:
            state["members"].pop(self._key, None)
            self._maybe_advance(state)
        self._next = None

    def __enter__(self) -> StageInterleaver:
        self.join()
        return self

    def __exit__(self, *exc: object) -> None:
        self.leave()

    def current_slot(self) -> int:
        state = self._read()
        return int(state["slot"]) if state else 0

    def members(self) -> dict[int, int]:
        """Position -> pid of the members now registered."""
        state = self._read() or {"members": {}}
        return {int(k): int(v["pid"]) for k, v in state["members"].items()}

    def _wait_for(self, slot: int) -> None:
        """Block until the group's current slot is ``slot`` (all earlier slots closed)."""
        t0 = time.monotonic()
        last_prune = t0
        delay = self.poll_s
        while True:
            state = self._read()
            current = int(state["slot"]) if state else slot
            me = state["members"].get(self._key) if state else None
            if me is None or int(me["pid"]) != self._pid:
                # dropped (we stalled, e.g. the job was suspended) or the file was reset: re-join
                with self._locked() as locked:
                    self._join_locked(locked, time.time())
                slot = self._next if self._next is not None else slot
                continue
            if current >= slot:
                self._next = current  # never behind: a prune may have skipped slots
                break
            now = time.monotonic()
            if now - last_prune > min(1.0, self.stall_timeout_s / 4):
                with self._locked() as locked:
                    self._prune(locked, time.time())
                last_prune = now
            time.sleep(delay)
            delay = min(delay * 1.5, 0.005)
        self.waited_s += time.monotonic() - t0

    def _arrive(self, slot: int) -> None:
        with self._locked() as state:
            me = state["members"].get(self._key)
            if me is None or int(me["pid"]) != self._pid:
                self._join_locked(state, time.time())
                return
            me["arrived"] = max(int(me["arrived"]), slot)
            me["seen_at"] = time.time()
            self._maybe_advance(state)
        self._next = slot + 1

    def stage_for(self, slot: int) -> str:
        """The stage this member runs in global slot ``slot`` (Eq. 3)."""
        return self.stages[(slot + self.slot) % len(self.stages)]

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[int]:
        """Run the body as this member's ``name`` stage in its next turn; yields the slot.

        Slots in which this member has another stage to run are closed idle (the member does
        not run two stages in one slot, and never skips its own order).
        """
        if name not in self.stages:
            raise ValueError(f"unknown stage {name!r}; this group's stages are {self.stages}")
        if self._next is None:
            self.join()
        while True:
            assert self._next is not None
            slot = self._next
            self._wait_for(slot)
            slot = self._next
            if self.stage_for(slot) == name:
                break
            self._arrive(slot)  # idle turn
        start = time.time()
        try:
            yield slot
        finally:
            end = time.time()
            if self.records is not None:
                self.records.append(StageRecord(slot, name, start, end))
            self._arrive(slot)


class NoInterleaving:
    """Same API as :class:`StageInterleaver` for jobs that are not in a group: no waiting."""

    group_id = None
    slot = None
    waited_s = 0.0

    def __init__(self, record: bool = False) -> None:
        self.records: list[StageRecord] | None = [] if record else None
        self._n = 0

    def __enter__(self) -> NoInterleaving:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def join(self) -> None:
        return None

    def leave(self) -> None:
        return None

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[int]:
        start = time.time()
        try:
            yield self._n
        finally:
            if self.records is not None:
                self.records.append(StageRecord(self._n, name, start, time.time()))
            self._n += 1


def overlap_s(a: Sequence[StageRecord], b: Sequence[StageRecord]) -> float:
    """Total seconds during which a stage of ``a`` and a stage of ``b`` ran at the same time."""
    total = 0.0
    for x in a:
        for y in b:
            total += max(0.0, min(x.end_s, y.end_s) - max(x.start_s, y.start_s))
    return total


def alternation(records: dict[str, Sequence[StageRecord]]) -> list[str]:
    """Owners of the given records in start-time order (e.g. ``['A', 'B', 'A', ...]``)."""
    merged = sorted((r.start_s, owner) for owner, rs in records.items() for r in rs)
    return [owner for _, owner in merged]
