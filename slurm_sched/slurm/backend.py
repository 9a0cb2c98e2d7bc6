"""The live Slurm cluster as a :class:`~slurm_sched.backend.ClusterBackend`.

Design (details, command table and the Slurm facts behind them, per release:
``docs/slurm-backend.md``):

- ``snapshot()`` runs the release's job query (``squeue --json``, ``--states=all`` from 23.02)
  and, every ``sinfo_refresh_s``, its node query (``sinfo --json`` on 22.05, ``scontrol show nodes
  --json`` from 23.02; ``query.py``), keeps only jobs of the managed partitions, and builds one
  :class:`JobView` per unfinished job. GPUs held by any other job (unmanaged partitions, jobs left
  to Slurm) are not free in ``known_free_gpus``. It also moves the backend's own in-flight work
  forward (this is the only place besides ``apply`` that runs commands): it re-pins jobs whose
  requeue has finished (Migrate/Reconfigure), takes back the start of jobs that a pin could not
  start within ``start_timeout_s`` (their begin time goes a lease ahead again), renews the
  fail-open lease of every pending managed job (below), and hands to Slurm (with a warning) jobs
  it cannot understand. GPUs that Slurm counts as used although no job holds them (an accounting
  leak of 22.05.8 after a slurmctld restart) are shown as foreign load (:attr:`phantom_gpus`).
- Fail-open lease (``slurm_sched/slurm/lease.py``): managed jobs are not held; the submit
  plugin sets their begin time a lease ahead, and every fresh snapshot pushes
  ``StartTime=now+lease_s`` on each pending managed job whose lease is due (one ``scontrol``
  batch). A Start is the pin, then the go ``StartTime=now``. Once nobody renews, Slurm starts
  the jobs.
- Slurm is eventually consistent: after a pin a job needs ~0.4-1 s to be RUNNING. Between
  ``apply`` and that moment the snapshot shows the job RUNNING on the placement asked for (an
  *intent*), so no policy books those GPUs twice; once Slurm reports the job, its real
  placement replaces the intent. Slurm picks GPU indices itself (lowest free first); when they
  differ from the policy's, the snapshot carries the real ones and the difference is logged and
  kept in :attr:`SlurmBackend.mismatches` (the action result stays ok: the job runs on the asked
  nodes with the asked number of GPUs, which is what an exclusive placement means).
- ``apply()`` checks every action against the backend's current view first (as the simulator
  does: state, GPU type, count, free GPUs), so "GPU already taken" comes back as data without
  touching Slurm, then runs the commands of all accepted actions stage by stage, each stage as
  one ``scontrol`` batch. It is idempotent per ``request_id`` and raises only
  :class:`~slurm_sched.errors.BackendUnavailableError`.
- Jobs the backend cannot understand (a bad hint that slipped past the submit plugin, GRES it
  does not know, no GPU at all) are *released to Slurm* unpinned (``StartTime=now``, plus
  ``release`` if held), logged with a warning and listed in :attr:`SlurmBackend.left_to_slurm`:
  never dropped silently, never held forever.
- ``dry_run=True`` (shadow mode): squeue/sinfo run for real, but every command that would change
  Slurm is only recorded (:attr:`SlurmBackend.dry_commands`), no file is written, and ``apply``
  leaves no trace in the next snapshot: it validates and translates, then forgets.

Parts (each module's docstring states its contract): :class:`SlurmBackend` keeps the public API
and composes them over one :class:`~slurm_sched.slurm.shared.BackendState`: ``query.py`` reads
Slurm, ``ledgers.py`` folds its jobs into the ledgers (moving ``intents.py`` forward and renewing
leases through ``leases.py``), ``view.py`` builds the snapshot; ``apply.py`` checks actions
(``validate.py``), reserves them in the view (``journal.py``) and runs their commands
(``execute.py``, the only place commands that change Slurm are run).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from slurm_sched.backend import ClusterBackend
from slurm_sched.errors import BackendUnavailableError, SlurmCommandError
from slurm_sched.model import Action, ActionResult, Cluster, ClusterSnapshot, CompletedJob
from slurm_sched.protocol.settings_file import SettingsStore
from slurm_sched.slurm.apply import Applier
from slurm_sched.slurm.document_errors import SlurmJsonError
from slurm_sched.slurm.execute import Executor
from slurm_sched.slurm.intents import UNSTART, Intent, Intents
from slurm_sched.slurm.journal import Journal
from slurm_sched.slurm.lease import Lease
from slurm_sched.slurm.leases import Leases
from slurm_sched.slurm.ledgers import Ledgers
from slurm_sched.slurm.parse import SlurmJob
from slurm_sched.slurm.query import EAGER_SINFO_S, SlurmQuery
from slurm_sched.slurm.runner import CommandRunner, DryRunRunner
from slurm_sched.slurm.shared import FOREIGN, BackendState, BackendStats, Mismatch, Slot
from slurm_sched.slurm.validate import REQUEUE_GRACE_S, SHARD_END_RISK_S, Validator
from slurm_sched.slurm.version import SlurmVersion
from slurm_sched.slurm.view import ViewBuilder

if TYPE_CHECKING:
    from slurm_sched.slurm.cluster import MiniCluster

__all__ = [
    "EAGER_SINFO_S",
    "FOREIGN",
    "REQUEUE_GRACE_S",
    "SHARD_END_RISK_S",
    "UNSTART",
    "BackendStats",
    "Intent",
    "Mismatch",
    "Slot",
    "SlurmBackend",
]

_T = TypeVar("_T")


class _Shared(Generic[_T]):
    """A backend attribute that lives in the state its parts share (read and written there)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> _Shared[_T]: ...
    @overload
    def __get__(self, obj: SlurmBackend, objtype: type | None = None) -> _T: ...
    def __get__(self, obj: SlurmBackend | None, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        return getattr(obj._state, self.name)

    def __set__(self, obj: SlurmBackend, value: _T) -> None:
        setattr(obj._state, self.name, value)


class SlurmBackend(ClusterBackend):
    """The live cluster behind the Slurm CLI.

    Args:
        runner: runs the Slurm commands (the process boundary; tests may pass a recorded fake).
        partitions: the partitions this scheduler manages; jobs elsewhere are foreign load.
        settings_dir: where per-job settings, progress reports and ledgers live.
        max_jobs_per_gpu: sharing capacity C of a GPU (1 = exclusive; >1 needs gres/shard).
        sinfo_refresh_s: how long the node list (``sinfo --json``) is cached (it is read again
            at once when a job is lost with its node, and with every squeue while shard
            jobs run: ``query.py``).
        start_timeout_s: a pinned job not RUNNING after this long gets its lease back (its GPUs
            were not free after all, e.g. taken by a job of another partition).
        min_query_interval_s: a snapshot taken sooner than this after the previous ``squeue``
            reuses its output (plus everything applied since). ``squeue --json`` costs 50-500 ms
            on a busy 2-core machine with a few hundred jobs, and the controller asks for a
            snapshot right after every ``apply``.
        expect_jobs: job ids after whose completion ``finished()`` returns True.
        clock: wall clock (epoch seconds), replaceable in tests.
        lease_s: the fail-open lease renewed on every pending managed job (None: no renewals,
            for a cluster whose submit plugin still holds jobs).
        dry_run: shadow mode (see the module docstring); the runner is wrapped in a
            :class:`~slurm_sched.slurm.runner.DryRunRunner`.
    """

    # settings and public records, kept in the shared state (slurm/shared.py)
    runner: _Shared[CommandRunner] = _Shared()
    partitions: _Shared[frozenset[str]] = _Shared()
    store: _Shared[SettingsStore] = _Shared()
    lease: _Shared[Lease | None] = _Shared()
    max_jobs_per_gpu: _Shared[int] = _Shared()
    sinfo_refresh_s: _Shared[float] = _Shared()
    start_timeout_s: _Shared[float] = _Shared()
    min_query_interval_s: _Shared[float] = _Shared()
    clock: _Shared[Callable[[], float]] = _Shared()
    dry_run: _Shared[bool] = _Shared()
    stats: _Shared[BackendStats] = _Shared()
    #: placements Slurm chose differently from the policy (newest last)
    mismatches: _Shared[list[Mismatch]] = _Shared()
    #: per result of the last ``apply``: the command lines of its translation (after-requeue
    #: stages included; empty when the action was rejected before any command)
    last_commands: _Shared[list[tuple[str, ...]]] = _Shared()
    #: when each job's lease was last renewed by this backend (epoch seconds)
    renewed_at: _Shared[dict[str, float]] = _Shared()
    #: jobs released to Slurm unmanaged, with the reason (never dropped silently)
    left_to_slurm: _Shared[dict[str, str]] = _Shared()
    #: GPUs Slurm counts as used that no job holds, confirmed by two fresh looks (a Slurm
    #: 22.05.8 accounting leak after a slurmctld restart); not offered to the policy
    phantom_gpus: _Shared[frozenset[Slot]] = _Shared()

    def __init__(
        self,
        runner: CommandRunner,
        *,
        partitions: Sequence[str] = ("sched",),
        settings_dir: str | os.PathLike[str],
        max_jobs_per_gpu: int = 1,
        sinfo_refresh_s: float = 30.0,
        start_timeout_s: float = 60.0,
        min_query_interval_s: float = 0.25,
        expect_jobs: Iterable[str] = (),
        clock: Callable[[], float] = time.time,
        lease_s: float | None = 120.0,
        dry_run: bool = False,
    ) -> None:
        if max_jobs_per_gpu < 1:
            raise ValueError(f"max_jobs_per_gpu must be >= 1, got {max_jobs_per_gpu}")
        if not partitions:
            raise ValueError("at least one managed partition is needed")
        if dry_run and not isinstance(runner, DryRunRunner):
            runner = DryRunRunner.wrapping(runner)
        self._state = BackendState(
            runner=runner,
            partitions=frozenset(partitions),
            store=SettingsStore(settings_dir, read_only=dry_run),
            lease=Lease(lease_s) if lease_s is not None else None,
            max_jobs_per_gpu=max_jobs_per_gpu,
            sinfo_refresh_s=sinfo_refresh_s,
            start_timeout_s=start_timeout_s,
            min_query_interval_s=min_query_interval_s,
            clock=clock,
            dry_run=dry_run,
            expected={str(j) for j in expect_jobs},
        )
        self._executor = Executor(self._state)
        self._query = SlurmQuery(self._state)
        self._view = ViewBuilder(self._state, self._query)
        self._leases = Leases(self._state, self._executor)
        self._validator = Validator(self._state, self._query)
        self._intents = Intents(self._state, self._executor)
        self._ledgers = Ledgers(
            self._state, self._query, self._executor, self._intents, self._leases
        )
        self._journal = Journal(self._state, self._ledgers)
        self._applier = Applier(
            self._state, self._validator, self._journal, self._executor, self._intents
        )

    @classmethod
    def for_mini_cluster(cls, cluster: MiniCluster, **kwargs: Any) -> SlurmBackend:
        """A backend for the local mini cluster (its env, managed partitions, settings dir)."""
        kwargs.setdefault("partitions", cluster.managed_partitions)
        kwargs.setdefault("settings_dir", Path(cluster.state_dir) / "job-settings")
        runner = kwargs.pop("runner", None) or CommandRunner(env=cluster.env)
        return cls(runner, **kwargs)

    # ------------------------------------------------------------------ public helpers
    def expect(self, job_ids: Iterable[str]) -> None:
        """Add job ids that ``finished()`` waits for."""
        self._state.expected.update(str(j) for j in job_ids)

    @property
    def cluster(self) -> Cluster:
        return self._query.cluster

    def slurm_version(self) -> SlurmVersion:
        """The Slurm release of the cluster, asked once (:meth:`SlurmQuery.slurm_version`)."""
        return self._query.slurm_version()

    @property
    def in_flight(self) -> frozenset[str]:
        """Jobs with work under way that Slurm has not confirmed yet (start, requeue...)."""
        return frozenset(self._state.intents)

    @property
    def slurm_jobs(self) -> dict[str, SlurmJob]:
        """Every job of the last ``squeue --json`` (all partitions), by id."""
        return dict(self._state.slurm)

    @property
    def last_snapshot(self) -> ClusterSnapshot | None:
        """The snapshot returned last (None before the first)."""
        return self._state.last

    @property
    def dry_commands(self) -> list[str]:
        """Dry-run mode: every command line that would have changed Slurm, oldest first."""
        runner = self.runner
        return list(runner.recorded) if isinstance(runner, DryRunRunner) else []

    def take_notices(self) -> list[tuple[str, dict[str, Any]]]:
        """What the backend noticed since the last call, oldest first, as ``(event, fields)``:
        ``node_unavailable`` / ``node_available`` (a node drained, down or back), ``admin_hold``
        / ``admin_release`` (an operator's ``scontrol hold`` seen or gone: such a job is not
        offered to the policy, keeps its lease and is never released by the scheduler),
        ``start_taken_back`` (a pinned job Slurm did not start, with Slurm's reason),
        ``start_lost`` (a job slurmctld forgot it had started, in a crash: kept off those
        nodes for ``LOST_START_GRACE_S``),
        ``time_limit`` (a job's limit changed in Slurm), ``job_end`` (a managed job reached a
        final state, cancelled ones included)."""
        out = self._state.notices
        self._state.notices = []
        return out

    @property
    def admin_held(self) -> frozenset[str]:
        """Managed jobs an operator holds (``scontrol hold``), as of the last fresh squeue."""
        return frozenset(self._state.admin_held)

    @property
    def unavailable_nodes(self) -> dict[str, str]:
        """Managed nodes no job can start on (drained, down...), with their state."""
        return dict(self._state.unavailable_nodes)

    def held_jobs(self) -> list[str]:
        """Managed jobs that Slurm shows held, as of the last snapshot (:class:`Leases`)."""
        return self._leases.held_jobs()

    def pending_jobs(self) -> list[str]:
        """Managed jobs pending in Slurm, not held, with no work in flight (:class:`Leases`)."""
        return self._leases.pending_jobs()

    def renew_leases(self, job_ids: Iterable[str]) -> dict[str, str | None]:
        """Give each job a fresh lease now, in one batch; the error per job (None = renewed).
        Raises only BackendUnavailableError (ValueError without a lease)."""
        return self._leases.renew_leases(job_ids)

    def release_held(self, job_ids: Iterable[str]) -> dict[str, str | None]:
        """Release held jobs under a fresh lease; the error per job (None = released).
        Raises only BackendUnavailableError."""
        return self._leases.release_held(job_ids)

    # ------------------------------------------------------------------ ClusterBackend
    def finished(self) -> bool:
        if not self._state.expected:
            return False
        return self._state.expected <= (self._state.done | self._state.final_left)

    def completed(self) -> list[CompletedJob]:
        return list(self._state.completed)

    def snapshot(self) -> ClusterSnapshot:
        try:
            return self._snapshot()
        except BackendUnavailableError:
            # after an outage Slurm's GPU counts may be off (see query.py): look closer
            self._state.sinfo_eager_until = time.monotonic() + EAGER_SINFO_S
            raise

    def _snapshot(self) -> ClusterSnapshot:
        jobs, fresh = self._query.read()
        now = self.clock()
        self._ledgers.reconcile(jobs, now, fresh=fresh)
        snap = self._view.build(now)
        self._state.last = snap
        self.stats.snapshots += 1
        return snap

    def apply(self, actions: Sequence[Action]) -> list[ActionResult]:
        self.stats.apply_calls += 1
        if self._state.last is None:
            try:
                self.snapshot()
            except (SlurmCommandError, SlurmJsonError) as exc:  # apply raises only this one
                raise BackendUnavailableError(f"cannot read the cluster state: {exc}") from exc
        return self._applier.apply(actions)
