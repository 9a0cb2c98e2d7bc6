"""The placement checks every backend shares: can this job go on these GPUs of this cluster?

Contract: :func:`check_placement` (or :func:`check_count`, then :func:`check_part` per node, for
a backend that layers checks of its own after each node) raises
:class:`~slurm_sched.backend.ActionRejected` for a placement that cannot hold the job, checking
in this order: the GPU count (only when ``exact``: gangs start whole; a Reconfigure may change
it); then per node, in the placement's order: a node the cluster lacks, a node the backend does
not offer for new jobs, a node of another GPU type than the job needs; then per GPU: an index
the node lacks, a GPU another job holds (unless the action shares), a GPU already holding
``max_jobs_per_gpu`` jobs (when the backend checks the capacity here). GPUs in ``own`` (the
job's current ones, for a backend that has not released them yet) are neither held nor full.
The checks read only what they are given and change nothing; their messages are the ones both
backends report.

:func:`missing_gpu` is the existence check alone, for a captured state whose jobs already hold
their GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet

from slurm_sched.backend import ActionRejected
from slurm_sched.model import Cluster, JobView, Node, NodeGpus, Placement

#: one GPU: (node name, GPU index)
Slot = tuple[str, int]


def check_placement(
    view: JobView,
    placement: Placement,
    cluster: Cluster,
    holders: Mapping[Slot, Sequence[str]],
    *,
    share: bool,
    exact: bool,
    max_jobs_per_gpu: int | None = None,
    own: AbstractSet[Slot] = frozenset(),
    available_nodes: AbstractSet[str] | None = None,
) -> None:
    """Reject ``placement`` for ``view``'s job (see the module docstring).

    Args:
        holders: the jobs holding each GPU now (a GPU no job holds may be absent).
        share: the action co-locates: GPUs held by other jobs are allowed.
        exact: the placement must have exactly the GPU count the job asked for.
        max_jobs_per_gpu: refuse a GPU that already holds this many jobs (None: not checked
            here).
        own: GPUs the job holds itself, skipped by the holder and capacity checks.
        available_nodes: the nodes offered for new jobs (None: every node of the cluster).
    """
    if exact:
        check_count(view, placement)
    for part in placement.parts:
        check_part(
            view,
            part,
            cluster,
            holders,
            share=share,
            max_jobs_per_gpu=max_jobs_per_gpu,
            own=own,
            available_nodes=available_nodes,
        )


def check_count(view: JobView, placement: Placement) -> None:
    """Reject a placement whose GPU count is not the one the job asked for."""
    if placement.num_gpus != view.spec.num_gpus:
        raise ActionRejected(
            f"job {view.job_id} asks for {view.spec.num_gpus} GPU(s), "
            f"placement has {placement.num_gpus}"
        )


def check_part(
    view: JobView,
    part: NodeGpus,
    cluster: Cluster,
    holders: Mapping[Slot, Sequence[str]],
    *,
    share: bool,
    max_jobs_per_gpu: int | None = None,
    own: AbstractSet[Slot] = frozenset(),
    available_nodes: AbstractSet[str] | None = None,
) -> Node:
    """Reject one node's part of a placement (arguments: :func:`check_placement`); returns the
    node."""
    node = cluster.by_name.get(part.node)
    if node is None:
        raise ActionRejected(f"unknown node {part.node!r}")
    if available_nodes is not None and node.name not in available_nodes:
        raise ActionRejected(f"node {node.name} is not available for new jobs")
    gpu_type = view.spec.gpu_type
    if gpu_type is not None and node.gpu_type != gpu_type:
        raise ActionRejected(
            f"job {view.job_id} needs {gpu_type} GPUs, node {node.name} has {node.gpu_type}"
        )
    for g in part.gpus:
        if g >= node.num_gpus:
            raise ActionRejected(f"node {node.name} has no GPU index {g}")
        slot = (node.name, g)
        if slot in own:
            continue
        held_by = holders.get(slot, ())
        if held_by and not share:
            raise ActionRejected(
                f"GPU {node.name}:{g} is held by {','.join(held_by)}; use Share to co-locate"
            )
        if max_jobs_per_gpu is not None and len(held_by) >= max_jobs_per_gpu:
            raise ActionRejected(
                f"GPU {node.name}:{g} already holds {len(held_by)} job(s) "
                f"(max {max_jobs_per_gpu})"
            )
    return node


def missing_gpu(cluster: Cluster, placement: Placement) -> Slot | None:
    """The first GPU of ``placement`` that ``cluster`` does not have (None: it has them all)."""
    by_name = cluster.by_name
    for name, g in placement.slots():
        node = by_name.get(name)
        if node is None or g >= node.num_gpus:
            return name, g
    return None
