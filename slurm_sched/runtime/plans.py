"""Execution plans (Rubick): parse the scheduler's plan code and apply it to a torch model.

Plan codes (``docs/hints.md``, the Rubick artifact's names):

==================  ==========================================================================
``dp`` ``ga`` ``ddp``  data parallel: torch DDP (gloo on CPU, NCCL on CUDA); gradient
                    accumulation comes from the settings' ``accumulation_steps``/``sub_batch_size``
``gc``              DP + activation checkpointing of every block (recompute in backward)
``zero-dp``         sharded data parallel, ZeRO-2-like: torch FSDP2 ``fully_shard`` per block
                    with ``reshard_after_forward=False`` (parameters stay gathered between
                    forward and backward; gradients and optimizer state are sharded)
``zero-offload``    ``zero-dp`` plus FSDP's CPU offload of parameters, gradients and the
                    optimizer step (on a CPU device there is nothing to offload: noted)
``<x>-gc``          any of the above plus activation checkpointing, e.g. ``zero-dp-gc``
``P-T-D``           PP-TP-DP triple, e.g. ``1-1-4``; only ``1-1-D`` (pure DP) is executed;
                    pipeline and tensor parallelism are not implemented: runs as DP, noted
==================  ==========================================================================

A plan that cannot be executed never crashes the job: :func:`apply_plan` falls back to DP and
says why in :attr:`AppliedPlan.notes` (reported to the scheduler with the progress).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

_TRIPLE = re.compile(r"^(\d+)-(\d+)-(\d+)$")
_DP_ALIASES = {"dp", "ga", "ddp"}


@dataclass(frozen=True)
class ExecutionPlan:
    """What a plan code asks for."""

    code: str
    sharded: bool = False
    offload: bool = False
    activation_checkpointing: bool = False
    pipeline_parallel: int = 1
    tensor_parallel: int = 1
    data_parallel: int | None = None  # None: as many ranks as the job has

    @property
    def is_pure_data_parallel(self) -> bool:
        return self.pipeline_parallel == 1 and self.tensor_parallel == 1


def parse_plan(code: str | None) -> ExecutionPlan:
    """Parse a plan code; ``None`` means plain DP. ``ValueError`` naming the code if unknown."""
    if code is None or code == "":
        return ExecutionPlan("dp")
    text = code.strip().lower()
    m = _TRIPLE.match(text)
    if m:
        pp, tp, dp = (int(g) for g in m.groups())
        if min(pp, tp, dp) < 1:
            raise ValueError(f"plan {code!r}: PP, TP and DP sizes must be >= 1")
        return ExecutionPlan(text, pipeline_parallel=pp, tensor_parallel=tp, data_parallel=dp)
    gc = False
    base = text
    if base == "gc":
        return ExecutionPlan(text, activation_checkpointing=True)
    if base.endswith("-gc"):
        gc = True
        base = base[: -len("-gc")]
    if base in _DP_ALIASES:
        return ExecutionPlan(text, activation_checkpointing=gc)
    if base == "zero-dp":
        return ExecutionPlan(text, sharded=True, activation_checkpointing=gc)
    if base == "zero-offload":
        return ExecutionPlan(text, sharded=True, offload=True, activation_checkpointing=gc)
    raise ValueError(
        f"unknown plan {code!r} (known: dp, ga, ddp, gc, zero-dp, zero-offload, <plan>-gc, P-T-D)"
    )


@dataclass
class AppliedPlan:
    """The wrapped model and what was really applied."""

    model: Any  # torch.nn.Module (DDP, FSDP2-sharded or plain)
    requested: str
    applied: str
    data_parallel: str  # "none" | "ddp" | "fsdp"
    activation_checkpointing: bool
    checkpointed_blocks: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def sharded(self) -> bool:
        return self.data_parallel == "fsdp"


def default_blocks(model: Any) -> list[Any]:
    """The repeated blocks of a model: the items of every ``nn.ModuleList`` (transformer layers,
    ResNet blocks), outermost first; else the root's direct children that own parameters."""
    from torch import nn

    blocks: list[nn.Module] = []
    seen: set[int] = set()
    for module in model.modules():
        if isinstance(module, nn.ModuleList) and id(module) not in seen:
            for child in module:
                if any(True for _ in child.parameters()):
                    blocks.append(child)
            # blocks inside a block are already covered by the outer one
            for child in module:
                seen.update(id(m) for m in child.modules())
    if blocks:
        return blocks
    return [c for c in model.children() if any(True for _ in c.parameters())]


def enable_activation_checkpointing(blocks: Iterable[Any]) -> int:
    """Recompute each block's activations in backward (``torch.utils.checkpoint``).

    The block's ``forward`` is wrapped in place, so parameter names and the state dict are
    unchanged (a checkpoint taken with ``gc`` loads without it and vice versa). Returns the
    number of blocks wrapped.
    """
    import torch
    from torch.utils.checkpoint import checkpoint

    n = 0
    for block in blocks:
        if getattr(block, "_slurm_sched_gc", False):
            continue
        inner: Callable[..., Any] = block.forward

        @functools.wraps(inner)
        def forward(*args: Any, _inner: Callable[..., Any] = inner, **kwargs: Any) -> Any:
            if torch.is_grad_enabled():
                return checkpoint(_inner, *args, use_reentrant=False, **kwargs)
            return _inner(*args, **kwargs)

        block.forward = forward
        block._slurm_sched_gc = True
        n += 1
    return n


def apply_plan(
    model: Any,
    code: str | None,
    *,
    world_size: int,
    device: Any,
    blocks: list[Any] | None = None,
) -> AppliedPlan:
    """Wrap ``model`` (already on ``device``) for plan ``code`` on ``world_size`` ranks.

    Needs an initialised default process group when ``world_size > 1``. Create the optimizer
    from ``result.model.parameters()`` *after* this call (FSDP replaces parameters).
    """
    notes: list[str] = []
    try:
        plan = parse_plan(code)
    except ValueError as exc:
        notes.append(f"{exc}; running as dp")
        plan = ExecutionPlan("dp")
    if not plan.is_pure_data_parallel:
        notes.append(
            f"plan {plan.code}: pipeline/tensor parallelism is not implemented by this runtime; "
            f"running as dp over {world_size} rank(s)"
        )
        plan = ExecutionPlan("dp")
    elif plan.data_parallel is not None and plan.data_parallel != world_size:
        notes.append(f"plan {plan.code}: DP size {plan.data_parallel} != {world_size} ranks")
    chosen_blocks = blocks if blocks is not None else default_blocks(model)
    n_gc = 0
    if plan.activation_checkpointing:
        n_gc = enable_activation_checkpointing(chosen_blocks)
        if n_gc == 0:
            notes.append("activation checkpointing: no block to wrap")
    applied = plan.code
    wrapped: Any = model
    mode = "none"
    if plan.sharded:
        if world_size > 1:
            wrapped = _fully_shard(model, chosen_blocks, plan, device, notes)
            mode = "fsdp"
        else:
            notes.append(f"plan {plan.code}: one rank, nothing to shard; running unsharded")
    elif world_size > 1:
        from torch.nn.parallel import DistributedDataParallel

        ids = [device.index] if device.type == "cuda" else None
        wrapped = DistributedDataParallel(model, device_ids=ids)
        mode = "ddp"
    return AppliedPlan(
        model=wrapped,
        requested=code or "dp",
        applied=applied,
        data_parallel=mode,
        activation_checkpointing=plan.activation_checkpointing and n_gc > 0,
        checkpointed_blocks=n_gc,
        notes=notes,
    )


def _fully_shard(
    model: Any, blocks: list[Any], plan: ExecutionPlan, device: Any, notes: list[str]
) -> Any:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, OffloadPolicy, fully_shard

    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    offload: OffloadPolicy = OffloadPolicy()
    if plan.offload:
        if device.type == "cuda":
            offload = CPUOffloadPolicy()
        else:
            notes.append(f"plan {plan.code}: the model is already on the CPU; offload is a no-op")
    # ZeRO-2 (Rubick's default ZeRO stage): keep parameters gathered from forward to backward
    for block in blocks:
        fully_shard(block, mesh=mesh, reshard_after_forward=False, offload_policy=offload)
    fully_shard(model, mesh=mesh, reshard_after_forward=False, offload_policy=offload)
    return model
