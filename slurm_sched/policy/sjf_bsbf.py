"""SJF-BSBF: shortest job first with best sharing benefit first (non-preemptive GPU sharing).

Paper: Y. Luo, Q. Wang, S. Shi, J. Lai, S. Qi, J. Zhang, X. Wang, "Scheduling Deep Learning Jobs
in Multi-Tenant GPU Clusters via Wise Resource Sharing" (HIT Shenzhen, arXiv). Implements
spec ``sjf-bsbf.md`` section 2: Algorithm 1 (SJF over pending jobs; free GPUs first, otherwise
share GPUs that hold exactly one job), the corrected Algorithm 2 (sub-batch search with a memory
check, F1-F5) and Theorem 1's share-now-or-never rule (PAIR_DECISION with the A1 mapping: the
running job R plays A, the new job N plays B; "no overlap" means N waits for R).

Every number comes from :mod:`slurm_sched.perf.sjf_bsbf_model`: the eq. (7) iteration-time model
(accumulation slows a job), the memory model (MEM_OK) and the interference model xi. The policy
predicts with the same model the ``sjf-bsbf`` world simulates with (the paper's setting: xi is
profiled). A job never changes GPUs or sub-batch after it starts (spec 2.5); ``Start`` and
``Share`` carry ``accumulation_steps`` / ``sub_batch_size`` in :class:`JobSettings`.

Readings of the spec's ambiguities: A1 as recommended; A2 ``exclusive`` (the waiting job later
runs alone with its solo micro-batch) by default, ``a2="sub-batch"`` for the alternative; A3 the
SJF key is the exclusive duration (``sjf_key`` as in :class:`~slurm_sched.policy.sjf.Sjf`); A4
shared GPUs first, then free GPUs (preferring the servers already used); A5 the smallest chosen
sub-batch, and every chosen pair is re-checked with it (memory *and* PAIR_DECISION, so no job
ever shares where the model predicts a worse pair average), with the new job's run time on the
servers of the placement actually composed (eq. 4's placement-aware t_comm; a share that
spreads the job over more servers than a packed start may stop paying;
``placement_aware=False`` re-checks with the packed run time, the spec's literal
PAIR_DECISION); A7 event-driven only (arrivals and completions; with deterministic models
a periodic tick adds nothing); A8 placement is
:func:`~slurm_sched.policy.placement.pack_consolidated`; A9 a running job that already shares
some of its GPUs may gain a co-runner on its others.

Deviations: the sub-batch candidates are the job's solo micro-batch (its requested
configuration's, i.e. at most Pollux's largest profiled per-GPU batch) and every ``ceil(B/2^k)``
below it, so a job whose B exceeds what it can run alone keeps its requested configuration
reachable and no job runs a micro-batch the profile never measured; when B is within that limit
the set is exactly ``{B, ceil(B/2), ..., 1}``.
Jobs without an application profile (no model or batch hint) use their duration, the default
xi, no memory limit and default settings. ``L_k`` is ``duration_s`` (which is t_iter x I by
construction of the traces), so with sharing disabled the schedule is exactly SJF's.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, insort
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, overload

from slurm_sched.model import (
    AS_SUBMITTED,
    Action,
    ClusterSnapshot,
    JobSettings,
    JobState,
    JobView,
    Placement,
    Share,
    Start,
)
from slurm_sched.perf.sjf_bsbf_model import (
    GPU_MEMORY_GB,
    Interference,
    JobProfile,
    current_sub_batch,
    default_interference,
    job_profile,
)
from slurm_sched.policy.base import Policy
from slurm_sched.policy.placement import FreeIndex, FreeMap, free_map, pack_consolidated
from slurm_sched.policy.sjf import SjfKey, sjf_sort_key

Slot = tuple[str, int]
#: A sharing candidate: (pair JCT, running job id, sub-batch).
Cand = tuple[float, str, int | None]
#: What BEST_SHARING reads of a running job besides its remaining time: (app, sub-batch, memory).
RunnerClass = tuple[str | None, int | None, float]
#: A pending job's application and (sub-batch, memory) options.
OptionsKey = tuple[str | None, tuple[tuple[int | None, float], ...]]
#: The sub-batches (option numbers) of a pending job that pass MEM_OK next to a runner class,
#: with their xi pair (xi of the running job, xi of the new job).
Signature = tuple[tuple[int, float, float], ...]
#: How many recent sharing decisions ``share_log`` keeps.
SHARE_LOG_SIZE = 100_000
A2Mode = Literal["exclusive", "sub-batch"]
#: Relative margin of the lower bounds of the ranked candidate search (:meth:`SjfBsbf._ranked`):
#: far above the few ulps of rounding error of the pair formulas.
_LB_MARGIN = 1e-9


# ------------------------------------------------------------------------- Theorem 1 (pair)
@dataclass(frozen=True, slots=True)
class PairDecision:
    """PAIR_DECISION's outcome; times are pair-average JCTs from now (seconds)."""

    share: bool
    t_overlap: float
    t_sequential: float

    @property
    def t_pair(self) -> float:
        return min(self.t_overlap, self.t_sequential)


def overlap_average(d_r: float, d_n: float, xi_r: float, xi_n: float) -> float:
    """Pair-average JCT from now when R (``d_r`` left alone) and N (``d_n`` alone) run together
    from now on, slowed by ``xi_r`` / ``xi_n`` until the first finishes (Theorem 1). Every caller
    uses this one sequence of operations, so equal inputs give bit-identical times."""
    if xi_r * d_r <= xi_n * d_n:  # R finishes first under overlap (Case 2 at kappa = 0)
        t_r = xi_r * d_r
        t_n = t_r + (d_n - t_r / xi_n)
    else:  # N finishes first (Case 1)
        t_n = xi_n * d_n
        t_r = t_n + (d_r - t_n / xi_r)
    return (t_r + t_n) / 2.0


def pair_decision(d_r: float, d_n: float, d_nx: float, xi_r: float, xi_n: float) -> PairDecision:
    """Theorem 1 as "compare full overlap with no overlap" (spec 2.2, mapping A1).

    Args:
        d_r: the running job's remaining time alone in its current configuration.
        d_n: the new job's run time alone with the candidate sub-batch.
        d_nx: the new job's run time alone when it waits (A2).
        xi_r, xi_n: slow-down factors of R and N while they share.
    Ties (``t_overlap == t_sequential``) do not share.
    """
    t_ov = overlap_average(d_r, d_n, xi_r, xi_n)
    t_seq = (d_r + (d_r + d_nx)) / 2.0
    return PairDecision(t_ov < t_seq, t_ov, t_seq)


def simulate_pair(t_a: float, i_a: float, t_b: float, i_b: float, xi_a: float, xi_b: float,
                  kappa: float) -> tuple[float, float]:
    """JCTs of a pair by direct simulation: A runs alone from 0, B joins at ``kappa``.

    Used to check eq. (18)-(25) (validation check 3). Both start from time 0's point of view;
    B's JCT counts from 0 (it was waiting).
    """
    if not kappa >= 0:
        raise ValueError(f"kappa must be >= 0, got {kappa}")
    solo_a = t_a * i_a
    if kappa >= solo_a:  # A finishes before B joins: sequential
        return solo_a, kappa + t_b * i_b
    left_a = i_a - kappa / t_a  # iterations of A when B joins
    left_b = float(i_b)
    shared_a, shared_b = t_a * xi_a, t_b * xi_b
    if left_a * shared_a <= left_b * shared_b:
        end_a = kappa + left_a * shared_a
        left_b -= left_a * shared_a / shared_b
        return end_a, end_a + left_b * t_b
    end_b = kappa + left_b * shared_b
    left_a -= left_b * shared_b / shared_a
    return end_b + left_a * t_a, end_b


def eq25(t_a: float, i_a: float, t_b: float, i_b: float, xi_a: float, xi_b: float,
         kappa: float) -> float:
    """The paper's eq. (25): pair-average JCT in Case 2 (A finishes first) as a function of
    the insertion time kappa."""
    slope = (2 * xi_b + xi_a - 2 * xi_a * xi_b) / (2 * xi_b)
    return slope * kappa + (1 - 1 / (2 * xi_b)) * t_a * xi_a * i_a + 0.5 * t_b * i_b


# ------------------------------------------------------------------------- job knowledge
@dataclass(frozen=True, slots=True)
class _Runner:
    """What a pending job needs to know about a running job it might share with."""

    job_id: str
    app: str | None
    sub_batch: int | None
    remaining_alone_s: float
    mem_gb: float


@dataclass(frozen=True, slots=True)
class _Candidate:
    """A pending job's options: (sub-batch, run time alone with it, memory)."""

    job: JobView
    profile: JobProfile | None
    options: tuple[tuple[int | None, float, float], ...]
    exclusive_s: float
    #: (app, ((sub-batch, memory), ...)) and whether every time is a finite number >= 0, for
    #: :meth:`SjfBsbf._ranked` (None: computed there)
    osig: OptionsKey | None = None
    regular: bool = False

    @property
    def app(self) -> str | None:
        return self.profile.app if self.profile else None

    def settings(self, b: int | None) -> JobSettings:
        if self.profile is None or b is None:
            return JobSettings()
        return self.profile.settings_for(b)


@dataclass(frozen=True, slots=True)
class SharingChoice:
    """BEST_SHARING's outcome for one (new job, running job) pair."""

    share: bool
    sub_batch: int | None
    t_pair: float


class _Lazy(Sequence[Cand]):
    """Candidates produced as far as they are read (the same sequence either way): the
    composition takes the first few of thousands of running jobs, so the rest are not
    examined."""

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


class _Excluding(Sequence[Cand]):
    """A :class:`_Lazy` source without the candidates of some running jobs, read as far as
    needed; what was already read is kept filtered in ``head``."""

    def __init__(self, source: _Lazy, head: list[Cand], pos: int,
                 excluded: frozenset[str]) -> None:
        self._source = source
        self._head = head
        self._pos = pos  # source items before this index are accounted for in head
        self._excluded = excluded

    def narrowed(self, bad: Iterable[str]) -> _Excluding:
        """The same without the candidates of ``bad`` too."""
        excluded = self._excluded.union(bad)
        done = self._source._done
        head = [c for c in self._head if c[1] not in excluded]
        head.extend(c for c in done[self._pos:] if c[1] not in excluded)
        return _Excluding(self._source, head, len(done), excluded)

    def __iter__(self) -> Iterator[Cand]:
        yield from self._head
        source, excluded, i = self._source, self._excluded, self._pos
        done = source._done
        while True:
            if i == len(done):
                source._fill(i + 1)
                if i == len(done):
                    return
            c = done[i]
            i += 1
            if c[1] not in excluded:
                yield c

    def __bool__(self) -> bool:
        return next(iter(self), None) is not None

    def __len__(self) -> int:
        return sum(1 for _ in self)

    @overload
    def __getitem__(self, i: int) -> Cand: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Cand]: ...
    def __getitem__(self, i: int | slice) -> Cand | Sequence[Cand]:
        return list(self)[i]


def _regular(x: float) -> bool:
    """A finite number >= 0 (what the monotonicity argument of the ranked search needs)."""
    return 0.0 <= x < math.inf


def _options_key(cand: _Candidate) -> tuple[OptionsKey, bool]:
    """``cand.osig`` and ``cand.regular`` computed."""
    osig = (cand.app, tuple((b, mem) for b, _, mem in cand.options))
    return osig, _regular(cand.exclusive_s) and all(_regular(d) for _, d, _ in cand.options)


class _OwnerIndex:
    """The running jobs holding at least one G_OJ GPU of one key (None = any type), grouped by
    :data:`RunnerClass` and sorted by (remaining time alone, job id) within a group.

    BEST_SHARING sees a running job only through its class and its remaining time, and its
    pair JCT grows with the remaining time (see :meth:`SjfBsbf._ranked`). Jobs whose remaining
    time is not a finite number >= 0 are kept apart (``odd``) and always evaluated.
    """

    def __init__(self) -> None:
        self.count: dict[str, int] = {}
        self.classes: dict[RunnerClass, list[tuple[float, str]]] = {}
        self.odd: set[str] = set()
        self._where: dict[str, tuple[RunnerClass, float] | None] = {}
        #: bumped whenever a class appears or empties (invalidates ``groups``)
        self.version = 0
        #: candidate options -> (version, [(signature, classes)]), see ``SjfBsbf._ranked``
        self.groups: dict[object, tuple[int, list[tuple[Signature, list[RunnerClass]]]]] = {}

    def add(self, rid: str, run: _Runner) -> None:
        self.remove(rid)
        d = run.remaining_alone_s
        if not _regular(d):
            self.odd.add(rid)
            self._where[rid] = None
            return
        key = (run.app, run.sub_batch, run.mem_gb)
        lst = self.classes.get(key)
        if lst is None:
            lst = self.classes[key] = []
            self.version += 1
        insort(lst, (d, rid))
        self._where[rid] = (key, d)

    def remove(self, rid: str) -> None:
        if rid not in self._where:
            return
        where = self._where.pop(rid)
        if where is None:
            self.odd.discard(rid)
            return
        key, d = where
        lst = self.classes[key]
        del lst[bisect_left(lst, (d, rid))]
        if not lst:
            del self.classes[key]
            self.version += 1

    def members(self) -> Iterable[str]:
        return self._where.keys()


class _State:
    """Mutable per-pass view: GPU holders and free GPUs, updated as the pass places jobs.

    A pass considers every pending job on clusters of thousands of GPUs, so what each job asks
    for is kept up to date rather than recomputed: free GPUs in a :class:`FreeIndex` (counts
    per GPU type, consolidated packing), and the GPUs holding exactly one running job (G_OJ) as
    sorted (server, GPU) positions, for all servers and per GPU type. :meth:`place` is the only
    way holders and free GPUs change during the pass.
    """

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        nodes = snapshot.cluster.nodes
        self.node_index = {n.name: i for i, n in enumerate(nodes)}
        self._names = [n.name for n in nodes]
        self._type_of = {n.name: n.gpu_type for n in nodes}
        self.free: FreeMap = free_map(snapshot)
        self.free_index = FreeIndex(self.free, self._type_of)
        self._views: dict[str, FreeMap] = {}
        # tuples, replaced on change: fewer objects for the garbage collector to track
        self.holders: dict[Slot, tuple[str, ...]] = dict(snapshot.occupancy)
        self.slots_of: dict[str, tuple[Slot, ...]] = {}
        for j in snapshot.jobs:
            if j.placement is not None and j.state is not JobState.PENDING:
                self.slots_of[j.job_id] = tuple(sorted(j.placement.slots(), key=self.slot_key))
        self.runners: dict[str, _Runner] = {}
        self.suspended = {j.job_id for j in snapshot.suspended}
        #: owner indexes (per key), built on first use and kept up to date afterwards
        self._owner_idx: dict[str | None, _OwnerIndex] = {}
        #: key (None = all servers, else a GPU type) -> sorted (server index, GPU) of G_OJ
        self._singles: dict[str | None, list[tuple[int, int]]] = {None: []}
        for t in self._type_of.values():
            self._singles.setdefault(t, [])
        self._single_set: set[Slot] = set()
        for slot, h in self.holders.items():
            if len(h) == 1 and h[0] not in self.suspended and slot[0] in self.node_index:
                self._single_set.add(slot)
        for slot in sorted(self._single_set, key=self.slot_key):
            pos = self.slot_key(slot)
            self._singles[None].append(pos)
            self._singles[self._type_of[slot[0]]].append(pos)

    def slot_key(self, slot: Slot) -> tuple[int, int]:
        return self.node_index[slot[0]], slot[1]

    def nodes_of_type(self, gpu_type: str | None) -> set[str] | None:
        if gpu_type is None:
            return None
        by_name = self.snapshot.cluster.by_name
        return {n for n in self.free if by_name[n].gpu_type == gpu_type}

    def free_for(self, gpu_type: str | None) -> FreeMap:
        """The free GPUs of a type (the same lists as ``free``: do not change them)."""
        if gpu_type is None:
            return self.free
        view = self._views.get(gpu_type)
        if view is None:
            allowed = self.nodes_of_type(gpu_type)
            assert allowed is not None
            view = {n: g for n, g in self.free.items() if n in allowed}
            self._views[gpu_type] = view
        return view

    def free_count(self, gpu_type: str | None) -> int:
        return self.free_index.total(gpu_type)

    def _single_positions(self, gpu_type: str | None) -> list[tuple[int, int]]:
        return self._singles.get(gpu_type, [])

    def single_count(self, gpu_type: str | None) -> int:
        return len(self._single_positions(gpu_type))

    def iter_singles(self, gpu_type: str | None) -> Iterable[Slot]:
        """G_OJ of a type in (server, GPU) order, lazily (do not place while iterating)."""
        names = self._names
        return ((names[i], g) for i, g in self._single_positions(gpu_type))

    def single_slots(self, gpu_type: str | None) -> list[Slot]:
        """GPUs holding exactly one job that is running (G_OJ), in (server, GPU) order."""
        return list(self.iter_singles(gpu_type))

    def is_single(self, slot: Slot, gpu_type: str | None) -> bool:
        """``slot`` is in G_OJ of that type."""
        return slot in self._single_set and (
            gpu_type is None or self._type_of.get(slot[0]) == gpu_type)

    def _file_single(self, slot: Slot, add: bool) -> None:
        pos = self.slot_key(slot)
        owner = self.holders[slot][0]  # the job holding the GPU alone (before / after)
        for key in (None, self._type_of[slot[0]]):
            lst = self._singles[key]
            if add:
                insort(lst, pos)
            else:
                del lst[bisect_left(lst, pos)]
            idx = self._owner_idx.get(key)
            if idx is not None:
                n = idx.count.get(owner, 0) + (1 if add else -1)
                if n > 0:
                    idx.count[owner] = n
                    if n == 1 and owner in self.runners:
                        idx.add(owner, self.runners[owner])
                else:
                    idx.count.pop(owner, None)
                    idx.remove(owner)
        if add:
            self._single_set.add(slot)
        else:
            self._single_set.discard(slot)

    def add_runner(self, job_id: str, run: _Runner) -> None:
        """Record what sharing needs to know about a running (or just placed) job."""
        self.runners[job_id] = run
        for idx in self._owner_idx.values():
            if idx.count.get(job_id, 0) > 0:
                idx.add(job_id, run)

    def owner_index(self, gpu_type: str | None) -> _OwnerIndex:
        """The running jobs holding a G_OJ GPU of the type (the set ``SjfBsbf._owners``
        yields), indexed for the ranked search; maintained by :meth:`place` from now on."""
        idx = self._owner_idx.get(gpu_type)
        if idx is None:
            idx = _OwnerIndex()
            names, holders = self._names, self.holders
            for i, g in self._single_positions(gpu_type):
                rid = holders[(names[i], g)][0]
                idx.count[rid] = idx.count.get(rid, 0) + 1
            for rid in idx.count:
                run = self.runners.get(rid)
                if run is not None:
                    idx.add(rid, run)
            self._owner_idx[gpu_type] = idx
        return idx

    def pack(self, num_gpus: int, gpu_type: str | None) -> Placement | None:
        """``pack_consolidated`` on the free GPUs of a type (taken from ``free``)."""
        return self.free_index.consolidated(num_gpus, gpu_type)

    def place(self, job_id: str, slots: Iterable[Slot]) -> None:
        slots = sorted(slots, key=self.slot_key)
        running = job_id not in self.suspended
        for node, g in slots:
            h = (*self.holders.get((node, g), ()), job_id)
            self.holders[(node, g)] = h
            was_single = (node, g) in self._single_set
            if was_single:
                self._file_single((node, g), add=False)
            elif len(h) == 1 and running:
                self._file_single((node, g), add=True)
            if g in self.free[node]:
                self.free_index.remove(node, g)
        self.slots_of[job_id] = tuple(slots)


def _placement(slots: Sequence[Slot], state: _State) -> Placement:
    alloc: dict[str, list[int]] = {}
    for node, g in sorted(slots, key=state.slot_key):
        alloc.setdefault(node, []).append(g)
    return Placement.of(alloc)


# ------------------------------------------------------------------------- the policy
class SjfBsbf(Policy):
    name = "sjf-bsbf"
    paper = "Luo et al., arXiv 2024 (SJF-BSBF, wise GPU sharing with gradient accumulation)"
    summary = ("SJF; when GPUs run short, shares a GPU with one running job only if the pair "
               "model predicts a lower average JCT, with the best sub-batch (non-preemptive)")
    clairvoyant = True
    shares_gpus = True
    max_jobs_per_gpu = 2
    progress_model = "sjf-bsbf"

    def __init__(
        self,
        interference: Interference | None = None,
        *,
        memory_gb: float | None = GPU_MEMORY_GB,
        a2: A2Mode = "exclusive",
        sjf_key: SjfKey = "duration",
        placement_aware: bool = True,
    ) -> None:
        if a2 not in ("exclusive", "sub-batch"):
            raise ValueError(f"a2 must be 'exclusive' or 'sub-batch', got {a2!r}")
        if memory_gb is not None and not memory_gb > 0:
            raise ValueError(f"memory_gb must be > 0 or None, got {memory_gb}")
        if sjf_key not in ("duration", "gpus", "gpu_time"):
            raise ValueError(f"sjf_key must be duration, gpus or gpu_time, got {sjf_key!r}")
        self.interference = interference if interference is not None else default_interference()
        self.memory_gb = memory_gb
        self.a2 = a2
        self.sjf_key = sjf_key
        self.placement_aware = placement_aware
        #: The latest sharing decisions, for audits: (job, running job, PairDecision at the
        #: chosen sub-batch). Validation check 5 reads it.
        self.share_log: deque[tuple[str, str, PairDecision]] = deque(maxlen=SHARE_LOG_SIZE)
        self._xi_cache: dict[tuple[str | None, int | None, str | None, int | None],
                             tuple[float, float]] = {}
        self._options_cache: dict[tuple[str, int, int],
                                  tuple[JobProfile, tuple[tuple[int, float, float], ...]]] = {}
        #: set once an interference model gave a xi outside [1, inf): the ranked candidate
        #: search relies on xi >= 1 and falls back to evaluating every running job
        self._xi_irregular = False
        self._cand_cache: dict[str, _Candidate] = {}
        self._pairs_memo: tuple[tuple[object, ...], dict[str, PairDecision]] | None = None
        self._settings_cache: dict[tuple[int, int], JobSettings] = {}
        self._sig_cache: dict[object, dict[RunnerClass, Signature]] = {}
        self._sig_ctx: tuple[object, float | None] | None = None

    # ------------------------------------------------------------ model queries
    def candidate(self, job: JobView) -> _Candidate:
        """A pending job's options (memoised per job: they depend on its spec alone)."""
        got = self._cand_cache.get(job.job_id)
        if got is not None and got.job.spec is job.spec:
            return got if got.job is job else _Candidate(job, got.profile, got.options,
                                                         got.exclusive_s, got.osig, got.regular)
        cand = self._make_candidate(job)
        osig, regular = _options_key(cand)
        cand = _Candidate(job, cand.profile, cand.options, cand.exclusive_s, osig, regular)
        if len(self._cand_cache) > 200_000:
            self._cand_cache.clear()
        self._cand_cache[job.job_id] = cand
        return cand

    def _make_candidate(self, job: JobView) -> _Candidate:
        prof = job_profile(job.spec)
        dur = job.spec.duration_s
        if prof is None:
            return _Candidate(job, None, ((None, dur, 0.0),), dur)
        # (sub-batch, slow-down, memory) depend on the profile only: memoised per profile
        key = (prof.app, prof.num_gpus, prof.batch_size)
        per_b = self._options_cache.get(key)
        if per_b is None or per_b[0] is not prof:
            per_b = (prof, tuple((b, prof.slowdown(b), prof.mem_gb(b) if self.memory_gb else 0.0)
                                 for b in prof.sub_batches()))
            if len(self._options_cache) > 100_000:
                self._options_cache.clear()
            self._options_cache[key] = per_b
        opts = tuple((b, dur * slow, mem) for b, slow, mem in per_b[1])
        return _Candidate(job, prof, opts, dur)

    def _settings(self, cand: _Candidate, b: int | None) -> JobSettings:
        """``cand.settings(b)``, one shared (immutable) object per (B, b)."""
        if cand.profile is None or b is None:
            return AS_SUBMITTED
        key = (cand.profile.local_bsz, b)
        got = self._settings_cache.get(key)
        if got is None:
            got = self._settings_cache[key] = cand.profile.settings_for(b)
        return got

    def solo_sub_batch(self, cand: _Candidate) -> int | None:
        """The largest sub-batch that fits alone (normally the solo micro-batch)."""
        if cand.profile is None:
            return None
        for b, _, mem in cand.options:
            if self.memory_gb is None or mem <= self.memory_gb:
                return b
        return cand.options[-1][0]

    def runner(self, job: JobView, now_s: float) -> _Runner:
        prof = job_profile(job.spec)
        b = current_sub_batch(job, prof)
        left = job.remaining_s(now_s)
        if prof is not None and b is not None and job.placement is not None:
            # remaining wall time alone = remaining work / its configuration's speed
            steps = (job.settings.accumulation_steps if job.settings.sub_batch_size is not None
                     else prof.steps_for(b))
            t = prof.iter_model.t_iter(b, steps, len(job.placement.parts),
                                       job.placement.num_gpus)
            left *= t / prof.ref_time_s
        mem = prof.mem_gb(b) if (prof is not None and b is not None and self.memory_gb) else 0.0
        return _Runner(job.job_id, prof.app if prof else None, b, left, mem)

    def _new_runner(self, cand: _Candidate, b: int | None, slowdown_alone: float) -> _Runner:
        mem = 0.0
        if cand.profile is not None and b is not None and self.memory_gb:
            mem = cand.profile.mem_gb(b)
        return _Runner(cand.job.job_id, cand.app, b, cand.exclusive_s * slowdown_alone, mem)

    def mem_ok(self, mem_n: float, run: _Runner) -> bool:
        return self.memory_gb is None or mem_n + run.mem_gb <= self.memory_gb + 1e-9

    def xi_pair(self, app_n: str | None, b: int | None, app_r: str | None, b_r: int | None
                ) -> tuple[float, float]:
        """(xi of R next to N, xi of N next to R), memoised: the pass asks for the same pairs
        many times."""
        key = (app_n, b, app_r, b_r)
        got = self._xi_cache.get(key)
        if got is None:
            x = self.interference
            got = (x.xi(app_r, b_r, app_n, b), x.xi(app_n, b, app_r, b_r))
            if not (1.0 <= got[0] < math.inf and 1.0 <= got[1] < math.inf):
                self._xi_irregular = True
            if len(self._xi_cache) > 1_000_000:
                self._xi_cache.clear()
            self._xi_cache[key] = got
        return got

    def decide_pair(self, cand: _Candidate, run: _Runner, b: int | None, d_n: float
                    ) -> PairDecision:
        xi_r, xi_n = self.xi_pair(cand.app, b, run.app, run.sub_batch)
        d_nx = cand.exclusive_s if self.a2 == "exclusive" else d_n
        return pair_decision(run.remaining_alone_s, d_n, d_nx, xi_r, xi_n)

    def best_sharing(self, cand: _Candidate, run: _Runner) -> SharingChoice:
        """Algorithm 2, corrected (F1-F5): the best (share flag, sub-batch, pair JCT).

        Evaluates :func:`pair_decision` for every sub-batch that passes MEM_OK (inlined here:
        this is the policy's hot loop)."""
        best_share, best_b, best_t = False, cand.options[0][0], math.inf
        limit = None if self.memory_gb is None else self.memory_gb + 1e-9 - run.mem_gb
        d_r = run.remaining_alone_s
        exclusive = self.a2 == "exclusive"
        app, rapp, rb = cand.app, run.app, run.sub_batch
        for b, d_n, mem in cand.options:  # largest b first; '<=' prefers the smaller b on ties
            if limit is not None and mem > limit:
                continue
            xi_r, xi_n = self.xi_pair(app, b, rapp, rb)
            t_ov = overlap_average(d_r, d_n, xi_r, xi_n)
            t_seq = (2.0 * d_r + (cand.exclusive_s if exclusive else d_n)) / 2.0
            t = t_ov if t_ov < t_seq else t_seq
            if t <= best_t:
                best_share, best_b, best_t = t_ov < t_seq, b, t
        return SharingChoice(best_share, best_b, best_t)

    # ------------------------------------------------------------ Algorithm 1
    def order(self, snapshot: ClusterSnapshot) -> list[JobView]:
        return sorted(snapshot.pending, key=sjf_sort_key(self.sjf_key))

    def decide(self, snapshot: ClusterSnapshot, now_s: float) -> list[Action]:
        if not snapshot.pending:
            return []
        state = _State(snapshot)
        for j in snapshot.running:
            state.add_runner(j.job_id, self.runner(j, now_s))
        actions: list[Action] = []
        for job in self.order(snapshot):
            act = self._schedule_one(job, state)
            if act is not None:
                actions.append(act)
        return actions

    def _schedule_one(self, job: JobView, state: _State) -> Action | None:
        need = job.spec.num_gpus
        gtype = job.spec.gpu_type
        n_free = state.free_count(gtype)
        if n_free < need and n_free + state.single_count(gtype) < need:
            return None  # not even sharing every G_OJ would do
        cand = self.candidate(job)
        if n_free >= need:  # free GPUs first (validation check 6)
            placement = state.pack(need, gtype)
            assert placement is not None
            b = self.solo_sub_batch(cand)
            state.place(job.job_id, placement.slots())
            slow = 1.0
            if cand.profile is not None and b is not None:
                slow = cand.profile.slowdown(b)
            state.add_runner(job.job_id, self._new_runner(cand, b, slow))
            return Start(job_id=job.job_id, placement=placement, settings=self._settings(cand, b),
                         reason="sjf: free GPUs")
        return self._share(job, cand, state, need, gtype)

    def sharing_candidates(self, cand: _Candidate, owners: Iterable[str], state: _State
                           ) -> Sequence[tuple[float, str, int | None]]:
        """Running jobs worth sharing with, as (pair JCT, job id, sub-batch), best first."""
        out = []
        for rid in owners:
            choice = self.best_sharing(cand, state.runners[rid])
            if choice.share:
                out.append((choice.t_pair, rid, choice.sub_batch))
        out.sort(key=lambda c: (c[0], c[1]))
        return out

    @staticmethod
    def _owners(state: _State, gtype: str | None) -> Iterable[str]:
        """Running jobs holding a G_OJ GPU of the type, in the order of their first one."""
        seen: set[str] = set()
        holders, runners = state.holders, state.runners
        for s in state.iter_singles(gtype):
            rid = holders[s][0]
            if rid not in seen and rid in runners:
                seen.add(rid)
                yield rid

    def _sharing_order(self, cand: _Candidate, state: _State, gtype: str | None
                       ) -> Sequence[Cand]:
        """:meth:`sharing_candidates` over every G_OJ owner of the type, produced lazily in the
        same order by :meth:`_ranked` unless a subclass changed how candidates are found."""
        cls = type(self)
        if (cls.sharing_candidates is not SjfBsbf.sharing_candidates
                or cls.best_sharing is not SjfBsbf.best_sharing):
            return self.sharing_candidates(cand, self._owners(state, gtype), state)
        return _Lazy(self._ranked(cand, state, gtype))

    def _ranked(self, cand: _Candidate, state: _State, gtype: str | None) -> Iterator[Cand]:
        """Exactly ``sharing_candidates(cand, owners, state)`` in order, computing
        BEST_SHARING for only as many running jobs as the order needs.

        BEST_SHARING sees a running job through its :data:`RunnerClass` (which sub-batches pass
        MEM_OK, and their xi pair) and its remaining time ``d_r``; classes with the same
        sub-batches and xi pairs form a group, inside which the pair JCT ``t`` is a function of
        ``d_r`` alone, and a non-decreasing one when xi >= 1 and times are >= 0: per sub-batch
        ``t_seq`` has slope 1 in ``d_r``, ``t_ov`` slope ``xi_r - xi_r / (2 xi_n) > 0`` (R
        finishes first) or 1/2 (N finishes first; the pieces meet where the cases switch),
        and a minimum of non-decreasing functions is one. Rounding moves a computed ``t`` by a
        few ulps (relative 1e-15), so every job of a group after its head (the smallest
        ``d_r`` not yet evaluated) has ``t >= t_head * (1 - 1e-9)``. The search evaluates
        group heads in the order of these bounds and hands out the best evaluated sharing
        candidate (by (t, job id), as the sort does) once it is strictly below every group's
        bound, so nothing not yet evaluated can precede it. Each evaluation is BEST_SHARING's
        arithmetic, operation for operation. Irregular inputs (a xi outside [1, inf), times
        that are negative or not finite) fall back to evaluating every owner.
        """
        idx = state.owner_index(gtype)
        runners = state.runners
        if cand.osig is None:
            osig, regular = _options_key(cand)
        else:
            osig, regular = cand.osig, cand.regular
        if not regular:
            yield from self.sharing_candidates(cand, idx.members(), state)
            return
        found: list[Cand] = [(c.t_pair, rid, c.sub_batch)
                             for rid in idx.odd
                             for c in (self.best_sharing(cand, runners[rid]),) if c.share]
        cached = idx.groups.get(osig)
        if cached is None or cached[0] != idx.version:
            sig_of = self._class_signatures(osig)
            by_sig: dict[Signature, list[RunnerClass]] = {}
            for ckey in idx.classes:
                sig = sig_of(ckey)
                if sig:  # empty: no sub-batch fits next to this class (t = inf, never shares)
                    by_sig.setdefault(sig, []).append(ckey)
            cached = (idx.version, list(by_sig.items()))
            idx.groups[osig] = cached
        classes = idx.classes
        if self._xi_irregular:  # the bounds may not hold: evaluate everything
            yield from self.sharing_candidates(cand, idx.members(), state)
            return
        opts = cand.options
        excl = cand.exclusive_s
        exclusive = self.a2 == "exclusive"
        b0 = opts[0][0]
        inf = math.inf

        def evaluate(rows: list[tuple[int | None, float, float, float]], d_r: float
                     ) -> tuple[bool, int | None, float]:
            # best_sharing's loop on the rows that pass MEM_OK, same operations
            best_share, best_b, best_t = False, b0, inf
            for b, d_n, xi_r, xi_n in rows:
                t_ov = overlap_average(d_r, d_n, xi_r, xi_n)
                t_seq = (2.0 * d_r + (excl if exclusive else d_n)) / 2.0
                t = t_ov if t_ov < t_seq else t_seq
                if t <= best_t:
                    best_share, best_b, best_t = t_ov < t_seq, b, t
            return best_share, best_b, best_t

        # per group: its rows, its classes' (d_r, job id) lists merged by a heap of
        # (next item, list number, position), and the evaluated head
        g_rows: list[list[tuple[int | None, float, float, float]]] = []
        g_lists: list[list[list[tuple[float, str]]]] = []
        g_merge: list[list[tuple[tuple[float, str], int, int]]] = []
        g_head: list[tuple[bool, int | None, float, str]] = []
        heads: list[tuple[float, int]] = []  # (lower bound, group number)
        for sig, ckeys in cached[1]:
            rows = [(opts[i][0], opts[i][1], xr, xn) for i, xr, xn in sig]
            lists = [classes[ck] for ck in ckeys]
            merge = [(lst[0], j, 0) for j, lst in enumerate(lists)]
            heapq.heapify(merge)
            (d_r, rid), j, pos = merge[0]
            if pos + 1 < len(lists[j]):
                heapq.heapreplace(merge, (lists[j][pos + 1], j, pos + 1))
            else:
                heapq.heappop(merge)
            share, b, t = evaluate(rows, d_r)
            heads.append((t - t * _LB_MARGIN, len(g_rows)))
            g_rows.append(rows)
            g_lists.append(lists)
            g_merge.append(merge)
            g_head.append((share, b, t, rid))
        heapq.heapify(found)
        heapq.heapify(heads)
        while True:
            while heads and (not found or found[0][0] >= heads[0][0]):
                k = heads[0][1]
                share, b, t, rid = g_head[k]
                if share:
                    heapq.heappush(found, (t, rid, b))
                merge = g_merge[k]
                if not merge:
                    heapq.heappop(heads)
                    continue
                (d_r, rid), j, pos = merge[0]
                lst = g_lists[k][j]
                if pos + 1 < len(lst):
                    heapq.heapreplace(merge, (lst[pos + 1], j, pos + 1))
                else:
                    heapq.heappop(merge)
                share, b, t = evaluate(g_rows[k], d_r)
                g_head[k] = (share, b, t, rid)
                heapq.heapreplace(heads, (t - t * _LB_MARGIN, k))
            if not found:
                return
            yield heapq.heappop(found)

    def _class_signatures(self, osig: OptionsKey) -> Callable[[RunnerClass], Signature]:
        """For a pending job's (app, ((sub-batch, memory), ...)): runner class -> the
        :data:`Signature` BEST_SHARING would use (memoised)."""
        ctx = (self.interference, self.memory_gb)
        if self._sig_ctx != ctx:
            self._sig_cache.clear()
            self._sig_ctx = ctx
        if len(self._sig_cache) > 100_000:
            self._sig_cache.clear()
        cache = self._sig_cache.setdefault(osig, {})
        app, per_b = osig
        memory = self.memory_gb
        xi_pair = self.xi_pair

        def sig(ckey: RunnerClass) -> Signature:
            got = cache.get(ckey)
            if got is None:
                rapp, rb, rmem = ckey
                limit = None if memory is None else memory + 1e-9 - rmem
                got = tuple((i, *xi_pair(app, b, rapp, rb))
                            for i, (b, mem) in enumerate(per_b)
                            if limit is None or not mem > limit)
                cache[ckey] = got
            return got

        return sig

    def _share(self, job: JobView, cand: _Candidate, state: _State, need: int,
               gtype: str | None) -> Action | None:
        self._pairs_memo = None
        found = self._sharing_order(cand, state, gtype)
        source = found if isinstance(found, _Lazy) else _Lazy(iter(found))
        cands: Sequence[Cand] = source
        view = _Excluding(source, [], 0, frozenset())
        while cands:
            chosen, slots, b_j = self._compose(cands, state, need, gtype)
            if slots is None:
                return None
            # A5: the smallest chosen sub-batch; re-check every chosen pair with it and with
            # the run time of the placement actually composed (eq. 4: spanning more servers
            # than a packed placement costs communication time)
            nodes = len({s[0] for s in slots}) if self.placement_aware else None
            bad = self._failing_pairs(cand, chosen, b_j, state, nodes)
            if not bad:
                return self._commit(job, cand, state, chosen, slots, b_j, nodes)
            view = view.narrowed(bad)
            cands = view
        return None

    def _compose(self, cands: Sequence[tuple[float, str, int | None]], state: _State,
                 need: int, gtype: str | None
                 ) -> tuple[list[str], list[Slot] | None, int | None]:
        taken: list[Slot] = []
        chosen: list[str] = []
        b_j: int | None = None
        for _, rid, b in cands:
            mine = [s for s in state.slots_of.get(rid, ()) if state.is_single(s, gtype)]
            if not mine:
                continue
            used_nodes = {s[0] for s in taken}
            mine.sort(key=lambda s: (s[0] not in used_nodes, state.slot_key(s)))
            take = mine[: need - len(taken)]
            taken.extend(take)
            chosen.append(rid)
            if b is not None:
                b_j = b if b_j is None else min(b_j, b)
            if len(taken) == need:
                break
        if len(taken) < need:  # A4: top up with free GPUs, servers already used first
            topped = self._top_up(taken, need - len(taken), state, gtype)
            if topped is None:
                return chosen, None, b_j
            taken.extend(topped)
        return chosen, taken, b_j

    @staticmethod
    def _top_up(taken: list[Slot], count: int, state: _State, gtype: str | None
                ) -> list[Slot] | None:
        free = {n: list(g) for n, g in state.free_for(gtype).items()}
        if sum(len(g) for g in free.values()) < count:
            return None
        out: list[Slot] = []
        for node in sorted({s[0] for s in taken}, key=state.node_index.__getitem__):
            for g in list(free.get(node, ())):
                if len(out) == count:
                    break
                out.append((node, g))
                free[node].remove(g)
        if len(out) < count:
            rest = pack_consolidated(free, count - len(out))
            if rest is None:
                return None
            out.extend(rest.slots())
        return out

    @staticmethod
    def run_time(cand: _Candidate, b: int | None, nodes: int | None = None) -> float:
        """The new job's run time alone with sub-batch ``b`` on ``nodes`` servers (packed if
        None)."""
        if cand.profile is None or b is None:
            return cand.exclusive_s
        return cand.exclusive_s * cand.profile.slowdown(b, nodes)

    def _failing_pairs(self, cand: _Candidate, chosen: list[str], b_j: int | None,
                       state: _State, nodes: int | None = None) -> set[str]:
        mem_n = next((m for b, _, m in cand.options if b == b_j), cand.options[0][2])
        d_n = self.run_time(cand, b_j, nodes)
        bad = set()
        pairs: dict[str, PairDecision] = {}
        for rid in chosen:
            run = state.runners[rid]
            if not self.mem_ok(mem_n, run):
                bad.add(rid)
                continue
            pair = pairs[rid] = self.decide_pair(cand, run, b_j, d_n)
            if not pair.share:
                bad.add(rid)
        # the share log of a commit right after wants the same decisions
        self._pairs_memo = ((cand.job.job_id, b_j, nodes, d_n), pairs)
        return bad

    def _commit(self, job: JobView, cand: _Candidate, state: _State, chosen: list[str],
                slots: list[Slot], b_j: int | None, nodes: int | None = None) -> Action:
        d_n = self.run_time(cand, b_j, nodes)
        memo = self._pairs_memo
        self._pairs_memo = None
        known = memo[1] if memo is not None and memo[0] == (job.job_id, b_j, nodes, d_n) else {}
        for rid in chosen:
            pair = known.get(rid)
            if pair is None:
                pair = self.decide_pair(cand, state.runners[rid], b_j, d_n)
            self.share_log.append((job.job_id, rid, pair))
        state.place(job.job_id, slots)
        slow = d_n / cand.exclusive_s if cand.exclusive_s > 0 else 1.0
        state.add_runner(job.job_id, self._new_runner(cand, b_j, slow))
        return Share(job_id=job.job_id, placement=_placement(slots, state),
                     with_jobs=tuple(chosen), settings=self._settings(cand, b_j),
                     reason=f"sjf-bsbf: share with {','.join(chosen)}, sub-batch {b_j}")

    def explain(self, snapshot: ClusterSnapshot, job_id: str) -> str:
        base = super().explain(snapshot, job_id)
        job = snapshot.by_id.get(job_id)
        if job is None or job.state is not JobState.PENDING:
            return base
        state = _State(snapshot)
        single = state.single_slots(job.spec.gpu_type)
        if snapshot.num_free_gpus + len(single) < job.spec.num_gpus:
            return f"{base}; only {len(single)} GPU(s) hold a single job"
        return f"{base}; no running job offers a sharing benefit (Theorem 1)"


POLICIES: list[type[Policy]] = [SjfBsbf]
