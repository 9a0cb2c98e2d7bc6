"""The cluster from --cluster, a sinfo --json file, or the live sinfo."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from slurm_sched.advisor.cluster_shape import cluster_shape
from slurm_sched.errors import ClusterSpecError, InputError, SlurmCommandError

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "slurm"


def test_spec_overrides_the_nodes_file() -> None:
    shape = cluster_shape(spec="2x8:a100", nodes_path=GOLDEN / "sinfo.json")
    assert shape.cluster.total_gpus == 16 and shape.source == "--cluster 2x8:a100"
    assert "2 nodes, 16 GPUs (a100)" in shape.describe()
    with pytest.raises(ClusterSpecError):
        cluster_shape(spec="2y8")


@pytest.mark.parametrize("name", ["sinfo.json", "v24.11/sinfo.json"])
def test_sinfo_file_and_partition(name: str) -> None:
    shape = cluster_shape(nodes_path=GOLDEN / name)
    assert shape.cluster.total_gpus == 16
    assert set(shape.cluster.gpu_types) == {"a100", "v100"}
    assert cluster_shape(nodes_path=GOLDEN / name, partition="sched").cluster.total_gpus == 16
    with pytest.raises(InputError, match="no node with a GPU in partition 'nope'"):
        cluster_shape(nodes_path=GOLDEN / name, partition="nope")


def test_bad_nodes_file(tmp_path: Path) -> None:
    bad = tmp_path / "n.json"
    bad.write_text("{")
    with pytest.raises(InputError, match="not JSON"):
        cluster_shape(nodes_path=bad)
    with pytest.raises(InputError, match="cannot read"):
        cluster_shape(nodes_path=tmp_path / "missing.json")


def _runner(stdout: str = "", rc: int = 0, exc: Exception | None = None) -> Any:
    def run(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        assert argv == ["sinfo", "--json"]
        if exc is not None:
            raise exc
        return subprocess.CompletedProcess(argv, rc, stdout, "sinfo: error: x")
    return run


def test_live_sinfo() -> None:
    text = (GOLDEN / "sinfo.json").read_text()
    assert cluster_shape(run=_runner(text)).cluster.total_gpus == 16
    with pytest.raises(InputError, match="cannot run sinfo"):
        cluster_shape(run=_runner(exc=FileNotFoundError(2, "No such file", "sinfo")))
    with pytest.raises(SlurmCommandError, match="exited 1"):
        cluster_shape(run=_runner(rc=1))
