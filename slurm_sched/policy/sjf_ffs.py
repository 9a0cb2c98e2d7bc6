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
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import overload

from slurm_sched.policy.base import Policy
from slurm_sched.policy.sjf_bsbf import SjfBsbf, _Candidate, _State

Cand = tuple[float, str, int | None]


class _Lazy(Sequence[Cand]):
    """The candidates, produced as far as they are read: the composition takes the first few
    of thousands of running jobs, so the rest are not examined (same sequence either way)."""

    def __init__(self, source: Iterator[Cand]) -> None:
        self._source = source
        self._done: list[Cand] = []

    def _fill(self, n: int | None) -> None:
        while n is None or len(self._done) < n:
            nxt = next(self._source, None)
            if nxt is None:
                break
            self._done.append(nxt)

    def __iter__(self) -> Iterator[Cand]:
        i = 0
        while True:
            if i == len(self._done):
                self._fill(i + 1)
                if i == len(self._done):
                    return
            yield self._done[i]
            i += 1

    def __bool__(self) -> bool:
        self._fill(1)
        return bool(self._done)

    def __len__(self) -> int:
        self._fill(None)
        return len(self._done)

    @overload
    def __getitem__(self, i: int) -> Cand: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Cand]: ...
    def __getitem__(self, i: int | slice) -> Cand | Sequence[Cand]:
        self._fill(None)
        return self._done[i]


class SjfFfs(SjfBsbf):
    name = "sjf-ffs"
    summary = ("SJF; when GPUs run short, shares the first GPUs holding one job (first fit), "
               "no benefit test (non-preemptive)")

    def sharing_candidates(self, cand: _Candidate, owners: Iterable[str], state: _State
                           ) -> Sequence[Cand]:
        """Every running job some sub-batch fits next to, in first-fit (GPU index) order.

        ``owners`` is already in the order of their first single-job GPU; the sort key is that
        rank, so Algorithm 1's composition takes their GPUs first fit.
        """
        def gen() -> Iterator[Cand]:
            for rank, rid in enumerate(owners):
                run = state.runners[rid]
                for b, _, mem in cand.options:  # largest first
                    if self.mem_ok(mem, run):
                        yield (float(rank), rid, b)
                        break

        return _Lazy(gen())

    def _failing_pairs(self, cand: _Candidate, chosen: list[str], b_j: int | None,
                       state: _State, nodes: int | None = None) -> set[str]:
        mem_n = next((m for b, _, m in cand.options if b == b_j), cand.options[0][2])
        return {rid for rid in chosen if not self.mem_ok(mem_n, state.runners[rid])}


POLICIES: list[type[Policy]] = [SjfFfs]
