"""``TrainingSession``: the scheduler's decisions applied inside a PyTorch training loop.

::

    from slurm_sched.runtime import TrainingSession

    with TrainingSession(model, lambda ps: torch.optim.SGD(ps, lr=0.1),
                         global_batch_size=256, total_iterations=1000) as s:
        for step in s.steps():               # resumes at the checkpointed step
            with s.stage("data"):
                batch = s.shard(make_global_batch(step))   # this rank's share
            s.train_step(batch, loss_fn)     # loss_fn(model, sub_batch) -> mean loss

What it does:

- reads this job's settings (:mod:`slurm_sched.runtime.job`): plan, accumulation, interleaving;
- joins the process group when launched with ``WORLD_SIZE > 1`` (gloo on CPU, NCCL on CUDA)
  and wraps the model for the plan (:mod:`slurm_sched.runtime.plans`: DDP, FSDP2, activation
  checkpointing);
- ``train_step`` runs the rank's batch as the scheduler's sub-batches with gradient
  accumulation (DDP/FSDP gradient sync only on the last one) and one optimizer step; the update
  equals the full-batch update (:mod:`slurm_sched.runtime.accumulation`);
- Muri: if the settings put the job in an interleaving group, ``stage()`` and ``train_step``
  take turns with the group's other members on this node
  (:mod:`slurm_sched.runtime.interleave`);
- preemption: SIGUSR1 (the backend's checkpoint warning) makes it checkpoint at the next step
  boundary and go on; SIGTERM (``scontrol requeue``, migration, reconfiguration, time limit,
  cancel) makes it checkpoint and leave with :class:`JobPreempted` (exit code 143). A restart
  resumes at exactly the checkpointed step, under any plan and number of ranks;
- progress reports (:mod:`slurm_sched.runtime.progress`) after each step (throttled), at every
  checkpoint and at the end;
- a final checkpoint at the end, so a finished job that is requeued does not train again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from slurm_sched.runtime import accumulation, checkpoint
from slurm_sched.runtime.interleave import DEFAULT_STAGES, NoInterleaving, StageInterleaver
from slurm_sched.runtime.job import JobContext, load_job_context
from slurm_sched.runtime.plans import AppliedPlan, apply_plan
from slurm_sched.runtime.progress import IterationTimer, ProgressReporter

log = logging.getLogger(__name__)

#: Exit status of a job that checkpointed because it was told to stop (128 + SIGTERM).
EXIT_PREEMPTED = 128 + signal.SIGTERM
CKPT_DIR_ENV = "SLURM_SCHED_CKPT_DIR"
# Code of the signal kinds in the per-step agreement between ranks (higher wins).
_NONE, _WARN, _STOP = 0, 1, 2


class JobPreempted(SystemExit):
    """Raised by :meth:`TrainingSession.steps` after the checkpoint that a stop signal asked
    for. A ``SystemExit``: the process ends with :data:`EXIT_PREEMPTED` unless caught."""

    def __init__(self, step: int, signum: int | None) -> None:
        super().__init__(EXIT_PREEMPTED)
        self.step = step
        self.signum = signum


def default_checkpoint_dir(job_id: str | None, env: Mapping[str, str] | None = None) -> Path:
    """``$SLURM_SCHED_CKPT_DIR/<job>``, else ``./checkpoints/<job>`` (the submit directory of a
    batch job; it must be visible from every node the job may move to)."""
    env = os.environ if env is None else env
    base = Path(env[CKPT_DIR_ENV]) if env.get(CKPT_DIR_ENV) else Path.cwd() / "checkpoints"
    return base / (job_id or "local")


class TrainingSession:
    """See the module docstring.

    Parameters
    ----------
    model:
        The model, on the CPU or already on its device (moved to :attr:`device` anyway).
    make_optimizer:
        ``params -> optimizer``; called after the plan is applied (FSDP replaces parameters).
    global_batch_size:
        Samples per optimizer step over all ranks; default: the hint ``batch_size``; without
        either, ``len(batch) * world_size`` at each step.
    total_iterations:
        Optimizer steps of the whole run; default: the hint ``iterations``.
    job:
        The job's settings; default :func:`load_job_context` (settings file, hints, defaults).
    checkpoint_dir:
        Default :func:`default_checkpoint_dir`.
    stages:
        Stage names of one iteration in order (Muri interleaving); ``train_step`` runs in
        ``"compute"`` when that is one of them.
    blocks:
        The modules that activation checkpointing and FSDP wrap one by one; default
        :func:`slurm_sched.runtime.plans.default_blocks`.
    extra_state:
        Objects with ``state_dict()``/``load_state_dict()`` saved in checkpoints (LR scheduler).
    checkpoint_every:
        Also checkpoint every that many steps (0: only on signals and at the end).
    report_every_s:
        Minimum seconds between two progress reports.
    """

    def __init__(
        self,
        model: nn.Module,
        make_optimizer: Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer],
        *,
        global_batch_size: int | None = None,
        total_iterations: int | None = None,
        job: JobContext | None = None,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        stages: Sequence[str] = DEFAULT_STAGES,
        blocks: list[nn.Module] | None = None,
        extra_state: Mapping[str, Any] | None = None,
        device: str | torch.device | None = None,
        checkpoint_every: int = 0,
        report_every_s: float = 1.0,
        signals: Sequence[int] = checkpoint.DEFAULT_SIGNALS,
        stop_signals: Sequence[int] = checkpoint.DEFAULT_STOP_SIGNALS,
        record_stages: bool = False,
        interleave_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self.job = job if job is not None else load_job_context()
        for w in self.job.warnings:
            log.warning("%s", w)
        hints = self.job.hints
        self.global_batch_size = global_batch_size or hints.batch_size
        total = total_iterations if total_iterations is not None else hints.iterations
        if total is None or total < 0:
            raise ValueError(
                f"total_iterations is required (argument or the 'iterations' hint), got {total!r}"
            )
        self.total_iterations = int(total)
        self._model = model
        self._make_optimizer = make_optimizer
        self.checkpoint_dir = (
            Path(checkpoint_dir)
            if checkpoint_dir is not None
            else (default_checkpoint_dir(self.job.job_id))
        )
        self.stages = tuple(stages)
        self._blocks = blocks
        self.extra_state = dict(extra_state or {})
        self._device_arg = device
        self.checkpoint_every = checkpoint_every
        self.watcher = checkpoint.PreemptionWatcher(signals, stop_signals)
        self.timer = IterationTimer()
        self.reporter = ProgressReporter(None, every_s=report_every_s)
        self._record_stages = record_stages
        self._interleave_dir = interleave_dir

        self.rank = 0
        self.world_size = 1
        self.local_rank = 0
        self.device = torch.device("cpu")
        self.model: Any = model
        self.optimizer: torch.optim.Optimizer | None = None
        self.applied: AppliedPlan | None = None
        self.interleaver: StageInterleaver | NoInterleaving = NoInterleaving(record_stages)
        self.start_step = 0
        self.step = 0
        self.restarts = 0
        self.last_checkpoint_step: int | None = None
        self.state = "created"
        self._owns_group = False
        self._stepped = False
        self._step_t0 = 0.0
        self._started = False
        self.micro_batch_sizes: list[int] = []

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> TrainingSession:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, _tb: object
    ) -> None:
        self.close(completed=exc_type is None, error=exc)

    def _init_distributed(self) -> None:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.device = self._select_device()
        if dist.is_available() and dist.is_initialized():
            self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        elif world > 1:
            backend = "nccl" if self.device.type == "cuda" else "gloo"
            if backend == "nccl":
                torch.cuda.set_device(self.device)
            dist.init_process_group(backend, init_method="env://", timeout=timedelta(minutes=10))
            self._owns_group = True
            self.rank, self.world_size = dist.get_rank(), dist.get_world_size()

    def _select_device(self) -> torch.device:
        if self._device_arg is not None:
            return torch.device(self._device_arg)
        if torch.cuda.is_available():
            return torch.device("cuda", self.local_rank % torch.cuda.device_count())
        return torch.device("cpu")

    def start(self) -> None:
        """Set up everything (see the class docstring); called by ``with``."""
        if self._started:
            return
        self._started = True
        self._init_distributed()
        self._model.to(self.device)
        self.applied = apply_plan(
            self._model,
            self.job.plan,
            world_size=self.world_size,
            device=self.device,
            blocks=self._blocks,
        )
        for note in self.applied.notes:
            log.warning("%s", note)
        self.model = self.applied.model
        self.optimizer = self._make_optimizer(self.model.parameters())
        resumed = checkpoint.load_checkpoint(
            self.checkpoint_dir, self.model, self.optimizer, extra=self.extra_state
        )
        if resumed is not None:
            self.start_step = resumed
            self.last_checkpoint_step = resumed
            meta = checkpoint.read_meta(self.checkpoint_dir) or {}
            self.restarts = int(meta.get("restarts", 0)) + 1
        self.step = self.start_step
        self.watcher.install()
        s = self.job.settings
        if s.group_id is not None:
            # Muri groups share GPUs: rank i of every member job takes turns on GPU i, so a
            # multi-GPU job joins one turn-taking group per local rank
            name = s.group_id if self.world_size == 1 else f"{s.group_id}.{self.local_rank}"
            self.interleaver = StageInterleaver(
                name,
                s.slot or 0,
                self.stages,
                state_dir=self._interleave_dir,
                record=self._record_stages,
            )
            self.interleaver.join()
        if self.rank == 0:
            self.reporter = ProgressReporter(
                self.job.progress_path, every_s=self.reporter.every_s, static=self._static_info()
            )
        self.state = "running"
        self._report(force=True)
        log.info(
            "job %s: %s; rank %d/%d on %s; %s; steps %d..%d; checkpoints in %s",
            self.job.job_id,
            self.job.describe(),
            self.rank,
            self.world_size,
            self.device,
            self._plan_summary(),
            self.start_step,
            self.total_iterations,
            self.checkpoint_dir,
        )

    def close(self, completed: bool = True, error: BaseException | None = None) -> None:
        """End the session; called by ``with``. Idempotent.

        ``completed`` (the loop was left without an exception): a final checkpoint and a
        ``completed`` report, or, if the loop was left early, a checkpoint and a ``stopped``
        report (a restart resumes there). After :class:`JobPreempted` nothing more is written;
        after any other exception a ``failed`` report (no checkpoint: the step may be half
        done). Then it leaves the Muri group, restores the signal handlers and tears down the
        process group this session created.
        """
        if not self._started or self.state == "closed":
            return
        try:
            self._finish_step()  # a step updated but not yet counted (left with break)
            if completed:
                done = self.step >= self.total_iterations
                if self.last_checkpoint_step != self.step:
                    self._save("final" if done else "exit")
                self.state = "completed" if done else "stopped"
                self._report(force=True)
            elif not isinstance(error, JobPreempted):
                self.state = "failed"
                self._report(force=True, error=f"{type(error).__name__}: {error}"[:500])
        finally:
            with contextlib.suppress(Exception):
                self.interleaver.leave()
            self.watcher.restore()
            if self._owns_group and dist.is_initialized():
                dist.destroy_process_group()
            self.state = "closed"

    # ------------------------------------------------------------------ the loop
    def steps(self) -> Iterator[int]:
        """Yield the step numbers still to run; the body must call :meth:`train_step` once.

        Between steps it reports progress, checks the preemption signals (all ranks agree) and
        raises :class:`JobPreempted` after the checkpoint of a stop signal.
        """
        if not self._started:
            self.start()
        while self.step < self.total_iterations:
            self._boundary()
            self._stepped = False
            self._step_t0 = time.perf_counter()
            try:
                yield self.step
            except GeneratorExit:  # the loop was left (break) after this step's update
                self._finish_step()
                raise
            if not self._stepped:
                raise RuntimeError(f"step {self.step}: the loop body did not call train_step()")
            self._finish_step()
            if self.checkpoint_every and self.step % self.checkpoint_every == 0:
                self._save("periodic")
            self._report()
        self._boundary(final=True)

    def _finish_step(self) -> None:
        """Count the step whose optimizer update was made (idempotent)."""
        if self._stepped:
            self._stepped = False
            self.timer.add(time.perf_counter() - self._step_t0)
            self.step += 1

    def _agreed_signal(self) -> int:
        code = _NONE
        if self.watcher.requested:
            code = _STOP if self.watcher.stop_requested else _WARN
        if self.world_size > 1:
            t = torch.tensor(
                [code],
                dtype=torch.int32,
                device=self.device if self.device.type == "cuda" else "cpu",
            )
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            code = int(t.item())
        return code

    def _boundary(self, final: bool = False) -> None:
        # every rank runs the same sequence of agreements, so the collectives match
        while True:
            code = self._agreed_signal()
            if code == _NONE:
                return
            signum = self.watcher.signum
            if self.last_checkpoint_step != self.step:
                self._save("stop" if code == _STOP else "warning")
            if code == _STOP:
                if final:
                    return  # finished anyway: close() reports completion
                self.state = "preempted"
                self._report(force=True)
                log.warning(
                    "job %s: stopping after step %d (signal %s); checkpoint in %s",
                    self.job.job_id,
                    self.step,
                    signum,
                    self.checkpoint_dir,
                )
                raise JobPreempted(self.step, signum)
            # a warning (SIGUSR1): checkpointed; go on unless a stop signal came meanwhile
            log.info(
                "job %s: checkpoint at step %d (signal %s)", self.job.job_id, self.step, signum
            )
            self.state = "running"
            self._report(force=True, checkpointed=True)
            self.watcher.clear_warning()

    # ------------------------------------------------------------------ per step
    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Run the body as stage ``name`` of this iteration (takes a turn under Muri)."""
        with self.interleaver.stage(name):
            yield

    def shard(self, global_batch: Any) -> Any:
        """This rank's contiguous share of a global batch (tensor or container of tensors)."""
        n = accumulation.batch_len(global_batch)
        start, stop = accumulation.shard_bounds(n, self.rank, self.world_size)
        return accumulation.slice_batch(global_batch, start, stop)

    def _sync_context(self, sync: bool) -> contextlib.AbstractContextManager[Any]:
        """Gradient all-reduce only on the last sub-batch of a step."""
        mode = self.applied.data_parallel if self.applied else "none"
        if mode == "ddp" and not sync:
            return self.model.no_sync()  # type: ignore[no-any-return]
        if mode == "fsdp":
            self.model.set_requires_gradient_sync(sync)
        return contextlib.nullcontext()

    def train_step(self, batch: Any, loss_fn: Callable[[Any, Any], torch.Tensor]) -> float:
        """One optimizer step on this rank's ``batch`` with the scheduler's sub-batches.

        ``loss_fn(model, sub_batch)`` must return the *mean* loss of the sub-batch. Returns the
        rank's mean loss over ``batch`` (a float; the value before the update).
        """
        if self._stepped:
            raise RuntimeError(f"step {self.step}: train_step() called twice")
        assert self.optimizer is not None, "start() first"
        with (
            self.interleaver.stage("compute")
            if "compute" in self.stages
            else (contextlib.nullcontext())
        ):
            loss = self._accumulate(batch, loss_fn)
            if self.device.type == "cuda" and isinstance(self.interleaver, StageInterleaver):
                # the turn ends when the GPU work has, not when the kernels were queued
                torch.cuda.synchronize(self.device)
        self._stepped = True
        return loss

    def _accumulate(self, batch: Any, loss_fn: Callable[[Any, Any], torch.Tensor]) -> float:
        assert self.optimizer is not None
        local = accumulation.batch_len(batch)
        s = self.job.settings
        sizes = accumulation.micro_batch_sizes(
            local, sub_batch_size=s.sub_batch_size, accumulation_steps=s.accumulation_steps
        )
        self.micro_batch_sizes = sizes
        global_batch = self.global_batch_size or local * self.world_size
        batch = _to_device(batch, self.device)
        self.optimizer.zero_grad(set_to_none=True)
        total = torch.zeros((), device=self.device)
        for i, micro in enumerate(accumulation.split_batch(batch, sizes)):
            last = i == len(sizes) - 1
            with self._sync_context(sync=last):
                loss = loss_fn(self.model, micro)
                # weights n_i * W / B: the all-reduce averages over W ranks, so the summed
                # gradient is that of the mean loss over the global batch
                (loss * (sizes[i] * self.world_size / global_batch)).backward()
            total += loss.detach() * sizes[i]
        self.optimizer.step()
        return float(total.item()) / local

    def full_model_state(self) -> dict[str, Any]:
        """Collective: the unsharded model state on the CPU, on rank 0 (empty on the others)."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        return dict(get_model_state_dict(self.model, options=options))

    # ------------------------------------------------------------------ checkpoints & reports
    def _save(self, reason: str) -> None:
        assert self.optimizer is not None
        meta = {
            "job_id": self.job.job_id,
            "plan": self.applied.applied if self.applied else None,
            "reason": reason,
            "restarts": self.restarts,
        }
        checkpoint.save_checkpoint(
            self.checkpoint_dir,
            self.model,
            self.optimizer,
            self.step,
            extra=self.extra_state,
            meta=meta,
        )
        self.last_checkpoint_step = self.step
        if reason not in ("final", "exit"):
            self._report(force=True, state="checkpointed", checkpoint_reason=reason)

    def _plan_summary(self) -> str:
        a = self.applied
        if a is None:
            return "plan not applied"
        gc = (
            f", activation checkpointing of {a.checkpointed_blocks} blocks"
            if (a.activation_checkpointing)
            else ""
        )
        return f"plan {a.applied} ({a.data_parallel}{gc})"

    def _static_info(self) -> dict[str, Any]:
        s = self.job.settings
        a = self.applied
        return {
            "job_id": self.job.job_id,
            "iterations_total": self.total_iterations,
            "world_size": self.world_size,
            "device": str(self.device),
            "plan_requested": self.job.plan or "dp",
            "plan_applied": a.applied if a else None,
            "data_parallel": a.data_parallel if a else None,
            "activation_checkpointing": bool(a and a.activation_checkpointing),
            "plan_notes": list(a.notes) if a else [],
            "global_batch_size": self.global_batch_size,
            "accumulation_steps": s.accumulation_steps,
            "sub_batch_size": s.sub_batch_size,
            "settings_source": self.job.settings_source,
            "interleave_group": s.group_id,
            "interleave_slot": s.slot,
            "restarts": self.restarts,
            "resumed_from": self.start_step,
        }

    def _report(self, force: bool = False, state: str | None = None, **extra: Any) -> None:
        if self.rank != 0:
            return
        recent = self.timer.recent_s()
        samples = None
        if recent and self.global_batch_size:
            samples = self.global_batch_size / recent
        self.reporter.report(
            self.step,
            recent,
            state=state or self.state,
            force=force,
            samples_per_s=samples,
            sub_batch_sizes=self.micro_batch_sizes,
            interleave_wait_s=round(self.interleaver.waited_s, 6),
            last_checkpoint_step=self.last_checkpoint_step,
            **extra,
        )


def _to_device(batch: Any, device: torch.device) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch if batch.device == device else batch.to(device, non_blocking=True)
    if isinstance(batch, tuple | list):
        return type(batch)(_to_device(b, device) for b in batch)
    if isinstance(batch, dict):
        return {k: _to_device(v, device) for k, v in batch.items()}
    return batch
