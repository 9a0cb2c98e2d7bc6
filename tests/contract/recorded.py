"""A recorded-output stand-in for the Slurm command runner (the process boundary).

``FakeRunner`` answers ``squeue --json``, ``sinfo --json``, ``scontrol show partition -o`` and
``scontrol ping|--version`` as recorded on the mini cluster (``tests/golden/slurm/``) and records
every other command line it is given (``lines``), as scontrol would run them; ``errors`` maps a
line to the error text scontrol would print, ``up = False`` makes it answer like an
unreachable slurmctld.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from slurm_sched.slurm.runner import CommandResult, CommandRunner

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "slurm"
NOW = 1795368100.0


def recorded(name: str) -> dict[str, Any]:
    return json.loads((GOLDEN / name).read_text())


class FakeRunner(CommandRunner):
    """Answers Slurm commands from recorded documents; ``errors`` maps scontrol lines to the
    error text scontrol would print for them.

    ``lines`` holds every command per job: a job-list update (``update JobId=a,b StartTime=V``)
    is recorded as one line per job, and answered as scontrol does, with an error per failing
    job that names it (``<error> for job a``). ``sent`` holds the lines as sent."""

    def __init__(self, squeue: dict[str, Any]) -> None:
        super().__init__(env={})
        self.squeue = squeue
        self.sinfo = recorded("sinfo.json")
        #: ``scontrol show partition -o`` (the keys the backend reads)
        self.partitions = "PartitionName=sched State=UP\nPartitionName=direct State=UP\n"
        self.errors: dict[str, str] = {}
        self.lines: list[str] = []
        self.sent: list[str] = []
        self.up = True

    def _exec(
        self, argv: Sequence[str], stdin: str | None = None, merge_stderr: bool = False
    ) -> CommandResult:
        argv = tuple(argv)
        if argv == ("squeue", "--json"):
            doc = self.squeue if self.up else recorded("squeue_unreachable.json")
            return CommandResult(argv, 0, json.dumps(doc), "")
        if argv == ("sinfo", "--json"):
            return CommandResult(argv, 0, json.dumps(self.sinfo), "")
        if argv == ("scontrol", "show", "partition", "-o"):
            return CommandResult(argv, 0, self.partitions, "")
        if argv == ("scontrol", "--version"):
            return CommandResult(argv, 0, f"slurm {self.sinfo['meta']['Slurm']['release']}\n", "")
        if argv == ("scontrol", "ping"):
            state = "UP" if self.up else "DOWN"
            return CommandResult(
                argv, 0 if self.up else 1, f"Slurmctld(primary) at vm is {state}", ""
            )
        if argv == ("scontrol",):  # batch on stdin
            out, rc = [], 0
            for line in (stdin or "").splitlines():
                self.sent.append(line)
                out.append(f"scontrol: {line}")
                per_job = _per_job(line)
                self.lines.extend(per_job)
                if not self.up:
                    out.append("Unable to contact slurm controller (connect failure)")
                    rc = 1
                    continue
                errors = self._errors_of(per_job)
                out.extend(errors)
                rc = 1 if errors else rc
            out.append("scontrol: ")
            return CommandResult(argv, rc, "\n".join(out) + "\n", "")
        line = " ".join(argv[1:]) if argv[0] == "scontrol" else " ".join(argv)
        self.sent.append(line)
        per_job = _per_job(line) if argv[0] == "scontrol" else [line]
        self.lines.extend(per_job)
        if not self.up:
            return CommandResult(argv, 1, "", "Unable to contact slurm controller")
        errors = self._errors_of(per_job)
        return CommandResult(argv, 1 if errors else 0, "", "\n".join(errors))

    def _errors_of(self, per_job: list[str]) -> list[str]:
        """The error lines scontrol prints for these per-job lines of one command line."""
        named = len(per_job) > 1  # scontrol names the job of a job-list update's error
        return [
            self.errors[one] + (f" for job {_job(one)}" if named else "")
            for one in per_job
            if one in self.errors
        ]


def _per_job(line: str) -> list[str]:
    """``update JobId=a,b StartTime=V`` -> one such line per job; any other line as it is."""
    words = line.split()
    if len(words) == 3 and words[0] == "update" and words[1].startswith("JobId="):
        return [f"update JobId={j} {words[2]}" for j in words[1][len("JobId="):].split(",")]
    return [line]


def _job(line: str) -> str:
    return line.split()[1][len("JobId="):]


def squeue_with(*changes: tuple[str, dict[str, Any]], drop: Sequence[str] = ()) -> dict[str, Any]:
    doc = copy.deepcopy(recorded("squeue_mixed.json"))
    jobs = {str(j["job_id"]): j for j in doc["jobs"]}
    for jid, fields in changes:
        if jid in jobs:
            jobs[jid].update(fields)
        else:
            base = copy.deepcopy(jobs["28"])
            base.update({"job_id": int(jid), **fields})
            jobs[jid] = base
    doc["jobs"] = [j for k, j in jobs.items() if k not in drop]
    return doc
