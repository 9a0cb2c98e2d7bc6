"""``slurm-sched snapshot --from-json JOBS --nodes NODES``: what the scheduler would see of a
cluster recorded in JSON files, from the outputs of each supported release."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slurm_sched.cli import main
from slurm_sched.model import JobState
from slurm_sched.service.snapshot_io import load_snapshot

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "slurm"
V2411 = GOLDEN / "v24.11"

#: the 24.11 recording (tests/unit/slurm/test_version.py): GPUs 0-2 of a100-1, 0-1 of a100-2
#: and 0 of v100-2 (a shard job) are held; v100-1 is drained
FREE_2411 = {"a100-1": [3], "a100-2": [2, 3], "v100-1": [], "v100-2": [1, 2, 3]}


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def snapshot_of(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, jobs: Path, nodes: Path, *extra: str
) -> dict[str, Any]:
    out = tmp_path / "snap.json"
    rc, _, err = run_cli(capsys, "snapshot", "--from-json", str(jobs), "--nodes", str(nodes),
                         "--out", str(out), *extra)
    assert rc == 0, err
    assert "written to" in err
    return json.loads(out.read_text())


@pytest.mark.parametrize(
    ("jobs", "nodes"),
    [
        ("squeue.json", "scontrol_show_node.json"),
        ("squeue.json", "sinfo.json"),
        ("scontrol_show_job.json", "sinfo_v0.0.40.json"),
        ("squeue_v0.0.41.json", "sinfo_v0.0.41.json"),
        ("restd_v0.0.40_jobs.json", "restd_v0.0.40_nodes.json"),
        ("restd_v0.0.41_jobs.json", "restd_v0.0.41_nodes.json"),
        ("restd_v0.0.42_jobs.json", "restd_v0.0.42_nodes.json"),
    ],
)
def test_recorded_2411_cluster_as_the_scheduler_sees_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, jobs: str, nodes: str
) -> None:
    doc = snapshot_of(capsys, tmp_path, V2411 / jobs, V2411 / nodes, "--partition", "sched")
    assert doc["slurm_version"] == "24.11.5" and doc["partitions"] == ["sched"]
    assert {n["name"]: (n["num_gpus"], n["gpu_type"]) for n in doc["cluster"]["nodes"]} == {
        "a100-1": (4, "a100"), "a100-2": (4, "a100"), "v100-1": (4, "v100"), "v100-2": (4, "v100"),
    }
    assert doc["free_gpus"] == FREE_2411
    # the one unfinished job of the managed partition: pending under its lease
    assert [(j["spec"]["job_id"], j["state"]) for j in doc["jobs"]] == [("13", "pending")]
    # recorded after the last thing that happened in it (a start, an end), not at a forecast
    assert 1.7e9 < doc["now_s"] < 1.8e9


def test_every_partition_by_default_and_the_file_reads_back(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    snapshot_of(capsys, tmp_path, V2411 / "squeue.json", V2411 / "scontrol_show_node.json")
    sf = load_snapshot(tmp_path / "snap.json")
    assert sf.partitions == ("direct", "sched")
    snap = sf.snapshot
    running = {v.job_id for v in snap.jobs if v.state is JobState.RUNNING}
    assert running == {"11", "12", "18"}
    assert snap.by_id["16"].state is JobState.SUSPENDED
    assert snap.by_id["18"].placement is not None
    assert snap.by_id["18"].placement.as_dict == {"a100-1": (2,), "a100-2": (1,)}


def test_recorded_2205_cluster(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    doc = snapshot_of(capsys, tmp_path, GOLDEN / "squeue_mixed.json", GOLDEN / "sinfo.json",
                      "--partition", "sched")
    assert doc["slurm_version"] == "22.05.8"
    assert len(doc["cluster"]["nodes"]) == 4


@pytest.mark.parametrize("release", ["23.02", "23.11", "24.05", "25.05", "25.11"])
@pytest.mark.parametrize(
    ("jobs", "nodes"),
    [("squeue.json", "sinfo.json"), ("scontrol_show_job.json", "scontrol_show_node.json"),
     ("restd_jobs.json", "restd_nodes.json")],
)
def test_built_cluster_of_every_release_as_the_scheduler_sees_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, release: str, jobs: str, nodes: str
) -> None:
    """Drained, down and powered-down nodes have no free GPU; GPUs held by jobs are not free;
    the h100s of the two-type node h-1 are reserved (its h200s are managed); MIG slices count."""
    built = GOLDEN / "built" / f"v{release}"
    doc = snapshot_of(capsys, tmp_path, built / jobs, built / nodes, "--partition", "sched")
    assert doc["slurm_version"].startswith(release + ".")
    assert {n["name"]: (n["num_gpus"], n["gpu_type"]) for n in doc["cluster"]["nodes"]} == {
        "a100-1": (4, "a100"), "a100-2": (4, "a100"), "v100-1": (4, "v100"),
        "v100-2": (4, "v100"), "h-1": (6, "h200"), "mig-1": (21, "1g.10gb"), "pw-1": (8, "a100"),
    }
    assert doc["free_gpus"] == {
        "a100-1": [2, 3], "a100-2": [], "v100-1": [], "v100-2": [1, 2, 3], "h-1": [2, 3, 4, 5],
        "mig-1": list(range(3, 21)), "pw-1": [],
    }


# ---------------------------------------------------------------------- refusals
def _fails(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    rc, _, err = run_cli(capsys, "snapshot", "--out", "/nonexistent/never.json", *args)
    assert rc == 2, err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err.strip()


def test_truncated_file_is_one_line_naming_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cut = tmp_path / "jobs.json"
    cut.write_text((V2411 / "squeue.json").read_text()[:5000])
    err = _fails(capsys, "--from-json", str(cut), "--nodes", str(V2411 / "sinfo.json"))
    assert err.startswith(f"error: {cut}: not valid JSON at line ")


def test_missing_field_names_file_field_and_release(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    doc = json.loads((V2411 / "squeue.json").read_text())
    del doc["jobs"][0]["job_id"]
    bad = tmp_path / "jobs.json"
    bad.write_text(json.dumps(doc))
    err = _fails(capsys, "--from-json", str(bad), "--nodes", str(V2411 / "sinfo.json"))
    assert err == f"error: {bad}: jobs[0]: field 'job_id' is missing (Slurm 24.11.5)"


def test_unsupported_release_is_named_with_the_range(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    doc = json.loads((V2411 / "scontrol_show_node.json").read_text())
    doc["meta"]["slurm"]["version"] = {"major": "21", "minor": "08", "micro": "8"}
    bad = tmp_path / "nodes.json"
    bad.write_text(json.dumps(doc))
    err = _fails(capsys, "--from-json", str(V2411 / "squeue.json"), "--nodes", str(bad))
    assert err == (
        f"error: {bad}: Slurm 21.08.8 is not supported (supported: 22.05 to 25.11)"
    )


def test_files_of_two_releases_and_half_an_invocation_are_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _fails(capsys, "--from-json", str(V2411 / "squeue.json"),
                 "--nodes", str(GOLDEN / "sinfo.json"))
    assert "field 'meta.slurm.version' = '22.05.8'" in err and "Slurm 24.11.5" in err
    err = _fails(capsys, "--from-json", str(V2411 / "squeue.json"))
    assert "--from-json and --nodes go together" in err


def test_no_node_in_the_partition_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    err = _fails(capsys, "--from-json", str(V2411 / "squeue.json"),
                 "--nodes", str(V2411 / "sinfo.json"), "--partition", "gpu")
    assert err.startswith("error: no node in the managed partitions ['gpu']")
    assert err.endswith("4 node(s) in all, Slurm 24.11.5)")
