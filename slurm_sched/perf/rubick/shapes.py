"""Placement shapes: GPUs per node, sorted descending (:data:`Shape`), from a placement, from text
and as a key.
"""

from __future__ import annotations

import math

from slurm_sched.model import Placement

Shape = tuple[int, ...]  # GPUs per node, sorted descending


def shape_of(placement: Placement) -> Shape:
    return tuple(sorted((len(p.gpus) for p in placement.parts), reverse=True))


def parse_shape(text: str) -> Shape:
    """Artifact placement string (one digit per node) -> shape."""
    if not text.isdigit() or "0" in text:
        raise ValueError(f"placement {text!r} must be digits 1-9, one per node")
    return tuple(sorted((int(c) for c in text), reverse=True))


def shape_key(shape: Shape) -> str:
    return "".join(str(k) for k in shape) if all(k < 10 for k in shape) else "x".join(
        map(str, shape))


def compact_shape(gpus: int, gpus_per_node: int = 8) -> Shape:
    """Most compact uniform shape: one node if it fits, else whole nodes."""
    if gpus <= gpus_per_node:
        return (gpus,)
    n = math.ceil(gpus / gpus_per_node)
    if gpus % n == 0:
        return (gpus // n,) * n
    return (gpus_per_node,) * (gpus // gpus_per_node) + ((gpus % gpus_per_node),)
