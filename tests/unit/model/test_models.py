"""Models: parsing, validation and derived values."""

import pytest
from pydantic import ValidationError

from slurm_sched.errors import ClusterSpecError
from slurm_sched.model import (
    ACTION_ADAPTER,
    ClusterSnapshot,
    JobState,
    JobView,
    Placement,
    Preempt,
    Start,
    parse_cluster_spec,
)
from tests.builders import job


def test_cluster_spec_heterogeneous_names_and_counts():
    c = parse_cluster_spec("3x8:v100,6x8:p100")
    assert [n.name for n in c.nodes[:4]] == ["v100-1", "v100-2", "v100-3", "p100-1"]
    assert c.total_gpus == 72
    assert c.gpu_types == ("v100", "p100")
    assert c.gpus_of_type("p100") == 48


def test_cluster_spec_sets_cpus_and_memory_per_node():
    c = parse_cluster_spec("2x8:a800/96cpu/1600gb,1x4/8cpu,1x2:t4/64.5gb")
    assert [(n.name, n.num_gpus, n.cpus, n.mem_gb) for n in c.nodes] == [
        ("a800-1", 8, 96, 1600.0), ("a800-2", 8, 96, 1600.0), ("node-1", 4, 8, 256.0),
        ("t4-1", 2, 32, 64.5)]


@pytest.mark.parametrize("bad", ["", "16", "16x", "x4", "0x4", "2x0", "2x4:", "2x4,,1x8", "a x b",
                                 "2x4/0cpu", "2x4/0gb", "2x4/1600gb/96cpu", "2x4/96"])
def test_cluster_spec_errors_name_the_part(bad):
    with pytest.raises(ClusterSpecError) as e:
        parse_cluster_spec(bad)
    assert "cluster" in str(e.value)


def test_placement_sorts_and_rejects_duplicates():
    p = Placement.of({"n1": [3, 1], "n2": [0]})
    assert p.as_dict == {"n1": (1, 3), "n2": (0,)}
    assert p.num_gpus == 3
    assert list(p.slots()) == [("n1", 1), ("n1", 3), ("n2", 0)]
    with pytest.raises(ValidationError):
        Placement.of({"n1": [1, 1]})


def test_actions_round_trip_through_the_discriminated_union():
    a = Start(job_id="j", placement=Placement.of({"n": [0]}), reason="x")
    assert ACTION_ADAPTER.validate_python(a.model_dump()) == a
    assert ACTION_ADAPTER.validate_json(Preempt(job_id="j").model_dump_json()).kind == "preempt"


def test_jobspec_rejects_bad_values():
    with pytest.raises(ValidationError):
        job("a", 0, 0, 10)
    with pytest.raises(ValidationError):
        job("a", 0, 1, -1)


def test_jobview_lazy_progress_respects_stall_and_cap():
    v = JobView(spec=job("a", 0, 2, 100), state=JobState.RUNNING, accounted_at_s=10,
                executed_s=5, work_done_s=5, rate=2.0, stall_until_s=20)
    assert v.work_done_at(15) == 5  # still stalled
    assert v.work_done_at(30) == 25  # 10 s at rate 2 after the stall
    assert v.work_done_at(1000) == 100  # capped at the duration
    assert v.executed_at(30) == 25
    assert v.attained_gpu_s(30) == 50
    assert v.remaining_s(30) == 75


def test_snapshot_free_gpus_and_occupancy():
    c = parse_cluster_spec("2x2")
    run = JobView(spec=job("a", 0, 1, 10), state=JobState.RUNNING,
                  placement=Placement.of({"node-2": [1]}))
    pend = JobView(spec=job("b", 0, 1, 10))
    s = ClusterSnapshot(now_s=0, cluster=c, jobs=(run, pend))
    assert s.free_gpus == {"node-1": (0, 1), "node-2": (0,)}
    assert s.occupancy == {("node-2", 1): ("a",)}
    assert s.num_free_gpus == 3
    assert [j.job_id for j in s.pending] == ["b"]
