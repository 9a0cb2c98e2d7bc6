"""Pure translation of actions into Slurm 22.05 command lines.

Each action becomes a :class:`Translation`: *stages* of commands to run now (stage ``i`` of all
actions of one ``apply`` call runs as one ``scontrol`` batch; an action whose command fails in a
stage runs none of its later stages), and *after-requeue* stages that the backend runs once
Slurm shows the requeued job PENDING again (a pin issued while the job is still COMPLETING is
overwritten by Slurm's requeue handling, which also sets ``EligibleTime = now + ~121 s``).

Managed jobs are not held: the submit plugin gives them a begin-time *lease* that the scheduler
renews (``slurm_sched/slurm/lease.py``). A start is therefore two updates in two stages: the
*pin* sets the nodes (and GRES) while the lease still keeps the job from starting, then the
*go* ``update JobId=X StartTime=now`` makes it eligible. Slurm never sees the job eligible with
the old nodes, and the CLI runner sends the go lines of a whole ``apply`` as a few job-list
updates (``update JobId=a,b,c StartTime=now``): 500 starts take about 4 s on a 2-core VM
against about 6 s with one combined update per job, where slurmctld launched each job between
the updates (docs/slurm-backend.md, Timings).

Slurm allocates the jobs of one ``apply`` in its own priority order (it did so with the combined
update too), so the GPU indices the backend predicts are not relied on where the order matters:
a Share waits while an exclusive start below its GPU is still in flight (backend).

Mapping (checked on the mini cluster; ``X`` is the job id):

==============  ===============================================================================
Start           ``[update JobId=X [ResetAccrueTime] TresPerJob=]`` (only when switching per-job
                <-> per-node GRES)
                -> ``update JobId=X [ResetAccrueTime] NodeList=n1,n2 NumNodes=2-2
                TresPerNode=gres:gpu:k`` (``ResetAccrueTime`` unless the job is under a lease;
                below)
                -> ``update JobId=X StartTime=now``
                (``TresPerJob=gres:gpu:N`` when the per-node counts differ; fields that would
                not change are left out; the go only when the begin time is ahead)
                -> ``[release X]`` (only for a held job: an older
                plugin's hold or a ``requeuehold``). A job whose lease has run out (Slurm could
                start it any moment) that needs the clearing update is held first (``uhold X``)
                and released after the pin, so Slurm never sees it eligible with half its
                fields.
Share           as Start, with ``TresPerNode=gres:shard[:type]:1``
Suspend         ``suspend X``
Resume          ``resume X``
Preempt         ``scancel --batch --signal=USR1 X`` (checkpoint warning, failure ignored) ->
                ``requeue X`` (SIGTERM, KillWait, back to PENDING with ``EligibleTime`` ~121 s
                ahead: a lease of its own, which the scheduler renews or pins over)
Migrate         ``requeue X``; after requeue: the Start pin and go
Reconfigure     settings file written by the backend, then as Migrate with the new GPU counts plus
                ``NumCPUs=`` / ``MinMemoryNode=`` (as Start when the job is pending)
==============  ===============================================================================

GRES rules on 22.05 (found by experiment, see docs/slurm-backend.md):

- the GRES *kind* of a job is fixed once it has one: ``gpu`` <-> ``shard`` updates are rejected
  (``Invalid generic resource (gres) specification``), even after clearing; a job submitted
  without GRES may get either;
- typed <-> untyped changes need a clearing update first; we keep the job's own typedness;
- a shard job gets all its shards from ONE GPU per node (Slurm picks the lowest index with
  enough free shards), so shard jobs hold exactly one GPU per node;
- ``NumNodes=n-n`` (min and max): a job submitted with ``-N 1`` refuses ``NumNodes=2``
  (``Node count specification invalid``) but accepts ``NumNodes=2-2``;
- ``TresPerNode`` gives every node the same count; non-uniform placements use ``TresPerJob``
  and Slurm splits the total (lowest-numbered nodes filled first).

A pin must only ever apply to a PENDING job. A job can leave PENDING between the snapshot and
the pin when Slurm may start it on its own: its begin time has passed or is close (a lease that
ran out), or a start of an earlier call was let go and its GPUs were still busy, so the policy
places it again. On a RUNNING job Slurm treats ``NodeList=`` as a *shrink*: it kills the job's
steps on the nodes left out, removes them from the job, and only then refuses the other fields
("Job is no longer pending execution"). For such a job (:attr:`JobContext.may_start`) the clear
and the pin carry ``ResetAccrueTime``: slurmctld's ``_update_job`` checks that flag before
``NodeList`` and refuses it, with the whole update, for a job that is not pending (22.05.8 and
24.11.5 ``job_mgr.c``; shown on the mini cluster by
``tests/integration/test_cluster.py::test_pin_never_shrinks_a_running_job``). On a pending job it
only resets the accrue time (Slurm's age priority factor and ``MaxJobsAccrue``); a job under its
lease has none yet (``AccrueTime=Unknown``), so there the flag would do nothing, and a job whose
lease is more than :data:`MAY_START_WITHIN_S` ahead cannot start before the pin lands and goes
without it. ``uhold`` is no such guard: it succeeds on a running job.

Shard counts: with ``S`` shards per GPU and at most ``C`` jobs per GPU, a started shard job takes
``S - (C - 1)`` shards and a sharing job takes 1. A started job therefore never fits on a GPU
that already has a job (at most ``C - 1`` shards left there, fewer than it needs when
``S > 2 (C - 1)``), and at most ``C`` jobs share a GPU.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from slurm_sched.errors import SlurmSchedError
from slurm_sched.model import (
    Action,
    JobSettings,
    Migrate,
    Placement,
    Preempt,
    Reconfigure,
    Resume,
    Share,
    Start,
    Suspend,
)
from slurm_sched.slurm.parse import GpuRequest

CHECKPOINT_SIGNAL = "USR1"
#: The flag that makes an update fail, with all its fields, unless the job is PENDING (see the
#: module docstring): a pin must never reach a job Slurm has just started.
PENDING_ONLY = "ResetAccrueTime"
#: A job whose begin time is less than this far ahead when its pin is planned may be started by
#: Slurm before the pin lands (an ``apply`` call runs all its stages within a few seconds).
MAY_START_WITHIN_S = 30.0


class TranslateError(SlurmSchedError):
    """An action that cannot be expressed on this Slurm (reported as a failed ActionResult)."""


@dataclass(frozen=True)
class Cmd:
    """One command line. ``optional``: its failure does not stop the action."""

    argv: tuple[str, ...]
    optional: bool = False

    @property
    def is_scontrol(self) -> bool:
        return self.argv[0] == "scontrol"

    def text(self) -> str:
        return " ".join(self.argv)


Stage = tuple[Cmd, ...]


@dataclass(frozen=True)
class JobContext:
    """What translation needs to know about the job as Slurm has it now."""

    job_id: str
    request: GpuRequest
    held: bool = False  # held in Slurm (priority 0): the pin must be followed by a release
    active: bool = False  # running or suspended (needs a requeue before a re-pin)
    #: what Slurm has now; a pin leaves out fields that would not change (each field of an
    #: update costs slurmctld time: NodeList and NumNodes several ms each on a busy 2-core VM).
    #: None / True = unknown: always set.
    node_count: int | None = None
    tres_per_node: str | None = None
    tres_per_job: str | None = None
    #: the go (StartTime=now) after the pin: needed whenever the job's begin time is ahead (its
    #: lease, or ~121 s after a requeue); only a held job whose begin time has passed can go
    #: without
    begin_now: bool = True
    #: pending, not held, begin time passed: Slurm's own scheduler may start it any moment
    eligible: bool = False
    #: Slurm may start the job before the pin lands (begin time passed or within
    #: MAY_START_WITHIN_S, a go of an earlier start in flight, or not known): the clear and the
    #: pin carry PENDING_ONLY. False only for a pending job under a lease well ahead.
    may_start: bool = True


@dataclass(frozen=True)
class ShardConfig:
    shards_per_gpu: int = 0
    max_jobs_per_gpu: int = 1

    @property
    def start_shards(self) -> int:
        return max(1, self.shards_per_gpu - (self.max_jobs_per_gpu - 1))

    @property
    def share_shards(self) -> int:
        return 1


@dataclass(frozen=True)
class Translation:
    """The commands for one action and the state they lead to."""

    kind: str
    job_id: str
    stages: tuple[Stage, ...]
    after_requeue: tuple[Stage, ...] = ()
    expect_state: str = "running"  # running | pending | suspended
    expect_placement: Placement | None = None
    settings: JobSettings | None = None
    notes: tuple[str, ...] = field(default=())

    def commands(self) -> list[Cmd]:
        return [c for st in (*self.stages, *self.after_requeue) for c in st]


def _sc(*argv: str) -> Cmd:
    return Cmd(("scontrol", *argv))


def start_now_cmd(job_id: str) -> Cmd:
    """``update JobId=X StartTime=now``: lets Slurm start the (pinned) job at once."""
    return _sc("update", f"JobId={job_id}", "StartTime=now")


def gres_fields(
    placement: Placement, request: GpuRequest, *, share: bool, shards: ShardConfig
) -> tuple[list[str], list[str]]:
    """(fields to clear first, fields of the pin update) for the job's GRES on ``placement``."""
    counts = [len(p.gpus) for p in placement.parts]
    typ = f"{request.gpu_type}:" if request.gpu_type else ""
    if request.kind == "shard" or (request.kind is None and share):
        if any(c != 1 for c in counts):
            raise TranslateError(
                f"job {'asks for shards' if request.kind == 'shard' else 'would share'}: Slurm "
                "22.05 gives a shard job one GPU per node, placement has "
                f"{max(counts)} on a node"
            )
        if shards.shards_per_gpu <= 0:
            raise TranslateError("the cluster has no gres/shard configured")
        n = shards.share_shards if share else shards.start_shards
        clear = ["TresPerJob="] if request.form == "job" else []
        return clear, [f"TresPerNode=gres:shard:{typ}{n}"]
    if share:
        raise TranslateError(
            "job holds exclusive gpu GRES; Slurm 22.05 cannot change a gpu job to shards "
            "(submit jobs that may share with --gres=shard:1)"
        )
    if len(set(counts)) == 1:
        clear = ["TresPerJob="] if request.form == "job" else []
        return clear, [f"TresPerNode=gres:gpu:{typ}{counts[0]}"]
    clear = ["TresPerNode="] if request.form == "node" else []
    return clear, [f"TresPerJob=gres:gpu:{typ}{sum(counts)}"]


def pin_stages(
    ctx: JobContext,
    placement: Placement,
    *,
    share: bool,
    shards: ShardConfig,
    settings: JobSettings | None = None,
) -> tuple[Stage, ...]:
    """[hold], [clear], pin, [go: StartTime=now], [release]: one command per stage."""
    jid = ctx.job_id
    clear, gres = gres_fields(placement, ctx.request, share=share, shards=shards)
    nodes = placement.nodes
    guard = [PENDING_ONLY] if ctx.may_start else []
    pin = ["update", f"JobId={jid}", *guard, f"NodeList={','.join(nodes)}"]
    if ctx.node_count != len(nodes):
        pin.append(f"NumNodes={len(nodes)}-{len(nodes)}")
    current = {"TresPerNode": ctx.tres_per_node, "TresPerJob": ctx.tres_per_job}
    for item in gres:
        name, _, value = item.partition("=")
        if clear or current.get(name) != value:
            pin.append(item)
    if settings is not None and settings.cpus is not None:
        pin.append(f"NumCPUs={settings.cpus}")
    if settings is not None and settings.mem_gb is not None:
        pin.append(f"MinMemoryNode={math.ceil(settings.mem_gb * 1024 / len(nodes))}")
    stages: list[Stage] = []
    # the clearing update would leave an eligible job startable with no GPU request: hold it,
    # with a user hold (JobHeldUser): one left by a scheduler killed before the release is
    # released by the next one's reconciliation, where an admin hold (JobHeldAdmin) stays
    hold = bool(clear) and ctx.eligible and not ctx.held
    if hold:
        stages.append((_sc("uhold", jid),))
    if clear:
        stages.append((_sc("update", f"JobId={jid}", *guard, *clear),))
    stages.append((_sc(*pin),))
    if ctx.begin_now:
        stages.append((start_now_cmd(jid),))
    if ctx.held or hold:
        stages.append((_sc("release", jid),))
    return tuple(stages)


def translate(action: Action, ctx: JobContext, shards: ShardConfig) -> Translation:
    """The commands realising ``action`` for the job described by ``ctx``.

    Raises:
        TranslateError: the action cannot be expressed on Slurm 22.05 (e.g. sharing a gpu job).
    """
    jid = ctx.job_id
    if isinstance(action, Start | Share):
        share = isinstance(action, Share)
        return Translation(
            kind=action.kind,
            job_id=jid,
            stages=pin_stages(ctx, action.placement, share=share, shards=shards),
            expect_placement=action.placement,
            settings=action.settings,
        )
    if isinstance(action, Suspend):
        return Translation("suspend", jid, ((_sc("suspend", jid),),), expect_state="suspended")
    if isinstance(action, Resume):
        return Translation("resume", jid, ((_sc("resume", jid),),))
    if isinstance(action, Preempt):
        signal = Cmd(("scancel", "--batch", f"--signal={CHECKPOINT_SIGNAL}", jid), optional=True)
        return Translation(
            "preempt", jid, ((signal,), (_sc("requeue", jid),)), expect_state="pending"
        )
    if isinstance(action, Migrate | Reconfigure):
        settings = action.settings if isinstance(action, Reconfigure) else None
        after = pin_stages(
            JobContext(jid, ctx.request),  # after a requeue: set every field
            action.placement,
            share=False,
            shards=shards,
            settings=settings,
        )
        if not ctx.active:  # a pending job: pin it now, like Start
            return Translation(
                action.kind,
                jid,
                pin_stages(ctx, action.placement, share=False, shards=shards, settings=settings),
                expect_placement=action.placement,
                settings=settings,
            )
        return Translation(
            action.kind,
            jid,
            ((_sc("requeue", jid),),),
            after_requeue=after,
            expect_placement=action.placement,
            settings=settings,
        )
    raise TranslateError(f"unknown action kind {action.kind!r}")


def render(actions: Sequence[tuple[Action, Translation]]) -> str:
    """Readable text of translations (the golden-file format)."""
    lines: list[str] = []
    for action, tr in actions:
        head = f"# {action.kind} job {action.job_id}"
        placement = getattr(action, "placement", None)
        if placement is not None:
            head += f" on {placement}"
        lines.append(head + f" -> expect {tr.expect_state}")
        for i, st in enumerate(tr.stages):
            for c in st:
                lines.append(f"[{i}] {c.text()}{'  (optional)' if c.optional else ''}")
        for i, st in enumerate(tr.after_requeue):
            for c in st:
                lines.append(f"[requeued {i}] {c.text()}")
        lines.append("")
    return "\n".join(lines)
