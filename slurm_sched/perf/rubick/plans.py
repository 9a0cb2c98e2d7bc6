"""Execution plans (:class:`Plan`): DP (``ga``: plain data parallel, gradient accumulation added
when the micro-batch does not fit), ZeRO-2 (``zero-dp``), ZeRO-Offload (``zero-offload``), each
with or without gradient checkpointing (``-gc``), and Megatron 3D ``PP-TP-DP`` (``2-4-4``,
optionally ``-gc``); :func:`plan_order` orders them.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurm_sched.perf.rubick.hashing import hash_once

DP_FAMILIES = ("dp", "zero-dp", "zero-offload")
_DP_CODES = {
    ("dp", False): "ga", ("dp", True): "gc",
    ("zero-dp", False): "zero-dp", ("zero-dp", True): "zero-dp-gc",
    ("zero-offload", False): "zero-offload", ("zero-offload", True): "zero-offload-gc",
}
_CODE_ALIASES = {
    "dp": ("dp", False), "ddp": ("dp", False), "ga": ("dp", False), "dp+ga": ("dp", False),
    "gc": ("dp", True), "dp+gc": ("dp", True), "dp-gc": ("dp", True),
    "zero-dp": ("zero-dp", False), "zero-dp+ga": ("zero-dp", False),
    "zero-dp-gc": ("zero-dp", True), "zero-dp+gc": ("zero-dp", True),
    "zero-offload": ("zero-offload", False), "zero-offload+ga": ("zero-offload", False),
    "zero-offload-gc": ("zero-offload", True), "zero-offload+gc": ("zero-offload", True),
}


@hash_once
@dataclass(frozen=True, order=True)
class Plan:
    """An execution plan. DP families use every GPU as a data-parallel rank (``dp`` = 0 means
    "all GPUs of the placement"); ``3d`` has explicit PP, TP and DP sizes with PP*TP*DP = GPUs.

    Gradient accumulation is not part of the plan: it follows from the placement (the smallest
    number of steps whose micro-batch fits, :func:`accumulation_steps`), as in the paper.
    """

    family: str
    gc: bool = False
    pp: int = 1
    tp: int = 1
    dp: int = 0

    def __post_init__(self) -> None:
        if self.family not in (*DP_FAMILIES, "3d"):
            raise ValueError(f"plan family must be one of dp, zero-dp, zero-offload, 3d; "
                             f"got {self.family!r}")
        if self.family == "3d" and min(self.pp, self.tp, self.dp) < 1:
            raise ValueError(f"3D plan needs PP, TP, DP >= 1, got {self.pp}-{self.tp}-{self.dp}")

    @property
    def is_3d(self) -> bool:
        return self.family == "3d"

    @property
    def offload(self) -> bool:
        return self.family == "zero-offload"

    @property
    def code(self) -> str:
        """The plan code carried by ``JobSettings.plan`` (``ga``, ``zero-dp-gc``, ``2-4-4``)."""
        if self.is_3d:
            return f"{self.pp}-{self.tp}-{self.dp}" + ("-gc" if self.gc else "")
        return _DP_CODES[(self.family, self.gc)]

    def gpus(self, shape_gpus: int) -> int:
        return self.pp * self.tp * self.dp if self.is_3d else shape_gpus

    def __str__(self) -> str:
        return self.code

    @classmethod
    def parse(cls, code: str, gpus: int | None = None) -> Plan:
        """Parse a plan code: ours (``zero-offload-gc``, ``2-4-4``), the artifact's (``ga``,
        ``zero-offload+gc``, 3-digit ``244`` = PP 2, TP 4, DP 4, ``tp+ga`` = TP over all
        ``gpus``) or the hint vocabulary (``dp``, ``2-2-1``).

        Raises:
            ValueError: naming the bad code.
        """
        c = code.strip().lower()
        if c in _CODE_ALIASES:
            fam, gc = _CODE_ALIASES[c]
            return cls(fam, gc)
        gc = False
        for suffix in ("-gc", "+gc"):
            if c.endswith(suffix):
                c, gc = c[: -len(suffix)], True
        if c in ("tp+ga", "tp"):
            if not gpus:
                raise ValueError(f"plan {code!r} needs the GPU count")
            return cls("3d", gc, 1, gpus, 1)
        parts = c.split("-") if "-" in c else (list(c) if c.isdigit() and len(c) == 3 else [])
        if len(parts) == 3 and all(p.isdigit() and int(p) >= 1 for p in parts):
            pp, tp, dp = (int(p) for p in parts)
            return cls("3d", gc, pp, tp, dp)
        raise ValueError(f"unknown plan code {code!r} (known: ga, gc, zero-dp, zero-offload, "
                         "their -gc variants, PP-TP-DP such as 2-4-4)")


def plan_order(plan: Plan) -> int:
    """Tie-break order of spec §3.6: DP < ZeRO-DP < DP+GC < ZeRO-DP+GC < 3D < ZeRO-Offload."""
    order = {("dp", False): 0, ("zero-dp", False): 1, ("dp", True): 2, ("zero-dp", True): 3,
             ("3d", False): 4, ("3d", True): 5, ("zero-offload", False): 6,
             ("zero-offload", True): 7}
    return order[(plan.family, plan.gc)]
