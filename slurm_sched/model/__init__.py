"""Frozen, typed models shared by the policies, the simulator and the Slurm backend."""

from slurm_sched.model.actions import (
    ACTION_ADAPTER,
    Action,
    ActionResult,
    Migrate,
    Preempt,
    Reconfigure,
    Resume,
    Share,
    Start,
    Suspend,
)
from slurm_sched.model.cluster import Cluster, Node, parse_cluster_spec
from slurm_sched.model.completed import CompletedJob
from slurm_sched.model.job import JobSpec, JobState, JobView
from slurm_sched.model.placement import NodeGpus, Placement
from slurm_sched.model.settings import AS_SUBMITTED, JobSettings
from slurm_sched.model.snapshot import ClusterSnapshot

__all__ = [
    "ACTION_ADAPTER",
    "AS_SUBMITTED",
    "Action",
    "ActionResult",
    "Cluster",
    "ClusterSnapshot",
    "CompletedJob",
    "JobSettings",
    "JobSpec",
    "JobState",
    "JobView",
    "Migrate",
    "Node",
    "NodeGpus",
    "Placement",
    "Preempt",
    "Reconfigure",
    "Resume",
    "Share",
    "Start",
    "Suspend",
    "parse_cluster_spec",
]
