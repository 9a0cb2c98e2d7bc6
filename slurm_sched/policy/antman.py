"""AntMan: FIFO, non-preemptive GPU sharing with guarantee and opportunistic jobs.

Paper: Xiao et al., "AntMan: Dynamic Scaling on GPU Clusters for Deep Learning", OSDI'20, as
the Muri artifact simulates it (``antman_sim_jobs``, spec ``shared/specs/muri.md`` section 3;
AntMan's scheduler is not open source, so Muri compares with it in simulation only).

- Each job has a class: 0 = resource-guarantee, 1 = opportunistic, from the trace column
  ``priority`` (``JobSpec.attrs["priority"]``). Without it the class is a fixed pseudo-random
  bit of the job id (CRC-32), about half and half like the traces.
- Order: class, then submit time, then job id (FIFO within a class, guarantee jobs first).
  Jobs are never preempted or migrated.
- A guarantee job needs GPUs that hold no other guarantee job (an opportunistic job may be
  there: it then shares). It reserves GPUs incrementally (learned state): a job that fits one
  node takes what is available on the node with the most available GPUs and waits there for
  the rest; a wider job collects available GPUs node by node, most available first. Reserved
  GPUs are closed to other guarantee jobs (opportunistic jobs may still borrow idle ones). It
  starts when it holds all its GPUs.
- An opportunistic job goes on GPUs whose utilisation estimate is below 0.8 (guarantee job =
  0.1, opportunistic job = 0.9: so on GPUs without an opportunistic job), least loaded first,
  ties by node order and GPU index. It is started with ``settings.plan = "opportunistic"``;
  the "muri" world (:mod:`slurm_sched.perf.muri_stages`) then slows it down to fill the idle
  gaps of the guarantee job it shares with, and never slows the guarantee job.

At most one guarantee and one opportunistic job share a GPU (``max_jobs_per_gpu = 2``).
"""

from __future__ import annotations

import zlib

from slurm_sched.model import (
    Action,
    ClusterSnapshot,
    JobSettings,
    JobSpec,
    JobState,
    JobView,
    Node,
    Placement,
    Share,
    Start,
)
from slurm_sched.perf.muri_stages import OPPORTUNISTIC
from slurm_sched.policy.base import Policy

GUARANTEE = 0
OPPORTUNISTIC_CLASS = 1
GUARANTEE_LOAD = 0.1
OPPORTUNISTIC_LOAD = 0.9
LOAD_LIMIT = 0.8

Slot = tuple[str, int]


def antman_class(spec: JobSpec) -> int:
    """0 = resource-guarantee, 1 = opportunistic (trace ``priority``, else a hash bit)."""
    p = spec.attrs.get("priority")
    if isinstance(p, int) and not isinstance(p, bool) and p in (GUARANTEE, OPPORTUNISTIC_CLASS):
        return p
    return zlib.crc32(spec.job_id.encode()) & 1


class AntMan(Policy):
    name = "antman"
    paper = "Xiao et al., OSDI'20 (AntMan), as simulated by Muri"
    summary = "FIFO, non-preemptive; guarantee jobs reserve GPUs, opportunistic jobs share them"
    shares_gpus = True
    max_jobs_per_gpu = 2
    progress_model = "muri"

    def __init__(self) -> None:
        #: Learned state: GPUs each waiting guarantee job has reserved, in reservation order.
        self._reserved: dict[str, list[Slot]] = {}

    def decide(self, snapshot: ClusterSnapshot, now_s: float) -> list[Action]:
        pending = snapshot.pending
        if not pending:
            self._reserved.clear()
            return []
        waiting = {j.job_id for j in pending}
        self._reserved = {j: s for j, s in self._reserved.items() if j in waiting}
        cluster = snapshot.cluster
        nodes = [n for n in cluster.nodes if n.num_gpus > 0]
        by_id = snapshot.by_id
        guar: set[Slot] = set()
        opp: set[Slot] = set()
        holders: dict[Slot, list[str]] = {}
        for slot, jobs in snapshot.occupancy.items():
            holders[slot] = list(jobs)
            for jid in jobs:
                if by_id[jid].settings.plan == OPPORTUNISTIC:
                    opp.add(slot)
                else:
                    guar.add(slot)
        reserved_by: dict[Slot, str] = {s: j for j, ss in self._reserved.items() for s in ss}
        actions: list[Action] = []
        order = sorted(pending, key=lambda j: (antman_class(j.spec), j.spec.submit_time_s,
                                               j.spec.job_id))
        total = sum(n.num_gpus for n in nodes)
        for job in order:
            spec = job.spec
            guarantee = antman_class(spec) == GUARANTEE
            # Nothing left for this class: skip the per-GPU scans (the queue can be long).
            if guarantee and len(guar.union(reserved_by)) >= total:
                continue
            if not guarantee and total - len(opp) < spec.num_gpus:
                continue
            typed = [n for n in nodes if spec.gpu_type is None or n.gpu_type == spec.gpu_type]
            if guarantee:
                slots = self._reserve(job, typed, guar, reserved_by)
                if slots is None:
                    continue
                for s in slots:
                    guar.add(s)
                    reserved_by.pop(s, None)
                del self._reserved[job.job_id]
                actions.append(self._launch(job, slots, holders, JobSettings(),
                                            "antman: resource-guarantee job"))
            else:
                slots = self._opportunistic(spec.num_gpus, typed, guar, opp)
                if slots is None:
                    continue
                opp.update(slots)
                actions.append(self._launch(job, slots, holders, JobSettings(plan=OPPORTUNISTIC),
                                            "antman: opportunistic job on idle capacity"))
        return actions

    def _reserve(
        self, job: JobView, nodes: list[Node], guar: set[Slot], reserved_by: dict[Slot, str]
    ) -> list[Slot] | None:
        """Extend the job's reservation with available GPUs; return them all once complete."""
        jid = job.job_id
        g = job.spec.num_gpus
        names = {n.name: n.num_gpus for n in nodes}
        # Drop reserved GPUs that vanished or that a guarantee job took meanwhile.
        mine = [s for s in self._reserved.get(jid, []) if s not in guar
                and s[1] < names.get(s[0], 0)]
        self._reserved[jid] = mine

        def available(node_name: str, count: int) -> list[Slot]:
            return [(node_name, i) for i in range(count)
                    if (node_name, i) not in guar and reserved_by.get((node_name, i)) is None]

        fits_one = [n for n in nodes if n.num_gpus >= g]
        if fits_one:
            if mine:
                home = mine[0][0]
                cand = [n for n in fits_one if n.name == home]
            else:
                cand = sorted(fits_one, key=lambda n: -len(available(n.name, n.num_gpus)))[:1]
            for n in cand:
                for s in available(n.name, n.num_gpus)[: g - len(mine)]:
                    mine.append(s)
                    reserved_by[s] = jid
        else:
            held = {s[0] for s in mine}
            order = sorted(nodes, key=lambda n: (n.name not in held,
                                                 -len(available(n.name, n.num_gpus))))
            for n in order:
                if len(mine) >= g:
                    break
                for s in available(n.name, n.num_gpus)[: g - len(mine)]:
                    mine.append(s)
                    reserved_by[s] = jid
        return list(mine) if len(mine) == g else None

    @staticmethod
    def _opportunistic(
        g: int, nodes: list[Node], guar: set[Slot], opp: set[Slot]
    ) -> list[Slot] | None:
        cands: list[tuple[float, int, int, Slot]] = []
        for pos, n in enumerate(nodes):
            for i in range(n.num_gpus):
                s = (n.name, i)
                load = (GUARANTEE_LOAD if s in guar else 0.0) + (
                    OPPORTUNISTIC_LOAD if s in opp else 0.0)
                if load < LOAD_LIMIT:
                    cands.append((load, pos, i, s))
        if len(cands) < g:
            return None
        cands.sort()
        return [c[3] for c in cands[:g]]

    @staticmethod
    def _launch(
        job: JobView,
        slots: list[Slot],
        holders: dict[Slot, list[str]],
        settings: JobSettings,
        reason: str,
    ) -> Action:
        alloc: dict[str, list[int]] = {}
        for node, i in sorted(slots):
            alloc.setdefault(node, []).append(i)
        placement = Placement.of(alloc)
        others: list[str] = []
        for s in slots:
            for jid in holders.get(s, []):
                if jid not in others:
                    others.append(jid)
            holders.setdefault(s, []).append(job.job_id)
        if others:
            return Share(job_id=job.job_id, placement=placement, with_jobs=tuple(others),
                         settings=settings, reason=reason)
        return Start(job_id=job.job_id, placement=placement, settings=settings, reason=reason)

    def explain(self, snapshot: ClusterSnapshot, job_id: str) -> str:
        base = super().explain(snapshot, job_id)
        job = snapshot.by_id.get(job_id)
        if job is None or job.state is not JobState.PENDING:
            return base
        kind = "guarantee" if antman_class(job.spec) == GUARANTEE else "opportunistic"
        held = len(self._reserved.get(job_id, ()))
        return f"{base}; {kind} job, FIFO, {held}/{job.spec.num_gpus} GPU(s) reserved"


POLICIES = [AntMan]
