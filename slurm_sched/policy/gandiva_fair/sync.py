"""The start of a Gandiva_fair cycle: the policy's job memory brought up to date with a
snapshot, and the :class:`~.cycle.Cycle` of the jobs holding GPUs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from slurm_sched.model import ClusterSnapshot, JobState, Placement
from slurm_sched.policy.gandiva_fair.cycle import Cycle
from slurm_sched.policy.gandiva_fair.job_state import HeldJob, JobMemory
from slurm_sched.policy.gandiva_fair.tickets import ANY_POOL, pool_sizes

if TYPE_CHECKING:
    from slurm_sched.policy.gandiva_fair.policy import GandivaFair


def sync(pol: GandivaFair, snap: ClusterSnapshot, now: float) -> Cycle:
    """Remember the snapshot's new jobs (arrival order), forget the finished ones, and return
    the cycle's working state with every job that holds GPUs (running or suspended)."""
    cy = Cycle(snap=snap, now=now, pools=pool_sizes(snap))
    alive = set()
    for j in snap.jobs:
        jid = j.spec.job_id
        alive.add(jid)
        mem = pol.mem.get(jid)
        if mem is None:
            mem = pol.mem[jid] = JobMemory(seq=pol.seq, placed_at_s=now)
            pol.seq += 1
        if j.state is JobState.PENDING or j.placement is None:
            continue
        slots = frozenset(j.placement.slots())
        cy.held[j.job_id] = HeldJob(
            view=j,
            user=j.spec.user,
            size=j.placement.num_gpus,
            pool=pool_of_placement(snap, j.placement),
            slots=slots,
            servers=j.placement.nodes,
            running=j.state is JobState.RUNNING,
        )
        for s in slots:
            cy.holders[s].append(j.job_id)
    for gone in set(pol.mem) - alive:
        del pol.mem[gone]
    return cy


def pool_of_placement(snap: ClusterSnapshot, p: Placement) -> str:
    """The GPU type of the placement's servers, :data:`.tickets.ANY_POOL` when they mix types."""
    types = {snap.cluster.by_name[n].gpu_type for n in p.nodes}
    return types.pop() if len(types) == 1 else ANY_POOL
