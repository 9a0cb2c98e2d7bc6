"""The cluster the jobs are replayed on: ``--cluster SPEC``, else a ``sinfo --json`` file
(``--nodes``), else the live ``sinfo --json``; nodes restricted to ``--partition`` when given.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurm_sched.errors import InputError, SlurmCommandError
from slurm_sched.model import Cluster, parse_cluster_spec
from slurm_sched.slurm.parse import cluster_from_nodes, read_nodes

#: Runs a command and returns its completed process (``subprocess.run`` in production).
Runner = Callable[..., "subprocess.CompletedProcess[str]"]
SINFO_ARGV = ("sinfo", "--json")


@dataclass(frozen=True)
class ClusterShape:
    """The cluster and where it came from (for the report)."""

    cluster: Cluster
    source: str

    def describe(self) -> str:
        """``N nodes, G GPUs (types)`` plus the source."""
        c = self.cluster
        types = ", ".join(c.gpu_types)
        return f"{len(c.nodes)} nodes, {c.total_gpus} GPUs ({types}) from {self.source}"


def _from_document(data: Any, source: str, partition: str | None) -> Cluster:
    _, nodes = read_nodes(data, source)
    partitions = [partition] if partition else sorted({p for n in nodes for p in n.partitions})
    cluster = cluster_from_nodes(nodes, partitions)
    if cluster.total_gpus == 0:
        where = f"partition {partition!r}" if partition else "any partition"
        raise InputError(f"no node with a GPU in {where}", source=source,
                         field="partition" if partition else None, value=partition)
    return cluster


def cluster_shape(
    *,
    spec: str | None = None,
    nodes_path: str | Path | None = None,
    partition: str | None = None,
    run: Runner = subprocess.run,
) -> ClusterShape:
    """The cluster from the first given of ``spec``, ``nodes_path``, the live ``sinfo --json``.

    Raises:
        ClusterSpecError: a malformed ``spec``.
        InputError: a missing or non-JSON nodes file, no GPU node in ``partition``, no sinfo.
        SlurmCommandError: sinfo ran and failed.
    """
    if spec is not None:
        return ClusterShape(parse_cluster_spec(spec), f"--cluster {spec}")
    if nodes_path is not None:
        path = Path(nodes_path)
        try:
            data = json.loads(path.read_text())
        except OSError as e:
            raise InputError(f"cannot read: {e.strerror}", field="--nodes",
                             value=str(path)) from None
        except json.JSONDecodeError as e:
            raise InputError(f"not JSON: {e.msg}", source=str(path), line=e.lineno) from None
        return ClusterShape(_from_document(data, str(path), partition), str(path))
    try:
        proc = run(list(SINFO_ARGV), capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise InputError(f"cannot run sinfo ({e}); give --nodes SINFO.json or --cluster SPEC",
                         field="cluster") from None
    if proc.returncode != 0:
        raise SlurmCommandError(list(SINFO_ARGV), proc.returncode, proc.stderr)
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        raise InputError(f"not JSON: {e.msg}", source="sinfo --json", line=e.lineno) from None
    return ClusterShape(_from_document(data, "sinfo --json", partition), "sinfo --json")
