"""Simulation profiles: every assumption a simulation makes beyond the policy and the trace.

A :class:`Profile` bundles the world (the progress model: how fast a job runs where it is
placed), the cost of a (re)start and when the scheduler may act. The ``default`` profile is our
realistic one: the policy's own world, a 30 s dead time per restart, decisions at every event
and at the policy's own timers. An ``*-artifact`` profile reproduces what one authors' simulator
assumes, so that our policies can be checked against that simulator's numbers on the same input
(``benchmarks/crosscheck.py``); each lives in its own module of
:mod:`slurm_sched.sim.profiles`.

Contract: :data:`BUILTIN` maps every profile's name to the module whose ``PROFILE`` declares
it; a module is imported only when its profile is asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from slurm_sched.errors import InputError
from slurm_sched.model import JobSpec

#: Dead time after a restart when neither the profile nor the caller names one.
DEFAULT_RESTART_OVERHEAD_S = 30.0


@dataclass(frozen=True)
class Profile:
    """What a simulation assumes beyond the policy and the trace.

    Attributes:
        name: registry name (``--profile``).
        summary: one line for ``slurm-sched policies --profiles`` and the docs.
        progress_model: the world, a progress-model registry name; ``None``: the policy's own.
        restart_overhead_s: dead time after every restart; ``None``: the caller's, else
            :data:`DEFAULT_RESTART_OVERHEAD_S`.
        round_s: the scheduler acts only at multiples of this many seconds (fixed rounds, events
            in between wait for the next round); ``None``: at every arrival and completion and at
            the policy's own timers.
        cluster: the cluster shape the artifact simulates (``parse_cluster_spec`` form, e.g.
            ``8x8:a800/96cpu/1600gb``), the default of tools that run the artifact's inputs;
            ``None``: no fixed shape.
        start_overhead_s: dead time at a job's *first* start too (a simulator that charges
            its restart delay on every allocation, the first included); ``0``: none (ours: a
            job's first start is free, only restarts cost ``restart_overhead_s``).
        event_overhead_s: ``None`` (default): off. Else the per-event overhead table
            ``{model: {gpus: seconds}}``: every running job loses its overhead of progress at
            every scheduling event (arrival, completion, the policy's own timer), whether it
            was restarted or not, clamped to the time it ran since its previous event; a member
            of an interleaving group loses the sum over its running group
            (``SimulatedBackend(event_overhead=...)``). A job's entry is its model's row at
            the largest GPU count <= its own (else the smallest);
            ``event_overhead_default_s`` for a model not in the table.
        event_overhead_default_s: see ``event_overhead_s``.
        in_place_settings: a ``Reconfigure`` that keeps a running job's placement changes only
            its settings, without a restart (``SimulatedBackend(in_place_settings=...)``);
            ``False``: every ``Reconfigure`` restarts the job, as a requeue on Slurm does.
        policy_options: constructor options per policy registry name (the artifact's setting of
            a documented policy option, e.g. no online model refit); applied where the policy is
            created by name (:func:`~slurm_sched.sim.runner.simulate` with a name, the CLI), under
            the caller's own options (see :meth:`options_for`).
    """

    name: str
    summary: str
    progress_model: str | None = None
    restart_overhead_s: float | None = None
    round_s: float | None = None
    cluster: str | None = None
    start_overhead_s: float = 0.0
    event_overhead_s: Mapping[str, Mapping[int, float]] | None = None
    event_overhead_default_s: float = 10.0
    in_place_settings: bool = False
    policy_options: Mapping[str, Mapping[str, object]] = field(default_factory=dict)

    def event_overhead(self, spec: JobSpec) -> float:
        """One job's per-event overhead (s) by ``event_overhead_s`` (0 when that is off)."""
        table = self.event_overhead_s
        if table is None:
            return 0.0
        row = table.get(spec.model or "")
        if not row:
            return self.event_overhead_default_s
        fits = [g for g in row if g <= spec.num_gpus]
        return float(row[max(fits)] if fits else row[min(row)])

    def options_for(self, policy: str,
                    given: Mapping[str, object] | None = None) -> dict[str, object]:
        """The options to create ``policy`` (a registry name) with: this profile's for it,
        each overridden by the caller's ``given`` ones."""
        return {**self.policy_options.get(policy, {}), **(given or {})}

    def __post_init__(self) -> None:
        if self.restart_overhead_s is not None and self.restart_overhead_s < 0:
            raise ValueError(f"profile {self.name}: restart_overhead_s must be >= 0")
        if self.start_overhead_s < 0:
            raise ValueError(f"profile {self.name}: start_overhead_s must be >= 0")
        if self.round_s is not None and self.round_s <= 0:
            raise ValueError(f"profile {self.name}: round_s must be > 0")
        rows = (self.event_overhead_s or {}).values()
        if self.event_overhead_default_s < 0 or any(v < 0 for r in rows for v in r.values()):
            raise ValueError(f"profile {self.name}: event overheads must be >= 0")


DEFAULT = Profile(
    name="default",
    summary="ours: the policy's world, 30 s per restart, decisions at every event",
)

#: Every profile: name -> the module whose ``PROFILE`` declares it ("" for :data:`DEFAULT`).
BUILTIN: dict[str, str] = {
    "default": "",
    "muri-artifact": "slurm_sched.sim.profiles.muri_artifact",
    "pollux-artifact": "slurm_sched.sim.profiles.pollux_artifact",
    "rubick-artifact": "slurm_sched.sim.profiles.rubick_artifact",
}


def names() -> list[str]:
    """Every profile's name (imports nothing)."""
    return list(BUILTIN)


def get(name: str) -> Profile:
    """The profile ``name``; an unknown name is an :class:`InputError` listing the known ones."""
    module = BUILTIN.get(name)
    if module is None:
        raise InputError(f"unknown profile; known: {', '.join(BUILTIN)}",
                         field="profile", value=name)
    if not module:
        return DEFAULT
    profile: Profile = importlib.import_module(module).PROFILE
    if profile.name != name:
        raise ValueError(f"{module} declares the profile {profile.name!r}, not {name!r}")
    return profile
