"""What the Slurm backend does when Slurm marks a node DOWN under running jobs (a node crash):
the fresh ``squeue`` that shows a job of the node requeued or ended ``NODE_FAIL`` makes it read
the node list again in the same snapshot, whatever ``sinfo_refresh_s`` says, so no placement is
offered or accepted on the lost node from that cycle on. The runner (the process boundary) is the
recorded fake of ``tests/contract/recorded.py``."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from slurm_sched.model import JobState, Placement, Start
from slurm_sched.slurm.backend import SlurmBackend
from tests.contract.recorded import NOW, FakeRunner, squeue_with

#: the shard jobs of the recording (31, 39) make the backend read the nodes with every fresh
#: squeue anyway (query.py); without them the node list is reused for sinfo_refresh_s
NO_SHARDS = ("31", "39")
#: job 30 (4+1 v100 GPUs on v100-1 and v100-2) requeued by Slurm after v100-1 went down
REQUEUED = ("30", {"job_state": "PENDING", "state_reason": "BeginTime", "restart_cnt": 1,
                   "nodes": "", "gres_detail": [], "eligible_time": NOW + 121})  # fmt: skip
#: job 29 (1 a100 GPU on a100-1, --no-requeue) ended by the loss of a100-1
NODE_FAILED = ("29", {"job_state": "NODE_FAIL", "state_reason": "NodeDown", "end_time": NOW})


def down(sinfo: dict[str, Any], name: str) -> dict[str, Any]:
    """``sinfo --json`` with node ``name`` as Slurm shows it after SlurmdTimeout."""
    doc = copy.deepcopy(sinfo)
    [node] = [n for n in doc["nodes"] if n["name"] == name]
    node.update(state="down", state_flags=["NOT_RESPONDING"], reason="Not responding")
    return doc


@pytest.mark.parametrize(("node", "change"), [("v100-1", REQUEUED), ("a100-1", NODE_FAILED)])
def test_a_job_lost_with_its_node_makes_the_node_list_read_at_once(
    tmp_path: Path, node: str, change: tuple[str, dict[str, Any]]
) -> None:
    runner = FakeRunner(squeue_with(drop=NO_SHARDS))
    backend = SlurmBackend(
        runner,
        partitions=["sched"],
        settings_dir=tmp_path / "settings",
        clock=lambda: NOW,
        min_query_interval_s=0.0,
        sinfo_refresh_s=3600.0,
    )
    backend.snapshot()
    assert backend.unavailable_nodes == {}
    runner.sinfo = down(runner.sinfo, node)
    # nothing lost yet: the node list is reused (an idle node's loss waits for sinfo_refresh_s)
    backend.snapshot()
    assert backend.unavailable_nodes == {}
    backend.take_notices()
    runner.squeue = squeue_with(change, drop=NO_SHARDS)
    snap = backend.snapshot()
    assert backend.unavailable_nodes == {node: "DOWN+NOT_RESPONDING"}
    assert snap.free_gpus[node] == ()
    [seen] = [f for e, f in backend.take_notices() if e == "node_unavailable"]
    assert (seen["node"], seen["reason"]) == (node, "Not responding")
    # the requeued job is the policy's again, but not on the lost node
    if change is REQUEUED:
        assert snap.job("30").state is JobState.PENDING
    [r] = backend.apply([Start(job_id="38", placement=Placement.of({node: [0]}))])
    assert not r.ok, r


def test_only_a_job_lost_with_its_node_forces_the_read(tmp_path: Path) -> None:
    """Jobs that end as usual, start or stay pending do not make the node list read again."""
    runner = FakeRunner(squeue_with(drop=NO_SHARDS))
    backend = SlurmBackend(
        runner,
        partitions=["sched"],
        settings_dir=tmp_path / "settings",
        clock=lambda: NOW,
        min_query_interval_s=0.0,
        sinfo_refresh_s=3600.0,
    )
    backend.snapshot()
    runner.sinfo = down(runner.sinfo, "a100-1")
    ended = {"job_state": "COMPLETED", "end_time": NOW}
    started = {"job_state": "RUNNING", "nodes": "a100-1", "start_time": NOW}
    runner.squeue = squeue_with(("29", ended), ("38", started), drop=NO_SHARDS)
    backend.snapshot()
    assert backend.unavailable_nodes == {}
