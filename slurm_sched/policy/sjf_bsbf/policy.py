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
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Literal

from slurm_sched.model import (
    AS_SUBMITTED,
    Action,
    ClusterSnapshot,
    JobSettings,
    JobState,
    JobView,
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
from slurm_sched.policy.placement import pack_consolidated
from slurm_sched.policy.sjf import SjfKey, sjf_sort_key
from slurm_sched.policy.sjf_bsbf.pair import PairDecision, overlap_average, pair_decision
from slurm_sched.policy.sjf_bsbf.pass_state import (
    Cand,
    Candidate,
    ExcludingCands,
    LazyCands,
    OptionsKey,
    PassState,
    Runner,
    RunnerClass,
    SharingChoice,
    Signature,
    Slot,
    options_key,
    placement_of,
)

#: How many recent sharing decisions ``share_log`` keeps.
SHARE_LOG_SIZE = 100_000
A2Mode = Literal["exclusive", "sub-batch"]
#: Relative margin of the lower bounds of the ranked candidate search (:meth:`SjfBsbf._ranked`):
#: far above the few ulps of rounding error of the pair formulas.
_LB_MARGIN = 1e-9


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
        self._cand_cache: dict[str, Candidate] = {}
        self._pairs_memo: tuple[tuple[object, ...], dict[str, PairDecision]] | None = None
        self._settings_cache: dict[tuple[int, int], JobSettings] = {}
        self._sig_cache: dict[object, dict[RunnerClass, Signature]] = {}
        self._sig_ctx: tuple[object, float | None] | None = None

    # ------------------------------------------------------------ model queries
    def candidate(self, job: JobView) -> Candidate:
        """A pending job's options (memoised per job: they depend on its spec alone)."""
        got = self._cand_cache.get(job.job_id)
        if got is not None and got.job.spec is job.spec:
            return got if got.job is job else Candidate(job, got.profile, got.options,
                                                         got.exclusive_s, got.osig, got.regular)
        cand = self._make_candidate(job)
        osig, regular = options_key(cand)
        cand = Candidate(job, cand.profile, cand.options, cand.exclusive_s, osig, regular)
        if len(self._cand_cache) > 200_000:
            self._cand_cache.clear()
        self._cand_cache[job.job_id] = cand
        return cand

    def _make_candidate(self, job: JobView) -> Candidate:
        prof = job_profile(job.spec)
        dur = job.spec.duration_s
        if prof is None:
            return Candidate(job, None, ((None, dur, 0.0),), dur)
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
        return Candidate(job, prof, opts, dur)

    def _settings(self, cand: Candidate, b: int | None) -> JobSettings:
        """``cand.settings(b)``, one shared (immutable) object per (B, b)."""
        if cand.profile is None or b is None:
            return AS_SUBMITTED
        key = (cand.profile.local_bsz, b)
        got = self._settings_cache.get(key)
        if got is None:
            got = self._settings_cache[key] = cand.profile.settings_for(b)
        return got

    def solo_sub_batch(self, cand: Candidate) -> int | None:
        """The largest sub-batch that fits alone (normally the solo micro-batch)."""
        if cand.profile is None:
            return None
        for b, _, mem in cand.options:
            if self.memory_gb is None or mem <= self.memory_gb:
                return b
        return cand.options[-1][0]

    def runner(self, job: JobView, now_s: float) -> Runner:
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
        return Runner(job.job_id, prof.app if prof else None, b, left, mem)

    def _new_runner(self, cand: Candidate, b: int | None, slowdown_alone: float) -> Runner:
        mem = 0.0
        if cand.profile is not None and b is not None and self.memory_gb:
            mem = cand.profile.mem_gb(b)
        return Runner(cand.job.job_id, cand.app, b, cand.exclusive_s * slowdown_alone, mem)

    def mem_ok(self, mem_n: float, run: Runner) -> bool:
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

    def decide_pair(self, cand: Candidate, run: Runner, b: int | None, d_n: float
                    ) -> PairDecision:
        xi_r, xi_n = self.xi_pair(cand.app, b, run.app, run.sub_batch)
        d_nx = cand.exclusive_s if self.a2 == "exclusive" else d_n
        return pair_decision(run.remaining_alone_s, d_n, d_nx, xi_r, xi_n)

    def best_sharing(self, cand: Candidate, run: Runner) -> SharingChoice:
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
        state = PassState(snapshot)
        for j in snapshot.running:
            state.add_runner(j.job_id, self.runner(j, now_s))
        actions: list[Action] = []
        for job in self.order(snapshot):
            act = self._schedule_one(job, state)
            if act is not None:
                actions.append(act)
        return actions

    def _schedule_one(self, job: JobView, state: PassState) -> Action | None:
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

    def sharing_candidates(self, cand: Candidate, owners: Iterable[str], state: PassState
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
    def _owners(state: PassState, gtype: str | None) -> Iterable[str]:
        """Running jobs holding a G_OJ GPU of the type, in the order of their first one."""
        seen: set[str] = set()
        holders, runners = state.holders, state.runners
        for s in state.iter_singles(gtype):
            rid = holders[s][0]
            if rid not in seen and rid in runners:
                seen.add(rid)
                yield rid

    def _sharing_order(self, cand: Candidate, state: PassState, gtype: str | None
                       ) -> Sequence[Cand]:
        """:meth:`sharing_candidates` over every G_OJ owner of the type, produced lazily in the
        same order by :meth:`_ranked` unless a subclass changed how candidates are found."""
        cls = type(self)
        if (cls.sharing_candidates is not SjfBsbf.sharing_candidates
                or cls.best_sharing is not SjfBsbf.best_sharing):
            return self.sharing_candidates(cand, self._owners(state, gtype), state)
        return LazyCands(self._ranked(cand, state, gtype))

    def _ranked(self, cand: Candidate, state: PassState, gtype: str | None) -> Iterator[Cand]:
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
            osig, regular = options_key(cand)
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

    def _share(self, job: JobView, cand: Candidate, state: PassState, need: int,
               gtype: str | None) -> Action | None:
        self._pairs_memo = None
        found = self._sharing_order(cand, state, gtype)
        source = found if isinstance(found, LazyCands) else LazyCands(iter(found))
        cands: Sequence[Cand] = source
        view = ExcludingCands(source, [], 0, frozenset())
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

    def _compose(self, cands: Sequence[tuple[float, str, int | None]], state: PassState,
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
    def _top_up(taken: list[Slot], count: int, state: PassState, gtype: str | None
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
    def run_time(cand: Candidate, b: int | None, nodes: int | None = None) -> float:
        """The new job's run time alone with sub-batch ``b`` on ``nodes`` servers (packed if
        None)."""
        if cand.profile is None or b is None:
            return cand.exclusive_s
        return cand.exclusive_s * cand.profile.slowdown(b, nodes)

    def _failing_pairs(self, cand: Candidate, chosen: list[str], b_j: int | None,
                       state: PassState, nodes: int | None = None) -> set[str]:
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

    def _commit(self, job: JobView, cand: Candidate, state: PassState, chosen: list[str],
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
        return Share(job_id=job.job_id, placement=placement_of(slots, state),
                     with_jobs=tuple(chosen), settings=self._settings(cand, b_j),
                     reason=f"sjf-bsbf: share with {','.join(chosen)}, sub-batch {b_j}")

    def explain(self, snapshot: ClusterSnapshot, job_id: str) -> str:
        base = super().explain(snapshot, job_id)
        job = snapshot.by_id.get(job_id)
        if job is None or job.state is not JobState.PENDING:
            return base
        state = PassState(snapshot)
        single = state.single_slots(job.spec.gpu_type)
        if snapshot.num_free_gpus + len(single) < job.spec.num_gpus:
            return f"{base}; only {len(single)} GPU(s) hold a single job"
        return f"{base}; no running job offers a sharing benefit (Theorem 1)"


POLICIES: list[type[Policy]] = [SjfBsbf]
