"""The snapshot of the Slurm backend: Slurm's jobs, the backend's intents and ledgers as one view.

Contract: :meth:`ViewBuilder.build` turns the shared state (Slurm's last job list, the managed
nodes, phantom GPUs, the intents, the ledgers and settings) into a
:class:`~slurm_sched.model.ClusterSnapshot`: one :class:`~slurm_sched.model.JobView` per managed,
unfinished, understood job (in submit order) but pending ones an operator holds (``scontrol
hold``) or whose partition is down, GPUs held by any other job (unmanaged partitions, jobs left
to Slurm, phantom GPUs, a node's other GPU types) shown as :data:`FOREIGN`, in-flight starts
shown RUNNING where Slurm will put them, and the free-GPU map. It stores the view it built
(views, holders, shard use, exclusive GPUs) in the shared state, where ``apply`` checks actions
against it and updates it. It changes nothing in Slurm and reads no Slurm document
itself (the nodes come from ``query.py``); its only I/O is the jobs' progress files and, once
per job found running by a scheduler that did not start it (a restart), the job's settings file:
the job runs with the settings written for its nodes, so the view shows those.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

from slurm_sched.model import Cluster, ClusterSnapshot, JobSettings, JobState, JobView, Placement
from slurm_sched.protocol.settings_file import (
    Progress,
    progress_rate,
    settings_entry_for,
    settings_from_document,
    work_done_s,
)
from slurm_sched.slurm.parse import SlurmJob
from slurm_sched.slurm.query import SlurmQuery
from slurm_sched.slurm.shared import (
    FOREIGN,
    PENDING_STATES,
    RUNNING_STATES,
    BackendState,
    Slot,
    log,
)
from slurm_sched.slurm.states import SlurmJobState


class ViewBuilder:
    """Builds the backend's snapshot (see the module docstring)."""

    def __init__(self, state: BackendState, query: SlurmQuery) -> None:
        self.state = state
        self.query = query

    def build(self, now: float) -> ClusterSnapshot:
        cluster = self.query.cluster
        holders: dict[Slot, list[str]] = {}
        shard_use: dict[Slot, int] = {}
        exclusive: set[Slot] = set()
        # 1. what Slurm says is held (any partition); jobs with an intent are shown as intended
        for job in self.state.slurm.values():
            if not job.holds_resources or job.job_id in self.state.intents:
                continue
            managed = self.state.managed(job) and job.job_id in self.state.ledgers
            owner = job.job_id if managed else FOREIGN
            for a in job.alloc:
                for g in a.gpus:
                    slot = (a.node, g)
                    holders.setdefault(slot, []).append(owner)
                    if a.shards:
                        shard_use[slot] = shard_use.get(slot, 0) + a.shards
                    else:
                        exclusive.add(slot)
        # 1b. GPUs Slurm will not hand out although nobody holds them (accounting leak)
        for slot in self.state.phantom_gpus:
            if slot not in holders:
                holders[slot] = [FOREIGN]
                exclusive.add(slot)
        # 1c. GPUs of a node's other GPU types (slurm/gres.py: node_gpus): never the scheduler's
        for n in self.state.nodes:
            for g in n.reserved_gpus:
                slot = (n.name, g)
                if slot not in holders:
                    holders[slot] = [FOREIGN]
                    exclusive.add(slot)
        # 2. in-flight intents, remapped to free GPUs where Slurm will put them
        views: dict[str, JobView] = {}
        placements: dict[str, Placement | None] = {}
        for jid, pend in self.state.intents.items():
            if pend.phase == "preempting" or pend.placement is None:
                placements[jid] = None
                continue
            p = pend.placement if pend.share else self._remap(pend.placement, holders, cluster)
            placements[jid] = p
            if p is None:
                continue  # shown PENDING: its GPUs are taken after all (see _remap)
            for slot in p.slots():
                holders.setdefault(slot, []).append(jid)
                if pend.share or self.state.is_shard_job(jid):
                    shard_use[slot] = shard_use.get(slot, 0) + (
                        self.state.shards.share_shards
                        if pend.share
                        else self.state.shards.start_shards
                    )
                else:
                    exclusive.add(slot)
        # 3. one view per managed, unfinished, understood job
        for jid, ledger in self.state.ledgers.items():
            sj = self.state.slurm.get(jid)
            if sj is None or sj.final or jid in self.state.done:
                continue
            job = sj
            it = self.state.intents.get(jid)
            if it is not None:
                placement = placements.get(jid)
                if it.phase == "preempting" or placement is None:
                    state, placement = JobState.PENDING, None
                else:
                    state = JobState.RUNNING
            elif job.state in RUNNING_STATES:
                state, placement = JobState.RUNNING, placement_of(job)
            elif job.state is SlurmJobState.SUSPENDED:
                state, placement = JobState.SUSPENDED, placement_of(job)
            elif job.admin_held:
                continue  # an operator's hold: not the policy's to start (nor to release)
            elif job.state in PENDING_STATES and self.state.partition_down(job):
                continue  # Slurm would not start it: its partition is down
            elif job.state in PENDING_STATES:
                state, placement = JobState.PENDING, None
            elif jid in self.state.views:  # COMPLETING, SIGNALING...: as last seen, until final
                # Slurm frees a completing job's GPUs at once and may give them to another job:
                # keep showing the job only while nobody else holds them
                prev = self.state.views[jid]
                state, placement = prev.state, prev.placement
                slots = list(placement.slots()) if placement is not None else []
                if any(holders.get(slot) for slot in slots):
                    continue
                for slot in slots:
                    holders[slot] = [jid]
                    exclusive.add(slot)
            else:
                continue
            if state is not JobState.PENDING and placement is None:
                continue  # running without GPUs we can see: nothing to decide about
            spec = ledger.spec
            executed = ledger.earlier_runs_s + ledger.run_executed_s
            prog = self._progress(jid)
            views[jid] = JobView.model_construct(
                spec=spec,
                state=state,
                placement=placement,
                settings=self._settings(jid, state, placement),
                first_start_s=ledger.first_start_s
                if ledger.first_start_s is not None
                else (now if state is JobState.RUNNING else None),
                accounted_at_s=now,
                executed_s=executed,
                work_done_s=work_done_s(spec, prog, executed),
                rate=progress_rate(spec, prog) if state is JobState.RUNNING else 0.0,
                stall_until_s=0.0,
                preemptions=max(0, job.restart_cnt - ledger.moves),
            )
        order = sorted(
            views.values(),
            key=lambda v: (v.spec.submit_time_s, _id_key(v.job_id)),
        )
        self._check_overlaps(order)
        self.state.views = {v.job_id: v for v in order}
        self.state.holders = holders
        self.state.shard_use = shard_use
        self.state.exclusive = exclusive
        return ClusterSnapshot.model_construct(
            now_s=now,
            cluster=cluster,
            jobs=tuple(order),
            known_free_gpus=self._free_map(),
            known_pending=tuple(v for v in order if v.state is JobState.PENDING),
        )

    def _check_overlaps(self, views: Sequence[JobView]) -> None:
        """Log (never raise) when two exclusive jobs claim one GPU in the view: a bug here."""
        seen: dict[Slot, str] = {}
        for v in views:
            if v.placement is None or v.state is JobState.PENDING:
                continue
            shard = self.state.is_shard_job(v.job_id) or (
                (it := self.state.intents.get(v.job_id)) is not None and it.share
            )
            for slot in v.placement.slots():
                other = seen.get(slot)
                if other is not None and not shard:
                    log.error(
                        "GPU %s:%d shown for jobs %s and %s (slurm: %s / %s; intents: %s / %s)",
                        slot[0],
                        slot[1],
                        other,
                        v.job_id,
                        self.state.slurm.get(other),
                        self.state.slurm.get(v.job_id),
                        self.state.intents.get(other),
                        self.state.intents.get(v.job_id),
                    )
                seen[slot] = v.job_id

    def _free_map(self) -> dict[str, tuple[int, ...]]:
        avail = {n.name: n.available for n in self.state.nodes}
        return {
            n.name: tuple(g for g in range(n.num_gpus) if (n.name, g) not in self.state.holders)
            if avail.get(n.name, False)
            else ()
            for n in self.query.cluster.nodes
        }

    def _remap(
        self, asked: Placement, holders: dict[Slot, list[str]], cluster: Cluster
    ) -> Placement | None:
        """Where Slurm will put a released job: the asked GPUs if free, else the lowest free;
        None if a node has not enough free GPUs (the job waits in Slurm)."""
        out: dict[str, list[int]] = {}
        for part in asked.parts:
            node = cluster.by_name.get(part.node)
            if node is None or all((part.node, g) not in holders for g in part.gpus):
                out[part.node] = list(part.gpus)
                continue
            free = [g for g in range(node.num_gpus) if (part.node, g) not in holders]
            if len(free) < len(part.gpus):
                return None  # Slurm cannot start it now: its GPUs are taken after all
            out[part.node] = free[: len(part.gpus)]
        return Placement.of(out)

    def _settings(self, jid: str, state: JobState, placement: Placement | None) -> JobSettings:
        """The job's settings: those of the action that placed it, else (a job running when
        this scheduler started) those its settings file holds for its nodes, else defaults."""
        known = self.state.settings.get(jid)
        if known is not None or state is JobState.PENDING or placement is None:
            return known or JobSettings()
        nodes = placement.nodes
        entry = settings_entry_for(
            self.state.store.read_settings(jid), nodes=nodes, node_count=len(nodes)
        )
        settings = JobSettings()
        if entry is not None:
            try:
                settings = settings_from_document(entry)
            except ValidationError as exc:
                log.warning("job %s: ignoring its settings file: %s", jid, exc)
        self.state.settings[jid] = settings
        return settings

    def _progress(self, jid: str) -> Progress | None:
        path = self.state.store.progress_path(jid)
        try:
            st = path.stat()
        except OSError:
            return None
        cached = self.state.progress_cache.get(jid)
        if cached is not None and cached[0] == st.st_mtime_ns and cached[1] == st.st_size:
            return cached[2]
        prog = self.state.store.read_progress(jid)
        self.state.progress_cache[jid] = (st.st_mtime_ns, st.st_size, prog)
        return prog


def placement_of(job: SlurmJob) -> Placement | None:
    """Where Slurm runs the job (its GPU slots); None without GPUs."""
    slots = job.gpu_slots()
    return Placement.of(slots) if slots else None


def _id_key(job_id: str) -> tuple[int, str]:
    return (int(job_id), "") if job_id.isdigit() else (1 << 62, job_id)
