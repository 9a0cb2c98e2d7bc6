"""SJF-FFS: shortest job first with first-fit sharing (the aggressive-sharing baseline).

Paper: the SJF-BSBF paper's baseline (Luo et al., spec ``sjf-bsbf.md`` section 3, "SJF-FFS").
Identical to :class:`~slurm_sched.policy.sjf_bsbf.SjfBsbf` except for the sharing branch: when
free GPUs are insufficient it shares GPUs that hold one job "in a first fit manner", with no
Algorithm 2 and no benefit test, so it shares whenever ``|free| + |single-job GPUs| >= G``.

Concretisation (spec): single-job GPUs are scanned in (server, GPU) index order; shared GPUs are
taken first and topped up with free GPUs (A4) as in SJF-BSBF; the sub-batch is the largest
candidate (``ceil(B/2^k)`` or the solo micro-batch) that passes MEM_OK with the co-runner, the
smallest over co-runners; a running job with which no sub-batch fits in memory is skipped (so
FFS respects the same memory model as SJF-BSBF). Its world is the same ``sjf-bsbf`` progress
model.

The sub-batch is an AMBIGUITY of the paper ("it does not search the best sharing configuration
as SJF-BSBF"). ``sub_batch="largest-fitting"`` (default) is the spec's reading above;
``sub_batch="full"`` is the other reading: FFS never accumulates gradients, so it shares only
where the job fits in memory at its solo micro-batch. docs/reproductions/sjf-bsbf.md compares
both in the interference sweep.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Literal

from slurm_sched.perf.sjf_bsbf_model import Interference
from slurm_sched.policy.base import Policy
from slurm_sched.policy.sjf_bsbf import SjfBsbf
from slurm_sched.policy.sjf_bsbf.pass_state import Cand, Candidate, LazyCands, PassState

FfsSubBatch = Literal["largest-fitting", "full"]


class SjfFfs(SjfBsbf):
    name = "sjf-ffs"
    summary = ("SJF; when GPUs run short, shares the first GPUs holding one job (first fit), "
               "no benefit test (non-preemptive)")

    def __init__(self, interference: Interference | None = None, *,
                 sub_batch: FfsSubBatch = "largest-fitting", **options: Any) -> None:
        """``options``: those of :class:`SjfBsbf` (``memory_gb``, ``a2``...)."""
        if sub_batch not in ("largest-fitting", "full"):
            raise ValueError(f"sub_batch must be 'largest-fitting' or 'full', got {sub_batch!r}")
        super().__init__(interference, **options)
        self.sub_batch = sub_batch

    def sharing_candidates(self, cand: Candidate, owners: Iterable[str], state: PassState
                           ) -> Sequence[Cand]:
        """Every running job some sub-batch fits next to, in first-fit (GPU index) order.

        ``owners`` is already in the order of their first single-job GPU; the sort key is that
        rank, so Algorithm 1's composition takes their GPUs first fit. With
        ``sub_batch="full"`` only the solo micro-batch (the first option) is tried.
        """
        options = cand.options[:1] if self.sub_batch == "full" else cand.options

        def gen() -> Iterator[Cand]:
            for rank, rid in enumerate(owners):
                run = state.runners[rid]
                for b, _, mem in options:  # largest first
                    if self.mem_ok(mem, run):
                        yield (float(rank), rid, b)
                        break

        return LazyCands(gen())

    def _failing_pairs(self, cand: Candidate, chosen: list[str], b_j: int | None,
                       state: PassState, nodes: int | None = None) -> set[str]:
        mem_n = next((m for b, _, m in cand.options if b == b_j), cand.options[0][2])
        return {rid for rid in chosen if not self.mem_ok(mem_n, state.runners[rid])}


POLICIES: list[type[Policy]] = [SjfFfs]
