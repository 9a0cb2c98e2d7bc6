"""Running commands of the Slurm backend: stages of commands, each stage one ``scontrol`` batch.

Contract: :meth:`Executor.execute` takes items (a key and its stages, each stage a tuple of
:class:`~slurm_sched.slurm.translate.Cmd`) and runs stage ``s`` of every item that has not failed
yet as one ``scontrol`` batch (other commands one by one), for s = 0, 1, ...; it returns the
first error per item (None = all its commands succeeded), counts commands and batches in the
backend's stats, and raises only :class:`~slurm_sched.errors.BackendUnavailableError` (from the
runner). It decides nothing and keeps no state: every command that changes Slurm goes through it
(``apply``, lease renewals, releases, hand-overs, re-pins, unstarts).
"""

from __future__ import annotations

from collections.abc import Sequence

from slurm_sched.slurm.shared import BackendState, log
from slurm_sched.slurm.translate import Cmd, Stage, start_now_cmd

#: Seconds an optional command (the checkpoint signal before a requeue) may take: ``scancel``
#: retries a job in transition for about a minute, and the requeue after it must not wait that long
OPTIONAL_TIMEOUT_S = 5.0


class Executor:
    """Runs stages of commands (see the module docstring)."""

    def __init__(self, state: BackendState) -> None:
        self.state = state

    def execute(self, items: Sequence[tuple[int, tuple[Stage, ...]]]) -> dict[int, str | None]:
        """Run stage ``s`` of every item as one batch, for s = 0, 1, ...; returns the first
        error per item (None = all its commands succeeded)."""
        errors: dict[int, str | None] = {i: None for i, _ in items}
        depth = max((len(st) for _, st in items), default=0)
        for s in range(depth):
            batch: list[tuple[int, Cmd]] = []
            for i, stages in items:
                if errors[i] is not None or s >= len(stages):
                    continue
                for cmd in stages[s]:
                    if cmd.is_scontrol:
                        batch.append((i, cmd))
                    else:
                        self.state.stats.commands += 1
                        res = (
                            self.state.runner.run_optional(list(cmd.argv), OPTIONAL_TIMEOUT_S)
                            if cmd.optional
                            else self.state.runner.run_unchecked(list(cmd.argv))
                        )
                        if not res.ok and not cmd.optional:
                            errors[i] = f"{res.line}: {(res.stderr or res.stdout).strip()}"
            if not batch:
                continue
            self.state.stats.batches += 1
            self.state.stats.commands += len(batch)
            out = self.state.runner.run_scontrol_batch([c.argv[1:] for _, c in batch])
            for (i, cmd), res in zip(batch, out, strict=True):
                if not res.ok and not cmd.optional and errors[i] is None:
                    if _is_go(cmd) and "no longer pending" in res.stderr:
                        # a go whose job already left PENDING: it started on its pin (a go
                        # re-run after unreadable scontrol output, or a lease that ran out)
                        log.info("%s: already started", res.line)
                        continue
                    errors[i] = f"{res.line}: {res.stderr.strip()}"
        return errors


def _is_go(cmd: Cmd) -> bool:
    """``scontrol update JobId=X StartTime=now``: the go of a start."""
    return (
        len(cmd.argv) == 4
        and cmd.argv[2].startswith("JobId=")
        and cmd.argv == start_now_cmd(cmd.argv[2][len("JobId=") :]).argv
    )
