"""The read side of the Slurm backend: what Slurm says about jobs and nodes.

Contract: :class:`SlurmQuery` asks ``scontrol --version`` once and runs the job and node queries
of that release (``squeue --json`` and ``sinfo --json`` up to 22.05; ``squeue --json
--states=all`` and ``scontrol show nodes --json`` from 23.02) and, with the nodes, ``scontrol show
partition -o`` (the managed partitions' states), parses them (``parse.py``), keeps the nodes of
the managed partitions, the :class:`~slurm_sched.model.Cluster` and the shard
configuration in the shared state, reuses the job list for ``min_query_interval_s`` and the
node list for ``sinfo_refresh_s`` (but reads the nodes again right after a fresh job list that
shows a node lost under a job: :func:`lost_with_a_node`), and finds phantom GPUs (used in
Slurm's count, held by no job). It runs only read-only commands and never changes the
backend's view of jobs: the snapshot is built by ``view.py``, jobs are folded into the ledgers by
``ledgers.py``.

Raises :class:`~slurm_sched.errors.BackendUnavailableError` when slurmctld does not answer (a
failed query is confirmed with ``scontrol ping``), ``ClusterMisreadError`` for a garbled
document or no node in the managed partitions, ``SlurmCommandError`` / ``SlurmJsonError`` for
other failed queries, ``UnsupportedSlurmVersion`` for a release outside the supported range.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar

from slurm_sched.errors import BackendUnavailableError, ClusterMisreadError, SlurmCommandError
from slurm_sched.model import Cluster
from slurm_sched.slurm import parse
from slurm_sched.slurm.document_errors import SlurmJsonError
from slurm_sched.slurm.parse import SlurmJob, SlurmNode
from slurm_sched.slurm.shared import PENDING_STATES, BackendState, Slot, log
from slurm_sched.slurm.states import SlurmJobState
from slurm_sched.slurm.translate import ShardConfig
from slurm_sched.slurm.version import SlurmVersion, UnsupportedSlurmVersion, parse_release

T = TypeVar("T")

#: After slurmctld did not answer, read sinfo with every fresh squeue for this long (seconds):
#: its GPU accounting may have leaked (see SlurmQuery._update_phantoms)
EAGER_SINFO_S = 120.0
#: From this release on, ``squeue --json`` lists finished jobs only when asked (``--states=all``)
#: and ``sinfo --json`` groups alike nodes, so nodes are read from ``scontrol show nodes --json``
_GROUPED_SINFO = SlurmVersion(23, 2)


class SlurmQuery:
    """Reads Slurm (see the module docstring)."""

    def __init__(self, state: BackendState) -> None:
        self.state = state

    @property
    def cluster(self) -> Cluster:
        if self.state.cluster is None:
            self._refresh_nodes(force=True)
        assert self.state.cluster is not None
        return self.state.cluster

    def slurm_version(self) -> SlurmVersion:
        """The Slurm release of the cluster (``scontrol --version``, asked once).

        Raises:
            UnsupportedSlurmVersion: a release outside the supported range.
            SlurmCommandError: ``scontrol --version`` printed no version.
        """
        if self.state.version is None:
            res = self.state.runner.run(["scontrol", "--version"])
            version = parse_release(res.stdout)
            if version is None:
                raise SlurmCommandError(
                    ["scontrol", "--version"], res.rc, f"no Slurm version in {res.stdout!r}"
                )
            if not version.supported:
                raise UnsupportedSlurmVersion(version, "scontrol --version")
            self.state.version = version
        return self.state.version

    def read(self) -> tuple[list[SlurmJob], bool]:
        """Slurm's job list and whether it is fresh (not a reused ``squeue`` output): the nodes
        are read first when due (with every fresh squeue while eager), phantom GPUs are looked
        for on a fresh (sinfo, squeue) pair, and the nodes are read again while shard jobs run
        and when the fresh list shows a job lost with its node (:func:`lost_with_a_node`), so
        that a node Slurm has just marked DOWN is out of this very snapshot."""
        sinfo_before = self.state.sinfo_at
        cached = self.state.jobs_cache
        will_query = (
            cached is None or time.monotonic() - cached[0] >= self.state.min_query_interval_s
        )
        self._refresh_nodes(force=will_query and time.monotonic() < self.state.sinfo_eager_until)
        sinfo_first = self.state.sinfo_at != sinfo_before  # sinfo read just before this squeue
        before = self.state.jobs_cache
        jobs = self._query_jobs()
        fresh = self.state.jobs_cache is not before
        if fresh and sinfo_first:
            self._update_phantoms(jobs)
        shards_run = fresh and any(a.shards for j in jobs if j.holds_resources for a in j.alloc)
        lost = fresh and before is not None and lost_with_a_node(before[1], jobs)
        if fresh and before is not None:
            self._note_lost_starts(before[1], jobs)
        if shards_run or lost:
            # shards: Slurm 22.05.8 may lose count of shards in use; read its own per-node view.
            # lost: Slurm marks a node DOWN and ends or requeues its jobs in one step, so the
            # node list read now shows it DOWN; the cached one would offer its GPUs for up to
            # sinfo_refresh_s more (pins there would wait start_timeout_s for nothing)
            self._refresh_nodes(force=True)
        if fresh:
            self.state.slurm_view_shards = shards_run
        return jobs, fresh

    def _jobs_argv(self) -> list[str]:
        if self.slurm_version() < _GROUPED_SINFO:
            return ["squeue", "--json"]
        return ["squeue", "--json", "--states=all"]

    def _nodes_argv(self) -> list[str]:
        if self.slurm_version() < _GROUPED_SINFO:
            return ["sinfo", "--json"]
        return ["scontrol", "show", "nodes", "--json"]

    def _note_lost_starts(self, before: Sequence[SlurmJob], after: Sequence[SlurmJob]) -> None:
        """A job that ran and is pending again with the same restart count was not requeued
        (every requeue counts a restart): slurmctld crashed and lost its start. Its first run
        may still be ending on its nodes, where slurmd refuses a second copy and Slurm drains
        the node ("Duplicate jobid"); remember the nodes (``lost_starts``, see
        ``validate.LOST_START_GRACE_S``)."""
        ran = {j.job_id: j for j in before if j.holds_resources}
        for j in after:
            old = ran.get(j.job_id)
            if (old is None or j.state not in PENDING_STATES
                    or j.restart_cnt != old.restart_cnt or not self.state.managed(j)):
                continue
            nodes = frozenset(old.nodes)
            self.state.lost_starts[j.job_id] = (self.state.clock(), nodes)
            log.warning("job %s: running on %s before, pending now with no requeue: slurmctld "
                        "lost its start", j.job_id, ",".join(sorted(nodes)))
            self.state.notice("start_lost", job_id=j.job_id, nodes=sorted(nodes),
                              why="slurmctld lost the start (a crash); not placed on these "
                                  "nodes again while its first run may still end there")

    def _refresh_nodes(self, force: bool = False) -> None:
        if not force and time.monotonic() - self.state.sinfo_at < self.state.sinfo_refresh_s:
            return
        argv = self._nodes_argv()
        version, nodes = self._query_document(argv, parse.read_nodes)
        managed = [n for n in nodes if self.state.partitions.intersection(n.partitions)]
        if not managed:
            raise ClusterMisreadError(
                f"no node in the managed partitions {sorted(self.state.partitions)} "
                f"({' '.join(argv)}: {len(nodes)} node(s) in all, Slurm {version})"
            )
        self.state.nodes = managed
        self.state.node_by_name = {n.name: n for n in managed}
        self._note_availability(managed)
        if time.monotonic() - self.state.partitions_at >= self.state.sinfo_refresh_s:
            self._refresh_partitions()  # not with every eager node read: states change rarely
        cluster = parse.cluster_from_nodes(managed, self.state.partitions)
        if self.state.cluster is None or cluster != self.state.cluster:
            self.state.cluster = cluster
        # a node whose slurmd has not registered since a slurmctld restart shows shard:0; it
        # is unavailable meanwhile and must not turn sharing off for the whole cluster
        spg = min(
            (n.shards_per_gpu for n in managed if n.num_gpus and not n.shards_unregistered),
            default=0,
        )
        self.state.shards = ShardConfig(spg, self.state.max_jobs_per_gpu)
        if self.state.max_jobs_per_gpu > 1 and spg <= 2 * (self.state.max_jobs_per_gpu - 1):
            log.warning(
                "GPU sharing with %d jobs per GPU needs more than %d shards per GPU; the "
                "cluster has %d: started jobs may land on shared GPUs",
                self.state.max_jobs_per_gpu,
                2 * (self.state.max_jobs_per_gpu - 1),
                spg,
            )
        self.state.sinfo_at = time.monotonic()

    def _note_availability(self, nodes: list[SlurmNode]) -> None:
        """Notice nodes on which no job can start any more (drained, down...) and nodes that
        can run jobs again; the view offers no GPU of an unavailable node."""
        before = self.state.unavailable_nodes
        now = {n.name: n.availability for n in nodes if not n.available}
        for n in nodes:
            if n.name in now and n.name not in before:
                log.info("node %s is %s (%s): no new job is placed there", n.name,
                         now[n.name], n.reason or "no reason given")
                self.state.notice("node_unavailable", node=n.name, state=now[n.name],
                                  reason=n.reason, why="no new job is placed on it")
            elif n.name not in now and n.name in before:
                log.info("node %s is %s again: jobs may be placed there", n.name, n.status)
                self.state.notice("node_available", node=n.name, state=str(n.status))
        self.state.unavailable_nodes = now

    def _refresh_partitions(self) -> None:
        """The managed partitions' states (``scontrol show partition -o``, with the nodes):
        notice those set DOWN or INACTIVE (their pending jobs are not offered to the policy)
        and those up again. A failed query keeps what was known."""
        argv = ["scontrol", "show", "partition", "-o"]
        res = self.state.runner.run_unchecked(argv)
        if not res.ok:
            log.warning("%s failed (partition states kept): %s", " ".join(argv),
                        (res.stderr or res.stdout).strip()[:200])
            return
        self.state.partitions_at = time.monotonic()
        states = parse.read_partition_states(res.stdout)
        down = {
            p: s
            for p, s in states.items()
            if p in self.state.partitions and s in parse.UNAVAILABLE_PARTITION_STATES
        }
        before = self.state.down_partitions
        for p, s in sorted(down.items()):
            if before.get(p) != s:
                log.info("partition %s is %s: its pending jobs are not started", p, s)
                self.state.notice("partition_unavailable", partition=p, state=s,
                                  why="Slurm starts none of its jobs; they keep their lease")
        for p in sorted(set(before) - set(down)):
            log.info("partition %s is %s again", p, states.get(p, "unknown"))
            self.state.notice("partition_available", partition=p, state=states.get(p, "unknown"))
        self.state.down_partitions = down

    def _query_json(self, argv: list[str]) -> dict[str, Any]:
        res = self.state.runner.run(argv)
        try:
            data = json.loads(res.stdout)
        except ValueError as exc:
            raise SlurmCommandError(argv, res.rc, f"invalid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise SlurmCommandError(argv, res.rc, "JSON output is not an object")
        return data

    def _query_document(
        self, argv: list[str], read: Callable[[Any, str, SlurmVersion], tuple[SlurmVersion, T]]
    ) -> tuple[SlurmVersion, T]:
        """Run ``argv`` and read its JSON output with ``read`` (a :mod:`parse` reader, given the
        command line as the source and the cluster's release as the fallback); a document the
        reader rejects goes to :meth:`_json_failure`."""
        data = self._query_json(argv)
        try:
            return read(data, " ".join(argv), self.slurm_version())
        except SlurmJsonError as exc:
            self._json_failure(exc)

    def _json_failure(self, exc: SlurmJsonError) -> NoReturn:
        if isinstance(exc, ClusterMisreadError):  # a garbled document, not a controller down
            raise exc
        if not self.state.runner.controller_up():
            raise BackendUnavailableError(f"{exc} (scontrol ping: DOWN)") from exc
        raise exc

    def _query_jobs(self) -> list[SlurmJob]:
        t0 = time.monotonic()
        cached = self.state.jobs_cache
        if cached is not None and t0 - cached[0] < self.state.min_query_interval_s:
            return cached[1]
        argv = self._jobs_argv()
        _, jobs = self._query_document(argv, parse.read_jobs)
        t1 = time.monotonic()
        self.state.stats.squeue_s += t1 - t0
        self.state.stats.squeue_calls += 1
        self.state.jobs_cache = (t1, jobs)
        return jobs

    def _update_phantoms(self, jobs: list[SlurmJob]) -> None:
        """GPUs that Slurm counts as used (``sinfo`` ``gres_used`` indices) although no job
        holds them, seen in two fresh (sinfo, squeue) pairs in a row.

        Slurm 22.05.8 can leak GPU accounting when jobs end while slurmctld is down (seen in the
        fault test: nodes idle, ``gres_used`` ``gpu:a100:2(IDX:0-1)``, a 4-GPU job pinned there
        pending on Resources for ever). Slurm will not hand such a GPU out, so offering it to
        the policy would make it pin jobs where they never start. Two looks are needed because
        one pair can see a job that ended between the two queries (sinfo is read first, so a job
        that started in between is seen holding its GPUs). ``scontrol reconfigure`` clears
        the leak.
        """
        held: set[Slot] = set()
        for job in jobs:
            if job.holds_resources:
                held.update((a.node, g) for a in job.alloc for g in a.gpus)
        # sinfo was read before this squeue: a job that started in between is in ``held``
        candidates = frozenset(
            (n.name, g) for n in self.state.nodes for g in n.used_gpus if (n.name, g) not in held
        )
        confirmed = candidates & self.state.phantom_seen
        for node, g in sorted(confirmed - self.state.phantom_gpus):
            log.error(
                "Slurm counts GPU %s:%d as used but no job holds it (GPU accounting leak of "
                "Slurm 22.05 after a slurmctld restart); not using it. Fix: scontrol reconfigure",
                node,
                g,
            )
        for node, g in sorted(self.state.phantom_gpus - confirmed):
            log.info("GPU %s:%d is usable again", node, g)
        self.state.phantom_seen = candidates
        self.state.phantom_gpus = confirmed


def lost_with_a_node(before: Sequence[SlurmJob], after: Sequence[SlurmJob]) -> bool:
    """Whether the job list ``after`` shows a job that held nodes in ``before`` ended
    ``NODE_FAIL`` or requeued (pending again, or a higher restart count while a node of a
    multi-node job still completes): what Slurm does to the jobs of a node it marks DOWN
    (``--no-requeue`` ones end ``NODE_FAIL``, the others are requeued). A requeue that has
    another cause (``scontrol requeue``, a preemption) also counts: it costs one node read."""
    held = {j.job_id: j.restart_cnt for j in before if j.holds_resources}
    return any(
        j.job_id in held
        and (
            SlurmJobState.NODE_FAIL in (j.state, j.base_state)
            or j.state in PENDING_STATES
            or j.restart_cnt > held[j.job_id]
        )
        for j in after
    )
