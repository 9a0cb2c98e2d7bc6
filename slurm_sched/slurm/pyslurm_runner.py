"""A thin pyslurm transport: the scontrol *action* lines of a batch run in-process.

:class:`PyslurmRunner` is a :class:`~slurm_sched.slurm.runner.CommandRunner` whose
``run_scontrol_batch`` sends each line it can map as ONE libslurm RPC through pyslurm (the 25.11
line, ``pyslurm.Job`` / ``pyslurm.JobSubmitDescription``) instead of feeding it to an ``scontrol``
process. Everything else stays on the CLI path of the parent class:

- queries (``run(argv)``: ``squeue --json``, ``sinfo --json``, ``scontrol show``/``ping``) - these
  exist unchanged on 25.11 and their JSON parsing is what the backend is tested against;
- ``scancel --batch --signal=USR1`` (goes through ``run_unchecked``, not the batch);
- every batch line with a verb, key or value this module does not map (see :data:`UPDATE_KEYS`,
  :data:`CLI_ONLY_KEYS`, :func:`plan_line`). Such a line runs through the parent's
  ``run_scontrol_batch`` (runs of consecutive CLI lines share one ``scontrol`` process, so the
  order of the lines is kept) and is counted in :attr:`PyslurmRunner.cli_fallback_lines` and
  :attr:`PyslurmRunner.fallback_reasons`: nothing is ever dropped.

A line is mapped whole or not at all: a pin (``update JobId=X ResetAccrueTime NodeList=..
NumNodes=.. TresPerNode=..``) must stay ONE update so Slurm never sees half of it, so one unmapped
key sends the whole line to the CLI.

The mapping was read in the pyslurm 25.11.0 sources (``pyslurm/core/job/job.pyx``,
``submission.pyx``/``.pxd``, ``utils/cstr.pyx``, ``utils/ctime.pyx``) against scontrol's
``update_job.c``:

=================================  ================================================================
scontrol line                      pyslurm call
=================================  ================================================================
``update JobId=X NodeList=a,b``    ``Job(X).modify(JobSubmitDescription(required_nodes="a,b"))``
``... StartTime=now[+N]``          ``begin_time="now[+N]"`` (both end in ``slurm_parse_time``)
``... TresPerNode=gres:K[:T]:N``   ``gres_per_node="gres:K[:T]:N"`` (-> ``tres_per_node``)
``... TresPerJob=gres:gpu[:T]:N``  ``gpus="gres:gpu[:T]:N"`` (-> ``tres_per_job``)
``... MinMemoryNode=M`` (MiB)      ``memory_per_node=M`` (-> ``pn_min_memory``)
``hold X`` / ``release X``         ``Job(X).hold()`` (priority 0) / ``Job(X).release()``
``uhold X``                        ``Job(X).hold(mode="user")`` (a user hold: ``JobHeldUser``)
``suspend X`` / ``resume X``       ``Job(X).suspend()`` / ``Job(X).unsuspend()``
``requeue X`` / ``requeuehold X``  ``Job(X).requeue()`` / ``Job(X).requeue(hold=True)``
=================================  ================================================================

Routed to the CLI on purpose (:data:`CLI_ONLY_KEYS`): ``NumNodes`` (``JobSubmitDescription`` sets
``min_nodes``/``max_nodes`` only when NOT updating), ``NumCPUs`` (the only attribute writing
``job_desc.min_cpus`` is ``min_cpus_per_node``, documented as sbatch's per-node ``--mincpus``),
the ``ResetAccrueTime`` flag that every pin and GRES clear carries (no attribute sets that bit;
so every pin runs through the CLI),
and an empty value such as ``TresPerJob=`` (scontrol sends ``""``, which clears the field;
pyslurm turns ``""`` into NULL, "not given", so the clear would silently do nothing).

Failures: a pyslurm ``RPCError`` becomes a result with ``rc=1`` and scontrol's error format
(``<message> for job X``); its text is classified like the CLI's, so "controller unreachable"
raises :class:`~slurm_sched.errors.BackendUnavailableError` and an ambiguous text is confirmed
with ``scontrol ping``. Any other exception from pyslurm (a value it refuses to encode) is a
failed line as well, never an exception out of the batch.

NOT tested against a real libslurm: PyPI's pyslurm refuses to build against any Slurm but its own
major release (``setup.py`` ``check_version``), and this project's machines run 22.05. The unit
tests use a fake ``pyslurm`` module that mirrors the 25.11 API read above (docs/pyslurm.md).
"""

from __future__ import annotations

import importlib
import logging
import os
import re
import shlex
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from slurm_sched.errors import BackendUnavailableError, InputError
from slurm_sched.slurm.runner import (
    _SAFE_TOKEN,
    CommandResult,
    CommandRunner,
    _looks_ambiguous,
    _looks_unreachable,
)

log = logging.getLogger(__name__)

#: The pyslurm release line whose API this module was written against (pyslurm versions are
#: ``<slurm major>.<patch>``: 25.11.x builds only against Slurm 25.11).
PYSLURM_LINE = "25.11"
INSTALL_HINT = (
    "pip install 'slurm_sched[pyslurm]' (pyslurm 25.11.x, built against the site's Slurm 25.11 "
    "libslurm)"
)
TRANSPORTS = ("cli", "pyslurm")

_JOB_ID = re.compile(r"^[1-9][0-9]*$")
_BEGIN = re.compile(r"^now(\+[0-9]+)?$")
_NODE_LIST = re.compile(r"^[A-Za-z0-9._\-\[\],]+$")
_GRES_ONE = re.compile(r"^gres:[A-Za-z0-9_]+(:[A-Za-z0-9_.\-]+)?:[0-9]+$")
_GPU_ONE = re.compile(r"^gres:gpu(:[A-Za-z0-9_.\-]+)?:[0-9]+$")
_MIB = re.compile(r"^[0-9]+$")

#: ``update`` keys mapped to a ``JobSubmitDescription`` attribute, with the value pattern the
#: mapping is exact for (another value of the key goes to the CLI).
UPDATE_KEYS: dict[str, tuple[str, re.Pattern[str]]] = {
    "NodeList": ("required_nodes", _NODE_LIST),
    "StartTime": ("begin_time", _BEGIN),
    "TresPerNode": ("gres_per_node", _GRES_ONE),
    "TresPerJob": ("gpus", _GPU_ONE),
    "MinMemoryNode": ("memory_per_node", _MIB),
}

#: ``update`` keys our commands use that deliberately run through the CLI, and why.
CLI_ONLY_KEYS: dict[str, str] = {
    "NumNodes": (
        "JobSubmitDescription sets min_nodes/max_nodes only on submit (not is_update), so "
        "Job.modify cannot change a node count"
    ),
    "NumCPUs": (
        "the only attribute writing job_desc.min_cpus is min_cpus_per_node, documented as "
        "sbatch --mincpus (per node); not relied on"
    ),
    # a flag, not KEY=VALUE: the pending-only guard of every pin (translate.PENDING_ONLY)
    "ResetAccrueTime": (
        "JobSubmitDescription sets no RESET_ACCRUE_TIME bit (its bitflags are SPREAD_JOB, "
        "KILL_INV_DEP and USE_MIN_NODES only), and the guard must travel in the pin's own RPC"
    ),
}

#: verb -> (``pyslurm.Job`` method, keyword arguments)
JOB_VERBS: dict[str, tuple[str, dict[str, Any]]] = {
    "hold": ("hold", {}),
    "uhold": ("hold", {"mode": "user"}),
    "release": ("release", {}),
    "suspend": ("suspend", {}),
    "resume": ("unsuspend", {}),
    "requeue": ("requeue", {}),
    "requeuehold": ("requeue", {"hold": True}),
}


@dataclass(frozen=True)
class PyslurmCall:
    """One line as one pyslurm call: ``Job(job_id).<method>(**kwargs)``, or for ``update``
    ``Job(job_id).modify(JobSubmitDescription(**changes))``."""

    job_id: int
    method: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    changes: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class CliFallback:
    """A line left to the CLI; ``reason`` names the verb/key/value that is not mapped."""

    reason: str


def _tokens(argv: Sequence[str] | str) -> list[str]:
    return shlex.split(argv) if isinstance(argv, str) else list(argv)


def plan_line(argv: Sequence[str] | str) -> PyslurmCall | CliFallback:
    """How one scontrol line (without the leading ``scontrol``) runs; pure.

    ``argv`` may also be the line as one string (split with :func:`shlex.split`).
    """
    tokens = _tokens(argv)
    if not tokens:
        return CliFallback("empty line")
    verb, args = tokens[0], tokens[1:]
    if verb in JOB_VERBS:
        if len(args) != 1 or not _JOB_ID.match(args[0]):
            return CliFallback(f"{verb}: argument {' '.join(args)!r} is not one plain job id")
        method, kwargs = JOB_VERBS[verb]
        return PyslurmCall(int(args[0]), method, dict(kwargs))
    if verb != "update":
        return CliFallback(f"verb {verb!r} not mapped")
    job_id: int | None = None
    changes: dict[str, Any] = {}
    seen: set[str] = set()
    why: list[str] = []  # every reason, so a new key is reported even next to a CLI-only one
    for tok in args:
        key, eq, value = tok.partition("=")
        if not eq:
            known = tok in CLI_ONLY_KEYS
            why.append(f"flag {tok!r} is CLI-only" if known else f"token {tok!r} is not KEY=VALUE")
            continue
        if key in seen:
            why.append(f"key {key!r} given twice")
        seen.add(key)
        if key == "JobId":
            if _JOB_ID.match(value):
                job_id = int(value)
            else:
                why.append(f"JobId {value!r} is not a plain job id")
        elif key in CLI_ONLY_KEYS:
            why.append(f"key {key!r} is CLI-only")
        elif key not in UPDATE_KEYS:
            why.append(f"key {key!r} not mapped")
        elif value == "":
            why.append(f"empty {key}= clears the field, pyslurm cannot")
        elif not UPDATE_KEYS[key][1].match(value):
            why.append(f"{key} value {value!r} not mapped")
        else:
            attr = UPDATE_KEYS[key][0]
            changes[attr] = int(value) if attr == "memory_per_node" else value
    if job_id is None and not any(w.startswith("JobId") for w in why):
        why.append("no JobId")
    if not why and not changes:
        why.append("nothing to change")
    if why or job_id is None:
        return CliFallback("update: " + "; ".join(why))
    return PyslurmCall(job_id, "modify", changes=changes)


def _import_pyslurm(env: Mapping[str, str] | None) -> ModuleType:
    """Import pyslurm so that libslurm reads the cluster's ``SLURM_CONF``.

    pyslurm initialises libslurm once, at import, from the PROCESS environment; the ``env`` a
    runner is given applies to CLI subprocesses only. So the runner exports ``SLURM_CONF`` into
    the process before the first import, and refuses a second cluster in the same process.
    """
    conf = (env or {}).get("SLURM_CONF")
    if conf and os.environ.get("SLURM_CONF") != conf:
        if sys.modules.get("pyslurm") is not None:
            raise BackendUnavailableError(
                f"pyslurm transport: libslurm in this process was initialised with "
                f"SLURM_CONF={os.environ.get('SLURM_CONF')!r}, not {conf!r} (one cluster per "
                "process)"
            )
        os.environ["SLURM_CONF"] = conf
    try:
        mod = importlib.import_module("pyslurm")
    except (ImportError, OSError) as exc:  # not installed, or libslurm missing/mismatched
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BackendUnavailableError(
            f"pyslurm transport unavailable ({reason}): {INSTALL_HINT}"
        ) from exc
    version = str(getattr(mod, "__version__", ""))
    if not version.startswith(PYSLURM_LINE + "."):
        raise BackendUnavailableError(
            f"pyslurm {version or '(unknown version)'} is not the {PYSLURM_LINE} line this "
            f"transport was written against: {INSTALL_HINT}"
        )
    missing = [n for n in ("Job", "JobSubmitDescription", "RPCError") if not hasattr(mod, n)]
    if missing:
        raise BackendUnavailableError(
            f"pyslurm {version} lacks {', '.join(missing)}: {INSTALL_HINT}"
        )
    return mod


@dataclass
class PyslurmRunner(CommandRunner):
    """A :class:`CommandRunner` that runs mapped scontrol batch lines through pyslurm.

    Raises:
        BackendUnavailableError: at construction, when pyslurm cannot be imported (the message
            names the ``pyslurm`` extra) or is not the 25.11 line.
    """

    #: lines run in-process through pyslurm
    pyslurm_lines: int = 0
    #: lines routed to the CLI (unmapped verb/key/value), and why
    cli_fallback_lines: int = 0
    fallback_reasons: Counter[str] = field(default_factory=Counter)
    _pyslurm: ModuleType | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._pyslurm = _import_pyslurm(self.env)

    # ------------------------------------------------------------------ batch
    def run_scontrol_batch(self, lines: Sequence[Sequence[str]]) -> list[CommandResult]:
        """As :meth:`CommandRunner.run_scontrol_batch`: one result per line, in order; raises
        only :class:`BackendUnavailableError` (and ``ValueError`` for a token needing quoting,
        like the CLI path)."""
        argvs = [_tokens(a) for a in lines]
        for argv in argvs:
            for tok in argv:
                if not _SAFE_TOKEN.match(tok):
                    raise ValueError(f"scontrol batch token needs quoting: {tok!r}")
        out: list[CommandResult] = []
        pending_cli: list[list[str]] = []
        for argv in argvs:
            plan = plan_line(argv)
            if isinstance(plan, CliFallback):
                self.cli_fallback_lines += 1
                self.fallback_reasons[plan.reason] += 1
                log.debug("scontrol %s: CLI (%s)", " ".join(argv), plan.reason)
                pending_cli.append(argv)
                continue
            if pending_cli:  # keep the order of the lines: flush the CLI run first
                out.extend(super().run_scontrol_batch(pending_cli))
                pending_cli = []
            out.append(self._call(argv, plan))
        if pending_cli:
            out.extend(super().run_scontrol_batch(pending_cli))
        return out

    def _call(self, argv: Sequence[str], plan: PyslurmCall) -> CommandResult:
        ps = self._pyslurm
        if ps is None:  # only when __post_init__ was bypassed
            raise BackendUnavailableError(f"pyslurm transport not initialised: {INSTALL_HINT}")
        self.pyslurm_lines += 1
        full = ("scontrol", *argv)
        t0 = time.monotonic()
        try:
            job = ps.Job(plan.job_id)
            if plan.changes is not None:
                job.modify(ps.JobSubmitDescription(**plan.changes))
            else:
                getattr(job, plan.method)(**plan.kwargs)
        except ps.RPCError as exc:
            err = f"{_rpc_text(exc)} for job {plan.job_id}"
            res = CommandResult(full, 1, "", err, time.monotonic() - t0)
            if _looks_unreachable(err):
                raise BackendUnavailableError(f"{res.line}: {err}") from exc
            if self.ping_on_error and _looks_ambiguous(err) and not self.controller_up():
                raise BackendUnavailableError(f"{res.line}: {err} (scontrol ping: DOWN)") from exc
            return res
        except Exception as exc:  # pyslurm refused to encode a value: this line failed, not all
            err = f"pyslurm: {type(exc).__name__}: {exc}"
            log.warning("scontrol %s: %s", " ".join(argv), err)
            return CommandResult(full, 1, "", err, time.monotonic() - t0)
        return CommandResult(full, 0, "", "", time.monotonic() - t0)


def _rpc_text(exc: BaseException) -> str:
    msg = getattr(exc, "msg", None)
    return str(msg if msg else exc).strip() or type(exc).__name__


def make_runner(
    transport: str = "cli", env: Mapping[str, str] | None = None, timeout_s: float = 30.0
) -> CommandRunner:
    """The runner for ``transport``: ``"cli"`` (default, Slurm client commands) or ``"pyslurm"``.

    Raises:
        InputError: unknown ``transport`` (field ``transport``).
        BackendUnavailableError: ``"pyslurm"`` without a usable pyslurm 25.11.
    """
    if transport == "cli":
        return CommandRunner(env=env, timeout_s=timeout_s)
    if transport == "pyslurm":
        return PyslurmRunner(env=env, timeout_s=timeout_s)
    raise InputError(
        f"unknown transport; expected one of {', '.join(TRANSPORTS)}",
        field="transport",
        value=transport,
    )
