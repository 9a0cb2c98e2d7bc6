"""A Slurm cluster read from recorded JSON files instead of live commands.

:class:`RecordedRunner` answers the read-only commands the backend runs with documents an admin
recorded on their own cluster (any supported release and form: ``squeue --json``,
``scontrol show job --json`` or slurmrestd ``/jobs`` for the jobs; ``sinfo --json``,
``scontrol show node --json`` or slurmrestd ``/nodes`` for the nodes). A
:class:`~slurm_sched.slurm.backend.SlurmBackend` in dry-run mode over it builds exactly the view
the daemon would build of that cluster (``slurm-sched snapshot --from-json``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slurm_sched.errors import InputError
from slurm_sched.slurm.parse import SlurmJob, SlurmNode, read_jobs, read_nodes
from slurm_sched.slurm.runner import CommandResult, CommandRunner
from slurm_sched.slurm.version import SlurmVersion


def load_json(path: str | os.PathLike[str]) -> Any:
    """A JSON file; a missing, unreadable or malformed (e.g. truncated) one is an
    :class:`InputError` naming the file and where the text stops making sense."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise InputError(exc.strerror or str(exc), source=str(p)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}", source=str(p)
        ) from None


@dataclass
class RecordedCluster:
    """The two documents of one cluster, checked: both parse, and both are of one release."""

    jobs_doc: Mapping[str, Any]
    nodes_doc: Mapping[str, Any]
    version: SlurmVersion
    jobs: list[SlurmJob]
    nodes: list[SlurmNode]

    @classmethod
    def from_files(
        cls, jobs_path: str | os.PathLike[str], nodes_path: str | os.PathLike[str]
    ) -> RecordedCluster:
        """Read both files.

        Raises:
            InputError: a file that cannot be read or is not JSON.
            ClusterMisreadError: a document of an unsupported release, or one that lacks or
                garbles a field the scheduler needs (the message names file, field, release).
            SlurmJsonError: a document that carries Slurm's own ``errors``.
        """
        jobs_doc = load_json(jobs_path)
        nodes_doc = load_json(nodes_path)
        jobs_version, jobs = read_jobs(jobs_doc, str(jobs_path))
        nodes_version, nodes = read_nodes(nodes_doc, str(nodes_path))
        if (jobs_version.major, jobs_version.minor) != (nodes_version.major, nodes_version.minor):
            raise InputError(
                f"the jobs are of Slurm {jobs_version}, the nodes of Slurm {nodes_version}: "
                "record both on one cluster",
                source=str(nodes_path),
                field="meta.slurm.version",
                value=str(nodes_version),
            )
        return cls(jobs_doc, nodes_doc, jobs_version, jobs, nodes)

    def newest_time_s(self) -> float:
        """The latest thing that had happened in the jobs (a submit, a start of a job that
        runs or ran, an end of a finished job, a suspend): the recording is no earlier.
        Pending jobs' start and end times are Slurm's forecasts and do not count."""
        times = [0.0]
        for j in self.jobs:
            times.extend((j.submit_time_s, j.suspend_time_s))
            if j.holds_resources or j.final:
                times.append(j.start_time_s)
            if j.final:
                times.append(j.end_time_s)
        return max(times)


@dataclass
class RecordedRunner(CommandRunner):
    """Answers the backend's queries from a :class:`RecordedCluster`; every other command
    fails (wrap it in a dry run: :class:`~slurm_sched.slurm.runner.DryRunRunner` only records
    what would change Slurm)."""

    recorded: RecordedCluster | None = None
    asked: list[str] = field(default_factory=list)

    def _exec(
        self, argv: Sequence[str], stdin: str | None = None, merge_stderr: bool = False
    ) -> CommandResult:
        assert self.recorded is not None
        argv = tuple(argv)
        self.asked.append(" ".join(argv))
        if argv == ("scontrol", "--version"):
            return CommandResult(argv, 0, f"slurm {self.recorded.version}\n", "")
        if argv == ("scontrol", "ping"):
            return CommandResult(argv, 0, "Slurmctld(primary) at recorded is UP\n", "")
        if argv[:2] == ("squeue", "--json"):
            return CommandResult(argv, 0, json.dumps(self.recorded.jobs_doc), "")
        if argv in (("sinfo", "--json"), ("scontrol", "show", "nodes", "--json")):
            return CommandResult(argv, 0, json.dumps(self.recorded.nodes_doc), "")
        if argv == ("scontrol", "show", "partition", "-o"):
            return CommandResult(argv, 0, "", "")  # not recorded: no partition taken as down
        return CommandResult(argv, 1, "", "not available from recorded files\n")
