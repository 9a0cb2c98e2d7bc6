"""The project's exception tree.

Every error carries the raw input that caused it, so a one-line message can name the file, line,
field and value. Expected outcomes ("this job cannot be placed now") are data, never exceptions.
"""

from __future__ import annotations


class SlurmSchedError(Exception):
    """Base class of every error this package raises on purpose."""


class InputError(SlurmSchedError):
    """Bad user input: a trace row, a CLI value, a hint or a config field.

    The CLI turns it into a one-line message and exit code 2.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        line: int | None = None,
        field: str | None = None,
        value: object = None,
    ) -> None:
        self.message = message
        self.source = source
        self.line = line
        self.field = field
        self.value = value
        super().__init__(self.one_line())

    def one_line(self) -> str:
        where = ""
        if self.source is not None:
            where = self.source
            if self.line is not None:
                where += f":{self.line}"
            where += ": "
        what = ""
        if self.field is not None:
            what = f"field '{self.field}'"
            if self.value is not None:
                what += f" = {self.value!r}"
            what += ": "
        return f"{where}{what}{self.message}"


class TraceFormatError(InputError):
    """A trace file that cannot be read: names file, line, field and value."""


class ClusterSpecError(InputError):
    """A malformed ``--cluster`` specification."""


class UnknownPolicyError(InputError):
    """A policy name that is not in the registry."""


class SimulationStalledError(SlurmSchedError):
    """The simulator has unfinished jobs but no future event could ever start them."""

    def __init__(self, now_s: float, stuck: list[str], reasons: dict[str, str]) -> None:
        self.now_s = now_s
        self.stuck = stuck
        self.reasons = reasons
        shown = ", ".join(f"{j} ({reasons.get(j, 'no reason given')})" for j in stuck[:5])
        more = f" and {len(stuck) - 5} more" if len(stuck) > 5 else ""
        super().__init__(
            f"simulation stalled at t={now_s:.0f}s: {len(stuck)} job(s) can never start: "
            f"{shown}{more}"
        )


class SlurmCommandError(SlurmSchedError):
    """A Slurm command failed: keeps the command line, exit code and stderr verbatim."""

    def __init__(self, cmd: list[str], rc: int, stderr: str) -> None:
        self.cmd = cmd
        self.rc = rc
        self.stderr = stderr
        super().__init__(f"{' '.join(cmd)!s} exited {rc}: {stderr.strip()}")


class BackendUnavailableError(SlurmSchedError):
    """The backend itself cannot be reached (e.g. slurmctld down); apply() raises only this."""


class ClusterMisreadError(SlurmSchedError):
    """What Slurm reports cannot be trusted as the cluster: an unsupported release, a document
    that lacks or garbles a field the scheduler needs, or no node in the managed partitions.

    Never retried: the daemon stops with this one-line message (exit code 2) rather than
    schedule on a misread cluster; managed jobs then start under their fail-open leases.
    """
