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

import math
from bisect import bisect_left, insort
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from slurm_sched.model import (
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
#: How many recent sharing decisions ``share_log`` keeps.
SHARE_LOG_SIZE = 100_000
A2Mode = Literal["exclusive", "sub-batch"]


# ------------------------------------------------------------------------- Theorem 1 (pair)
@dataclass(frozen=True)
class PairDecision:
    """PAIR_DECISION's outcome; times are pair-average JCTs from now (seconds)."""

    share: bool
    t_overlap: float
    t_sequential: float

    @property
    def t_pair(self) -> float:
        return min(self.t_overlap, self.t_sequential)


def pair_decision(d_r: float, d_n: float, d_nx: float, xi_r: float, xi_n: float) -> PairDecision:
    """Theorem 1 as "compare full overlap with no overlap" (spec 2.2, mapping A1).

    Args:
        d_r: the running job's remaining time alone in its current configuration.
        d_n: the new job's run time alone with the candidate sub-batch.
        d_nx: the new job's run time alone when it waits (A2).
        xi_r, xi_n: slow-down factors of R and N while they share.
    Ties (``t_overlap == t_sequential``) do not share.
    """
    if xi_r * d_r <= xi_n * d_n:  # R finishes first under overlap (Case 2 at kappa = 0)
        t_r = xi_r * d_r
        t_n = t_r + (d_n - t_r / xi_n)
    else:  # N finishes first (Case 1)
        t_n = xi_n * d_n
        t_r = t_n + (d_r - t_n / xi_r)
    t_ov = (t_r + t_n) / 2.0
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
@dataclass(frozen=True)
class _Runner:
    """What a pending job needs to know about a running job it might share with."""

    job_id: str
    app: str | None
    sub_batch: int | None
    remaining_alone_s: float
    mem_gb: float


@dataclass(frozen=True)
class _Candidate:
    """A pending job's options: (sub-batch, run time alone with it, memory)."""

    job: JobView
    profile: JobProfile | None
    options: tuple[tuple[int | None, float, float], ...]
    exclusive_s: float

    @property
    def app(self) -> str | None:
        return self.profile.app if self.profile else None

    def settings(self, b: int | None) -> JobSettings:
        if self.profile is None or b is None:
            return JobSettings()
        return self.profile.settings_for(b)


@dataclass(frozen=True)
class SharingChoice:
    """BEST_SHARING's outcome for one (new job, running job) pair."""

    share: bool
    sub_batch: int | None
    t_pair: float


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
        self.holders: dict[Slot, list[str]] = {k: list(v) for k, v in snapshot.occupancy.items()}
        self.slots_of: dict[str, list[Slot]] = {}
        for j in snapshot.jobs:
            if j.placement is not None and j.state is not JobState.PENDING:
                self.slots_of[j.job_id] = sorted(j.placement.slots(), key=self.slot_key)
        self.runners: dict[str, _Runner] = {}
        self.suspended = {j.job_id for j in snapshot.suspended}
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
        for key in (None, self._type_of[slot[0]]):
            lst = self._singles[key]
            if add:
                insort(lst, pos)
            else:
                del lst[bisect_left(lst, pos)]
        if add:
            self._single_set.add(slot)
        else:
            self._single_set.discard(slot)

    def pack(self, num_gpus: int, gpu_type: str | None) -> Placement | None:
        """``pack_consolidated`` on the free GPUs of a type (taken from ``free``)."""
        return self.free_index.consolidated(num_gpus, gpu_type)

    def place(self, job_id: str, slots: Iterable[Slot]) -> None:
        slots = sorted(slots, key=self.slot_key)
        running = job_id not in self.suspended
        for node, g in slots:
            h = self.holders.setdefault((node, g), [])
            was_single = (node, g) in self._single_set
            h.append(job_id)
            if was_single:
                self._file_single((node, g), add=False)
            elif len(h) == 1 and running:
                self._file_single((node, g), add=True)
            if g in self.free[node]:
                self.free_index.remove(node, g)
        self.slots_of[job_id] = slots


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

    # ------------------------------------------------------------ model queries
    def candidate(self, job: JobView) -> _Candidate:
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
            if xi_r * d_r <= xi_n * d_n:
                t_r = xi_r * d_r
                t_n = t_r + (d_n - t_r / xi_n)
            else:
                t_n = xi_n * d_n
                t_r = t_n + (d_r - t_n / xi_r)
            t_ov = (t_r + t_n) / 2.0
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
            state.runners[j.job_id] = self.runner(j, now_s)
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
            state.runners[job.job_id] = self._new_runner(cand, b, slow)
            return Start(job_id=job.job_id, placement=placement, settings=cand.settings(b),
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

    def _share(self, job: JobView, cand: _Candidate, state: _State, need: int,
               gtype: str | None) -> Action | None:
        cands = self.sharing_candidates(cand, self._owners(state, gtype), state)
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
            cands = [c for c in cands if c[1] not in bad]
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
        for rid in chosen:
            run = state.runners[rid]
            if not self.mem_ok(mem_n, run) or not self.decide_pair(cand, run, b_j, d_n).share:
                bad.add(rid)
        return bad

    def _commit(self, job: JobView, cand: _Candidate, state: _State, chosen: list[str],
                slots: list[Slot], b_j: int | None, nodes: int | None = None) -> Action:
        d_n = self.run_time(cand, b_j, nodes)
        for rid in chosen:
            self.share_log.append((job.job_id, rid, self.decide_pair(
                cand, state.runners[rid], b_j, d_n)))
        state.place(job.job_id, slots)
        slow = d_n / cand.exclusive_s if cand.exclusive_s > 0 else 1.0
        state.runners[job.job_id] = self._new_runner(cand, b_j, slow)
        return Share(job_id=job.job_id, placement=_placement(slots, state),
                     with_jobs=tuple(chosen), settings=cand.settings(b_j),
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
