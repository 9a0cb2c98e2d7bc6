"""The state the parts of :class:`~slurm_sched.slurm.backend.SlurmBackend` share.

Contract: one :class:`BackendState` per backend, created by the backend and passed to every part
(``query``, ``view``, ``execute``, ``leases``, ``intents``, ``ledgers``, ``validate``,
``journal``, ``apply``). It holds the backend's settings, its public records (``stats``,
``mismatches``, ``left_to_slurm``...) and everything the parts read and write between calls
(Slurm's last job list, the current view, the intents, the ledgers). Parts keep no state of
their own beyond what they were constructed with; they never reach into each other's fields,
only into this object. Nothing here runs a command.

Also the small vocabulary every part uses: GPU slots, the foreign holder, the groups of Slurm
job states, the backend's statistics and placement mismatches, and its logger.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from slurm_sched.model import (
    ActionResult,
    Cluster,
    ClusterSnapshot,
    CompletedJob,
    JobSettings,
    JobView,
    Placement,
)
from slurm_sched.protocol.settings_file import Ledger, Progress, SettingsStore
from slurm_sched.slurm.lease import Lease
from slurm_sched.slurm.parse import SlurmJob, SlurmNode
from slurm_sched.slurm.runner import CommandRunner
from slurm_sched.slurm.states import SlurmJobState
from slurm_sched.slurm.translate import ShardConfig
from slurm_sched.slurm.version import SlurmVersion

if TYPE_CHECKING:
    from slurm_sched.slurm.intents import Intent

#: Every part logs under the backend's one logger name, as before the backend was split (log
#: lines carry the name; operators filter on it)
log = logging.getLogger("slurm_sched.slurm.backend")

Slot = tuple[str, int]
FOREIGN = "<foreign>"

#: notices kept for a user of the backend that does not take them (the daemon takes them every
#: cycle)
MAX_NOTICES = 10_000

RUNNING_STATES = frozenset({SlurmJobState.RUNNING, SlurmJobState.CONFIGURING})
PENDING_STATES = frozenset(
    {
        SlurmJobState.PENDING,
        SlurmJobState.REQUEUED,
        SlurmJobState.REQUEUE_HOLD,
        SlurmJobState.REQUEUE_FED,
    }
)


@dataclass(frozen=True)
class Mismatch:
    """Slurm placed a job differently from what the policy asked (GPU indices or per-node split)."""

    job_id: str
    asked: Placement
    actual: Placement
    at_s: float


@dataclass
class BackendStats:
    snapshots: int = 0
    squeue_calls: int = 0
    squeue_s: float = 0.0
    apply_calls: int = 0
    commands: int = 0
    batches: int = 0
    start_timeouts: int = 0
    #: starts Slurm requeued after the go because the launch failed
    launch_failures: int = 0
    lease_renewals: int = 0
    lease_failures: int = 0
    released_held: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)


@dataclass(eq=False)
class BackendState:
    """Settings and mutable state of one backend (see the module docstring)."""

    # ---- settings (see SlurmBackend's arguments); tests may tune the intervals
    runner: CommandRunner
    partitions: frozenset[str]
    store: SettingsStore
    lease: Lease | None
    max_jobs_per_gpu: int
    sinfo_refresh_s: float
    start_timeout_s: float
    min_query_interval_s: float
    clock: Callable[[], float]
    dry_run: bool
    # ---- public records
    stats: BackendStats = field(default_factory=BackendStats)
    #: placements Slurm chose differently from the policy (newest last)
    mismatches: list[Mismatch] = field(default_factory=list)
    #: per result of the last ``apply``: the command lines of its translation (after-requeue
    #: stages included; empty when the action was rejected before any command)
    last_commands: list[tuple[str, ...]] = field(default_factory=list)
    #: when each job's lease was last renewed by this backend (epoch seconds)
    renewed_at: dict[str, float] = field(default_factory=dict)
    #: jobs released to Slurm unmanaged, with the reason (never dropped silently)
    left_to_slurm: dict[str, str] = field(default_factory=dict)
    #: GPUs Slurm counts as used that no job holds, confirmed by two fresh looks (a Slurm
    #: 22.05.8 accounting leak after a slurmctld restart); not offered to the policy
    phantom_gpus: frozenset[Slot] = frozenset()
    #: what the backend noticed Slurm or an operator change and how it reacted, oldest first:
    #: ``(event, fields)``, taken by :meth:`SlurmBackend.take_notices` (the decision log)
    notices: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    #: managed jobs an operator holds (``scontrol hold``), as of the last fresh squeue
    admin_held: set[str] = field(default_factory=set)
    #: each unfinished managed job's time limit as last seen (None: no limit)
    time_limits: dict[str, float | None] = field(default_factory=dict)
    #: managed nodes on which no job can start (drained, down...): node -> its state
    unavailable_nodes: dict[str, str] = field(default_factory=dict)
    #: managed partitions whose jobs Slurm does not start (DOWN, INACTIVE): name -> state
    down_partitions: dict[str, str] = field(default_factory=dict)
    # ---- the read side (query.py)
    version: SlurmVersion | None = None
    nodes: list[SlurmNode] = field(default_factory=list)
    node_by_name: dict[str, SlurmNode] = field(default_factory=dict)  # the same, by name
    cluster: Cluster | None = None
    shards: ShardConfig = field(default_factory=ShardConfig)
    sinfo_at: float = -1e18
    jobs_cache: tuple[float, list[SlurmJob]] | None = None
    slurm_view_shards: bool = False  # the last sinfo is fresh and shard jobs are running
    phantom_seen: frozenset[Slot] = frozenset()
    sinfo_eager_until: float = 0.0  # read sinfo with every fresh squeue until then
    partitions_at: float = -1e18  # when the partition states were read (monotonic)
    # ---- the current view, rebuilt by snapshot() and updated by apply()
    slurm: dict[str, SlurmJob] = field(default_factory=dict)
    views: dict[str, JobView] = field(default_factory=dict)
    holders: dict[Slot, list[str]] = field(default_factory=dict)
    shard_use: dict[Slot, int] = field(default_factory=dict)
    exclusive: set[Slot] = field(default_factory=set)
    last: ClusterSnapshot | None = None
    # ---- in-flight work (intents.py)
    intents: dict[str, Intent] = field(default_factory=dict)
    #: job -> (when our requeue of it returned, the nodes of the run it killed)
    requeued: dict[str, tuple[float, frozenset[str]]] = field(default_factory=dict)
    #: job -> (when it was seen pending again, the nodes of the run slurmctld forgot in a crash)
    lost_starts: dict[str, tuple[float, frozenset[str]]] = field(default_factory=dict)
    # ---- ledgers and completions (ledgers.py)
    expected: set[str] = field(default_factory=set)
    ledgers: dict[str, Ledger] = field(default_factory=dict)
    settings: dict[str, JobSettings] = field(default_factory=dict)
    completed: list[CompletedJob] = field(default_factory=list)
    done: set[str] = field(default_factory=set)  # completed, or final before we first looked
    released: set[str] = field(default_factory=set)  # left to Slurm and released
    final_left: set[str] = field(default_factory=set)  # left to Slurm and finished since
    tracked: set[str] = field(default_factory=set)  # managed jobs seen unfinished
    first: bool = True
    progress_cache: dict[str, tuple[int, int, Progress | None]] = field(default_factory=dict)
    # ---- apply results by request id (apply is idempotent per request_id)
    results: dict[str, ActionResult] = field(default_factory=dict)

    def notice(self, event: str, **fields: Any) -> None:
        """Record what the backend noticed (see ``notices``); a user that never takes them
        keeps the newest :data:`MAX_NOTICES`."""
        self.notices.append((event, fields))
        if len(self.notices) > MAX_NOTICES:
            del self.notices[: len(self.notices) - MAX_NOTICES]

    def managed(self, job: SlurmJob) -> bool:
        """The job is in a managed partition."""
        return any(p in self.partitions for p in job.partition.split(","))

    def partition_down(self, job: SlurmJob) -> bool:
        """Every managed partition of the job is down or inactive: Slurm starts none of its
        jobs."""
        parts = [p for p in job.partition.split(",") if p in self.partitions]
        return bool(parts) and all(p in self.down_partitions for p in parts)

    def is_shard_job(self, jid: str) -> bool:
        job = self.slurm.get(jid)
        return job is not None and job.gpu_request.kind == "shard"
