"""The recommendation and its uncertainty: a block bootstrap over days (or weeks) of history.

Contract:

- Only the jobs every compared schedule completed are used, so each average is over the same
  jobs. A job belongs to the UTC calendar day of its submit time (``block="day"``) or to its
  ISO week, Monday to Sunday (``block="week"``).
- One resample draws as many blocks as the history has, with replacement (``random.Random(seed)``,
  so a seed gives the same answer), and computes each policy's average JCT over the drawn blocks'
  jobs from the per-job results; nothing is simulated again.
- In each resample the *winner* is the policy with the lowest average JCT among the deployable
  ones (the baseline and every policy that is not clairvoyant; ties go to the earlier one in the
  list). A policy *beats* the baseline when its average JCT is lower; its relative improvement is
  (baseline - policy) / baseline.
- Recommendation: among the deployable policies other than the baseline that beat it in at least
  :data:`CONFIDENCE` of the resamples, the one that wins most often (ties: the one that beats the
  baseline more often, then list order). When none does: stay with Slurm's own scheduling.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from slurm_sched.advisor.metrics import percentiles
from slurm_sched.advisor.outcomes import JobOutcome

#: The share of resamples in which a policy must beat the baseline to be recommended.
CONFIDENCE = 0.8
DAY_S = 86400.0
BLOCKS = ("day", "week")

#: Called with (resamples done, total).
ResampleProgress = Callable[[int, int], None]


def block_of(epoch_s: float, block: str) -> int:
    """The index of the UTC day, or ISO week (Monday first), of an epoch time."""
    day = math.floor(epoch_s / DAY_S)
    if block == "day":
        return day
    if block == "week":
        return (day + 3) // 7  # 1970-01-01 was a Thursday: day 4 of its ISO week
    raise ValueError(f"block must be one of {BLOCKS}, got {block!r}")


@dataclass(frozen=True)
class PolicyOdds:
    """One policy over the resamples. ``win_share`` is None for a clairvoyant policy (it does not
    compete); the improvement figures are relative to the baseline (positive = better)."""

    policy: str
    avg_jct_s: float
    win_share: float | None
    beat_share: float
    improvement_median: float
    improvement_p5: float
    improvement_p95: float


@dataclass(frozen=True)
class Recommendation:
    """The advice: ``policy`` None means stay with Slurm's own scheduling."""

    policy: str | None
    win_share: float
    beat_share: float
    text: str


@dataclass(frozen=True)
class Resampling:
    """The bootstrap's figures and the recommendation drawn from them."""

    baseline: str
    block: str
    resamples: int
    seed: int
    blocks: int
    jobs: int
    odds: dict[str, PolicyOdds]
    recommendation: Recommendation
    notes: tuple[str, ...] = ()


def _recommend(baseline: str, odds: Mapping[str, PolicyOdds], order: Sequence[str],
               stay_text: str) -> Recommendation:
    pool = [p for p in order if p != baseline and odds[p].win_share is not None
            and odds[p].beat_share >= CONFIDENCE]
    if not pool:
        best = max((odds[p].beat_share for p in order if p != baseline
                    and odds[p].win_share is not None), default=0.0)
        return Recommendation(
            None, odds[baseline].win_share or 0.0, 0.0,
            f"stay with Slurm's own scheduling ({baseline}): no policy beats it in at least "
            f"{CONFIDENCE:.0%} of the resamples (the best does in {best:.0%})" + stay_text)
    top = max(pool, key=lambda p: (odds[p].win_share or 0.0, odds[p].beat_share,
                                   -order.index(p)))
    o = odds[top]
    return Recommendation(
        top, o.win_share or 0.0, o.beat_share,
        f"switch to {top}: it has the lowest average JCT in {o.win_share or 0.0:.0%} of the "
        f"resamples and beats {baseline} in {o.beat_share:.0%}; its average JCT is "
        f"{o.improvement_median:.1%} lower than {baseline}'s (median; 5-95%: "
        f"{o.improvement_p5:.1%} to {o.improvement_p95:.1%})")


def resample(
    outcomes: Mapping[str, Sequence[JobOutcome]],
    baseline: str,
    *,
    origin_s: float,
    clairvoyant: Collection[str] = (),
    block: str = "day",
    resamples: int = 200,
    seed: int = 0,
    on_progress: ResampleProgress | None = None,
) -> Resampling:
    """Bootstrap the average JCT of each policy of ``outcomes`` (which holds ``baseline``);
    ``origin_s`` is the epoch time of the outcomes' time 0, ``clairvoyant`` the policies that
    may not win."""
    if baseline not in outcomes:
        raise ValueError(f"the baseline {baseline!r} has no results")
    if block not in BLOCKS:
        raise ValueError(f"block must be one of {BLOCKS}, got {block!r}")
    order = list(outcomes)
    common = set.intersection(*({o.job_id for o in os_} for os_ in outcomes.values()))
    sums: dict[str, dict[int, float]] = {p: {} for p in order}
    counts: dict[int, int] = {}
    for p in order:
        for o in outcomes[p]:
            if o.job_id not in common:
                continue
            b = block_of(origin_s + o.submit_s, block)
            sums[p][b] = sums[p].get(b, 0.0) + o.jct_s
            if p == baseline:
                counts[b] = counts.get(b, 0) + 1
    blocks = sorted(counts)
    competing = [p for p in order if p not in clairvoyant or p == baseline]
    rng = random.Random(seed)
    wins = dict.fromkeys(order, 0)
    beats = dict.fromkeys(order, 0)
    gains: dict[str, list[float]] = {p: [] for p in order}
    for r in range(resamples if blocks else 0):
        drawn = [blocks[rng.randrange(len(blocks))] for _ in blocks]
        n = sum(counts[b] for b in drawn)
        avg = {p: sum(sums[p].get(b, 0.0) for b in drawn) / n for p in order}
        winner = min(competing, key=lambda p: (avg[p], competing.index(p)))
        wins[winner] += 1
        base = avg[baseline]
        for p in order:
            beats[p] += avg[p] < base
            gains[p].append((base - avg[p]) / base if base > 0 else 0.0)
        if on_progress is not None:
            on_progress(r + 1, resamples)
    done = resamples if blocks else 0
    jobs = sum(counts.values())
    ranges = {p: percentiles(gains[p], (50, 5, 95)) for p in order}
    odds = {
        p: PolicyOdds(
            policy=p,
            avg_jct_s=sum(sums[p].values()) / jobs if jobs else 0.0,
            win_share=None if p not in competing else (wins[p] / done if done else 0.0),
            beat_share=beats[p] / done if done else 0.0,
            improvement_median=ranges[p][0],
            improvement_p5=ranges[p][1],
            improvement_p95=ranges[p][2],
        )
        for p in order
    }
    notes = []
    if len(blocks) < 2:
        notes.append(f"the history spans {len(blocks)} {block}(s): resampling cannot measure "
                     "the uncertainty; collect a longer history")
    stay_text = "" if blocks else "; no job was completed by every policy"
    return Resampling(baseline, block, resamples, seed, len(blocks), jobs, odds,
                      _recommend(baseline, odds, order, stay_text), tuple(notes))
