"""The Slurm view read from the output of every supported release (22.05 to 25.11).

- ``tests/golden/slurm/*.json``: recorded on the 22.05.8 mini cluster;
- ``tests/golden/slurm/v24.11/``: recorded on the 24.11.5 mini cluster (``squeue``, ``sinfo``,
  ``scontrol show job|node``, and slurmrestd's ``/jobs`` and ``/nodes`` in data_parser
  v0.0.40, v0.0.41 and v0.0.42, which 24.11 all serves);
- ``tests/golden/slurm/built/vXX.YY/``: built from each release's data_parser schema for the
  releases not run here, one cluster in every shape (their README says from what).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slurm_sched.slurm.document_errors import SlurmJsonError, SlurmMisreadError
from slurm_sched.slurm.parse import SlurmJob, SlurmNode, read_jobs, read_nodes
from slurm_sched.slurm.states import SlurmJobState
from slurm_sched.slurm.version import SlurmVersion, UnsupportedSlurmVersion

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "slurm"
RECORDED_2411 = GOLDEN / "v24.11"


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def nodes_of(path: Path) -> tuple[SlurmVersion, dict[str, SlurmNode]]:
    version, nodes = read_nodes(load(path), path.name)
    return version, {n.name: n for n in nodes}


def jobs_of(path: Path) -> tuple[SlurmVersion, dict[str, SlurmJob]]:
    version, jobs = read_jobs(load(path), path.name)
    return version, {j.job_id: j for j in jobs}


# ---------------------------------------------------------------------- 24.11, recorded
#: name -> (state, available, GPUs, type, used GPU indices): the recording's cluster had a
#: 2-GPU job and one GPU of a 2-node job on a100-1, a suspended job and the other GPU of the
#: 2-node job on a100-2, v100-1 drained, a 3-shard job on GPU 0 of v100-2
NODES_2411 = {
    "a100-1": ("MIXED", True, 4, "a100", (0, 1, 2)),
    "a100-2": ("MIXED", True, 4, "a100", (0, 1)),
    "v100-1": ("IDLE+DRAIN", False, 4, "v100", ()),
    "v100-2": ("MIXED", True, 4, "v100", (0,)),
}
#: job -> (state as 22.05 prints it, GPUs held per node, time limit s, held, restarts)
JOBS_2411 = {
    "11": ("RUNNING", {"a100-1": (0, 1)}, 3600.0, False, 0),
    "12": ("RUNNING", {"v100-2": (0,)}, None, False, 0),
    "13": ("PENDING", {}, None, False, 0),
    "14": ("PENDING", {}, None, True, 0),
    "15": ("COMPLETED", {}, None, False, 0),
    "16": ("SUSPENDED", {"a100-2": (0,)}, None, False, 0),
    "17": ("PENDING", {}, None, False, 1),
    "18": ("RUNNING", {"a100-1": (2,), "a100-2": (1,)}, None, False, 0),
}


@pytest.mark.parametrize(
    "name",
    [
        "sinfo.json",
        "sinfo_v0.0.40.json",
        "sinfo_v0.0.41.json",
        "scontrol_show_node.json",
        "restd_v0.0.40_nodes.json",
        "restd_v0.0.41_nodes.json",
        "restd_v0.0.42_nodes.json",
    ],
)
def test_recorded_2411_nodes(name: str) -> None:
    version, nodes = nodes_of(RECORDED_2411 / name)
    assert version == SlurmVersion(24, 11, 5)
    assert set(nodes) == set(NODES_2411)
    for node_name, (state, available, gpus, gpu_type, used) in NODES_2411.items():
        n = nodes[node_name]
        assert (str(n.status), n.available, n.num_gpus, n.gpu_type, n.used_gpus) == (
            state, available, gpus, gpu_type, used,
        ), node_name
        assert n.partitions == ("sched", "direct") and n.shards_per_gpu == 8
        assert (n.cpus, n.mem_mb) == (16, 64000)
    assert nodes["v100-1"].reason == "maintenance"


@pytest.mark.parametrize(
    "name",
    [
        "squeue.json",
        "squeue_v0.0.40.json",
        "squeue_v0.0.41.json",
        "scontrol_show_job.json",
        "restd_v0.0.40_jobs.json",
        "restd_v0.0.41_jobs.json",
        "restd_v0.0.42_jobs.json",
    ],
)
def test_recorded_2411_jobs(name: str) -> None:
    version, jobs = jobs_of(RECORDED_2411 / name)
    assert version == SlurmVersion(24, 11, 5)
    for job_id, (state, gpus, limit, held, restarts) in JOBS_2411.items():
        j = jobs[job_id]
        assert j.state is SlurmJobState(state), job_id
        assert (j.gpu_slots(), j.time_limit_s, j.held, j.restart_cnt) == (
            gpus, limit, held, restarts,
        ), job_id
    shard = jobs["12"]
    assert [(a.node, a.gpus, a.shards) for a in shard.alloc] == [("v100-2", (0,), 3)]
    assert shard.gpu_request.kind == "shard"
    assert jobs["11"].gpu_request.gpu_type == "a100" and jobs["11"].tres_per_node.startswith(
        "gres/gpu"
    )
    assert jobs["13"].partition == "sched" and jobs["13"].comment.startswith('{"v":1')
    assert jobs["15"].exit_code == 0 and jobs["15"].end_time_s > jobs["15"].start_time_s > 0
    assert jobs["18"].nodes == ("a100-1", "a100-2") and jobs["18"].node_count == 2


# ---------------------------------------------------------------------- built releases
BUILT = GOLDEN / "built"
#: name -> (state, available, GPUs, managed type, used GPU indices, reserved GPU indices)
NODES_BUILT = {
    "a100-1": ("MIXED", True, 4, "a100", (0, 1), ()),
    "a100-2": ("IDLE+DRAIN", False, 4, "a100", (), ()),
    "v100-1": ("DOWN+NOT_RESPONDING", False, 4, "v100", (), ()),
    "v100-2": ("MIXED", True, 4, "v100", (0,), ()),
    "h-1": ("IDLE", True, 6, "h200", (), (0, 1)),
    "mig-1": ("MIXED", True, 21, "1g.10gb", (0, 1, 2), ()),
    "cpu-1": ("IDLE", True, 0, "gpu", (), ()),
    "pw-1": ("IDLE+POWERED_DOWN", False, 8, "a100", (), ()),
}
#: job -> (state as 22.05 prints it, base state, GPUs held per node, held, restarts)
JOBS_BUILT = {
    "101": ("RUNNING", "RUNNING", {"a100-1": (0, 1)}, False, 0),
    "102": ("PENDING", "PENDING", {}, False, 0),
    "103": ("PENDING", "PENDING", {}, True, 0),
    "104": ("COMPLETED", "COMPLETED", {}, False, 0),
    "105": ("REQUEUED", "PENDING", {}, False, 1),
    "106": ("RUNNING", "RUNNING", {"v100-2": (0,)}, False, 0),
    "107": ("RUNNING", "RUNNING", {"mig-1": (0, 1, 2)}, False, 0),
    "108": ("RUNNING", "RUNNING", {}, False, 0),
    "109": ("COMPLETING", "CANCELLED", {}, False, 0),
}
RELEASES = {"23.02": "v0.0.39", "23.11": "v0.0.40", "24.05": "v0.0.41", "25.05": "v0.0.43",
            "25.11": "v0.0.44"}


@pytest.mark.parametrize("release", sorted(RELEASES))
@pytest.mark.parametrize(
    "name", ["sinfo.json", "scontrol_show_node.json", "restd_nodes.json"]
)
def test_built_nodes_of_every_release(release: str, name: str) -> None:
    version, nodes = nodes_of(BUILT / f"v{release}" / name)
    assert version.release == release and version.data_parser == RELEASES[release]
    assert set(nodes) == set(NODES_BUILT)
    for node_name, (state, available, gpus, gpu_type, used, reserved) in NODES_BUILT.items():
        n = nodes[node_name]
        assert (str(n.status), n.available, n.num_gpus, n.gpu_type, n.used_gpus,
                n.reserved_gpus) == (state, available, gpus, gpu_type, used, reserved), node_name
    assert nodes["h-1"].gpu_types == (("h100", 2), ("h200", 4))
    assert nodes["a100-1"].partitions == ("sched", "direct")


@pytest.mark.parametrize("release", sorted(RELEASES))
@pytest.mark.parametrize("name", ["squeue.json", "scontrol_show_job.json", "restd_jobs.json"])
def test_built_jobs_of_every_release(release: str, name: str) -> None:
    version, jobs = jobs_of(BUILT / f"v{release}" / name)
    assert version.release == release
    assert set(jobs) == set(JOBS_BUILT)
    for job_id, (state, base, gpus, held, restarts) in JOBS_BUILT.items():
        j = jobs[job_id]
        if release == "23.02" and job_id == "109":
            base = "UNKNOWN"  # one string up to 23.02: "COMPLETING" hides the base state
        assert (j.state.value, j.base_state.value, j.gpu_slots(), j.held, j.restart_cnt) == (
            state, base, gpus, held, restarts,
        ), job_id
    assert jobs["101"].time_limit_s == 3600.0 and jobs["102"].time_limit_s is None
    assert jobs["101"].gpu_request.gpu_type == "a100" and jobs["101"].gpu_request.per_node == 2
    assert [(a.node, a.shards) for a in jobs["106"].alloc] == [("v100-2", 3)]
    assert jobs["107"].gpu_request.gpu_type == "1g.10gb"
    assert jobs["104"].exit_code == 0 and jobs["101"].start_time_s > jobs["101"].submit_time_s


# ---------------------------------------------------------------------- 22.05, recorded
def test_recorded_2205_nodes_and_jobs_declare_their_release() -> None:
    version, nodes = nodes_of(GOLDEN / "sinfo.json")
    assert version == SlurmVersion(22, 5, 8)
    assert all(n.state.value in ("IDLE", "MIXED", "ALLOCATED") for n in nodes.values())
    version, jobs = jobs_of(GOLDEN / "squeue_mixed.json")
    assert version == SlurmVersion(22, 5, 8)
    assert {j.state for j in jobs.values()} <= set(SlurmJobState)


# ---------------------------------------------------------------------- bad documents
def _doc_2411(name: str) -> dict[str, Any]:
    return load(RECORDED_2411 / name)


def test_job_without_an_id_names_the_field_and_the_release() -> None:
    doc = _doc_2411("squeue.json")
    del doc["jobs"][3]["job_id"]
    with pytest.raises(SlurmMisreadError) as info:
        read_jobs(doc, "jobs.json")
    assert str(info.value) == "jobs.json: jobs[3]: field 'job_id' is missing (Slurm 24.11.5)"


def test_job_state_of_the_wrong_kind_names_the_job() -> None:
    doc = _doc_2411("squeue.json")
    doc["jobs"][0]["job_state"] = {"current": ["RUNNING"]}
    with pytest.raises(SlurmMisreadError, match=r"job 1\): field 'job_state' = .*24\.11\.5"):
        read_jobs(doc, "jobs.json")


def test_node_without_a_name_and_grouped_sinfo_without_nodes() -> None:
    doc = _doc_2411("scontrol_show_node.json")
    del doc["nodes"][1]["name"]
    with pytest.raises(SlurmMisreadError, match=r"nodes\[1\]: field 'name' is missing"):
        read_nodes(doc, "nodes.json")
    doc = _doc_2411("sinfo.json")
    doc["sinfo"][0]["nodes"] = {"total": 1}
    with pytest.raises(SlurmMisreadError, match=r"sinfo\[0\]\.nodes\.nodes' is missing"):
        read_nodes(doc, "sinfo.json")


def test_unreadable_gres_is_refused_not_read_as_no_gpu() -> None:
    doc = _doc_2411("scontrol_show_node.json")
    doc["nodes"][0]["gres"] = "gpu:a100:4,&&&"
    with pytest.raises(SlurmMisreadError, match=r"\(a100-1\): field 'gres' = .*Slurm 24\.11\.5"):
        read_nodes(doc, "nodes.json")


def test_document_without_its_list_or_version_or_of_an_unsupported_release() -> None:
    with pytest.raises(SlurmMisreadError, match="field 'jobs' is missing"):
        read_jobs({"meta": _doc_2411("squeue.json")["meta"]}, "jobs.json")
    with pytest.raises(SlurmMisreadError, match=r"field 'meta\.slurm\.version' is missing"):
        read_jobs({"jobs": []}, "jobs.json")
    doc = _doc_2411("squeue.json")
    doc["meta"]["slurm"]["version"] = {"major": "26", "minor": "05", "micro": "0"}
    with pytest.raises(UnsupportedSlurmVersion, match=r"Slurm 26\.05\.0 is not supported"):
        read_jobs(doc, "jobs.json")


def test_errors_reported_by_slurm_are_not_a_misread() -> None:
    doc = _doc_2411("squeue.json")
    doc["errors"] = [{"description": "Unable to contact slurm controller", "error_number": 1}]
    with pytest.raises(SlurmJsonError) as info:
        read_jobs(doc, "squeue --json")
    assert not isinstance(info.value, SlurmMisreadError)
