"""Placements: which GPU indices of which nodes a job holds."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from functools import cached_property

from pydantic import BaseModel, ConfigDict, Field, field_validator


class NodeGpus(BaseModel):
    """GPU indices used on one node (sorted, unique)."""

    model_config = ConfigDict(frozen=True)

    node: str = Field(min_length=1)
    gpus: tuple[int, ...]

    @field_validator("gpus")
    @classmethod
    def _sorted_unique(cls, gpus: tuple[int, ...]) -> tuple[int, ...]:
        if not gpus:
            raise ValueError("a node part of a placement needs at least one GPU")
        if any(g < 0 for g in gpus):
            raise ValueError(f"negative GPU index in {gpus}")
        if len(set(gpus)) != len(gpus):
            raise ValueError(f"duplicate GPU index in {gpus}")
        return tuple(sorted(gpus))


class Placement(BaseModel):
    """Where a job runs: one :class:`NodeGpus` per node, nodes unique, in the order given."""

    model_config = ConfigDict(frozen=True)

    parts: tuple[NodeGpus, ...]

    @field_validator("parts")
    @classmethod
    def _unique_nodes(cls, parts: tuple[NodeGpus, ...]) -> tuple[NodeGpus, ...]:
        names = [p.node for p in parts]
        if len(set(names)) != len(names):
            raise ValueError(f"node listed twice in placement: {names}")
        if not parts:
            raise ValueError("empty placement")
        return parts

    @classmethod
    def of(cls, alloc: Mapping[str, Sequence[int]]) -> Placement:
        """Build from ``{node: [gpu indices]}`` (insertion order kept)."""
        return cls(parts=tuple(NodeGpus(node=n, gpus=tuple(g)) for n, g in alloc.items() if g))

    @cached_property
    def num_gpus(self) -> int:
        return sum(len(p.gpus) for p in self.parts)

    @cached_property
    def nodes(self) -> tuple[str, ...]:
        return tuple(p.node for p in self.parts)

    @cached_property
    def as_dict(self) -> dict[str, tuple[int, ...]]:
        return {p.node: p.gpus for p in self.parts}

    def slots(self) -> Iterator[tuple[str, int]]:
        """Every (node, gpu index) pair of the placement."""
        for p in self.parts:
            for g in p.gpus:
                yield p.node, g

    def __str__(self) -> str:
        return " ".join(f"{p.node}[{','.join(map(str, p.gpus))}]" for p in self.parts)
