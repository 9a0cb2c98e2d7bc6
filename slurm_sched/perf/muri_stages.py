"""Muri's stage-time model: interleaving efficiency and the "muri" simulated world.

Paper: Zhao et al., "Multi-Resource Interleaving for Deep Learning Training", SIGCOMM'22
(spec ``shared/specs/muri.md`` sections 2.1-2.4 and 2.10; artifact Rivendile/Muri @ 4e69a78).

Every training iteration runs one stage per resource: storage IO, CPU, GPU, network. Muri runs
up to k jobs on the same GPUs and rotates their stages so that, in each *slot*, every resource
serves at most one job; a slot ends when its longest stage ends (barrier). A member's ``slot``
(its position in the rotation) is what the runtime needs; the group period T follows from the
member profiles and positions:

- **k measured stage times** (user hints, e.g. ``[storage, cpu, gpu, network]``): Eq. 3,
  ``T = sum_j max_members t[(pos + j) mod k]`` over ``k`` slots. Efficiency Eq. 4, closed form
  ``gamma = sum(t) / (k * T)``.
- **3 measured times** (the public traces: ``r0`` = data loading + preprocessing, ``r1`` = GPU,
  ``r2`` = gradient sync): the artifact's recurrence over 4 positions, where the data stage
  spans two slots (section 2.4). Calibrated group period ``T_group = T * c_p`` with the
  artifact's multipliers ``c_2, c_3, c_4``; ``gamma = sum(r) / (4 * T_group)``.

Orderings: the layouts tried are the member permutations over positions ``0..p-1`` (Eq. 3 read
literally, as the artifact does) plus, for a 3-time pair, positions ``(0, 2)`` (the artifact's
extra ``T_alt`` candidate: one job loads data while the other computes and syncs). The best
layout has the smallest T, the "worst ordering" ablation the largest. ``superset=True`` tries
every injective assignment of members to the k positions instead (the spec's optional reading).

The "muri" progress model (simulated world, used for every policy of a Muri comparison):

- a job alone runs at ``1 / ISO_FACTOR`` (the artifact multiplies every isolated iteration time
  by 1.015, under all policies);
- running jobs that share their GPUs with the same ``settings.group_id`` form an interleaving
  group: each completes one iteration per ``T_group`` computed from the members' ``slot``
  positions (best layout if the slots are missing or clash), so its rate is
  ``iso_iteration_ms / T_group`` (capped at the alone rate);
- a job marked ``settings.plan == OPPORTUNISTIC`` (AntMan) fills the idle gaps of the
  resource-guarantee jobs it shares with (the artifact's AntMan rule, section 3), runs at half
  speed next to another opportunistic job, and never slows the others down;
- any other co-location outside a group is plain time-slicing: the rate is divided by
  ``1 + (number of such co-located jobs)`` (two equal jobs sharing a contended GPU each run at
  half speed, the paper's section 2.1 example).

Deviation: the artifact charges each running job its restart overhead at *every* scheduling
event; the framework charges a restart overhead only when a job is (re)started.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

from slurm_sched.model import Cluster, JobSpec, JobView, Placement
from slurm_sched.perf.progress import ProgressModel

#: Resource types of a training iteration: storage IO, CPU, GPU, network (k).
NUM_RESOURCES = 4
#: The artifact multiplies every isolated iteration time by this, for every policy.
ISO_FACTOR = 1.015
#: Artifact group-period multipliers c_p for p = 2, 3, 4 members (``simulator/jobs.py``).
ARTIFACT_MULTIPLIERS: Mapping[int, float] = {2: 1.33 / 1.015, 3: 1.5 / 1.015, 4: 1.37 / 1.015}
#: The artifact's multipliers for its "w/o Blossom" ablation run (c_4 = 1.30 / 1.015).
NO_BLOSSOM_MULTIPLIERS: Mapping[int, float] = {2: 1.33 / 1.015, 3: 1.5 / 1.015, 4: 1.3 / 1.015}
#: ``JobSettings.plan`` of an AntMan opportunistic job (low priority, fills idle gaps).
OPPORTUNISTIC = "opportunistic"
#: Positions of the artifact's 3-time recurrence (data 2 slots, GPU 1, network 1).
ARTIFACT_POSITIONS = 4

Profile = tuple[float, ...]

#: Per-iteration stage times (r0 data, r1 GPU, r2 network) ms and isolated iteration time ms of
#: the Muri models on 1 GPU (spec table 5.2), for tests and benchmarks.
PROFILES_1GPU: Mapping[str, tuple[Profile, float]] = {
    "vgg16": ((117.0, 68.0, 0.0), 107.0),
    "vgg19": ((114.0, 80.0, 0.0), 109.0),
    "resnet18": ((711.0, 110.0, 0.0), 779.0),
    "shufflenet_v2_x1_0": ((706.0, 59.0, 0.0), 798.0),
    "bert": ((0.5, 160.0, 0.0), 178.0),
    "gpt2": ((0.6, 410.0, 0.0), 426.0),
    "a2c": ((514.0, 14.0, 0.0), 517.0),
    "dqn": ((446.0, 8.0, 0.0), 490.0),
}
#: The same on 8 GPUs (spec table 5.2; the models measured there).
PROFILES_8GPU: Mapping[str, tuple[Profile, float]] = {
    "vgg19": ((82.0, 88.0, 60.0), 226.0),
    "shufflenet_v2_x1_0": ((769.0, 57.0, 10.0), 957.0),
    "bert": ((0.5, 167.0, 59.0), 192.0),
    "gpt2": ((0.6, 419.0, 49.0), 437.0),
    "a2c": ((502.0, 14.0, 0.4), 555.0),
    "dqn": ((435.0, 8.0, 0.5), 509.0),
}


# --------------------------------------------------------------------------- job inputs
def job_profile(spec: JobSpec) -> Profile | None:
    """The job's per-iteration stage times (ms), or None if it has no usable profile.

    Usable: at least 2 finite, non-negative times with a positive sum.
    """
    st = spec.stage_times_ms
    if st is None or len(st) < 2:
        return None
    if any(not math.isfinite(t) or t < 0 for t in st) or sum(st) <= 0:
        return None
    return tuple(float(t) for t in st)


def iso_iteration_ms(spec: JobSpec) -> float | None:
    """Isolated iteration time (ms): measured (trace), else duration / iterations, else the sum
    of the stage times (stages run one after the other), else None."""
    it = spec.attrs.get("iteration_time_ms")
    if isinstance(it, int | float) and math.isfinite(it) and it > 0:
        return float(it)
    if spec.iterations:
        return spec.duration_s * 1000.0 / spec.iterations
    prof = job_profile(spec)
    return sum(prof) if prof is not None else None


def num_positions(profile_len: int) -> int:
    """Slots of one group iteration: 4 for the 3-time artifact model, k for k stage times."""
    return ARTIFACT_POSITIONS if profile_len == 3 else profile_len


# --------------------------------------------------------------------------- periods
def period_eq3(profiles: Sequence[Profile], positions: Sequence[int]) -> float:
    """Eq. 3: the member at position q uses resource ``(j + q) mod k`` in slot j."""
    k = len(profiles[0])
    return sum(
        max(p[(q + j) % k] for p, q in zip(profiles, positions, strict=True)) for j in range(k)
    )


def period_artifact(profiles: Sequence[Profile], positions: Sequence[int]) -> float:
    """The artifact's 3-time recurrence (spec section 2.4), generalised to any occupied
    positions of the 4-slot rotation (positions ``0..p-1`` reproduce the artifact exactly;
    ``(0, 2)`` for a pair gives its ``T_alt``).

    Slot boundaries ``f``: in slot i the network stage of position ``(i+1) mod 4``, the GPU
    stage of ``(i+2) mod 4`` and the second half of the data stage of ``(i+3) mod 4`` (which
    started one slot earlier) must end. The steady-state period is returned.
    """
    at: list[Profile | None] = [None] * ARTIFACT_POSITIONS
    for p, q in zip(profiles, positions, strict=True):
        at[q] = p
    f = [0.0] * 9
    for i in range(8):
        v = 0.0
        net = at[(i + 1) % 4]
        if net is not None:
            v = max(v, f[i] + net[2])
        gpu = at[(i + 2) % 4]
        if gpu is not None:
            v = max(v, f[i] + gpu[1])
        if i > 0:
            data = at[(i + 3) % 4]
            if data is not None:
                v = max(v, f[i - 1] + data[0])
        f[i + 1] = v
        if i >= 4:
            cur = f[i + 1] - f[i - 3]
            if cur > 0 and math.isclose(cur, f[i] - f[i - 4], rel_tol=1e-3):
                return cur
    return f[8] - f[4]


def raw_period(profiles: Sequence[Profile], positions: Sequence[int]) -> float:
    """Uncalibrated group period (ms) of members at the given positions."""
    if len(profiles[0]) == 3:
        return period_artifact(profiles, positions)
    return period_eq3(profiles, positions)


def gamma_eq4(profiles: Sequence[Profile], period: float) -> float:
    """Eq. 4 as written: 1 - mean over resources of the idle fraction of the period."""
    k = len(profiles[0])
    idle = sum((period - sum(p[j] for p in profiles)) / period for j in range(k))
    return 1.0 - idle / k


def layouts(p: int, profile_len: int, *, superset: bool = False) -> list[tuple[int, ...]]:
    """Candidate positions for p members, in a fixed order (ties go to the first)."""
    npos = num_positions(profile_len)
    if p > npos:
        raise ValueError(f"a group of {p} jobs needs at most {npos} members for this profile")
    if superset:
        return list(itertools.permutations(range(npos), p))
    out = list(itertools.permutations(range(p)))
    if profile_len == 3 and p == 2:
        out.append((0, 2))
    return out


def antman_opportunistic_iteration_ms(
    own: Profile, own_iter_ms: float, guarantee: Profile, guarantee_iter_ms: float
) -> float:
    """Iteration time of an AntMan opportunistic job next to a resource-guarantee job.

    Spec section 3: the opportunistic job only runs a stage while the guarantee job is in
    another one. Its data stage fits in the guarantee job's GPU + network time, its GPU stage in
    the guarantee job's data + network time, its network stage in data + GPU time; it needs
    ``n`` guarantee iterations for one own iteration (a partial gap costs a whole iteration,
    and a partial data gap also absorbs part of the next stage). Returns
    ``max(own, n * guarantee iteration)``; 2 x own when the guarantee job leaves no gap.
    """
    o0, o1, o2 = own[:3]
    c0, c1, c2 = guarantee[:3]
    gaps = (c1 + c2, c0 + c2, c0 + c1)
    if any(g <= 0 for g in gaps):
        return 2.0 * own_iter_ms
    n = 0
    whole, rest = divmod(o0, gaps[0])
    n += int(whole)
    if rest > 0:
        n += 1
        o1 -= min(o1, c2, gaps[0] - rest)
    whole, rest = divmod(o1, gaps[1])
    n += int(whole)
    if rest > 0:
        n += 1
        if rest < c0:
            o2 -= min(o2, c0 + c1 - rest)
    whole, rest = divmod(o2, gaps[2])
    n += int(whole)
    if rest > c0:
        n += 1
    return max(own_iter_ms, n * guarantee_iter_ms)


# --------------------------------------------------------------------------- the model
class StageModel:
    """Group periods, layouts and interleaving efficiency, memoised by profile tuples.

    Args:
        multipliers: calibration c_p by group size, applied to 3-time profiles only (the
            k-time Eq. 3 model is the paper's uncalibrated one).
        iso_factor: isolated iteration time multiplier (artifact: 1.015).
        superset: search every injective position assignment, not only positions 0..p-1.
    """

    def __init__(
        self,
        multipliers: Mapping[int, float] = ARTIFACT_MULTIPLIERS,
        iso_factor: float = ISO_FACTOR,
        superset: bool = False,
    ) -> None:
        if iso_factor <= 0:
            raise ValueError(f"iso_factor must be > 0, got {iso_factor}")
        if any(c <= 0 for c in multipliers.values()):
            raise ValueError(f"multipliers must be > 0, got {dict(multipliers)}")
        self.multipliers = dict(multipliers)
        self.iso_factor = iso_factor
        self.superset = superset
        self._extreme: dict[tuple[tuple[Profile, ...], bool], tuple[float, tuple[int, ...]]] = {}
        self._gamma: dict[tuple[tuple[Profile, ...], bool], float] = {}

    def multiplier(self, profiles: Sequence[Profile]) -> float:
        if len(profiles) < 2 or len(profiles[0]) != 3:
            return 1.0
        return self.multipliers.get(len(profiles), 1.0)

    def group_period(self, profiles: Sequence[Profile], positions: Sequence[int]) -> float:
        """Calibrated period T_group (ms) of a group of >= 2 members at ``positions``."""
        return raw_period(profiles, positions) * self.multiplier(profiles)

    def extreme_layout(
        self, profiles: Sequence[Profile], worst: bool = False
    ) -> tuple[float, tuple[int, ...]]:
        """(raw T, positions) of the best (smallest T) or worst layout; ties: first layout."""
        key = (tuple(profiles), worst)
        hit = self._extreme.get(key)
        if hit is not None:
            return hit
        if len({len(p) for p in profiles}) != 1:
            raise ValueError(f"profiles of one group must have one length, got {profiles}")
        best: tuple[float, tuple[int, ...]] | None = None
        for pos in layouts(len(profiles), len(profiles[0]), superset=self.superset):
            t = raw_period(profiles, pos)
            if best is None or (t > best[0] if worst else t < best[0]):
                best = (t, pos)
        assert best is not None
        self._extreme[key] = best
        return best

    def gamma(self, profiles: Sequence[Profile], worst: bool = False) -> float:
        """Interleaving efficiency of a group (the matching weight), memoised by multiset.

        3-time profiles: ``sum(r) / (4 * T_group)`` (artifact ``calc_used_ratio``: the
        calibrated period and k = 4 in the denominator). k-time: Eq. 4 closed form.
        """
        key = (tuple(sorted(profiles)), worst)
        hit = self._gamma.get(key)
        if hit is not None:
            return hit
        ordered = key[0]
        t_raw = self.extreme_layout(ordered, worst)[0]
        total = sum(sum(p) for p in ordered)
        if len(ordered[0]) == 3:
            g = total / (NUM_RESOURCES * t_raw * self.multiplier(ordered))
        else:
            g = total / (len(ordered[0]) * t_raw)
        self._gamma[key] = g
        return g

    def keeps_group(self, profiles: Sequence[Profile], iso_ms: Sequence[float]) -> bool:
        """Autopack: a group is worth it if its best period is no longer than running the
        members one after another (``T_group <= sum(iso_factor * iso)``)."""
        t = self.extreme_layout(profiles)[0] * self.multiplier(profiles)
        return t <= self.iso_factor * sum(iso_ms) * (1 + 1e-12)


# --------------------------------------------------------------------------- the world
class MuriProgress(ProgressModel):
    """The "muri" simulated world (see the module docstring)."""

    def __init__(self, model: StageModel | None = None) -> None:
        self.model = model or StageModel()

    def rate(
        self,
        job: JobView,
        placement: Placement,
        co_located: Sequence[JobView],
        cluster: Cluster,
    ) -> float:
        alone = 1.0 / self.model.iso_factor
        if not co_located:
            return alone
        gid = job.settings.group_id
        mates = [
            c for c in co_located
            if gid is not None and c.settings.group_id == gid and c.placement == placement
        ]
        mate_ids = {c.job_id for c in mates}
        outsiders = [c for c in co_located if c.job_id not in mate_ids]
        base = self._group_rate(job, mates) if mates else alone
        if not outsiders:
            return base
        if job.settings.plan == OPPORTUNISTIC:
            return min(base, self._opportunistic_rate(job, outsiders))
        plain = [c for c in outsiders if c.settings.plan != OPPORTUNISTIC]
        return base / (1 + len(plain))

    def _group_rate(self, job: JobView, mates: Sequence[JobView]) -> float:
        members = [job, *mates]
        alone = 1.0 / self.model.iso_factor
        profiles = [job_profile(m.spec) for m in members]
        iso = iso_iteration_ms(job.spec)
        if iso is None or any(p is None for p in profiles) or len(
            {len(p) for p in profiles if p is not None}
        ) != 1:
            return alone / len(members)  # no usable profile: time-slicing
        profs: list[Profile] = [p for p in profiles if p is not None]
        npos = num_positions(len(profs[0]))
        if len(members) > npos:
            return alone / len(members)
        slots = [m.settings.slot for m in members]
        if any(s is None or s >= npos for s in slots) or len(set(slots)) != len(slots):
            positions: Sequence[int] = self.model.extreme_layout(profs)[1]
        else:
            positions = [s for s in slots if s is not None]
        period = self.model.group_period(profs, positions)
        return min(alone, iso / period)

    def _opportunistic_rate(self, job: JobView, others: Sequence[JobView]) -> float:
        own_iter = iso_iteration_ms(job.spec)
        own_prof = job_profile(job.spec)
        if own_iter is None:
            return 1.0 / (2.0 * self.model.iso_factor)
        it = own_iter
        for c in others:
            c_prof = job_profile(c.spec)
            c_iter = iso_iteration_ms(c.spec)
            if (
                c.settings.plan == OPPORTUNISTIC
                or own_prof is None or c_prof is None or c_iter is None
                or len(own_prof) != 3 or len(c_prof) != 3
            ):
                it = max(it, 2.0 * own_iter)
            else:
                it = max(it, antman_opportunistic_iteration_ms(own_prof, own_iter, c_prof, c_iter))
        return own_iter / (it * self.model.iso_factor)


PROGRESS_MODELS = {
    "muri": MuriProgress,
    "muri-noblossom": lambda: MuriProgress(StageModel(NO_BLOSSOM_MULTIPLIERS)),
}
