"""Integration tests against a real Slurm mini cluster started on this machine.

Every test in this directory is marked ``integration``. The ``slurm_cluster`` fixture starts the
cluster once per session (``slurm_sched/slurm/cluster.sh up``: installs the Slurm packages if
missing, a few seconds otherwise) and stops and deletes it at the end. It needs root, because
slurmd runs jobs as their users; without root these tests are skipped with that reason. Set
``MINI_SLURM_KEEP=1`` to leave the cluster running after the session (for debugging).

The tests must tolerate jobs of other sessions sharing the cluster: they cancel only their own
jobs and never assume the whole cluster is free.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurm_sched.slurm.cluster import MiniCluster
from tests.integration.daemon_run import DaemonProcess, write_config

HERE = Path(__file__).parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "integration: needs the real mini Slurm cluster (started by the test session)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)


def _live_sessions(sessions: Path) -> list[int]:
    """PIDs of test sessions registered in ``sessions`` that still run (stale files removed)."""
    live = []
    for entry in sessions.glob("[0-9]*"):
        pid = int(entry.name)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            entry.unlink(missing_ok=True)
            continue
        except PermissionError:
            pass
        live.append(pid)
    return live


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[MiniCluster]:
    """The running mini cluster; pass ``slurm_cluster.env`` to every Slurm client call.

    Several pytest sessions may share one cluster (same state dir): each registers its PID in
    ``<state>/sessions``, and the last one to finish stops and deletes the cluster, but only if
    a test session started it. A cluster someone started by hand is left running. For a private
    cluster set ``MINI_SLURM_STATE`` and free ports (``MINI_SLURM_CTLD_PORT``,
    ``MINI_SLURM_SLURMD_PORT``).
    """
    if os.geteuid() != 0:
        pytest.skip("the Slurm mini cluster needs root (slurmd runs jobs as their users)")
    cluster = MiniCluster()
    already_up = cluster.status()["up"]
    cluster.up()
    sessions = cluster.state_dir / "sessions"
    sessions.mkdir(exist_ok=True)
    if not already_up:
        (sessions / "started-by-tests").touch()
    me = sessions / str(os.getpid())
    me.touch()
    try:
        yield cluster
    finally:
        me.unlink(missing_ok=True)
        last_out = not _live_sessions(sessions)
        started_by_tests = (sessions / "started-by-tests").exists()
        if last_out and started_by_tests and os.environ.get("MINI_SLURM_KEEP") != "1":
            cluster.down(purge=True)


@pytest.fixture
def daemon(slurm_cluster: MiniCluster, tmp_path: Path) -> Iterator[DaemonProcess]:
    """``slurm-sched run`` (fifo, short lease, ``tests/integration/daemon_run.py``), not started
    yet; killed at the end of the test if still running."""
    d = DaemonProcess(write_config(tmp_path / "config.toml", slurm_cluster), tmp_path)
    try:
        yield d
    finally:
        if d.alive:
            d.kill()
