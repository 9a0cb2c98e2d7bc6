"""Checking an action against the Slurm backend's current view, before any command runs.

Contract: the checks raise :class:`~slurm_sched.backend.ActionRejected` (which ``apply`` turns
into ``ActionResult(ok=False)``) for an action the view says cannot work: a placement with the
wrong GPU count or type, an unknown or unavailable node, GPUs held by other jobs (the shared
checks of :mod:`slurm_sched.backend.placement_check`), a share Slurm would put elsewhere or cannot
co-locate; and, from what Slurm itself would do, a start onto GPUs Slurm wrongly counts as free
(the 22.05.8 shard accounting loss), a start or share that a sharer about to end could
misdirect, a launch within the requeue grace on a node of the job's killed run.
:meth:`Validator.check_gpus` returns where the job will really be (a Share may land on another
GPU it can share). Checks read the shared state only: they change nothing (but forget a requeue
whose grace has passed) and run no command.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from slurm_sched.backend import ActionRejected
from slurm_sched.backend.placement_check import check_count, check_part
from slurm_sched.model import JobView, Placement
from slurm_sched.slurm.query import SlurmQuery
from slurm_sched.slurm.shared import FOREIGN, PENDING_STATES, BackendState, Slot

#: A requeued job is not launched again on a node of its killed run sooner than this (seconds)
#: after the requeue returned: slurmd revokes the job's credential at the requeue time (whole
#: seconds) and refuses a launch whose credential is from that same second ("Killing
#: non-startable batch JobId=X: Job credential revoked", the job ends FAILED). Slurm itself
#: avoids it by setting the begin time 121 s ahead; the scheduler's StartTime=now skips that.
REQUEUE_GRACE_S = 1.5
#: A job whose start slurmctld lost in a crash (pending again, not requeued) is not launched
#: again on the nodes of that start sooner than this (seconds): its first run may still be
#: ending there, slurmd refuses a second copy of a job it runs and Slurm then drains the node
#: ("Duplicate jobid"). Slurm's own requeue delay is as long.
LOST_START_GRACE_S = 121.0
#: A GPU shared by several shard jobs, one of which is expected to end within this many seconds,
#: is not relied on to stay busy in Slurm's view while a new start is pending: Slurm 22.05.8
#: drops the whole GPU's shard usage when one of them ends (see Validator._check_slurm_view)
SHARD_END_RISK_S = 30.0


class Validator:
    """Checks actions against the current view (see the module docstring)."""

    def __init__(self, state: BackendState, query: SlurmQuery) -> None:
        self.state = state
        self.query = query

    def check_requeue_grace(self, jid: str, placement: Placement) -> None:
        lost = lost_start_left(self.state, jid, placement)
        if lost > 0:
            nodes = ",".join(sorted(self.state.lost_starts[jid][1]))
            raise ActionRejected(
                f"job {jid}: slurmctld lost its start on {nodes} in a crash; its first run may "
                f"still be ending there (slurmd would refuse a second copy and Slurm drain the "
                f"node): not placed there for {lost:.0f}s more; place it elsewhere or retry"
            )
        left = requeue_grace_left(self.state, jid, placement)
        if left > 0:
            nodes = ",".join(sorted(self.state.requeued[jid][1]))
            raise ActionRejected(
                f"job {jid} was requeued on {nodes} just now: "
                f"slurmd would refuse to launch it there for {left:.1f}s more (credential "
                "revoked); retry"
            )

    def check_gpus(self, view: JobView, p: Placement, *, share: bool, exact: bool) -> Placement:
        """Check a placement against the current view; returns where the job will be (for a
        Share: the GPU Slurm will pick, when that is another GPU the job can share).

        Per node, the shared checks (:mod:`slurm_sched.backend.placement_check`; the job's own GPUs
        count as free, the sharing capacity is checked where Slurm decides the GPU), then
        Slurm's own view and, for a Share, where Slurm will put it."""
        jid = view.job_id
        if exact:
            check_count(view, p)
        cluster = self.query.cluster
        available = {n.name for n in self.state.nodes if n.available}
        own = set(view.placement.slots()) if view.placement is not None else set()
        out: dict[str, list[int]] = {}
        for part in p.parts:
            node = check_part(
                view,
                part,
                cluster,
                self.state.holders,
                share=share,
                own=own,
                available_nodes=available,
            )
            out[node.name] = list(part.gpus)
            if not share or not self.state.holders.get((node.name, part.gpus[0])):
                self._check_slurm_view(jid, node.name, part.gpus, own)
            if share:
                if len(part.gpus) != 1:
                    raise ActionRejected(
                        f"Slurm 22.05 shares one GPU per node; {node.name} has {len(part.gpus)}"
                    )
                slot = (node.name, part.gpus[0])
                if self.state.holders.get(slot):  # joining someone (a Share on a free GPU = Start)
                    out[node.name] = [self._check_share(jid, slot)]
        return Placement.of(out)

    def _check_slurm_view(self, jid: str, node: str, gpus: Sequence[int], own: set[Slot]) -> None:
        """Refuse a start that Slurm would put on a GPU it wrongly counts as free.

        Slurm 22.05.8 drops a GPU's shard usage when one of the shard jobs sharing it ends,
        although another one still runs there (``sinfo`` then shows ``shard:...:0(IDX:N/A)``);
        it would then give that GPU to the next job (double booking, seen in the tests). Slurm
        picks the lowest indices it thinks free, so predict that and check it against what the
        jobs really hold.
        """
        slurm_used = self._slurm_used(node)
        if slurm_used is None:
            return
        free = [g for g in range(self.query.cluster.by_name[node].num_gpus) if g not in slurm_used]
        for g in free[: len(gpus)]:
            holders = [h for h in self.state.holders.get((node, g), []) if (node, g) not in own]
            if holders:
                raise ActionRejected(
                    f"Slurm counts GPU {node}:{g} as free although {','.join(holders)} still "
                    "holds it (Slurm 22.05 loses shard usage when a co-located shard job ends); "
                    f"job {jid} would be put there"
                )
        # Slurm allocates the pinned job a moment later (its next scheduling pass, ~0.4 s, more
        # under load): a shared GPU whose partner ends in between looks free by then and would
        # be picked if its index is lower (seen in the integration suite: an exclusive job on a
        # GPU that still ran a shard job). Wait until that GPU's sharing is over.
        ending = self._shard_gpus_ending(node, own)
        for g in sorted(set(free) | set(ending))[: len(gpus)]:
            if g in ending:
                raise ActionRejected(
                    f"GPU {node}:{g} is shared by {','.join(self.state.holders[(node, g)])} and "
                    f"{ending[g]} ends within {SHARD_END_RISK_S:.0f}s: Slurm 22.05 would then "
                    f"count the GPU as free and could give it to job {jid}; retry"
                )

    def _shard_gpus_ending(self, node: str, own: set[Slot]) -> dict[int, str]:
        """GPUs of ``node`` shared by 2+ jobs -> a sharing job expected to end soon (by its
        ``duration_s`` hint; a job without one gives no reason to expect its end)."""
        now = self.state.clock()
        out: dict[int, str] = {}
        for g in range(self.query.cluster.by_name[node].num_gpus):
            holders = self.state.holders.get((node, g), [])
            if len(holders) < 2 or (node, g) in own or (node, g) in self.state.exclusive:
                continue
            ending = self._ending_soon(holders, now)
            if ending is not None:
                out[g] = ending
        return out

    def _ending_soon(self, holders: Iterable[str], now: float) -> str | None:
        """One of ``holders`` expected to end within ``SHARD_END_RISK_S``, by its
        ``duration_s`` hint (a job without one gives no reason to expect its end); or None."""
        for h in holders:
            view = self.state.views.get(h)
            if (
                view is not None
                and view.spec.attrs.get("duration_source") == "hint"
                and view.remaining_s(now) <= SHARD_END_RISK_S
            ):
                return h
        return None

    def _check_share(self, jid: str, slot: Slot) -> int:
        """The GPU index on ``slot``'s node where Slurm will put a sharing (1-shard) job."""
        node, g = slot
        holders = self.state.holders.get(slot, [])
        self._shareable(jid, slot, holders)
        spg = self.state.shards.shards_per_gpu
        need = self.state.shards.share_shards
        # a GPU whose shard usage Slurm 22.05.8 lost has all its shards free in Slurm's view:
        # the share goes there (and must fit there) even when the GPU is full in reality
        lost = self._slurm_lost_usage(node)
        now = self.state.clock()
        # Slurm gives a shard job the lowest-index GPU of the node with enough free shards
        for idx in range(self.query.cluster.by_name[node].num_gpus):
            s = (node, idx)
            if s in self.state.exclusive:
                # Slurm allocates the pins of one moment in its own order: while an exclusive
                # start below is pinned but not allocated, that GPU is empty in Slurm's view and
                # this shard would go there (then the exclusive job takes other GPUs, maybe one
                # whose shard usage Slurm has lost)
                flying = [h for h in self.state.holders.get(s, []) if self._in_flight(h)]
                if flying:
                    raise ActionRejected(
                        f"job {','.join(flying)} is pinned to GPU {node}:{idx} but not started "
                        f"yet; Slurm could put job {jid}'s shard there first; retry"
                    )
                self._refuse_if_freed_below(jid, s, now)
                continue
            if idx not in lost and spg - self.state.shard_use.get(s, 0) < need:
                self._refuse_if_freed_below(jid, s, now)
                continue
            if idx == g:
                return g
            other = self.state.holders.get(s, [])
            if not other:
                raise ActionRejected(
                    f"Slurm would put job {jid}'s shard on the empty GPU {node}:{idx}, not "
                    f"{node}:{g} (22.05 picks the lowest GPU with a free shard)"
                )
            self._shareable(jid, s, other)
            return idx  # another GPU with room for one more job: shared there instead
        raise ActionRejected(f"no free shard on GPU {node}:{g}")

    def _refuse_if_freed_below(self, jid: str, slot: Slot, now: float) -> None:
        """Refuse a Share while a full GPU below its target has a holder about to end.

        Slurm allocates the pinned shard a moment later: if that holder ends first, the GPU is
        empty (an exclusive job ended) or its shard usage is lost (22.05.8, a sharer ended), and
        Slurm puts the shard there instead, next to jobs this backend does not expect (seen in
        the integration suite: three 1-shard jobs on one GPU at C = 2; a shard on the GPU an
        exclusive job had just left, which then pushed the next exclusive start onto a shared
        GPU)."""
        ending = self._ending_soon(self.state.holders.get(slot, ()), now)
        if ending is not None:
            node, idx = slot
            raise ActionRejected(
                f"job {ending} on GPU {node}:{idx} ends within {SHARD_END_RISK_S:.0f}s: Slurm "
                f"could then put job {jid}'s shard there, not where expected; retry"
            )

    def _slurm_used(self, node: str) -> set[int] | None:
        """GPU indices of ``node`` that Slurm's fresh per-node view (``sinfo``) counts as used,
        plus those of jobs this backend pinned since (intents); None without a fresh view."""
        if not self.state.slurm_view_shards:
            return None
        snode = self.state.node_by_name.get(node)
        if snode is None:
            return None
        used = set(snode.used_gpus)
        for g in range(snode.num_gpus):
            if any(h in self.state.intents for h in self.state.holders.get((node, g), ())):
                used.add(g)
        return used

    def _slurm_lost_usage(self, node: str) -> set[int]:
        """GPUs of ``node`` that jobs hold but Slurm counts as unused (22.05.8 drops a shared
        GPU's shard usage when one sharer ends); empty without a fresh view."""
        used = self._slurm_used(node)
        if used is None:
            return set()
        return {
            g
            for g in range(self.query.cluster.by_name[node].num_gpus)
            if self.state.holders.get((node, g)) and g not in used
        }

    def _in_flight(self, jid: str) -> bool:
        """Pinned by this backend (in this call or before) and not running in Slurm yet."""
        if jid not in self.state.intents:
            return False
        job = self.state.slurm.get(jid)
        return job is None or job.state in PENDING_STATES

    def _shareable(self, jid: str, slot: Slot, holders: list[str]) -> None:
        node, g = slot
        cap = self.state.max_jobs_per_gpu
        if len(holders) >= cap:
            raise ActionRejected(f"GPU {node}:{g} already holds {len(holders)} job(s) (max {cap})")
        if slot in self.state.exclusive or FOREIGN in holders:
            raise ActionRejected(
                f"GPU {node}:{g} is held with exclusive gpu GRES (or by a job of another "
                "partition); Slurm 22.05 can only co-locate shard jobs"
            )


def lost_start_left(state: BackendState, jid: str, placement: Placement) -> float:
    """Seconds until ``jid`` may be launched on ``placement`` after slurmctld lost its start
    there (0 when it may, see :data:`LOST_START_GRACE_S`)."""
    return _grace_left(state.lost_starts, LOST_START_GRACE_S, state.clock(), jid, placement)


def requeue_grace_left(state: BackendState, jid: str, placement: Placement | None) -> float:
    """Seconds until ``jid`` may be launched on ``placement`` after our requeue of it (0 when
    it may, see :data:`REQUEUE_GRACE_S`)."""
    return _grace_left(state.requeued, REQUEUE_GRACE_S, state.clock(), jid, placement)


def _grace_left(
    entries: dict[str, tuple[float, frozenset[str]]],
    grace_s: float,
    now: float,
    jid: str,
    placement: Placement | None,
) -> float:
    """Seconds left of ``grace_s`` since ``entries[jid]`` began when ``placement`` (None: any)
    uses one of its nodes; an entry past its grace is dropped."""
    entry = entries.get(jid)
    if entry is None:
        return 0.0
    at, nodes = entry
    left = at + grace_s - now
    if left <= 0:
        del entries[jid]
        return 0.0
    if placement is not None and not nodes.intersection(placement.nodes):
        return 0.0
    return left
