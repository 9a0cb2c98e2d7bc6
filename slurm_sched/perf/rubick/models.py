"""The models of Rubick's evaluation (:data:`MODELS`): the seven Transformer models of the paper's
Table 2 plus T5-3B (Fig. 8) and LLaMA-2-7B at batch 16 (Fig. 7), with their constants (P, b, s,
h, l, heads) and the artifact's micro-batch limits.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurm_sched.perf.rubick.hashing import hash_once

MIB = float(2**20)


@hash_once
@dataclass(frozen=True)
class ModelSpec:
    """One model type (jobs of the same architecture share one fitted model, paper §3)."""

    name: str
    params: int  # P, parameter count
    batch: int  # global batch b of the traces
    seq: int  # s
    hidden: int  # h
    layers: int  # l
    heads: int
    allow_3d: bool  # TP/PP allowed in the paper's traces (§7.3)
    table: str | None  # data/rubick/traces/<table>/placements.csv
    profile: str | None  # data/rubick/profile/<profile>/
    b_intra: float  # NVLink bandwidth constant (artifact units, §2.8)
    b_pcie: float  # PCIe (offload) bandwidth constant (artifact units, §2.8)
    fwd_1gpu_ms: float  # forward time of the whole global batch on one GPU (artifact, §5.2)
    #: (family, gc) -> largest per-GPU micro-batch that fits (artifact ``max_dp_atom_bsz``);
    #: 0 = infeasible. Families absent here fall back to the analytic estimator.
    max_micro: tuple[tuple[str, bool, int], ...] = ()

    @property
    def ps(self) -> float:
        """Parameter count in Mi (the artifact's ``parameter_size``)."""
        return self.params / MIB

    def micro_limit(self, family: str, gc: bool) -> int | None:
        for f, g, m in self.max_micro:
            if f == family and g == gc:
                return m
        return None


def _lim(dp: int, dp_gc: int, zero: int, off: int, off_gc: int = 0) -> tuple:
    return (
        ("dp", False, dp), ("dp", True, dp_gc), ("zero-dp", False, zero),
        ("zero-dp", True, 0), ("zero-offload", False, off), ("zero-offload", True, off_gc),
    )


# Constants: spec §5.2 (params, b, h/s/l), §2.8 (bandwidth constants), §2.6 (micro-batch
# limits, amended: LLaMA-2-7B ZeRO-DP and LLaMA-30B ZeRO-Offload are "/" (OOM) in Table 2 and
# absent from the measurements; ZeRO-Offload+GC exists for T5, GPT-2 and LLaMA-2-7B (§6.4)).
MODELS: dict[str, ModelSpec] = {
    m.name: m
    for m in (
        ModelSpec("vit", 85_952_456, 64, 512, 768, 12, 12, False, "vit", "vit",
                  34.057, 64.0, 40.0, _lim(64, 64, 64, 64)),
        ModelSpec("roberta", 355_412_057, 64, 512, 1024, 24, 16, False, "roberta", "roberta",
                  50.30364, 7.91074, 480.0, _lim(64, 64, 64, 64)),
        ModelSpec("bert", 336_297_858, 32, 512, 1024, 24, 16, False, "bert", "bert",
                  119.48791, 64.0, 225.0, _lim(32, 32, 32, 32)),
        ModelSpec("t5", 1_240_809_472, 16, 512, 1024, 32, 16, False, "t5", "t5",
                  88.56588, 64.0, 338.0, _lim(16, 16, 16, 16, 16)),
        ModelSpec("gpt2", 1_557_686_400, 16, 1024, 1600, 48, 25, True, "gpt2", "gpt2",
                  144.83764, 59.72096, 1100.0, _lim(16, 16, 16, 16, 16)),
        ModelSpec("llama7b", 6_738_423_808, 8, 2048, 4096, 32, 32, True, "llama7", "llama7b",
                  150.0, 0.96, 3000.0, _lim(0, 0, 0, 8, 8)),
        ModelSpec("llama30b", 33_170_309_120, 4, 2048, 5120, 40, 40, True, "llama30", None,
                  150.0, 0.96, 7400.0, _lim(0, 0, 0, 0, 0)),
        # Micro-benchmark models: T5-3B of Fig. 8 and LLaMA-2-7B at b = 16 of Fig. 7.
        ModelSpec("t5-3b", 3_338_423_808, 4, 512, 1024, 48, 32, True, "t5_3B", None,
                  88.56588, 64.0, 1300.0, _lim(0, 0, 0, 4, 4)),
        ModelSpec("llama7b-b16", 6_738_423_808, 16, 2048, 4096, 32, 32, True, "llama7b_bsz16",
                  None, 150.0, 0.96, 6000.0, _lim(0, 0, 0, 16, 16)),
    )
}

_ALIASES = {
    "llama7": "llama7b", "llama-7b": "llama7b", "llama-2-7b": "llama7b", "llama2-7b": "llama7b",
    "llama30": "llama30b", "llama-30b": "llama30b", "gpt-2": "gpt2", "t5_3b": "t5-3b",
    "t5-3B": "t5-3b", "t53b": "t5-3b", "llama7b_bsz16": "llama7b-b16",
}


def model_spec(name: str | None) -> ModelSpec | None:
    """The model of a job's ``model`` field (case-insensitive, common aliases), or None."""
    if not name:
        return None
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    return MODELS.get(key)
