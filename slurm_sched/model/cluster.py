"""Cluster model: nodes with typed GPUs, grouped in partitions.

Nodes are immutable; what is in use on them lives in
:class:`~slurm_sched.model.snapshot.ClusterSnapshot`.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from slurm_sched.errors import ClusterSpecError

DEFAULT_GPU_TYPE = "gpu"


class Node(BaseModel):
    """One server. ``num_gpus`` GPUs of one ``gpu_type``; indices are 0..num_gpus-1."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1)
    num_gpus: int = Field(ge=0)
    gpu_type: str = DEFAULT_GPU_TYPE
    cpus: int = Field(default=32, ge=1)
    mem_gb: float = Field(default=256.0, gt=0)
    partitions: tuple[str, ...] = ()


class Cluster(BaseModel):
    """An ordered set of nodes. Node order is the canonical tie-break everywhere."""

    model_config = ConfigDict(frozen=True)

    nodes: tuple[Node, ...]

    @field_validator("nodes")
    @classmethod
    def _unique_names(cls, nodes: tuple[Node, ...]) -> tuple[Node, ...]:
        seen: set[str] = set()
        for n in nodes:
            if n.name in seen:
                raise ValueError(f"duplicate node name {n.name!r}")
            seen.add(n.name)
        return nodes

    @cached_property
    def by_name(self) -> dict[str, Node]:
        return {n.name: n for n in self.nodes}

    @cached_property
    def total_gpus(self) -> int:
        return sum(n.num_gpus for n in self.nodes)

    @cached_property
    def gpu_types(self) -> tuple[str, ...]:
        out: list[str] = []
        for n in self.nodes:
            if n.num_gpus and n.gpu_type not in out:
                out.append(n.gpu_type)
        return tuple(out)

    @cached_property
    def max_gpus_per_node(self) -> int:
        return max((n.num_gpus for n in self.nodes), default=0)

    @cached_property
    def capacity_by_type(self) -> dict[str | None, int]:
        """GPUs per type; the key None counts every GPU."""
        cap: dict[str | None, int] = {None: self.total_gpus}
        for n in self.nodes:
            if n.num_gpus:
                cap[n.gpu_type] = cap.get(n.gpu_type, 0) + n.num_gpus
        return cap

    def gpus_of_type(self, gpu_type: str | None) -> int:
        return self.capacity_by_type.get(gpu_type, 0)


_SPEC_PART = re.compile(r"^(?P<n>\d+)x(?P<g>\d+)(?::(?P<type>[A-Za-z0-9_.-]+))?"
                        r"(?:/(?P<cpus>\d+)cpu)?(?:/(?P<mem>\d+(?:\.\d+)?)gb)?$")


def parse_cluster_spec(spec: str) -> Cluster:
    """Parse ``NxG[:type][/Ccpu][/Mgb][,...]``, e.g. ``16x4``, ``3x8:v100,6x8:p100`` or
    ``8x8:a800/96cpu/1600gb``.

    Nodes are named ``<type>-<k>`` (``node-<k>`` without a type), numbered from 1 per type.
    ``/Ccpu`` and ``/Mgb`` set each node's CPUs and host memory (GB); without them a node has
    :class:`Node`'s defaults.

    Raises:
        ClusterSpecError: naming the bad part and why.
    """
    if not spec or not spec.strip():
        raise ClusterSpecError(
            "empty cluster spec; expected NxG[:type], e.g. 16x4", field="cluster", value=spec
        )
    nodes: list[Node] = []
    counters: dict[str, int] = {}
    for part in spec.split(","):
        part = part.strip()
        m = _SPEC_PART.match(part)
        if not m:
            raise ClusterSpecError(
                "expected NxG[:type][/Ccpu][/Mgb] (e.g. 16x4, 3x8:v100 or 8x8:a800/96cpu/1600gb)",
                field="cluster", value=part
            )
        n, g = int(m["n"]), int(m["g"])
        if n < 1 or g < 1:
            raise ClusterSpecError("node and GPU counts must be >= 1", field="cluster", value=part)
        gpu_type = m["type"] or DEFAULT_GPU_TYPE
        prefix = m["type"] or "node"
        extra: dict[str, Any] = {}
        if m["cpus"]:
            extra["cpus"] = int(m["cpus"])
        if m["mem"]:
            extra["mem_gb"] = float(m["mem"])
        if extra.get("cpus") == 0 or extra.get("mem_gb") == 0:
            raise ClusterSpecError("CPUs and memory must be > 0", field="cluster", value=part)
        for _ in range(n):
            counters[prefix] = counters.get(prefix, 0) + 1
            nodes.append(Node(name=f"{prefix}-{counters[prefix]}", num_gpus=g, gpu_type=gpu_type,
                              **extra))
    return Cluster(nodes=tuple(nodes))
