"""GRES strings, job and node states and release numbers of every supported Slurm release."""

from __future__ import annotations

import pytest

from slurm_sched.slurm.gres import (
    GresItem,
    node_gpus,
    parse_gres,
    used_gpu_indices,
)
from slurm_sched.slurm.states import (
    SlurmJobState,
    SlurmNodeState,
    job_state,
    node_state,
)
from slurm_sched.slurm.version import (
    SlurmVersion,
    UnsupportedSlurmVersion,
    declared_data_parser,
    declared_version,
    parse_release,
    version_of,
)


# ---------------------------------------------------------------------- GRES
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gres/gpu:h100:1", [GresItem("gpu", "h100", 1)]),
        ("gpu:1g.10gb:21", [GresItem("gpu", "1g.10gb", 21)]),
        ("tmp:300G", [GresItem("tmp", None, 300 * 1024**3)]),
        ("gpu:a100:4(S:0-1)", [GresItem("gpu", "a100", 4)]),
        ("gpu:a100:0(IDX:N/A)", [GresItem("gpu", "a100", 0, ())]),
        ("shard:v100:3(3/8,0/8,2/8,0/8)", [GresItem("shard", "v100", 3, (0, 2))]),
        (
            "gpu:h100:2(S:0),gpu:h200:4(S:1),tmp:300G",
            [
                GresItem("gpu", "h100", 2),
                GresItem("gpu", "h200", 4),
                GresItem("tmp", None, 300 << 30),
            ],
        ),
    ],
)
def test_gres_forms_of_every_release(text: str, expected: list[GresItem]) -> None:
    assert parse_gres(text) == expected


def test_node_with_two_gpu_types_manages_the_larger_and_reserves_the_other() -> None:
    gpus = node_gpus("gpu:h100:2(S:0),gpu:h200:4(S:1),tmp:300G", "gpu")
    assert (gpus.count, gpus.gpu_type, gpus.managed) == (6, "h200", 4)
    assert gpus.types == (("h100", 2), ("h200", 4))
    assert gpus.reserved == (0, 1)  # Slurm's indices of the h100s, listed first


def test_node_gpu_type_ties_go_to_the_first_listed_and_mig_slices_are_gpus() -> None:
    tie = node_gpus("gpu:h100:4,gpu:a100:4", "gpu")
    assert (tie.gpu_type, tie.reserved) == ("h100", (4, 5, 6, 7))
    mig = node_gpus("gpu:1g.10gb:21", "gpu")
    assert (mig.count, mig.gpu_type, mig.reserved) == (21, "1g.10gb", ())
    plain = node_gpus("gpu:4,shard:32", "gpu")
    assert (plain.count, plain.gpu_type, plain.shards_per_gpu) == (4, "gpu", 8)
    assert node_gpus("tmp:300G", "gpu").count == 0
    with pytest.raises(ValueError, match="cannot parse GRES item"):
        node_gpus("gpu:a100:4,???", "gpu")


def test_used_gpus_from_both_shard_forms() -> None:
    assert used_gpu_indices("gpu:a100:2(IDX:0-1),shard:a100:3(IDX:3)") == (0, 1, 3)
    assert used_gpu_indices("gpu:v100:0(IDX:N/A),shard:v100:3(3/8,0/8,0/8,1/8)") == (0, 3)
    assert used_gpu_indices("garbage(((") == ()


# ---------------------------------------------------------------------- states
@pytest.mark.parametrize(
    ("value", "state", "base"),
    [
        ("RUNNING", SlurmJobState.RUNNING, SlurmJobState.RUNNING),
        (["RUNNING"], SlurmJobState.RUNNING, SlurmJobState.RUNNING),
        ("COMPLETING", SlurmJobState.COMPLETING, SlurmJobState.UNKNOWN),
        (["CANCELLED", "COMPLETING"], SlurmJobState.COMPLETING, SlurmJobState.CANCELLED),
        ("REQUEUED", SlurmJobState.REQUEUED, SlurmJobState.PENDING),
        (["PENDING", "REQUEUED"], SlurmJobState.REQUEUED, SlurmJobState.PENDING),
        (["PENDING", "REQUEUE_HOLD"], SlurmJobState.REQUEUE_HOLD, SlurmJobState.PENDING),
        ("CONFIGURING", SlurmJobState.CONFIGURING, SlurmJobState.RUNNING),
        (["SUSPENDED"], SlurmJobState.SUSPENDED, SlurmJobState.SUSPENDED),
        (["NEW_IN_2027"], SlurmJobState.UNKNOWN, SlurmJobState.UNKNOWN),
    ],
)
def test_job_state_in_both_forms(value: object, state: SlurmJobState, base: SlurmJobState) -> None:
    read = job_state(value)
    assert (read.state, read.base) == (state, base)
    assert read.state == state.value  # compares as the string Slurm prints


@pytest.mark.parametrize("bad", [None, 3, [], [""], ["RUNNING", 1], {"state": "RUNNING"}])
def test_job_state_of_the_wrong_kind_is_refused(bad: object) -> None:
    with pytest.raises(ValueError):
        job_state(bad)


@pytest.mark.parametrize(
    ("value", "flags", "state", "available"),
    [
        ("idle", [], SlurmNodeState.IDLE, True),
        ("mixed", [], SlurmNodeState.MIXED, True),
        ("drained", ["DRAIN"], SlurmNodeState.IDLE, False),
        ("draining", [], SlurmNodeState.MIXED, False),
        ("idle", ["DRAIN"], SlurmNodeState.IDLE, False),
        ("down", ["NOT_RESPONDING"], SlurmNodeState.DOWN, False),
        ("idle*", [], SlurmNodeState.IDLE, False),
        (["IDLE"], [], SlurmNodeState.IDLE, True),
        (["IDLE", "DRAIN"], [], SlurmNodeState.IDLE, False),
        (["MIXED", "DRAIN"], [], SlurmNodeState.MIXED, False),
        (["DOWN", "NOT_RESPONDING"], [], SlurmNodeState.DOWN, False),
        (["IDLE", "POWERED_DOWN"], [], SlurmNodeState.IDLE, False),
        (["IDLE", "MAINTENANCE", "RESERVED"], [], SlurmNodeState.IDLE, False),
        (["IDLE", "REBOOT_REQUESTED"], [], SlurmNodeState.IDLE, False),
        (["FUTURE"], [], SlurmNodeState.FUTURE, False),
        (["ALLOCATED", "RESERVED"], [], SlurmNodeState.ALLOCATED, True),
        (["IDLE", "PLANNED"], [], SlurmNodeState.IDLE, True),
    ],
)
def test_node_state_in_both_forms(
    value: object, flags: list[str], state: SlurmNodeState, available: bool
) -> None:
    read = node_state(value, flags)
    assert read.state is state
    assert read.available is available


def test_node_state_of_the_wrong_kind_is_refused() -> None:
    with pytest.raises(ValueError):
        node_state({"IDLE": True})


# ---------------------------------------------------------------------- releases
def test_release_numbers_in_both_meta_spellings() -> None:
    old = {"meta": {"plugin": {"type": "openapi/v0.0.38"},
                    "Slurm": {"version": {"major": 22, "minor": 5, "micro": 8}}}}
    new = {"meta": {"plugin": {"data_parser": "data_parser/v0.0.42"},
                    "slurm": {"version": {"major": "24", "minor": "11", "micro": "5"},
                              "release": "24.11.5"}}}
    assert declared_version(old) == SlurmVersion(22, 5, 8)
    assert declared_version(new) == SlurmVersion(24, 11, 5)
    assert declared_data_parser(old) == "v0.0.38"
    assert declared_data_parser(new) == "v0.0.42"
    assert str(SlurmVersion(22, 5, 8)) == "22.05.8"
    assert SlurmVersion(25, 11).data_parser == "v0.0.44"
    assert parse_release("slurm-wlm 22.05.8\n") == SlurmVersion(22, 5, 8)
    assert parse_release("slurm 25.11.0-0rc1") == SlurmVersion(25, 11, 0)
    assert parse_release("no version") is None


@pytest.mark.parametrize("release", ["21.08.8", "26.05.0"])
def test_release_outside_the_range_is_refused_in_one_line(release: str) -> None:
    major, minor, micro = (int(x) for x in release.split("."))
    doc = {"meta": {"slurm": {"version": {"major": major, "minor": minor, "micro": micro}}}}
    with pytest.raises(UnsupportedSlurmVersion) as info:
        version_of(doc, "jobs.json")
    assert str(info.value) == (
        f"jobs.json: Slurm {release} is not supported (supported: 22.05 to 25.11)"
    )


def test_document_without_a_version_uses_the_fallback() -> None:
    assert version_of({}, "x.json", SlurmVersion(23, 11, 1)) == SlurmVersion(23, 11, 1)
