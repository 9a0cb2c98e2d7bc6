"""The process boundary to Slurm: runs Slurm client commands and classifies their failures.

Every Slurm call the backend makes goes through a :class:`CommandRunner`; tests may replace it
with a recorded-output fake (the only place fakes are allowed).

Contract:

- ``run(argv)`` runs one command with the cluster environment (``SLURM_CONF``) and a timeout and
  returns its :class:`CommandResult` when it exits 0. It raises
  :class:`~slurm_sched.errors.BackendUnavailableError` when slurmctld cannot be reached (the
  command timed out, the error text says so, or an ambiguous failure is followed by a failed
  ``scontrol ping``) and :class:`~slurm_sched.errors.SlurmCommandError` for every other failure.
- ``run_scontrol_batch(lines)`` feeds many ``scontrol`` commands to ONE ``scontrol`` process on
  stdin (about 0.7 ms per command instead of about 6 ms per process) and returns one
  :class:`CommandResult` per line, in order, never raising :class:`SlurmCommandError` (a failed
  line is a result with ``rc != 0``). How errors are attributed: when stdin is not a terminal,
  scontrol echoes every command as ``scontrol: <line>`` before running it, and we read stdout and
  stderr through ONE pipe, so the error text of a line sits between its echo and the next echo.
  If the echoes cannot be matched to the lines sent (a future scontrol prints differently), the
  batch is re-run one command per process (:attr:`CommandRunner.batch_fallbacks` counts this).
- Begin-time updates in a batch (``update JobId=X StartTime=V``: the go of pinned starts, lease
  renewals, hand-overs, un-starts) with the same ``V`` are sent as job-list updates of up to
  :data:`LIST_UPDATE_MAX_JOBS` jobs (``update JobId=a,b,c StartTime=V``; about 1.3 ms a job
  instead of about 3 on a 2-core VM) and their results are split per job again: scontrol names
  the job of each error (``... for job 99999``). A list whose error text names no single job of
  it is re-run one job per line.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from slurm_sched.errors import BackendUnavailableError, SlurmCommandError

log = logging.getLogger(__name__)

#: Error texts that mean "slurmctld did not answer" (seen on 22.05: connect failures, timeouts).
UNREACHABLE_PATTERNS = (
    "unable to contact slurm controller",
    "socket timed out",
    "zero bytes were transmitted",
    "connection refused",
    "communication connection failure",
    "slurm_receive_msg",
    "slurmctld not responding",
)
#: Error texts that may or may not mean the controller is down: confirmed with ``scontrol ping``.
#: ("Unexpected message received" is what ``scontrol suspend/release`` prints both for an unknown
#: job id and for an unreachable controller.)
AMBIGUOUS_PATTERNS = ("unexpected message received", "unspecified error")

_ECHO = "scontrol: "


@dataclass(frozen=True)
class CommandResult:
    """What one command printed; ``rc`` 0 means success."""

    argv: tuple[str, ...]
    rc: int
    stdout: str
    stderr: str
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.rc == 0

    @property
    def line(self) -> str:
        return " ".join(self.argv)


def _looks_unreachable(text: str) -> bool:
    low = text.lower()
    return any(p in low for p in UNREACHABLE_PATTERNS)


def _looks_ambiguous(text: str) -> bool:
    low = text.lower()
    return any(p in low for p in AMBIGUOUS_PATTERNS)


_SAFE_TOKEN = re.compile(r"^[^\s'\"\\#]+$")


def _check_batch_tokens(argv: Sequence[str]) -> None:
    """Raise ValueError unless every token of ``argv`` stands in an ``scontrol`` batch line as
    it is (no white space, quote, backslash or ``#``: the line is not quoted)."""
    for tok in argv:
        if not _SAFE_TOKEN.match(tok):
            raise ValueError(f"scontrol batch token needs quoting: {tok!r}")


#: Most jobs in one job-list begin-time update (keeps the line short, about 700 characters)
LIST_UPDATE_MAX_JOBS = 100
#: How scontrol names the job of a failed job-list update (22.05)
_LIST_ERROR_JOB = re.compile(r" for job (\S+)$")


def _begin_update(argv: Sequence[str]) -> tuple[str, str] | None:
    """(job id, ``StartTime=V``) of exactly ``update JobId=X StartTime=V``; None otherwise."""
    if (
        len(argv) == 3
        and argv[0] == "update"
        and argv[1].startswith("JobId=")
        and argv[2].startswith("StartTime=")
    ):
        job = argv[1][len("JobId=") :]
        if job and "," not in job:
            return job, argv[2]
    return None


def merge_begin_updates(lines: Sequence[Sequence[str]]) -> list[tuple[tuple[str, ...], list[int]]]:
    """Group the lines of a batch: each begin-time update joins the last job-list line of its
    ``StartTime`` value while that has room; every other line stays alone, in order. Returns
    (line to send, indices of the original lines it stands for)."""
    groups: list[tuple[str | None, list[str], list[int]]] = []  # (StartTime, jobs, lines)
    open_list: dict[str, int] = {}  # StartTime value -> its group
    for i, argv in enumerate(lines):
        begin = _begin_update(argv)
        if begin is None:
            groups.append((None, [], [i]))
            continue
        job, when = begin
        g = open_list.get(when)
        if g is None or len(groups[g][1]) >= LIST_UPDATE_MAX_JOBS:
            g = open_list[when] = len(groups)
            groups.append((when, [], []))
        groups[g][1].append(job)
        groups[g][2].append(i)
    return [
        (tuple(lines[members[0]]) if when is None
         else ("update", "JobId=" + ",".join(jobs), when), members)
        for when, jobs, members in groups
    ]  # fmt: skip


@dataclass
class CommandRunner:
    """Runs Slurm CLI commands for one cluster.

    Args:
        env: extra environment for every command (at least ``SLURM_CONF`` for a cluster without
            ``/etc/slurm/slurm.conf``); merged over ``os.environ``.
        timeout_s: limit per command; a command that runs longer means slurmctld is not answering.
        ping_on_error: confirm ambiguous failures with ``scontrol ping``.
    """

    env: Mapping[str, str] | None = None
    timeout_s: float = 30.0
    ping_on_error: bool = True
    calls: int = 0
    batch_fallbacks: int = 0
    _full_env: dict[str, str] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self._full_env = dict(os.environ)
        # scontrol reads a batch through readline, which wraps an echoed line longer than the
        # terminal width (80 without a tty) with cursor escapes: a job-list update of 11 jobs
        # already broke the attribution of the output to the lines (CI). No width, no wrap.
        self._full_env["COLUMNS"] = "1000000"
        if self.env:
            self._full_env.update(self.env)

    # ------------------------------------------------------------------ low level
    def _exec(
        self, argv: Sequence[str], stdin: str | None = None, merge_stderr: bool = False
    ) -> CommandResult:
        self.calls += 1
        # DEBUG shows every command Slurm gets: what an admin needs to retrace an action
        log.debug("run %s%s", shlex.join(argv), f" <<< {stdin!r}" if stdin else "")
        t0 = time.monotonic()
        try:
            proc = subprocess.run(
                list(argv),
                input=stdin,
                env=self._full_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                text=True,
                timeout=self.timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise BackendUnavailableError(
                f"{shlex.join(argv)} did not finish in {self.timeout_s:.0f}s "
                "(slurmctld not answering?)"
            ) from exc
        except OSError as exc:  # the command itself is missing: Slurm clients not installed
            raise BackendUnavailableError(f"cannot run {argv[0]}: {exc}") from exc
        return CommandResult(
            argv=tuple(argv),
            rc=proc.returncode,
            stdout=proc.stdout or "",
            stderr=proc.stderr or "",
            elapsed_s=time.monotonic() - t0,
        )

    def controller_up(self) -> bool:
        """``scontrol ping``: True when the primary slurmctld answers (about 10-30 ms)."""
        try:
            res = self._exec(["scontrol", "ping"])
        except BackendUnavailableError:
            return False
        return res.rc == 0 and " is UP" in res.stdout

    def check_failure(self, res: CommandResult, message: str | None = None) -> None:
        """Raise the right error for a failed command (``message`` overrides its stderr)."""
        text = message if message is not None else (res.stderr or res.stdout)
        if _looks_unreachable(text):
            raise BackendUnavailableError(f"{res.line}: {text.strip()}")
        if self.ping_on_error and _looks_ambiguous(text) and not self.controller_up():
            raise BackendUnavailableError(f"{res.line}: {text.strip()} (scontrol ping: DOWN)")
        raise SlurmCommandError(list(res.argv), res.rc, text)

    # ------------------------------------------------------------------ API
    def run(self, argv: Sequence[str]) -> CommandResult:
        """Run one command; raise on failure (see the module docstring)."""
        res = self._exec(argv)
        if res.rc != 0:
            self.check_failure(res)
        return res

    def run_optional(self, argv: Sequence[str], timeout_s: float) -> CommandResult:
        """Run a command whose failure the caller ignores, within ``timeout_s``: one that runs
        longer (or finds the controller unreachable) is given up, ``rc=124``, instead of raising.

        Why: ``scancel --signal`` of a job Slurm is requeueing retries for about a minute ("Job
        can not be altered now, try again later", Slurm 24.11); that is no outage. The commands
        that must succeed next report a real outage.
        """
        saved = self.timeout_s
        self.timeout_s = min(saved, timeout_s)
        try:
            return self.run_unchecked(argv)
        except BackendUnavailableError as exc:
            log.info("%s: given up (%s)", shlex.join(argv), exc)
            return CommandResult(tuple(argv), 124, "", str(exc), self.timeout_s)
        finally:
            self.timeout_s = saved

    def run_unchecked(self, argv: Sequence[str]) -> CommandResult:
        """Run one command and return its result even when it fails (``rc != 0``).

        Still raises :class:`BackendUnavailableError` when the controller is unreachable.
        """
        res = self._exec(argv)
        if res.rc != 0:
            try:
                self.check_failure(res)
            except SlurmCommandError:
                return res
        return res

    def run_scontrol_batch(self, lines: Sequence[Sequence[str]]) -> list[CommandResult]:
        """Run ``scontrol`` subcommands (argv without the leading ``scontrol``) in one process.

        Returns one result per line (``argv`` includes ``scontrol``); failed lines have
        ``rc=1`` and their error text in ``stderr``. Raises only
        :class:`BackendUnavailableError`.
        """
        if not lines:
            return []
        groups = merge_begin_updates(lines)
        if len(groups) == len(lines):
            return self._run_batch(lines)
        sent = self._run_batch([argv for argv, _ in groups])
        out: list[CommandResult | None] = [None] * len(lines)
        for (_, members), res in zip(groups, sent, strict=True):
            for i, r in zip(members, self._split_list_result(lines, members, res), strict=True):
                out[i] = r
        return [r for r in out if r is not None]

    def _split_list_result(
        self, lines: Sequence[Sequence[str]], members: list[int], res: CommandResult
    ) -> list[CommandResult]:
        """Per original line, the result of a (possibly job-list) line ``res``."""
        if len(members) == 1:
            return [res]
        share = res.elapsed_s / len(members)
        errors: dict[str, list[str]] = {}
        if not res.ok:
            jobs = {lines[i][1][len("JobId=") :] for i in members}
            for text in res.stderr.splitlines():
                m = _LIST_ERROR_JOB.search(text.strip())
                if m is None or m.group(1) not in jobs:
                    # an error we cannot pin on one job: ask each job on its own
                    self.batch_fallbacks += 1
                    return [self.run_unchecked(["scontrol", *lines[i]]) for i in members]
                errors.setdefault(m.group(1), []).append(text.strip())
        out = []
        for i in members:
            err = "\n".join(errors.get(lines[i][1][len("JobId=") :], []))
            out.append(CommandResult(("scontrol", *lines[i]), 1 if err else 0, "", err, share))
        return out

    def _run_batch(self, lines: Sequence[Sequence[str]]) -> list[CommandResult]:
        texts = []
        for argv in lines:
            _check_batch_tokens(argv)
            texts.append(" ".join(argv))
        if len(lines) == 1:
            return [self.run_unchecked(["scontrol", *lines[0]])]
        res = self._exec(["scontrol"], stdin="\n".join(texts) + "\n", merge_stderr=True)
        per_line = _attribute(texts, res.stdout)
        if per_line is None or len(per_line) < len(lines):
            # unattributable output, or scontrol stopped early: a line that ran must not run
            # twice (a second StartTime=now fails with "no longer pending" although the first
            # one started the job), so only the lines it did not reach are re-run
            self.batch_fallbacks += 1
            done = 0 if per_line is None else len(per_line)
            log.warning(
                "could not attribute scontrol batch output to lines %d-%d of %d; re-running "
                "them one by one. Output: %r",
                done + 1, len(lines), len(lines), res.stdout[-2000:],
            )  # fmt: skip
            if per_line is None:
                return [self.run_unchecked(["scontrol", *argv]) for argv in lines]
            # scontrol stopped early: the text after a line that ran is its error
            head = self._results(lines[:done], per_line, rc=1, share=res.elapsed_s / len(lines))
            return head + [self.run_unchecked(["scontrol", *argv]) for argv in lines[done:]]
        out = self._results(lines, per_line, res.rc, res.elapsed_s / len(lines))
        if res.rc != 0 and not any(r.rc for r in out):
            # scontrol failed but printed nothing we could attribute: do not guess
            self.batch_fallbacks += 1
            log.warning("scontrol batch exited %d without per-line errors; re-running", res.rc)
            return [self.run_unchecked(["scontrol", *argv]) for argv in lines]
        return out

    def _results(
        self, lines: Sequence[Sequence[str]], per_line: Sequence[str], rc: int, share: float
    ) -> list[CommandResult]:
        """One result per line from the text scontrol printed after each (see _attribute)."""
        if rc == 0 and any(per_line):
            # rc 0 but text after a line: informational output, not an error
            per_line = ["" for _ in per_line]
        out: list[CommandResult] = []
        for argv, err in zip(lines, per_line, strict=True):
            err = err.strip()
            r = CommandResult(("scontrol", *argv), 1 if err else 0, "", err, share)
            if err:
                if _looks_unreachable(err):
                    raise BackendUnavailableError(f"{r.line}: {err}")
                if self.ping_on_error and _looks_ambiguous(err) and not self.controller_up():
                    raise BackendUnavailableError(f"{r.line}: {err} (scontrol ping: DOWN)")
            out.append(r)
        return out


def _attribute(texts: Sequence[str], output: str) -> list[str] | None:
    """Split merged scontrol output into the text printed after each echoed line.

    Returns one text per line scontrol echoed: all lines, or a prefix of them when it stopped
    early (the others did not run). Returns None when text comes before the first echo.
    """
    chunks: list[list[str]] = []
    expect = 0
    for raw in output.splitlines():
        if expect < len(texts) and raw == _ECHO + texts[expect]:
            chunks.append([])
            expect += 1
            continue
        if raw.strip() in ("scontrol:", ""):
            continue  # the final prompt at end of input
        if not chunks:
            return None  # text before the first echo: cannot attribute
        chunks[-1].append(raw)
    return ["\n".join(c) for c in chunks]


#: Commands that only read Slurm's state: a dry run runs them for real.
_READ_ONLY = (
    ("squeue",),
    ("sinfo",),
    ("scontrol", "ping"),
    ("scontrol", "show"),
    ("scontrol", "--version"),
)


def is_read_only(argv: Sequence[str]) -> bool:
    """Whether a Slurm command only reads (``squeue``, ``sinfo``, ``scontrol ping/show``)."""
    return any(tuple(argv[: len(prefix)]) == prefix for prefix in _READ_ONLY)


@dataclass
class DryRunRunner(CommandRunner):
    """Shadow mode: commands that read Slurm run (through ``inner`` when given); every other
    command is recorded in :attr:`recorded` and reported as done, so nothing in Slurm changes.

    The guarantee is here, at the process boundary, not in the callers: whatever the backend
    decides to run, only read-only commands reach Slurm.
    """

    inner: CommandRunner | None = None
    recorded: list[str] = field(default_factory=list)

    @classmethod
    def wrapping(cls, runner: CommandRunner) -> DryRunRunner:
        return cls(
            env=runner.env,
            timeout_s=runner.timeout_s,
            ping_on_error=runner.ping_on_error,
            inner=runner,
        )

    def _exec(
        self, argv: Sequence[str], stdin: str | None = None, merge_stderr: bool = False
    ) -> CommandResult:
        if stdin is None and is_read_only(argv):
            if self.inner is not None:
                return self.inner._exec(argv, stdin, merge_stderr)
            return super()._exec(argv, stdin, merge_stderr)
        lines = [shlex.join(argv)] if stdin is None else [
            f"{shlex.join(argv)} {line}" for line in stdin.splitlines() if line.strip()
        ]
        self.recorded.extend(lines)
        return CommandResult(tuple(argv), 0, "", "")

    def run_scontrol_batch(self, lines: Sequence[Sequence[str]]) -> list[CommandResult]:
        out = []
        for argv in lines:
            _check_batch_tokens(argv)
            self.recorded.append(" ".join(("scontrol", *argv)))
            out.append(CommandResult(("scontrol", *argv), 0, "", ""))
        return out

    def drain(self) -> list[str]:
        """The recorded command lines since the last drain (and forget them)."""
        out, self.recorded = self.recorded, []
        return out
