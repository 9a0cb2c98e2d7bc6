"""Muri: multi-resource interleaving with Blossom grouping (Muri-S, Muri-L, ablations).

Paper: Zhao et al., "Multi-Resource Interleaving for Deep Learning Training", SIGCOMM'22. Spec
``shared/specs/muri.md`` sections 2.5-2.9 and 3; artifact Rivendile/Muri @ 4e69a78. The time
model and the simulated world are in :mod:`slurm_sched.perf.muri_stages`.

One scheduling pass, at every arrival and completion (``EventGate``; optionally also every
``interval_s``, e.g. the testbed's 360 s):

1. Priority, lower first: Muri-S = SRSF, remaining isolated time x GPUs (clairvoyant); Muri-L =
   continuous 2D-LAS, attained wall time x GPUs. Ties: submit time, job id.
2. Candidates (spec 2.8 step 3, the artifact's reading): walk the jobs in priority order on a
   virtual empty cluster; a job whose GPUs still fit reserves one g-GPU slot, and that slot is
   given to the next ``packing_num`` jobs of its bucket. Buckets: same GPU count, same GPU type
   and same profile length (only jobs with a stage profile can share a slot).
3. Grouping inside each bucket by maximum-weight matching with weight = interleaving
   efficiency gamma of the merged set, for up to ``packing_num`` rounds (pairs, then pairs of
   pairs, ... up to 4 jobs). Matched pairs are merged in descending gamma (ties: fewer GPUs,
   higher priority) only while the candidates' GPU demand exceeds the cluster ("merge as
   needed"); rounds stop once it fits. Among equal-weight matchings, pairs that already run
   together are kept (a 1e-6 relative bonus), so groups do not reshuffle for nothing.
4. Autopack: a group slower than running its members one after another is split again.
5. Groups in priority order (best member) that fit the virtual empty cluster run; the rest wait.
6. Realisation: a planned group whose running members already share their GPUs, with slots
   that realise the target layout, stays where it is (new members join with ``Share``); every
   other running job is preempted and its group placed anew, consolidated (``pack_consolidated``),
   larger GPU counts first. A new group's first member gets ``Start``, the others ``Share``
   (``with_jobs`` = the members placed before it); every member carries ``settings.group_id``
   and its ``settings.slot`` (position in the stage rotation of the best, or for the ablation
   the worst, layout). Jobs running alone carry no group.

Matching and the decision-time bound: networkx ``max_weight_matching`` (Blossom) is O(n^3) in
pure Python (about 0.1 s for 32 nodes, 1.5 s for 128, 12 s for 256 with these weights on the
2-core reference machine). A bucket of at most ``window`` (default 32) nodes is matched by
Blossom. A bigger bucket is matched exactly by ``typed_max_weight_pairs``: the weight only
depends on the members' profiles and jobs of one model are interchangeable, so the matching is
a small b-matching over profile types (at most 8 models in the traces, 44 types in round 2),
solved to optimality by HiGHS; its optimum weight equals Blossom's (tested against Blossom and
brute force). Only when a bucket holds more than ``max_types`` distinct profile sets (e.g.
thousands of jobs with distinct user-measured profiles) does the bound apply: Blossom inside
consecutive windows of ``window`` nodes in priority order, the highest-priority candidates
together. ``benchmarks/bench_muri_decide.py`` measures 2,000 pending jobs on 512 GPUs both ways.

Deviations (documented in ``docs/reproductions/muri.md``):
- Fit tests count GPUs (as the framework's SRTF/SRSF/Tiresias do) instead of the artifact's
  YARN node-level test, and running groups keep their GPUs instead of the artifact's full
  re-placement at every event (moving a job costs a restart here).
- Jobs without a usable stage profile (``stage_times_ms``) are never grouped; they run alone.
- A group changes membership only by restart (one executor per group, as on the testbed),
  except that new members may join running members whose slots already fit the target layout.
- When nothing would be (re)started, no job is preempted just to idle GPUs (as SRTF), unless it
  shares GPUs with a job that stays.
- Merge order within a round: descending gamma by default (the spec's recommendation). The
  artifact's intended sort is discarded, so it merges whole buckets in turn and, inside a
  bucket, pairs by first node in priority order: ``merge_order="bucket"``, which brings trace 3
  closer to the artifact's per-job output (``benchmarks/crosscheck.py``; numbers in
  ``docs/reproductions/muri.md``).
"""

from __future__ import annotations

import functools
import itertools
import math
import zlib
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import networkx as nx
import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

from slurm_sched.model import (
    Action,
    ClusterSnapshot,
    JobSettings,
    JobState,
    JobView,
    Placement,
    Preempt,
    Share,
    Start,
)
from slurm_sched.perf.muri_stages import (
    NUM_RESOURCES,
    Profile,
    StageModel,
    iso_iteration_ms,
    job_profile,
    num_positions,
    raw_period,
)
from slurm_sched.policy.base import Policy
from slurm_sched.policy.placement import FreeIndex, free_map
from slurm_sched.policy.solver_output import silenced_stdout

Grouping = Literal["blossom", "consecutive"]
PlacementOrder = Literal["gpus-desc", "priority"]
MergeOrder = Literal["gamma", "bucket"]
BucketKey = tuple[int, str | None, int]  # (GPUs, GPU type, profile length; 0 = no profile)
PrioKey = tuple[float, float, str]
HomeKey = tuple[tuple[str, tuple[int, ...]], ...]  # a placement as plain tuples (cheap hash)
#: Relative weight bonus of an edge whose jobs already run together: it only breaks ties
#: between (near-)equal matchings, so groups do not reshuffle (and restart) for nothing.
STICKY = 1e-6


# --------------------------------------------------------------------------- event gate
class EventGate:
    """When an event-driven policy should re-plan (learned state of the policy).

    The Muri artifact's simulators (Muri, SRSF, Themis, ...) schedule at arrivals and
    completions only. The framework may wake a policy at other moments too (another
    policy's timer, a superseded completion estimate). For a policy whose priorities cross
    continuously (2D-LAS, Themis' rounds received) re-planning at those moments swaps jobs back
    and forth, each swap costing a restart. The gate says "due" when a job arrived or finished
    since the last plan, when ``interval_s`` (> 0) passed since it, or when the last plan's
    actions did not take effect (so a failed start is retried).
    """

    def __init__(self, interval_s: float = 0.0) -> None:
        if interval_s < 0:
            raise ValueError(f"interval_s must be >= 0, got {interval_s}")
        self.interval_s = interval_s
        self._seen: frozenset[str] | None = None
        self._last_s: float | None = None
        self._expected: dict[str, JobState] = {}

    def due(self, snapshot: ClusterSnapshot, now_s: float) -> bool:
        seen = self._seen
        if seen is None or len(snapshot.jobs) != len(seen):
            return True
        if self.interval_s > 0 and (
            self._last_s is None or now_s >= self._last_s + self.interval_s - 1e-9
        ):
            return True
        expected = self._expected
        for j in snapshot.jobs:
            jid = j.spec.job_id
            if jid not in seen:
                return True
            state = expected.get(jid)
            if state is not None and j.state is not state:
                return True
        return False

    def planning(self, snapshot: ClusterSnapshot, now_s: float) -> None:
        """Record a plan made now on these jobs."""
        self._seen = frozenset(j.job_id for j in snapshot.jobs)
        self._last_s = now_s
        self._expected = {}

    def expect(self, actions: Sequence[Action]) -> None:
        """The states the plan's actions should leave their jobs in."""
        for a in actions:
            self._expected[a.job_id] = (
                JobState.PENDING if a.kind == "preempt" else JobState.RUNNING
            )

    def next_wakeup_s(self, snapshot: ClusterSnapshot, now_s: float) -> float | None:
        if self.interval_s <= 0 or not snapshot.jobs:
            return None
        nxt = (now_s if self._last_s is None else self._last_s) + self.interval_s
        return nxt if nxt > now_s else now_s + self.interval_s


# --------------------------------------------------------------------------- matching
def max_weight_pairs(
    n: int, weight: Callable[[int, int], float | None], window: int | None = None
) -> list[tuple[int, int, float]]:
    """Maximum-weight matching over nodes ``0..n-1`` (networkx Blossom), windowed.

    ``weight(u, v)`` gives the edge weight or None for no edge. Nodes are matched within
    consecutive windows of ``window`` nodes (None = all at once). Returns ``(u, v, w)`` with
    ``u < v``, sorted by ``u``.
    """
    size = n if window is None or window <= 0 else window
    out: list[tuple[int, int, float]] = []
    for start in range(0, n, max(size, 1)):
        stop = min(n, start + size)
        g = nx.Graph()
        g.add_nodes_from(range(start, stop))
        for u in range(start, stop):
            for v in range(u + 1, stop):
                w = weight(u, v)
                if w is not None:
                    g.add_edge(u, v, weight=w)
        if g.number_of_edges() == 0:
            continue
        for a, b in nx.max_weight_matching(g, maxcardinality=False):
            u, v = (a, b) if a < b else (b, a)
            out.append((u, v, g[u][v]["weight"]))
    out.sort()
    return out


def typed_max_weight_pairs(
    types: Sequence[Hashable],
    weight: Callable[[Hashable, Hashable], float | None],
    homes: Sequence[Hashable | None] | None = None,
    cache: dict[object, list[tuple[int, int, float, int]] | None] | None = None,
    order: Callable[[int], Any] | None = None,
) -> list[tuple[int, int, float]] | None:
    """Maximum-weight matching when nodes of one type are interchangeable.

    ``types[i]`` is node i's type and ``weight(a, b)`` the weight of an edge between any node
    of type a and any node of type b (None = no edge). The matching is then a b-matching over
    types: integer pair counts ``x_ab`` with ``sum_b x_ab + 2 x_aa <= count_a``, maximising
    ``sum w_ab x_ab``; it is solved exactly (HiGHS MILP, zero gap) on T(T+1)/2 variables
    instead of Blossom's O(n^3) on n nodes, and has the same optimum weight. Concrete nodes are
    then taken in index order (callers pass them in priority order), or by ``order(i)`` when
    given, node pairs with the same non-None ``homes`` entry (jobs already running together)
    first. Returns ``(u, v, w)`` with
    ``u < v`` sorted by ``u``, or None if the solver fails (callers fall back to Blossom).
    ``cache`` (one per weight function) memoises the type-level solution by type counts.
    Types must be mutually comparable (they are sorted for a canonical order).
    """
    kinds: dict[Hashable, list[int]] = {}
    for i, t in enumerate(types):
        kinds.setdefault(t, []).append(i)
    names = sorted(kinds)  # type: ignore[type-var]
    count = [len(kinds[t]) for t in names]
    together: set[tuple[int, int]] = set()
    if homes is not None:
        by_home: dict[Hashable, list[int]] = {}
        for i, h in enumerate(homes):
            if h is not None:
                by_home.setdefault(h, []).append(i)
        index = {t: k for k, t in enumerate(names)}
        for members in by_home.values():
            for u, v in itertools.combinations(members, 2):
                a, b = sorted((index[types[u]], index[types[v]]))
                together.add((a, b))
    key = (tuple(names), tuple(count), frozenset(together))
    if cache is not None and key in cache:
        solved = cache[key]
    else:
        solved = _solve_type_matching(names, count, together, weight)
        if cache is not None:
            if len(cache) > 4096:
                cache.clear()
            cache[key] = solved
    if solved is None:
        return None
    free = {t: sorted(kinds[t], key=order) if order is not None else kinds[t] for t in names}
    used: set[int] = set()
    out: list[tuple[int, int, float]] = []
    for a, b, w, x in solved:
        left_a = [i for i in free[names[a]] if i not in used]
        left_b = left_a if a == b else [i for i in free[names[b]] if i not in used]
        chosen: list[tuple[int, int]] = []
        if homes is not None:  # keep pairs that already run together
            # left_b's nodes by home, in left_b order (the first partner found is the same as
            # a scan of left_b, without the scan: thousands of nodes of one type)
            partners: dict[Hashable, list[int]] = {}
            for v in left_b:
                if homes[v] is not None:
                    partners.setdefault(homes[v], []).append(v)
            for u in left_a:
                if len(chosen) == x:
                    break
                if u in used or homes[u] is None:
                    continue
                for v in partners.get(homes[u], ()):
                    if v != u and v not in used:
                        chosen.append((u, v))
                        used.update((u, v))
                        break
        rest_a = [i for i in left_a if i not in used]
        rest_b = rest_a if a == b else [i for i in left_b if i not in used]
        if a == b:
            for k in range(0, 2 * (x - len(chosen)), 2):
                chosen.append((rest_a[k], rest_a[k + 1]))
        else:
            chosen.extend(zip(rest_a[: x - len(chosen)], rest_b, strict=False))
        for u, v in chosen:
            used.update((u, v))
            out.append((min(u, v), max(u, v), w))
    out.sort()
    return out


def _solve_type_matching(
    names: list[Hashable],
    count: list[int],
    together: set[tuple[int, int]],
    weight: Callable[[Hashable, Hashable], float | None],
) -> list[tuple[int, int, float, int]] | None:
    """The type-level b-matching: ``(a, b, w, pairs)`` by descending weight, None on failure."""
    pairs: list[tuple[int, int, float]] = []
    for a in range(len(names)):
        for b in range(a, len(names)):
            if (a == b and count[a] < 2) or count[a] == 0 or count[b] == 0:
                continue
            w = weight(names[a], names[b])
            if w is not None and w > 0:
                pairs.append((a, b, w))
    if not pairs:
        return []
    obj = np.array([-w * (1.0 + STICKY if (a, b) in together else 1.0) for a, b, w in pairs])
    rows = np.zeros((len(names), len(pairs)))
    upper = np.empty(len(pairs))
    for k, (a, b, _) in enumerate(pairs):
        rows[a, k] += 1.0
        rows[b, k] += 1.0
        upper[k] = count[a] // 2 if a == b else min(count[a], count[b])
    with silenced_stdout():  # HiGHS prints stray debug lines to fd 1
        res = milp(obj, constraints=LinearConstraint(rows, -np.inf, np.array(count, dtype=float)),
                   integrality=np.ones(len(pairs)), bounds=Bounds(0, upper),
                   options={"mip_rel_gap": 0.0, "presolve": True})
    if res.status != 0 or res.x is None:
        return None
    return sorted(
        ((a, b, w, round(float(x))) for (a, b, w), x in zip(pairs, res.x, strict=True)
         if round(float(x)) > 0),
        key=lambda p: (-p[2], p[0], p[1]),
    )


# --------------------------------------------------------------------------- plan pieces
@dataclass(slots=True)
class _Cand:  # read-only after construction (not frozen: cheaper to build, 10^4 a pass)
    job: JobView
    key: PrioKey
    bucket: BucketKey
    profile: Profile | None
    iso_ms: float | None
    home: HomeKey | None  # where it runs now (None if pending)
    job_id: str  # job.spec.job_id


@dataclass(slots=True)
class _Group:
    members: list[_Cand]
    bucket: BucketKey
    gamma: float = 0.0
    #: the best (lowest) member priority key; kept by :meth:`extend`
    key: PrioKey = field(init=False)
    #: memo of :meth:`signature` and :func:`_common_home` (reset by :meth:`extend`)
    _sig: tuple[Profile, ...] | None = field(default=None, init=False, repr=False)
    _home: tuple[HomeKey | None] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        ms = self.members
        self.key = ms[0].key if len(ms) == 1 else min(c.key for c in ms)

    def extend(self, members: list[_Cand]) -> None:
        self.members.extend(members)
        self.key = min(c.key for c in self.members)
        self._sig = self._home = None

    def signature(self) -> tuple[Profile, ...]:
        """The members' profiles, sorted (the node type of the typed matching)."""
        if self._sig is None:
            self._sig = tuple(sorted(m.profile for m in self.members if m.profile is not None))
        return self._sig

    @property
    def gpus(self) -> int:
        return self.bucket[0]

    @property
    def gpu_type(self) -> str | None:
        return self.bucket[1]


@dataclass(slots=True)
class _Plan:
    """One group to run: members sorted by job id and their target slots (None if alone)."""

    members: list[_Cand]
    slots: list[int | None]
    bucket: BucketKey
    key: PrioKey
    stayers: list[_Cand] = field(default_factory=list)
    placement: Placement | None = None
    group_id: str | None = None


def _gamma_edge(
    model: StageModel, profiles: list[Profile], limit: int, worst: bool, lbd: float
) -> float | None:
    """Edge weight of merging two nodes: gamma of the union, None if the union is too big or
    not above ``lbd * size / k`` (artifact edge threshold)."""
    size = len(profiles)
    if size > limit:
        return None
    w = model.gamma(profiles, worst)
    threshold = lbd * size / NUM_RESOURCES
    if w <= threshold or math.isclose(w, threshold, rel_tol=1e-5):
        return None
    return w


def _home_key(p: Placement) -> HomeKey:
    return tuple((part.node, part.gpus) for part in p.parts)


def _common_home(g: _Group) -> HomeKey | None:
    """Where all members of ``g`` run together now, or None."""
    if g._home is None:
        h = {m.home for m in g.members}
        g._home = (h.pop() if len(h) == 1 else None,)
    return g._home[0]


class _Counter:
    """GPU counting per type on a virtual cluster (the rule of ``preemptive_in_order``)."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.left = dict(snapshot.cluster.capacity_by_type)
        self.typed = len(self.left) > 2

    def take(self, g: int, t: str | None) -> bool:
        left = self.left
        if not (g <= left[None] and (t is None or g <= left.get(t, 0))):
            return False
        left[None] -= g
        if t is not None:
            left[t] -= g
        elif self.typed:
            for k in left:
                if k is not None:
                    left[k] = min(left[k], left[None])
        return True


# --------------------------------------------------------------------------- the policy
class Muri(Policy):
    """Muri with its knobs; see :class:`MuriS` / :class:`MuriL` for the registered defaults.

    Args:
        know_duration: True = Muri-S (SRSF priority), False = Muri-L (2D-LAS).
        packing_num: most jobs per group (<= positions of the profile: 4 for the traces).
        ordering: "best" (shortest group period) or "worst" (ablation).
        grouping: "blossom" (matching) or "consecutive" (the "w/o Blossom" ablation: jobs
            ``[4i .. 4i+3]`` of a bucket in priority order).
        merge_all: merge every matched pair (paper-literal) instead of only while the demand
            exceeds the cluster (artifact).
        merge_order: the order in which a round's matched pairs are merged while the demand
            exceeds the cluster. "gamma" (the spec's recommendation A4): descending gamma, then
            fewer GPUs, then higher priority. "bucket" (the artifact's effective order, spec
            A4: its intended sort by gamma is discarded): whole buckets one after another, in
            the order their best job appears in the priority order, and inside a bucket the
            pairs by their first node in priority order, so the best jobs are grouped first.
        autopack: split groups slower than their members run one after another.
        placement_order: "gpus-desc" (artifact) or "priority" (new groups placed best first).
        window: most nodes per Blossom matching; bigger buckets use the exact typed solver
            or, with more than ``max_types`` distinct profile sets, Blossom in windows of
            this many nodes (the decision-time bound). None = one Blossom over everything.
        max_types: most distinct node types for the typed solver.
        interval_s: 0 = event-driven; > 0 = also reschedule every ``interval_s`` (testbed 360).
        weight_lbd: an edge needs gamma > weight_lbd * (jobs merged) / 4.
        match_seed: None = among equally good matchings, the one found with the nodes in
            job-id order (Blossom) or priority order (typed solver). An integer (a diagnosis)
            orders the nodes by a hash of it and the job id instead, which picks another of
            the equally good matchings: how much a result depends on that choice.
        model: the stage-time model (calibration, superset layouts).
    """

    name = "muri"
    paper = "Zhao et al., SIGCOMM'22 (Muri: multi-resource interleaving)"
    summary = "multi-resource interleaving, Blossom grouping"
    shares_gpus = True
    max_jobs_per_gpu = 4
    progress_model = "muri"

    def __init__(
        self,
        *,
        know_duration: bool = True,
        packing_num: int = 4,
        ordering: Literal["best", "worst"] = "best",
        grouping: Grouping = "blossom",
        merge_all: bool = False,
        merge_order: MergeOrder = "gamma",
        autopack: bool = True,
        placement_order: PlacementOrder = "gpus-desc",
        window: int | None = 32,
        max_types: int = 64,
        interval_s: float = 0.0,
        weight_lbd: float = 0.0,
        match_seed: int | None = None,
        model: StageModel | None = None,
    ) -> None:
        if not 1 <= packing_num <= 8:
            raise ValueError(f"packing_num must be in 1..8, got {packing_num}")
        if ordering not in ("best", "worst"):
            raise ValueError(f"ordering must be 'best' or 'worst', got {ordering!r}")
        if grouping not in ("blossom", "consecutive"):
            raise ValueError(f"grouping must be 'blossom' or 'consecutive', got {grouping!r}")
        if placement_order not in ("gpus-desc", "priority"):
            raise ValueError(f"placement_order must be 'gpus-desc' or 'priority', "
                             f"got {placement_order!r}")
        if window is not None and window < 2:
            raise ValueError(f"window must be >= 2 or None, got {window}")
        self.know_duration = know_duration
        self.packing_num = packing_num
        self.worst = ordering == "worst"
        self.grouping = grouping
        if merge_order not in ("gamma", "bucket"):
            raise ValueError(f"merge_order must be 'gamma' or 'bucket', got {merge_order!r}")
        self.merge_all = merge_all
        self.merge_order = merge_order
        self.autopack = autopack
        self.placement_order = placement_order
        self.window = window
        self.max_types = max_types
        self.interval_s = interval_s
        self.weight_lbd = weight_lbd
        self.match_seed = match_seed
        self.model = model or StageModel()
        self._next_group = 0
        self.gate = EventGate(interval_s)
        # Memo (learned state, pure functions of their keys): matchings and job profiles.
        self._match_cache: dict[object, list[tuple[int, int, float]]] = {}
        self._typed_cache: dict[int, dict[object, list[tuple[int, int, float, int]] | None]] = {}
        self._inputs: dict[str, tuple[Profile | None, float | None]] = {}
        self._layout_cache: dict[object, list[int | None] | None] = {}
        #: Groups of the last plan (job id -> group members), for ``explain``.
        self.last_groups: dict[str, tuple[str, ...]] = {}

    # ------------------------------------------------------------------ priority
    def priority(self, job: JobView, now_s: float) -> float:
        """Lower runs first: remaining x GPUs (Muri-S) or attained x GPUs (Muri-L)."""
        if self.know_duration:
            return job.remaining_s(now_s) * job.spec.num_gpus
        return job.attained_gpu_s(now_s)

    def _cand(self, job: JobView, now_s: float) -> _Cand:
        spec = job.spec
        got = self._inputs.get(spec.job_id)
        if got is None:
            prof = job_profile(spec)
            got = (prof, iso_iteration_ms(spec) if prof is not None else None)
            self._inputs[spec.job_id] = got
        prof, iso = got
        plen = len(prof) if prof is not None and iso is not None else 0
        return _Cand(
            job=job,
            key=(self.priority(job, now_s), spec.submit_time_s, spec.job_id),
            bucket=(spec.num_gpus, spec.gpu_type, plen),
            profile=prof if plen else None,
            iso_ms=iso if plen else None,
            home=_home_key(job.placement)
            if job.state is not JobState.PENDING and job.placement is not None else None,
            job_id=spec.job_id,
        )

    def _slot_size(self, bucket: BucketKey) -> int:
        plen = bucket[2]
        return 1 if plen == 0 else min(self.packing_num, num_positions(plen))

    # ------------------------------------------------------------------ decide
    def decide(self, snapshot: ClusterSnapshot, now_s: float) -> list[Action]:
        if not self.gate.due(snapshot, now_s):
            return []
        self.gate.planning(snapshot, now_s)
        if not snapshot.jobs:
            return []
        if not snapshot.pending and (
            all(j.settings.group_id is None for j in snapshot.jobs)
            or not any(len(h) > 1 for h in snapshot.occupancy.values())
        ):
            return []  # everyone runs alone and nobody waits: nothing to improve
        if len(self._inputs) > 2 * len(snapshot.jobs) + 1024:
            self._inputs = {j: v for j, v in self._inputs.items() if j in snapshot.by_id}
        cands = sorted((self._cand(j, now_s) for j in snapshot.jobs), key=lambda c: c.key)
        buckets = self._candidates(snapshot, cands)
        groups = self._group(buckets, snapshot.cluster.total_gpus)
        if self.autopack:
            groups = self._autopack(groups)
        groups.sort(key=lambda g: g.key)
        counter = _Counter(snapshot)
        plans = [self._plan(g) for g in groups if counter.take(g.gpus, g.gpu_type)]
        self.last_groups = {
            c.job_id: tuple(m.job_id for m in p.members) for p in plans for c in p.members
        }
        actions = self._realise(snapshot, plans, [c.job for c in cands])
        self.gate.expect(actions)
        return actions

    def next_wakeup_s(self, snapshot: ClusterSnapshot, now_s: float) -> float | None:
        return self.gate.next_wakeup_s(snapshot, now_s)

    # ------------------------------------------------------------------ step 2: candidates
    def _candidates(
        self, snapshot: ClusterSnapshot, cands: list[_Cand]
    ) -> dict[BucketKey, list[_Cand]]:
        lists: dict[BucketKey, list[_Cand]] = {}
        for c in cands:
            lists.setdefault(c.bucket, []).append(c)
        ptr = dict.fromkeys(lists, 0)
        chosen: set[str] = set()
        counter = _Counter(snapshot)
        for c in cands:
            if c.job_id in chosen:
                continue
            b = c.bucket
            if counter.take(b[0], b[1]):
                lst = lists[b]
                p = ptr[b]
                stop = min(p + self._slot_size(b), len(lst))
                for x in lst[p:stop]:
                    chosen.add(x.job_id)
                ptr[b] = stop
        return {b: lst[: ptr[b]] for b, lst in lists.items() if ptr[b]}

    # ------------------------------------------------------------------ step 3: grouping
    def _group(self, buckets: dict[BucketKey, list[_Cand]], capacity: int) -> list[_Group]:
        nodes = {b: [_Group([c], b) for c in cs] for b, cs in buckets.items()}
        demand = sum(b[0] * len(cs) for b, cs in buckets.items())
        if demand <= capacity and not self.merge_all:
            return [g for gs in nodes.values() for g in gs]
        if self.grouping == "consecutive":
            return self._group_consecutive(nodes, demand, capacity)
        for _ in range(self.packing_num):
            if demand <= capacity and not self.merge_all:
                break
            proposals: list[tuple[tuple[Any, ...], float, int, BucketKey, int, int]] = []
            for rank, (b, gs) in enumerate(nodes.items()):
                limit = self._slot_size(b)
                if limit < 2 or len(gs) < 2:
                    continue
                for u, v, w in self._match(gs, limit):
                    order: tuple[Any, ...]
                    if self.merge_order == "gamma":
                        order = (-w, b[0], min(gs[u].key, gs[v].key), b, u, v)
                    else:
                        # buckets are in the order their best job appears in the priority
                        # order, and gs is in priority order; the merged node lists the
                        # higher-priority node's members first
                        u, v = min(u, v), max(u, v)
                        order = (rank, u, v)
                    proposals.append((order, -w, b[0], b, u, v))
            if not proposals:
                break
            proposals.sort(key=lambda p: p[0])
            merged: dict[BucketKey, set[int]] = {}
            fused: dict[BucketKey, list[_Group]] = {}
            for _order, neg_w, g, b, u, v in proposals:
                if demand <= capacity and not self.merge_all:
                    break
                gs = nodes[b]
                fused.setdefault(b, []).append(
                    _Group(gs[u].members + gs[v].members, b, gamma=-neg_w)
                )
                merged.setdefault(b, set()).update((u, v))
                demand -= g
            if not fused:
                break
            for b, new in fused.items():
                rest = [x for i, x in enumerate(nodes[b]) if i not in merged[b]]
                nodes[b] = sorted(rest + new, key=lambda x: x.key)
        return [g for gs in nodes.values() for g in gs]

    def _match(self, gs: list[_Group], limit: int) -> list[tuple[int, int, float]]:
        """A maximum-weight matching of one bucket's nodes ``gs`` (priority order).

        - up to ``window`` nodes: networkx Blossom (``max_weight_pairs``), memoised: the
          nodes are inserted in job-id order, so the result depends only on which nodes (and
          which running groups) the bucket holds, and unchanged buckets reuse it;
        - more nodes with at most ``max_types`` distinct profile multisets: the exact typed
          solver (``typed_max_weight_pairs``), same optimum weight, no O(n^3);
        - otherwise (the decision-time bound): Blossom inside consecutive windows of
          ``window`` nodes in priority order.
        """
        n = len(gs)
        size = n if self.window is None else self.window
        if n > size:
            sigs = [g.signature() for g in gs]
            if len(set(sigs)) <= self.max_types:
                model, worst, lbd = self.model, self.worst, self.weight_lbd

                def type_weight(a: Hashable, b: Hashable) -> float | None:
                    pa, pb = cast(tuple[Profile, ...], a), cast(tuple[Profile, ...], b)
                    return _gamma_edge(model, list(pa) + list(pb), limit, worst, lbd)

                got = typed_max_weight_pairs(
                    sigs, type_weight, [_common_home(g) for g in gs],
                    cache=self._typed_cache.setdefault(limit, {}),
                    order=None if self.match_seed is None
                    else lambda i: self._node_key(gs[i]),
                )
                if got is not None:
                    return got
        out: list[tuple[int, int, float]] = []
        for start in range(0, n, size):
            canon = sorted(range(start, min(n, start + size)), key=lambda i: self._node_key(gs[i]))
            key = (limit, tuple(
                (tuple(c.job_id for c in gs[i].members), _common_home(gs[i])) for i in canon
            ))
            hit = self._match_cache.get(key)
            if hit is None:
                if len(self._match_cache) > 4096:
                    self._match_cache.clear()
                hit = max_weight_pairs(len(canon), self._edge([gs[i] for i in canon], limit))
                self._match_cache[key] = hit
            out.extend((canon[a], canon[b], w) for a, b, w in hit)
        return out

    def _node_key(self, g: _Group) -> tuple[int, str]:
        """A matching node's place in the insertion order (see ``match_seed``)."""
        jid = g.members[0].job_id
        if self.match_seed is None:
            return (0, jid)
        return (zlib.crc32(f"{self.match_seed}/{jid}".encode()), jid)

    def _edge(self, gs: list[_Group], limit: int) -> Callable[[int, int], float | None]:
        model, worst, lbd = self.model, self.worst, self.weight_lbd
        profs = [[m.profile for m in g.members if m.profile is not None] for g in gs]
        homes = [_common_home(g) for g in gs]

        def weight(u: int, v: int) -> float | None:
            w = _gamma_edge(model, profs[u] + profs[v], limit, worst, lbd)
            if w is not None and homes[u] is not None and homes[u] == homes[v]:
                w *= 1.0 + STICKY  # among equal choices, keep a group that already runs
            return w

        return weight

    def _group_consecutive(
        self, nodes: dict[BucketKey, list[_Group]], demand: int, capacity: int
    ) -> list[_Group]:
        """The "w/o Blossom" ablation: in each bucket, jobs [K*i .. K*i+K-1] in priority order
        form a group, members added one by one while the demand exceeds the cluster."""
        out: list[_Group] = []
        for b, gs in nodes.items():
            size = self._slot_size(b)
            for start in range(0, len(gs), size):
                head = _Group(list(gs[start].members), b)
                for nxt in gs[start + 1 : start + size]:
                    if demand > capacity or self.merge_all:
                        head.extend(nxt.members)
                        demand -= b[0]
                    else:
                        out.append(nxt)
                out.append(head)
        return out

    # ------------------------------------------------------------------ step 4: autopack
    def _autopack(self, groups: list[_Group]) -> list[_Group]:
        out: list[_Group] = []
        for g in groups:
            if len(g.members) < 2:
                out.append(g)
                continue
            ms = sorted(g.members, key=lambda c: c.job_id)
            profs = [m.profile for m in ms if m.profile is not None]
            isos = [m.iso_ms for m in ms if m.iso_ms is not None]
            if self.model.keeps_group(profs, isos):
                out.append(g)
            else:
                out.extend(_Group([m], g.bucket) for m in g.members)
        return out

    def _plan(self, g: _Group) -> _Plan:
        ms = sorted(g.members, key=lambda c: c.job_id)
        if len(ms) == 1:
            return _Plan(ms, [None], g.bucket, g.key)
        profs = [m.profile for m in ms if m.profile is not None]
        _, pos = self.model.extreme_layout(profs, self.worst)
        return _Plan(ms, list(pos), g.bucket, g.key)

    # ------------------------------------------------------------------ step 6: realise
    def _realise(
        self, snapshot: ClusterSnapshot, plans: list[_Plan], order: list[JobView]
    ) -> list[Action]:
        """Actions turning the current placement into ``plans``; ``order`` = every job in
        priority order (preemptions are issued in it)."""
        occupancy = snapshot.occupancy
        # Running (or suspended) jobs by exact placement: a candidate "home" for a plan if
        # nobody else overlaps those GPUs.
        homes: dict[HomeKey, list[JobView]] = {}
        for j in snapshot.jobs:
            if j.state is not JobState.PENDING and j.placement is not None:
                homes.setdefault(_home_key(j.placement), []).append(j)
        claimed: set[HomeKey] = set()
        for plan in plans:
            self._find_home(plan, homes, occupancy, claimed)
        stay = {c.job_id for p in plans for c in p.stayers}
        to_preempt = [
            j for j in order if j.state is not JobState.PENDING and j.job_id not in stay
        ]
        moving = [p for p in plans if len(p.stayers) < len(p.members)]
        if not moving:
            stay_slots = {s for p in plans if p.placement is not None and p.stayers
                          for s in p.placement.slots()}
            if not any(s in stay_slots for j in to_preempt if j.placement is not None
                       for s in j.placement.slots()):
                return []  # preempting alone would only idle GPUs
        actions: list[Action] = [
            Preempt(job_id=j.job_id, reason="muri: not in this round's groups")
            for j in to_preempt
        ]
        free = free_map(snapshot)
        leaving = {j.job_id for j in to_preempt}
        touched: set[str] = set()
        for j in to_preempt:
            assert j.placement is not None
            for node, gpu in j.placement.slots():
                holders = occupancy.get((node, gpu), ())
                if holders and all(h in leaving for h in holders) and holders[0] == j.job_id:
                    free[node].append(gpu)
                    touched.add(node)
        for node in touched:
            free[node].sort()
        # pack_consolidated through an index: thousands of groups on thousands of nodes
        index = FreeIndex(free, {n.name: n.gpu_type for n in snapshot.cluster.nodes})
        if self.placement_order == "gpus-desc":
            moving.sort(key=lambda p: -p.bucket[0])  # stable: priority order within a size
        for plan in moving:
            actions.extend(self._place(plan, index))
        return actions

    def _find_home(
        self,
        plan: _Plan,
        homes: dict[HomeKey, list[JobView]],
        occupancy: dict[tuple[str, int], tuple[str, ...]],
        claimed: set[HomeKey],
    ) -> None:
        """Decide which running members of ``plan`` stay where they are (``plan.stayers``)."""
        counts: dict[HomeKey, list[_Cand]] = {}
        for c in plan.members:
            if c.home is not None:
                counts.setdefault(c.home, []).append(c)
        if not counts:
            return
        home, stayers = max(counts.items(), key=lambda kv: len(kv[1]))  # first on ties
        if home in claimed:
            return
        here = homes.get(home, [])
        ids = {j.job_id for j in here}
        if any(len(occupancy.get((n, g), ())) != len(ids) for n, gs in home for g in gs):
            return  # someone else overlaps those GPUs partially: start afresh
        placement = stayers[0].job.placement
        if len(plan.members) == 1:
            plan.stayers, plan.placement = stayers, placement
            claimed.add(home)
            return
        gids = {c.job.settings.group_id for c in stayers}
        slots = [c.job.settings.slot for c in stayers]
        if None in gids or len(gids) != 1 or None in slots or len(set(slots)) != len(slots):
            return
        fixed = {c.job_id: s for c, s in zip(stayers, slots, strict=True) if s is not None}
        assignment = self._complete_layout(plan, fixed)
        if assignment is None:
            return
        plan.slots = assignment
        plan.stayers, plan.placement = stayers, placement
        plan.group_id = next(iter(gids))
        claimed.add(home)

    def _complete_layout(self, plan: _Plan, fixed: dict[str, int]) -> list[int | None] | None:
        """Slots for the plan's members that keep the ``fixed`` ones and reach the target
        (best or worst) period; None if no completion does."""
        profs = [m.profile for m in plan.members if m.profile is not None]
        npos = num_positions(len(profs[0]))
        if any(s >= npos for s in fixed.values()):
            return None
        known = tuple(fixed.get(m.job_id) for m in plan.members)
        key = (tuple(profs), known)
        if key in self._layout_cache:
            return self._layout_cache[key]
        target = self.model.extreme_layout(profs, self.worst)[0]
        free_pos = [q for q in range(npos) if q not in fixed.values()]
        new = [i for i, q in enumerate(known) if q is None]
        found: list[int | None] | None = None
        for choice in itertools.permutations(free_pos, len(new)):
            pos = [-1 if q is None else q for q in known]
            for i, q in zip(new, choice, strict=True):
                pos[i] = q
            if math.isclose(raw_period(profs, pos), target, rel_tol=1e-9):
                found = list(pos)
                break
        if len(self._layout_cache) > 4096:
            self._layout_cache.clear()
        self._layout_cache[key] = found
        return found

    def _place(self, plan: _Plan, index: FreeIndex) -> list[Action]:
        g, gpu_type = plan.bucket[0], plan.bucket[1]
        if plan.placement is None:
            placement = index.consolidated(g, gpu_type)
            if placement is None:
                return []  # fragmentation across GPU types: wait for the next event
            plan.placement = placement
        grouped = len(plan.members) > 1
        if grouped and plan.group_id is None:
            plan.group_id = f"muri-{self._next_group}"
            self._next_group += 1
        placed = [c.job_id for c in plan.stayers]
        stay = set(placed)
        actions: list[Action] = []
        for c, slot in zip(plan.members, plan.slots, strict=True):
            if c.job_id in stay:
                continue
            settings = JobSettings(group_id=plan.group_id, slot=slot) if grouped else JobSettings()
            reason = (f"muri: group {plan.group_id} ({len(plan.members)} jobs), slot {slot}"
                      if grouped else "muri: runs alone")
            if placed:
                actions.append(Share(job_id=c.job_id, placement=plan.placement,
                                     with_jobs=tuple(placed), settings=settings, reason=reason))
            else:
                actions.append(Start(job_id=c.job_id, placement=plan.placement,
                                     settings=settings, reason=reason))
            placed.append(c.job_id)
        return actions

    # ------------------------------------------------------------------ explain
    def explain(self, snapshot: ClusterSnapshot, job_id: str) -> str:
        base = super().explain(snapshot, job_id)
        job = snapshot.by_id.get(job_id)
        if job is None:
            return base
        kind = "remaining" if self.know_duration else "attained"
        out = f"{base}; priority ({kind} x GPUs) {self.priority(job, snapshot.now_s):.0f}"
        if job_profile(job.spec) is None:
            out += "; no stage profile, never grouped"
        group = self.last_groups.get(job_id)
        if group is not None and len(group) > 1:
            out += f"; last plan groups it with {', '.join(j for j in group if j != job_id)}"
        elif group is None:
            out += "; not chosen in the last plan (lower priority than the jobs that fit)"
        return out


class MuriS(Muri):
    name = "muri-s"
    summary = "Muri-S: SRSF priority (durations known), Blossom interleaving groups of <= 4"
    clairvoyant = True
    fixed_options = ("know_duration",)

    def __init__(self, **kw: object) -> None:
        super().__init__(know_duration=True, **kw)  # type: ignore[arg-type]


class MuriL(Muri):
    name = "muri-l"
    summary = "Muri-L: 2D-LAS priority (durations unknown), Blossom interleaving groups of <= 4"
    fixed_options = ("know_duration",)

    def __init__(self, **kw: object) -> None:
        super().__init__(know_duration=False, **kw)  # type: ignore[arg-type]


POLICIES = [
    MuriS,
    MuriL,
    (
        "muri-l-worst-ordering",
        functools.partial(MuriL, ordering="worst"),
        "Muri-L ablation: every group uses its worst stage ordering",
    ),
    (
        "muri-l-no-blossom",
        functools.partial(MuriL, grouping="consecutive"),
        "Muri-L ablation w/o Blossom: consecutive priority-ordered jobs grouped 4 at a time",
    ),
]
