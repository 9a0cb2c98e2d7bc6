"""Checkpoint/restart for preemption, migration and reconfiguration.

A checkpoint holds the *full* (unsharded) model and optimizer state keyed by parameter name
(``torch.distributed.checkpoint.state_dict`` with ``full_state_dict=True``), so it loads under
any plan and any number of data-parallel ranks: a job preempted as 4-rank ``zero-dp`` may resume
as 2-rank ``dp`` (Rubick reconfiguration) or on another node (migration).

Files in the checkpoint directory (written atomically: temporary file, then rename):

- ``checkpoint.pt``: ``{"format", "version", "step", "model", "optim", "rng", "extra", "meta"}``;
  ``step`` = optimizer steps completed; ``rng`` = every rank's RNG states (restored only when
  the number of ranks is unchanged); ``extra`` = the ``state_dict()`` of user objects (LR
  schedulers, data-loader positions).
- ``checkpoint.json``: ``{"step", "saved_at", "world_size", "plan", "job_id", "reason"}``,
  readable without torch (tests, operators).

The preemption signal (SIGUSR1 from ``scancel --signal=USR1``, SIGTERM from Slurm's kill or a
time limit) only sets a flag; the training loop checkpoints at the next step boundary, when
every rank agrees (:class:`PreemptionWatcher`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import signal
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

log = logging.getLogger(__name__)

FORMAT = "slurm_sched.runtime.checkpoint"
VERSION = 1
CKPT_FILE = "checkpoint.pt"
META_FILE = "checkpoint.json"
DEFAULT_SIGNALS = (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT)
DEFAULT_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class PreemptionWatcher:
    """Turns preemption signals into flags the training loop polls.

    ``install()`` replaces the handlers of ``signals`` (main thread only); ``restore()`` puts the
    old ones back. A signal in ``stop_signals`` asks to checkpoint and stop; any other one to
    checkpoint and go on. ``signum`` is the signal that counts: the first stop signal received,
    else the first other one (the backend sends SIGUSR1 and SIGTERM milliseconds apart: the
    SIGTERM must not be lost behind the SIGUSR1).
    """

    def __init__(
        self,
        signals: Iterable[int] = DEFAULT_SIGNALS,
        stop_signals: Iterable[int] = DEFAULT_STOP_SIGNALS,
    ) -> None:
        self.signals = tuple(signals)
        self.stop_signals = frozenset(stop_signals)
        self.signum: int | None = None
        self.received_at: float | None = None
        self._old: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def stop_requested(self) -> bool:
        return self.signum in self.stop_signals

    def clear_warning(self) -> None:
        """Forget a checkpoint-and-go-on signal once handled (a stop signal stays)."""
        if self.signum is not None and self.signum not in self.stop_signals:
            self.signum = None

    def _handler(self, signum: int, _frame: FrameType | None) -> None:
        if self.signum is None or (signum in self.stop_signals and not self.stop_requested):
            self.signum = signum
            self.received_at = time.time()

    def install(self) -> None:
        for sig in self.signals:
            try:
                self._old[sig] = signal.signal(sig, self._handler)
            except ValueError:  # not the main thread: the caller must poll another way
                log.warning("cannot install a handler for %s outside the main thread", sig)

    def restore(self) -> None:
        for sig, old in self._old.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(sig, old)
        self._old.clear()

    def trigger(self, signum: int = signal.SIGUSR1) -> None:
        """Act as if ``signum`` had been received (tests, a scheduler API)."""
        self._handler(signum, None)


def _rng_state() -> dict[str, Any]:
    import numpy as np
    import torch

    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: Mapping[str, Any]) -> None:
    import numpy as np
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        with contextlib.suppress(RuntimeError, IndexError):
            torch.cuda.set_rng_state_all(state["cuda"])


def _world() -> tuple[int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def checkpoint_exists(directory: str | os.PathLike[str]) -> bool:
    return (Path(directory) / CKPT_FILE).is_file()


def read_meta(directory: str | os.PathLike[str]) -> dict[str, Any] | None:
    """``checkpoint.json`` of a directory, or None (no torch needed)."""
    try:
        return dict(json.loads((Path(directory) / META_FILE).read_text()))
    except (FileNotFoundError, ValueError):
        return None


def save_checkpoint(
    directory: str | os.PathLike[str],
    model: Any,
    optimizer: Any,
    step: int,
    *,
    extra: Mapping[str, Any] | None = None,
    meta: Mapping[str, Any] | None = None,
) -> Path | None:
    """Collective: every rank calls it; rank 0 writes. Returns the file on rank 0, else None."""
    import torch
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    rank, world = _world()
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    model_sd, optim_sd = get_state_dict(model, optimizer, options=options)
    rng = [_rng_state()]
    if world > 1:
        gathered: list[Any] = [None] * world
        dist.all_gather_object(gathered, rng[0])
        rng = gathered
    out = None
    if rank == 0:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        payload = {
            "format": FORMAT,
            "version": VERSION,
            "step": step,
            "model": model_sd,
            "optim": optim_sd,
            "rng": rng,
            "extra": {k: v.state_dict() for k, v in (extra or {}).items()},
            "meta": dict(meta or {}),
        }
        tmp = d / f".{CKPT_FILE}.tmp"
        torch.save(payload, tmp)
        os.replace(tmp, d / CKPT_FILE)
        info = {"step": step, "saved_at": time.time(), "world_size": world, **(meta or {})}
        tmp_meta = d / f".{META_FILE}.tmp"
        tmp_meta.write_text(json.dumps(info, sort_keys=True, default=str) + "\n")
        os.replace(tmp_meta, d / META_FILE)
        out = d / CKPT_FILE
    if world > 1:
        dist.barrier()  # nobody exits (or goes on) before the file is complete
    return out


def load_checkpoint(
    directory: str | os.PathLike[str],
    model: Any,
    optimizer: Any,
    *,
    extra: Mapping[str, Any] | None = None,
) -> int | None:
    """Load the checkpoint of ``directory`` into ``model``/``optimizer`` (every rank reads the
    file); returns the step to resume at, or None when there is no checkpoint."""
    import torch
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

    path = Path(directory) / CKPT_FILE
    if not path.is_file():
        return None
    payload = torch.load(path, map_location="cpu", weights_only=False)
    if payload.get("format") != FORMAT or payload.get("version") != VERSION:
        raise ValueError(
            f"{path}: not a {FORMAT} v{VERSION} checkpoint "
            f"(format={payload.get('format')!r}, version={payload.get('version')!r})"
        )
    set_state_dict(
        model,
        optimizer,
        model_state_dict=payload["model"],
        optim_state_dict=payload["optim"],
        options=StateDictOptions(full_state_dict=True),
    )
    for key, obj in (extra or {}).items():
        if key in payload["extra"]:
            obj.load_state_dict(payload["extra"][key])
    rank, world = _world()
    rng = payload.get("rng") or []
    if len(rng) == world:
        _set_rng_state(rng[rank])
    else:
        log.info("checkpoint has RNG states of %d rank(s), now %d: not restored", len(rng), world)
    return int(payload["step"])
