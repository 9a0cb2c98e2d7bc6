"""Small real models on synthetic data, for the example training job, the profiler and tests.

Each :class:`Workload` builds a model and makes the *global* batch of a step deterministically
from ``(seed, step)``, so a run that is interrupted and resumed, or that changes its number of
data-parallel ranks, sees exactly the same samples at every step.

- ``mlp``: 3-layer perceptron, 64 features, 10 classes (fastest; unit tests).
- ``tiny-transformer``: 2-layer transformer encoder language model (vocab 256, d_model 64,
  4 heads, sequence 32), next-token loss. No dropout, so runs are bit-reproducible.
- ``resnet18``: the CIFAR variant of ResNet-18 (3x3 stem, 4 stages of 2 basic blocks,
  64-512 channels, 32x32 inputs, 10 classes), written out here (torchvision is not a
  dependency). Far slower on CPU; meant for GPU profiling.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

Batch = tuple[Tensor, Tensor]


@dataclass(frozen=True)
class Workload:
    """A model plus its synthetic data and loss.

    ``loss(model, batch)`` returns the *mean* loss over the batch (what gradient accumulation
    assumes).
    """

    name: str
    build: Callable[[], nn.Module]
    make_batch: Callable[[int, int, int], Batch]  # (batch_size, step, seed) -> (x, y)
    loss: Callable[[nn.Module, Batch], Tensor]
    description: str


def _generator(seed: int, step: int) -> torch.Generator:
    # a distinct, reproducible stream per (seed, step); independent of the process's RNG
    return torch.Generator().manual_seed((seed * 1_000_003 + step) % (2**63 - 1))


# ---------------------------------------------------------------------------------- MLP
MLP_IN = 64
MLP_CLASSES = 10


def _build_mlp() -> nn.Module:
    return nn.Sequential(
        nn.Linear(MLP_IN, 128),
        nn.ReLU(),
        nn.Linear(128, 128),
        nn.ReLU(),
        nn.Linear(128, MLP_CLASSES),
    )


def _mlp_batch(batch_size: int, step: int, seed: int) -> Batch:
    g = _generator(seed, step)
    x = torch.randn(batch_size, MLP_IN, generator=g)
    y = torch.randint(0, MLP_CLASSES, (batch_size,), generator=g)
    return x, y


def _classification_loss(model: nn.Module, batch: Batch) -> Tensor:
    x, y = batch
    return F.cross_entropy(model(x), y)


# ---------------------------------------------------------------------------------- transformer
VOCAB = 256
SEQ_LEN = 32


class TinyTransformerLM(nn.Module):
    """Token + position embedding, ``layers`` encoder layers (causal mask), linear head."""

    def __init__(self, d_model: int = 64, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d_model)
        self.pos = nn.Parameter(torch.zeros(SEQ_LEN, d_model))
        # a ModuleList of blocks: what activation checkpointing and FSDP wrap one by one
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(
                d_model, heads, dim_feedforward=4 * d_model, dropout=0.0, batch_first=True
            )
            for _ in range(layers)
        )
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, VOCAB)
        self.register_buffer(
            "causal",
            torch.triu(torch.full((SEQ_LEN, SEQ_LEN), float("-inf")), diagonal=1),
            persistent=False,
        )

    def forward(self, tokens: Tensor) -> Tensor:
        n = tokens.shape[1]
        h = self.embed(tokens) + self.pos[:n]
        causal = self.get_buffer("causal")
        mask = causal[:n, :n]
        for block in self.blocks:
            h = block(h, src_mask=mask)
        out: Tensor = self.head(self.norm(h))
        return out


def _lm_batch(batch_size: int, step: int, seed: int) -> Batch:
    g = _generator(seed, step)
    tokens = torch.randint(0, VOCAB, (batch_size, SEQ_LEN + 1), generator=g)
    return tokens[:, :-1], tokens[:, 1:]


def _lm_loss(model: nn.Module, batch: Batch) -> Tensor:
    x, y = batch
    logits = model(x)
    return F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))


# ---------------------------------------------------------------------------------- ResNet-18
class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet18(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64))
        blocks: list[nn.Module] = []
        cin = 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.blocks = nn.ModuleList(blocks)
        self.fc = nn.Linear(512, classes)

    def forward(self, x: Tensor) -> Tensor:
        h = F.relu(self.stem(x))
        for block in self.blocks:
            h = block(h)
        out: Tensor = self.fc(torch.flatten(F.adaptive_avg_pool2d(h, 1), 1))
        return out


def _image_batch(batch_size: int, step: int, seed: int) -> Batch:
    g = _generator(seed, step)
    return torch.randn(batch_size, 3, 32, 32, generator=g), torch.randint(
        0, 10, (batch_size,), generator=g
    )


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            "mlp",
            _build_mlp,
            _mlp_batch,
            _classification_loss,
            "3-layer MLP, 64 features, 10 classes",
        ),
        Workload(
            "tiny-transformer",
            TinyTransformerLM,
            _lm_batch,
            _lm_loss,
            "2-layer transformer LM, d_model 64, seq 32, vocab 256",
        ),
        Workload(
            "resnet18",
            ResNet18,
            _image_batch,
            _classification_loss,
            "ResNet-18 (CIFAR variant), 32x32 images, 10 classes",
        ),
    )
}


def workload(name: str) -> Workload:
    """The workload called ``name``; ``ValueError`` naming the known ones otherwise."""
    try:
        return WORKLOADS[name]
    except KeyError:
        raise ValueError(
            f"unknown model {name!r} (known: {', '.join(sorted(WORKLOADS))})"
        ) from None


def to_device(batch: Any, device: torch.device) -> Any:
    """Move a tensor, or a tuple/list/dict of them, to ``device``."""
    if isinstance(batch, Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, tuple | list):
        return type(batch)(to_device(b, device) for b in batch)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    return batch
