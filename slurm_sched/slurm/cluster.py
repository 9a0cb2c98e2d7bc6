"""Python handle on the local Slurm mini cluster started by ``cluster.sh``.

Used by the integration tests, ``slurm-sched cluster up|down|status``, the README and docker::

    cluster = MiniCluster()
    cluster.up()                       # idempotent; a few seconds the first time
    subprocess.run(["sinfo"], env=cluster.env, check=True)
    cluster.down(purge=True)

All settings map to the ``MINI_SLURM_*`` knobs documented at the top of ``cluster.sh``; ``None``
keeps the script's default (or what the caller's environment sets).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

from slurm_sched.errors import ClusterMisreadError, SlurmSchedError
from slurm_sched.slurm.document_errors import SlurmJsonError
from slurm_sched.slurm.parse import read_nodes

SCRIPT = Path(__file__).parent / "cluster.sh"
DEFAULT_STATE_DIR = Path("/tmp/slurm-sched-cluster")
DEFAULT_PARTITION = "sched"


class MiniClusterError(SlurmSchedError):
    """``cluster.sh`` failed; the message carries its stderr (with the daemons' log tails)."""


class MiniCluster:
    """A real Slurm cluster (munged, slurmctld, one slurmd per node) on this machine.

    Parameters
    ----------
    state_dir:
        Where configs, logs and spool live (``MINI_SLURM_STATE``, default
        ``/tmp/slurm-sched-cluster``).
    nodes:
        ``"name:gputype:count ..."`` (``MINI_SLURM_NODES``); default 2 x 4 A100 + 2 x 4 V100.
    shards_per_gpu:
        gres/shard per GPU for GPU sharing (``MINI_SLURM_SHARDS_PER_GPU``, default 4).
    partition:
        The partition the scheduler manages (``MINI_SLURM_PARTITION``, default ``sched``).
    lease_s:
        The submit plugin's fail-open lease in seconds (``MINI_SLURM_LEASE_S``, default 120).
    ctld_port, slurmd_port:
        slurmctld port and the first slurmd port (defaults 16817 and 17001).
    slurm_prefix:
        Run the Slurm installed under this prefix (``MINI_SLURM_PREFIX``; what
        ``scripts/slurm-build.sh`` prints) instead of the apt packages.
    timeout_s:
        Limit for one ``cluster.sh`` call (the first ``up`` may install packages).
    """

    def __init__(
        self,
        state_dir: str | os.PathLike[str] | None = None,
        *,
        nodes: str | None = None,
        shards_per_gpu: int | None = None,
        partition: str | None = None,
        lease_s: int | None = None,
        ctld_port: int | None = None,
        slurmd_port: int | None = None,
        script: str | os.PathLike[str] | None = None,
        slurm_prefix: str | os.PathLike[str] | None = None,
        timeout_s: float = 600.0,
    ) -> None:
        if state_dir is None:
            state_dir = os.environ.get("MINI_SLURM_STATE") or DEFAULT_STATE_DIR
        self._state_dir = Path(state_dir).absolute()
        self._script = Path(script) if script is not None else SCRIPT
        self._timeout_s = timeout_s
        knobs: dict[str, object | None] = {
            "MINI_SLURM_NODES": nodes,
            "MINI_SLURM_SHARDS_PER_GPU": shards_per_gpu,
            "MINI_SLURM_PARTITION": partition,
            "MINI_SLURM_LEASE_S": lease_s,
            "MINI_SLURM_CTLD_PORT": ctld_port,
            "MINI_SLURM_SLURMD_PORT": slurmd_port,
            "MINI_SLURM_PREFIX": Path(slurm_prefix).absolute() if slurm_prefix else None,
        }
        self._knobs = {k: str(v) for k, v in knobs.items() if v is not None}
        self._knobs["MINI_SLURM_STATE"] = str(self._state_dir)
        self.last_up_s: float | None = None

    # ------------------------------------------------------------------ paths and environment
    @property
    def state_dir(self) -> Path:
        return self._state_dir

    @property
    def slurm_conf(self) -> Path:
        return self._state_dir / "etc" / "slurm.conf"

    @property
    def env_file(self) -> Path:
        """``<state>/env.sh``: ``export SLURM_CONF=...`` and the partition names."""
        return self._state_dir / "env.sh"

    def exported(self) -> dict[str, str]:
        """The variables ``env.sh`` exports (empty when the cluster was never started)."""
        out: dict[str, str] = {}
        try:
            text = self.env_file.read_text()
        except FileNotFoundError:
            return out
        for line in text.splitlines():
            words = shlex.split(line, comments=True)
            if len(words) == 2 and words[0] == "export" and "=" in words[1]:
                key, _, value = words[1].partition("=")
                if key == "PATH":  # a prefix build: "<prefix>/bin:<prefix>/sbin:$PATH"
                    value = value.replace("$PATH", os.environ.get("PATH", ""))
                out[key] = value
        return out

    @property
    def env(self) -> dict[str, str]:
        """The environment for Slurm client subprocesses: ours plus ``SLURM_CONF`` & co."""
        env = dict(os.environ)
        env.update(self.exported())
        env["SLURM_CONF"] = str(self.slurm_conf)
        return env

    @property
    def managed_partitions(self) -> list[str]:
        value = self.exported().get("MINI_SLURM_MANAGED_PARTITIONS") or self._knobs.get(
            "MINI_SLURM_PARTITION", DEFAULT_PARTITION
        )
        return [p for p in value.split(",") if p]

    @property
    def unmanaged_partitions(self) -> list[str]:
        value = self.exported().get("MINI_SLURM_UNMANAGED_PARTITIONS", "")
        return [p for p in value.split(",") if p]

    # ------------------------------------------------------------------ lifecycle
    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ)
        env.update(self._knobs)
        try:
            return subprocess.run(
                ["bash", str(self._script), *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=self._timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise MiniClusterError(
                f"cluster.sh {' '.join(args)} did not finish in {self._timeout_s:.0f}s"
            ) from exc

    def up(self) -> float:
        """Start the cluster (or check that it runs); returns the wall seconds it took.

        Raises :class:`MiniClusterError` with the script's stderr when it cannot start.
        """
        t0 = time.monotonic()
        proc = self._run("up")
        if proc.returncode != 0:
            raise MiniClusterError(
                f"cluster.sh up failed (exit {proc.returncode}):\n{proc.stderr.strip()}"
            )
        self.last_up_s = time.monotonic() - t0
        return self.last_up_s

    def down(self, purge: bool = False) -> None:
        """Cancel all jobs and stop every daemon; ``purge`` also deletes the state dir."""
        proc = self._run("down", *(["--purge"] if purge else []))
        if proc.returncode != 0:
            raise MiniClusterError(
                f"cluster.sh down failed (exit {proc.returncode}):\n{proc.stderr.strip()}"
            )

    @property
    def lease_s(self) -> int:
        """The submit plugin's lease (seconds) of the running cluster."""
        value = self.exported().get("MINI_SLURM_LEASE_S") or self._knobs.get(
            "MINI_SLURM_LEASE_S", "120"
        )
        return int(value)

    def stop_ctld(self) -> None:
        """Stop slurmctld only (its state is saved; slurmds and running jobs go on)."""
        self._checked("ctld", "stop")

    def kill_ctld(self) -> None:
        """SIGKILL slurmctld (a crash: no last state save; slurmds and running jobs go on)."""
        self._checked("ctld", "kill")

    def start_ctld(self) -> None:
        """Start slurmctld again from its saved state and wait until it answers."""
        self._checked("ctld", "start")

    def kill_node(self, name: str) -> None:
        """Crash node ``name``: its slurmd, slurmstepds and job processes SIGKILLed at once.
        Slurm marks it DOWN after ``SlurmdTimeout`` (``MINI_SLURM_SLURMD_TIMEOUT``)."""
        self._checked("node", "kill", name)

    def start_node(self, name: str) -> None:
        """Start the slurmd of node ``name`` again (``ReturnToService=2`` puts it back)."""
        self._checked("node", "start", name)

    def reconfigure(self) -> None:
        """``scontrol reconfigure``: slurmctld re-reads its config and recounts what every
        running job holds (clears the GPU accounting leak after a restart)."""
        proc = self._run_client("scontrol", "reconfigure", timeout_s=60)
        if proc.returncode != 0:
            raise MiniClusterError(f"scontrol reconfigure failed: {proc.stderr.strip()}")

    def _run_client(self, *argv: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
        """A Slurm client command run against this cluster (its environment), output captured;
        a non-zero exit is the caller's to judge."""
        return subprocess.run(
            list(argv), env=self.env, capture_output=True, text=True, timeout=timeout_s, check=False
        )

    def _checked(self, *args: str) -> None:
        proc = self._run(*args)
        if proc.returncode != 0:
            raise MiniClusterError(
                f"cluster.sh {' '.join(args)} failed (exit {proc.returncode}):\n"
                f"{proc.stderr.strip()}"
            )

    def status(self) -> dict[str, Any]:
        """Daemons (pid or None), whether all run, and the nodes as ``sinfo --json`` sees them.

        ``{"state_dir", "slurm_conf", "up", "daemons": {"munged": pid, "slurmctld": pid,
        "slurmd:<node>": pid}, "partitions", "nodes": [{"name", "state", "partitions",
        "gres", "gres_used", "cpus", "real_memory"}]}``; a node's ``state`` is its base state
        and flags in lower case, ``"idle"`` or ``"idle+drain"``, on every Slurm release.
        """
        daemons: dict[str, int | None] = {
            "munged": self._pid(self._state_dir / "munge" / "munged.pid"),
            "slurmctld": self._pid(self._state_dir / "run" / "slurmctld.pid"),
        }
        exported = self.exported()
        node_names = [s.split(":")[0] for s in exported.get("MINI_SLURM_NODES", "").split()]
        for name in node_names:
            daemons[f"slurmd:{name}"] = self._pid(self._state_dir / "run" / f"slurmd-{name}.pid")
        nodes: list[dict[str, Any]] = []
        if daemons["slurmctld"] is not None:
            nodes = self._sinfo_nodes()
        return {
            "state_dir": str(self._state_dir),
            "slurm_conf": str(self.slurm_conf),
            "up": bool(node_names) and all(p is not None for p in daemons.values()),
            "daemons": daemons,
            "partitions": {
                "managed": self.managed_partitions,
                "unmanaged": self.unmanaged_partitions,
            },
            "nodes": nodes,
        }

    def _pid(self, pid_file: Path) -> int | None:
        """The PID in ``pid_file`` if that process runs and belongs to this state dir."""
        try:
            pid = int(pid_file.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except (OSError, ValueError):
            return None
        return pid if f"{self._state_dir}/".encode() in cmdline else None

    def _sinfo_nodes(self) -> list[dict[str, Any]]:
        try:
            proc = self._run_client("sinfo", "--json", timeout_s=10)
            data = json.loads(proc.stdout) if proc.returncode == 0 else {}
        except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError):
            return []
        try:
            _, nodes = read_nodes(data, "sinfo --json")
        except (SlurmJsonError, ClusterMisreadError):
            return []
        return [
            {
                "name": n.name,
                "state": str(n.status).lower(),
                "partitions": list(n.partitions),
                "gres": n.gres,
                "gres_used": n.gres_used,
                "cpus": n.cpus,
                "real_memory": n.mem_mb,
            }
            for n in nodes
        ]
