"""AntMan: FIFO, non-preemptive GPU sharing with guarantee and opportunistic jobs.

Paper: Xiao et al., "AntMan: Dynamic Scaling on GPU Clusters for Deep Learning", OSDI'20, as
the Muri artifact simulates it (``antman_sim_jobs``, spec ``shared/specs/muri.md`` section 3;
AntMan's scheduler is not open source, so Muri compares with it in simulation only).

- Each job has a class: 0 = resource-guarantee, 1 = opportunistic, from the trace column
  ``priority`` (``JobSpec.attrs["priority"]``). Without it the class is a fixed pseudo-random
  bit of the job id (CRC-32), about half and half like the traces.
- Order: class, then submit time, then arrival order (FIFO within a class, guarantee jobs
  first).
  Jobs are never preempted or migrated.
- A guarantee job needs GPUs that hold no other guarantee job (an opportunistic job may be
  there: it then shares). It reserves GPUs incrementally (learned state): a job that fits one
  node takes what is available on the node with the most available GPUs and waits there for
  the rest; a wider job collects available GPUs node by node, most available first. Reserved
  GPUs are closed to other guarantee jobs (opportunistic jobs may still borrow idle ones). It
  starts when it holds all its GPUs. Option ``guarantee_node="first-fit"`` (the Muri
  artifact's ``antman_alloc_res``): a job that fits one node starts on the *first* node with
  enough available GPUs (else the one with the most); a wider job reserves only nodes whose
  GPUs are *all* available, in node order, one whenever it comes free, plus one node for the
  GPUs short of a whole node. On trace 3 it ends 99% of the jobs within 1% of the artifact's
  per-job output (most-available: 56%) (``python benchmarks/crosscheck.py --artifacts muri
  --policies antman``).
- An opportunistic job goes on GPUs whose utilisation estimate is below 0.8 (guarantee job =
  0.1, opportunistic job = 0.9: so on GPUs without an opportunistic job), least loaded first,
  ties by node order and GPU index. It is started with ``settings.plan = "opportunistic"``;
  the "muri" world (:mod:`slurm_sched.perf.muri_stages`) then slows it down to fill the idle
  gaps of the guarantee job it shares with, and never slows the guarantee job.

At most one guarantee and one opportunistic job share a GPU (``max_jobs_per_gpu = 2``).
"""

from __future__ import annotations

import heapq
import zlib
from bisect import bisect_left, insort

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


class _Slots:
    """GPU slots of one pass, indexed so that each job costs about its own size.

    The plain rules scan every GPU of the cluster per job (most available node, least loaded
    GPUs), which is quadratic for thousands of pending jobs on thousands of nodes. This keeps,
    per GPU type (key None = all nodes), the nodes filed under their count of *available* GPUs
    (no guarantee job, not reserved) and two heaps of the GPUs an opportunistic job may take
    (idle ones, then ones holding only a guarantee job), in (node order, index) order. Every
    change of ``guar``, ``opp`` and ``reserved_by`` goes through it.
    """

    def __init__(self, nodes: list[Node], guar: set[Slot], opp: set[Slot],
                 reserved_by: dict[Slot, str]) -> None:
        self.nodes = nodes
        self.guar = guar
        self.opp = opp
        self.reserved_by = reserved_by
        #: GPUs closed to guarantee jobs (held by one, or reserved)
        self.closed: set[Slot] = guar.union(reserved_by)
        self._pos = {n.name: i for i, n in enumerate(nodes)}
        self._node = {n.name: n for n in nodes}
        self._type = {n.name: n.gpu_type for n in nodes}
        self.avail: dict[str, int] = {}
        top = max((n.num_gpus for n in nodes), default=0)
        keys: list[str | None] = [None, *dict.fromkeys(n.gpu_type for n in nodes)]
        self._by_avail: dict[str | None, list[list[int]]] = {
            k: [[] for _ in range(top + 1)] for k in keys}
        # Opportunistic candidates, load below LOAD_LIMIT: with the loads above, a GPU that
        # holds an opportunistic job never is; idle GPUs (load 0) come before GPUs holding a
        # guarantee job only (load 0.1), each in (node order, index) order.
        self._idle: dict[str | None, list[tuple[int, int, Slot]]] = {k: [] for k in keys}
        self._shared: dict[str | None, list[tuple[int, int, Slot]]] = {k: [] for k in keys}
        self._n_idle: dict[str | None, int] = dict.fromkeys(keys, 0)
        self._n_shared: dict[str | None, int] = dict.fromkeys(keys, 0)
        for pos, n in enumerate(nodes):
            free = 0
            for i in range(n.num_gpus):
                slot = (n.name, i)
                if slot not in guar and reserved_by.get(slot) is None:
                    free += 1
                if slot in opp:
                    continue
                heaps, counts = (self._shared, self._n_shared) if slot in guar else (
                    self._idle, self._n_idle)
                for k in (None, n.gpu_type):
                    heaps[k].append((pos, i, slot))  # appended in order: already heaps
                    counts[k] += 1
            self.avail[n.name] = free
            for k in (None, n.gpu_type):
                self._by_avail[k][free].append(pos)

    def available(self, node: Node) -> list[Slot]:
        """GPUs of ``node`` open to a guarantee job, by index."""
        guar, reserved_by = self.guar, self.reserved_by
        return [(node.name, i) for i in range(node.num_gpus)
                if (node.name, i) not in guar and reserved_by.get((node.name, i)) is None]

    def most_available(self, gpu_type: str | None, min_gpus: int) -> Node:
        """The node with at least ``min_gpus`` GPUs and the most available ones (first in
        node order), among the nodes of ``gpu_type``; one must exist."""
        buckets = self._by_avail[gpu_type]
        for c in range(len(buckets) - 1, -1, -1):
            for pos in buckets[c]:
                if self.nodes[pos].num_gpus >= min_gpus:
                    return self.nodes[pos]
        raise AssertionError("no node of the type holds the job")

    def first_fit(self, gpu_type: str | None, g: int) -> Node:
        """The first node of ``gpu_type``, in node order, with at least ``g`` available GPUs;
        else :meth:`most_available`."""
        buckets = self._by_avail[gpu_type]
        first = min((pos for c in range(g, len(buckets)) for pos in buckets[c]
                     if self.nodes[pos].num_gpus >= g), default=None)
        return self.most_available(gpu_type, g) if first is None else self.nodes[first]

    def _lose_available(self, node: str) -> None:
        pos = self._pos[node]
        before = self.avail[node]
        self.avail[node] = before - 1
        for k in (None, self._type[node]):
            old = self._by_avail[k][before]
            del old[bisect_left(old, pos)]
            insort(self._by_avail[k][before - 1], pos)

    def reserve(self, slot: Slot, job_id: str) -> None:
        """``job_id`` reserves an available GPU."""
        self.reserved_by[slot] = job_id
        self.closed.add(slot)
        self._lose_available(slot[0])

    def guarantee(self, slot: Slot) -> None:
        """A guarantee job starts on ``slot`` (it held the reservation)."""
        if slot in self.guar:
            self.reserved_by.pop(slot, None)
            return
        node = self._node.get(slot[0])
        if node is None or slot[1] >= node.num_gpus:
            self.guar.add(slot)  # not a GPU of the cluster: nothing indexed to update
            self.reserved_by.pop(slot, None)
            self.closed.add(slot)
            return
        if self.reserved_by.get(slot) is None:
            self._lose_available(slot[0])
        self.guar.add(slot)
        self.reserved_by.pop(slot, None)
        self.closed.add(slot)
        if slot not in self.opp:
            entry = (self._pos[node.name], slot[1], slot)
            for k in (None, node.gpu_type):  # idle -> holds a guarantee job only
                self._n_idle[k] -= 1
                self._n_shared[k] += 1
                heapq.heappush(self._shared[k], entry)

    def opportunistic(self, g: int, gpu_type: str | None) -> list[Slot] | None:
        """Take the ``g`` least loaded GPUs of ``gpu_type`` for an opportunistic job, if there
        are that many below the load limit."""
        if gpu_type not in self._n_idle or self._n_idle[gpu_type] + self._n_shared[
                gpu_type] < g:
            return None
        guar, opp = self.guar, self.opp
        out: list[Slot] = []
        idle, shared = self._idle[gpu_type], self._shared[gpu_type]
        while len(out) < g and self._n_idle[gpu_type] > 0:
            slot = heapq.heappop(idle)[2]
            if slot not in guar and slot not in opp:
                out.append(slot)
                self._take_opportunistic(slot)
        while len(out) < g:
            slot = heapq.heappop(shared)[2]
            if slot in guar and slot not in opp:
                out.append(slot)
                self._take_opportunistic(slot)
        return out

    def _take_opportunistic(self, slot: Slot) -> None:
        counts = self._n_shared if slot in self.guar else self._n_idle
        for k in (None, self._type[slot[0]]):
            counts[k] -= 1
        self.opp.add(slot)


class AntMan(Policy):
    name = "antman"
    paper = "Xiao et al., OSDI'20 (AntMan), as simulated by Muri"
    summary = "FIFO, non-preemptive; guarantee jobs reserve GPUs, opportunistic jobs share them"
    shares_gpus = True
    max_jobs_per_gpu = 2
    progress_model = "muri"

    def __init__(self, guarantee_node: str = "most-available") -> None:
        if guarantee_node not in ("most-available", "first-fit"):
            raise ValueError("guarantee_node must be 'most-available' or 'first-fit', "
                             f"got {guarantee_node!r}")
        self.guarantee_node = guarantee_node
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
        slots_of = _Slots(nodes, guar, opp, reserved_by)
        typed_nodes: dict[str | None, tuple[list[Node], dict[str, int]]] = {}
        actions: list[Action] = []
        # stable sort of the pending jobs (arrival order): equal submit times keep the trace's
        # order (an id compared as a string would put "10" before "9")
        order = sorted(pending, key=lambda j: (antman_class(j.spec), j.spec.submit_time_s))
        total = sum(n.num_gpus for n in nodes)
        for job in order:
            spec = job.spec
            guarantee = antman_class(spec) == GUARANTEE
            # Nothing left for this class: skip the per-GPU scans (the queue can be long).
            if guarantee and len(slots_of.closed) >= total:
                continue
            if not guarantee and total - len(opp) < spec.num_gpus:
                continue
            if guarantee:
                if spec.gpu_type not in typed_nodes:
                    typed = [n for n in nodes
                             if spec.gpu_type is None or n.gpu_type == spec.gpu_type]
                    typed_nodes[spec.gpu_type] = (typed, {n.name: n.num_gpus for n in typed})
                typed, names = typed_nodes[spec.gpu_type]
                slots = self._reserve(job, typed, names, slots_of)
                if slots is None:
                    continue
                for s in slots:
                    slots_of.guarantee(s)
                del self._reserved[job.job_id]
                actions.append(self._launch(job, slots, holders, JobSettings(),
                                            "antman: resource-guarantee job"))
            else:
                slots = slots_of.opportunistic(spec.num_gpus, spec.gpu_type)
                if slots is None:
                    continue
                actions.append(self._launch(job, slots, holders, JobSettings(plan=OPPORTUNISTIC),
                                            "antman: opportunistic job on idle capacity"))
        return actions

    def _reserve(self, job: JobView, nodes: list[Node], names: dict[str, int],
                 slots_of: _Slots) -> list[Slot] | None:
        """Extend the job's reservation with available GPUs on ``nodes`` (the job's type;
        ``names``: their GPU counts); return them all once complete."""
        jid = job.job_id
        g = job.spec.num_gpus
        guar = slots_of.guar
        # Drop reserved GPUs that vanished or that a guarantee job took meanwhile.
        mine = [s for s in self._reserved.get(jid, []) if s not in guar
                and s[1] < names.get(s[0], 0)]
        self._reserved[jid] = mine
        if self.guarantee_node == "first-fit":
            self._reserve_first_fit(job, nodes, mine, slots_of)
        elif any(n.num_gpus >= g for n in nodes):
            if mine:
                home = mine[0][0]
                cand = [n for n in nodes if n.name == home and n.num_gpus >= g]
            else:
                cand = [slots_of.most_available(job.spec.gpu_type, g)]
            for n in cand:
                for s in slots_of.available(n)[: g - len(mine)]:
                    mine.append(s)
                    slots_of.reserve(s, jid)
        else:
            held = {s[0] for s in mine}
            avail = slots_of.avail
            order = sorted(nodes, key=lambda n: (n.name not in held, -avail[n.name]))
            for n in order:
                if len(mine) >= g:
                    break
                for s in slots_of.available(n)[: g - len(mine)]:
                    mine.append(s)
                    slots_of.reserve(s, jid)
        return list(mine) if len(mine) == g else None

    @staticmethod
    def _reserve_first_fit(job: JobView, nodes: list[Node], mine: list[Slot],
                           slots_of: _Slots) -> None:
        """``guarantee_node="first-fit"``: the Muri artifact's reservation. A job that fits
        one node starts on the first node, in node order, with enough available GPUs (else
        on the one with the most) and then waits there. A wider job of ``g`` GPUs on nodes
        of ``size`` GPUs takes ``g // size`` nodes only when *all* their GPUs are available,
        in node order, one whenever it comes free, and its last ``g % size`` GPUs on one
        node chosen as a one-node job chooses."""
        spec = job.spec
        g = spec.num_gpus
        size = max(n.num_gpus for n in nodes)

        def take(node: Node, count: int) -> None:
            for s in slots_of.available(node)[:count]:
                mine.append(s)
                slots_of.reserve(s, job.job_id)

        held: dict[str, int] = {}
        for node_name, _ in mine:
            held[node_name] = held.get(node_name, 0) + 1
        if g <= size:
            home = [n for n in nodes if n.name in held]
            take(home[0] if home else slots_of.first_fit(spec.gpu_type, g), g - len(mine))
            return
        need = g - len(mine)
        rest = need % size
        partial = [n for n in nodes if 0 < held.get(n.name, 0) < n.num_gpus]
        avail = slots_of.avail
        for n in [n for n in nodes if n.num_gpus == size and avail[n.name] == size
                  and n.name not in held][: need // size]:
            take(n, size)
        if rest:
            # reserved whole nodes have nothing available left, so they are not chosen again
            take(partial[0] if partial else slots_of.first_fit(spec.gpu_type, rest), rest)

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
