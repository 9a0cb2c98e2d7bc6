"""Gradient accumulation (SJF-BSBF): split a rank's batch into the scheduler's sub-batches.

The global batch B the user fixed never changes (SJF-BSBF §1.2: "convergence identical to the
requested batch"); the scheduler only chooses how many sub-batches each GPU runs per optimizer
step. With a mean-reduced loss, weighting sub-batch i of n_i samples by ``n_i * W / B`` (W =
data-parallel ranks, whose all-reduce averages) makes the summed gradient equal the gradient of
the mean loss over the whole global batch, also when the split is uneven.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def micro_batch_sizes(
    local_batch: int, *, sub_batch_size: int | None = None, accumulation_steps: int = 1
) -> list[int]:
    """Sizes of the sub-batches one rank runs for a step of ``local_batch`` samples.

    ``sub_batch_size`` wins when given (the policy's chosen b: ``ceil(local / b)`` sub-batches,
    the last one possibly smaller); otherwise the batch is cut into ``accumulation_steps`` parts
    as equal as possible. Never returns an empty sub-batch.
    """
    if local_batch < 1:
        raise ValueError(f"local_batch must be >= 1, got {local_batch}")
    if sub_batch_size is not None:
        if sub_batch_size < 1:
            raise ValueError(f"sub_batch_size must be >= 1, got {sub_batch_size}")
        b = min(sub_batch_size, local_batch)
        n = math.ceil(local_batch / b)
        return [b] * (n - 1) + [local_batch - b * (n - 1)]
    if accumulation_steps < 1:
        raise ValueError(f"accumulation_steps must be >= 1, got {accumulation_steps}")
    s = min(accumulation_steps, local_batch)
    base, extra = divmod(local_batch, s)
    return [base + 1] * extra + [base] * (s - extra)


def batch_len(batch: Any) -> int:
    """Samples in a batch: the leading dimension of its (first) tensor."""
    if hasattr(batch, "shape"):
        return int(batch.shape[0])
    if isinstance(batch, tuple | list) and batch:
        return batch_len(batch[0])
    if isinstance(batch, dict) and batch:
        return batch_len(next(iter(batch.values())))
    raise TypeError(f"cannot tell the batch size of a {type(batch).__name__}")


def slice_batch(batch: Any, start: int, stop: int) -> Any:
    """``batch[start:stop]`` along the leading dimension, for tensors and containers of them."""
    if hasattr(batch, "shape"):
        return batch[start:stop]
    if isinstance(batch, tuple | list):
        return type(batch)(slice_batch(b, start, stop) for b in batch)
    if isinstance(batch, dict):
        return {k: slice_batch(v, start, stop) for k, v in batch.items()}
    raise TypeError(f"cannot slice a {type(batch).__name__}")


def split_batch(batch: Any, sizes: Sequence[int]) -> list[Any]:
    """Consecutive sub-batches of the given sizes (their sum must be the batch size)."""
    n = batch_len(batch)
    if sum(sizes) != n:
        raise ValueError(f"sub-batch sizes {list(sizes)} do not add up to the batch size {n}")
    out = []
    start = 0
    for size in sizes:
        out.append(slice_batch(batch, start, start + size))
        start += size
    return out


def shard_bounds(global_batch: int, rank: int, world_size: int) -> tuple[int, int]:
    """``[start, stop)`` of rank ``rank``'s share of a global batch (sizes differ by <= 1)."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} out of range for world size {world_size}")
    base, extra = divmod(global_batch, world_size)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)
