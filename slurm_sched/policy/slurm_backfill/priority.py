"""Slurm's priority/multifactor job priority, restricted to the factors a GPU trace carries.

Formulas (https://slurm.schedmd.com/priority_multifactor.html; the fair-share factor is the
classic algorithm of https://slurm.schedmd.com/classic_fair_share.html):

- ``priority = weight_age * age + weight_job_size * size + weight_fairshare * fairshare``
  (the QOS, partition, association, nice, site and TRES terms are left out: a trace has no
  QOS or partition; with one partition and one QOS they add the same constant to every job).
- ``age = min(1, (now - submit) / PriorityMaxAge)`` (Slurm counts from the eligible time; a
  trace job is eligible at submission).
- ``size = gpus / cluster GPUs``; with ``PriorityFavorSmall=YES``
  ``size = 1 - (gpus - 1) / cluster GPUs`` (a 1-GPU job gets 1.0). Slurm sizes a job by its
  nodes or CPUs; on a GPU cluster the GPUs are the resource that a job's size means.
- ``fairshare = 2^(-U/S)``: ``S`` is the account's normalised share (its raw shares over the
  sum of the raw shares of every account known; 1 share each unless given), ``U`` its
  effective usage, the account's decayed usage over every account's. Usage is GPU-seconds of
  running jobs, decayed with half-life ``PriorityDecayHalfLife``: a GPU-second consumed ``t``
  seconds ago counts ``2^(-t / half-life)`` (0 = no decay). Accounts are flat (children of
  root), so the parent's usage term of the classic formula is the whole cluster's.

Slurm stores the priority as an integer; here it stays a float (the same order, fewer ties).
"""

from __future__ import annotations

import math
from collections.abc import Mapping


class FairShare:
    """Decayed GPU-second usage per account, accrued from the running jobs' GPU counts.

    The caller reports every change of an account's running GPUs (:meth:`add_rate`) at the
    time it happens; usage accrues exactly in between (the rate is constant there). An
    account is brought up to date only when its rate changes or its factor is read: each keeps
    its usage as of its last update, decayed and accrued in one step from there.
    """

    def __init__(self, half_life_s: float, shares: Mapping[str, float] | None = None) -> None:
        self.half_life_s = half_life_s
        self._raw_shares: dict[str, float] = dict(shares or {})
        self._share_sum = sum(self._raw_shares.values())
        #: account -> [usage as of ``at``, at, GPUs running]
        self._acct: dict[str, list[float]] = {}
        self._total = [0.0, 0.0, 0.0]  # the same for the sum over every account

    def _accrue(self, rec: list[float], now_s: float) -> None:
        usage, at, rate = rec
        dt = now_s - at
        if dt <= 0:
            return
        if self.half_life_s <= 0:
            usage += rate * dt
        else:
            # decay what was there, add the integral of rate * 2^-(now - t)/H over [at, now]
            kept = 2.0 ** (-dt / self.half_life_s)
            usage = usage * kept + rate * self.half_life_s / math.log(2) * (1.0 - kept)
        rec[0] = usage
        rec[1] = now_s

    def _account(self, account: str, now_s: float) -> list[float]:
        rec = self._acct.get(account)
        if rec is None:
            rec = self._acct[account] = [0.0, now_s, 0.0]
            if account not in self._raw_shares:
                self._raw_shares[account] = 1.0
                self._share_sum += 1.0
        return rec

    def add_rate(self, account: str, gpus: int, now_s: float) -> None:
        """``account`` runs ``gpus`` more GPUs (fewer if negative) from ``now_s`` on."""
        rec = self._account(account, now_s)
        self._accrue(rec, now_s)
        self._accrue(self._total, now_s)
        rec[2] += gpus
        self._total[2] += gpus

    def usage(self, account: str, now_s: float) -> float:
        """The account's decayed usage in GPU-seconds as of ``now_s``."""
        rec = self._acct.get(account)
        if rec is None:
            return 0.0
        self._accrue(rec, now_s)
        return rec[0]

    def factor(self, account: str, now_s: float) -> float:
        """Classic fair share ``2^(-U/S)`` of ``account`` at ``now_s`` (1.0 while nobody
        has used anything)."""
        rec = self._account(account, now_s)
        self._accrue(rec, now_s)
        self._accrue(self._total, now_s)
        total = self._total[0]
        if total <= 0:
            return 1.0
        share = self._raw_shares[account] / self._share_sum
        if share <= 0:
            return 0.0
        return float(2.0 ** (-(rec[0] / total) / share))


def size_factor(gpus: int, cluster_gpus: int, favor_small: bool) -> float:
    """Slurm's job-size factor by GPUs (see the module docstring)."""
    total = max(1, cluster_gpus)
    if favor_small:
        return max(0.0, 1.0 - (gpus - 1) / total)
    return min(1.0, gpus / total)


def age_factor(age_s: float, max_age_s: float) -> float:
    """Slurm's age factor: ``min(1, age / PriorityMaxAge)`` (0 for a negative age)."""
    return min(1.0, max(0.0, age_s) / max_age_s)
