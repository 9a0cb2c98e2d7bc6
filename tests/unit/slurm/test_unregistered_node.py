"""A node whose slurmd has not registered since slurmctld restarted (crashed meanwhile): Slurm
22.05.8 shows ``shard:0`` in its GRES and its state from before the restart (recorded:
``tests/golden/slurm/sinfo_ctld_restarted.json``), 24.11.5 shows state ``UNKNOWN`` and its
configured shards (``v24.11/scontrol_show_node_ctld_restarted.json``). Either way the node is
unavailable until it registers, and the other nodes keep sharing. The runner is the recorded
fake of ``tests/contract/recorded.py``."""

from __future__ import annotations

from pathlib import Path

from slurm_sched.model import Placement, Share
from slurm_sched.slurm.backend import SlurmBackend
from slurm_sched.slurm.gres import node_gpus
from slurm_sched.slurm.parse import read_nodes
from tests.contract.recorded import NOW, FakeRunner, recorded, squeue_with

#: a pending one-shard job under its lease (recorded job 28 changed)
SHARD_JOB = {"job_state": "PENDING", "state_reason": "BeginTime", "priority": 5, "comment": "",
             "tres_per_node": "gres:shard:1", "eligible_time": NOW + 100}  # fmt: skip


def test_shard_zero_reads_as_unregistered() -> None:
    assert node_gpus("gpu:a100:4,shard:0", "gpu").shards_unregistered
    assert not node_gpus("gpu:a100:4,shard:a100:32", "gpu").shards_unregistered
    assert not node_gpus("gpu:a100:4", "gpu").shards_unregistered  # no sharing configured
    _, nodes = read_nodes(recorded("sinfo_ctld_restarted.json"), "sinfo --json")
    by_name = {n.name: n for n in nodes}
    assert by_name["a100-1"].shards_unregistered and not by_name["a100-1"].available
    assert by_name["a100-1"].availability == "MIXED+GRES_UNREGISTERED"
    assert by_name["a100-2"].available and by_name["a100-2"].shards_per_gpu == 8
    _, nodes = read_nodes(recorded("v24.11/scontrol_show_node_ctld_restarted.json"),
                          "scontrol show nodes --json")
    by_name = {n.name: n for n in nodes}
    assert not by_name["a100-1"].available and not by_name["a100-1"].shards_unregistered
    assert by_name["a100-1"].availability == "UNKNOWN"
    assert by_name["a100-2"].available and by_name["a100-2"].shards_per_gpu == 8


def test_unregistered_node_is_unavailable_and_sharing_goes_on(tmp_path: Path) -> None:
    runner = FakeRunner(squeue_with(("50", SHARD_JOB)))
    runner.sinfo = recorded("sinfo_ctld_restarted.json")
    backend = SlurmBackend(runner, partitions=["sched"], settings_dir=tmp_path / "settings",
                           clock=lambda: NOW, min_query_interval_s=0.0, max_jobs_per_gpu=3)
    snap = backend.snapshot()
    assert snap.free_gpus["a100-1"] == ()
    assert backend.unavailable_nodes == {"a100-1": "MIXED+GRES_UNREGISTERED"}
    [seen] = [f for e, f in backend.take_notices() if e == "node_unavailable"]
    assert (seen["node"], seen["state"]) == ("a100-1", "MIXED+GRES_UNREGISTERED")
    # shard jobs still start elsewhere: the unregistered node's shard:0 is not the cluster's
    [r] = backend.apply([Share(job_id="50", placement=Placement.of({"a100-2": [0]}))])
    assert r.ok, r.error
    assert "update JobId=50 NodeList=a100-2" in runner.lines
