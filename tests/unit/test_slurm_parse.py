"""Parsing Slurm 22.05 JSON (recorded on the mini cluster: ``tests/golden/slurm/``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slurm_sched.errors import BackendUnavailableError, SlurmCommandError
from slurm_sched.slurm.document_errors import SlurmJsonError
from slurm_sched.slurm.parse import (
    GpuRequest,
    NodeAlloc,
    cluster_from_nodes,
    expand_hostlist,
    parse_gpu_request,
    parse_gres,
    parse_gres_detail,
    parse_index_list,
    read_jobs,
    read_nodes,
)
from slurm_sched.slurm.runner import (
    LIST_UPDATE_MAX_JOBS,
    CommandResult,
    CommandRunner,
    _attribute,
    merge_begin_updates,
)

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "slurm"


def load(name: str) -> dict[str, Any]:
    return json.loads((GOLDEN / name).read_text())


# ---------------------------------------------------------------------- small grammars
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a100-[1-2],v100-1", ["a100-1", "a100-2", "v100-1"]),
        ("n[01-03,7]", ["n01", "n02", "n03", "n7"]),
        ("v100-[1-2]", ["v100-1", "v100-2"]),
        ("solo", ["solo"]),
        ("", []),
    ],
)
def test_expand_hostlist(text: str, expected: list[str]) -> None:
    assert expand_hostlist(text) == expected


def test_index_lists() -> None:
    assert parse_index_list("0-1,3") == (0, 1, 3)
    assert parse_index_list("N/A") == ()
    assert parse_index_list("") == ()


@pytest.mark.parametrize(
    ("text", "name", "type_", "count", "indices"),
    [
        ("gpu:a100:4", "gpu", "a100", 4, None),
        ("gpu:a100:4(S:0)", "gpu", "a100", 4, None),
        ("gres:gpu:2", "gpu", None, 2, None),
        ("gres/gpu:2", "gpu", None, 2, None),
        ("shard:a100:3(IDX:0)", "shard", "a100", 3, (0,)),
        ("gpu:a100:0(IDX:)", "gpu", "a100", 0, ()),
        ("gpu:v100:4(IDX:0-3)", "gpu", "v100", 4, (0, 1, 2, 3)),
        ("gpu", "gpu", None, 1, None),
    ],
)
def test_gres_items(
    text: str, name: str, type_: str | None, count: int, indices: tuple[int, ...] | None
) -> None:
    [item] = parse_gres(text)
    assert (item.name, item.type, item.count, item.indices) == (name, type_, count, indices)


def test_gres_lists_and_bad_items() -> None:
    items = parse_gres("gpu:a100:2(IDX:0,2),foo:1")
    assert [(i.name, i.count, i.indices) for i in items] == [("gpu", 2, (0, 2)), ("foo", 1, None)]
    assert parse_gres("(null)") == []
    with pytest.raises(ValueError, match="cannot parse"):
        parse_gres("gpu:a100:2:extra:junk!")


def test_gpu_requests() -> None:
    assert parse_gpu_request("gres:gpu:a100:2") == GpuRequest("gpu", "a100", 2, None, "node")
    assert parse_gpu_request("", "gres:gpu:5") == GpuRequest("gpu", None, None, 5, "job")
    shard = parse_gpu_request("gres:shard:3")
    assert shard.kind == "shard" and shard.total(node_count=1) == 1
    assert parse_gpu_request("gres:gpu:2").total(node_count=2) == 4
    assert parse_gpu_request("gres:foo:1").other == ("foo:1",)
    assert parse_gpu_request("", "", "gres:gpu:1").other == ("gpu:1 per task",)
    assert parse_gpu_request("").total(3) == 0


def test_gres_detail_pairs_entries_with_nodes_in_order() -> None:
    alloc = parse_gres_detail(["v100-1", "v100-2"], ["gpu:v100:4(IDX:0-3)", "gpu:v100:1(IDX:0)"])
    assert alloc == (
        NodeAlloc("v100-1", (0, 1, 2, 3)),
        NodeAlloc("v100-2", (0,)),
    )
    assert parse_gres_detail(["a100-2"], ["shard:a100:3(IDX:0)"]) == (NodeAlloc("a100-2", (0,), 3),)


# ---------------------------------------------------------------------- sinfo
def test_sinfo_nodes_and_cluster() -> None:
    nodes = read_nodes(load("sinfo.json"))[1]
    assert [n.name for n in nodes] == ["a100-1", "a100-2", "v100-1", "v100-2"]
    a = nodes[0]
    assert (a.num_gpus, a.gpu_type, a.shards_per_gpu, a.cpus, a.mem_mb) == (4, "a100", 4, 16, 64000)
    assert a.partitions == ("sched", "direct")
    assert all(n.available for n in nodes)
    cluster = cluster_from_nodes(nodes, ["sched"])
    assert cluster.total_gpus == 16
    assert cluster.gpu_types == ("a100", "v100")
    assert cluster.by_name["v100-2"].mem_gb == pytest.approx(62.5)
    assert cluster_from_nodes(nodes, ["other"]).nodes == ()


def test_drained_node_is_not_available() -> None:
    data = load("sinfo.json")
    data["nodes"][1]["state"] = "idle"
    data["nodes"][1]["state_flags"] = ["DRAIN"]
    data["nodes"][2]["state"] = "down"
    nodes = read_nodes(data)[1]
    assert [n.available for n in nodes] == [True, False, False, True]


def test_unreachable_controller_json_raises() -> None:
    with pytest.raises(SlurmJsonError, match="slurm_load_jobs"):
        read_jobs(load("squeue_unreachable.json"))
    with pytest.raises(SlurmJsonError):
        read_nodes(load("sinfo_unreachable.json"))


# ---------------------------------------------------------------------- squeue
@pytest.fixture(scope="module")
def jobs() -> dict[str, Any]:
    return {j.job_id: j for j in read_jobs(load("squeue_mixed.json"))[1]}


def test_held_pending_job_with_hints(jobs: dict[str, Any]) -> None:
    j = jobs["28"]
    assert (j.state, j.reason, j.held, j.partition) == ("PENDING", "JobHeldUser", True, "sched")
    assert j.gpu_request == GpuRequest("gpu", "a100", 2, None, "node")
    assert json.loads(j.comment)["iterations"] == 1000
    assert j.time_limit_s == 30 * 60
    assert j.alloc == () and j.executed_s(1e10) == 0


def test_running_jobs_and_their_gpus(jobs: dict[str, Any]) -> None:
    j = jobs["29"]
    assert j.state == "RUNNING" and not j.held and j.holds_resources
    assert j.gpu_slots() == {"a100-1": (0,)}
    multi = jobs["30"]  # TresPerJob=gres:gpu:5 over two nodes: Slurm split it 4 + 1
    assert multi.gpu_request.per_job == 5 and multi.gpu_request.form == "job"
    assert multi.gpu_slots() == {"v100-1": (0, 1, 2, 3), "v100-2": (0,)}
    assert multi.executed_s(multi.start_time_s + 10) == 10


def test_shard_jobs_share_one_gpu_index(jobs: dict[str, Any]) -> None:
    a, b = jobs["31"], jobs["39"]
    assert a.alloc == (NodeAlloc("a100-2", (0,), 3),)
    assert b.alloc == (NodeAlloc("a100-2", (0,), 1),)
    assert a.gpu_request.kind == "shard"


def test_suspended_and_requeued_jobs(jobs: dict[str, Any]) -> None:
    s = jobs["32"]
    assert s.state == "SUSPENDED" and s.holds_resources
    assert s.gpu_slots() == {"a100-1": (1,)}
    assert s.executed_s(1e12) == s.pre_sus_time_s  # no time passes while suspended
    r = jobs["33"]  # requeuehold: pending, held, restart counted, no resources
    assert (r.state, r.held, r.restart_cnt, r.alloc) == ("PENDING", True, 1, ())


def test_node_count_of_a_requeued_job_follows_its_numnodes_update() -> None:
    """22.05.8 keeps a requeued job's node_count at its last run's count after ``update
    NumNodes=2-2``; only ``tres_req_str`` shows the new request (seen on the mini cluster)."""
    doc = load("squeue_mixed.json")
    [rec] = [j for j in doc["jobs"] if j["job_id"] == 33]
    rec.update({"node_count": 1, "max_nodes": 0, "tres_req_str": "cpu=2,mem=2G,node=2,billing=2"})
    [j] = [j for j in read_jobs(doc)[1] if j.job_id == "33"]
    assert (j.node_count, j.max_nodes) == (2, 0)
    rec["job_state"] = "RUNNING"  # a running job's count is what it holds
    [j] = [j for j in read_jobs(doc)[1] if j.job_id == "33"]
    assert j.node_count == 1


def test_finished_and_foreign_jobs(jobs: dict[str, Any]) -> None:
    done = jobs["34"]
    assert done.final and done.state == "COMPLETED" and not done.holds_resources
    cancelled = jobs["35"]
    assert cancelled.final and cancelled.state == "CANCELLED"
    foreign = jobs["36"]
    assert foreign.partition == "direct" and foreign.gpu_slots() == {"a100-2": (2,)}
    typed = jobs["37"]
    assert typed.account == "team-a" and typed.features == "v100"
    stuck = jobs["38"]  # released but its nodes are busy
    assert stuck.state == "PENDING" and stuck.reason == "Resources" and not stuck.held


# ---------------------------------------------------------------------- runner (no Slurm)
def test_scontrol_batch_output_is_attributed_per_line() -> None:
    sent = ["update JobId=99999 NodeList=a100-1", "release 23", "suspend 99998"]
    out = (
        "scontrol: update JobId=99999 NodeList=a100-1\n"
        "scontrol: error: Could not load state information for job 99999: Invalid job id\n"
        "scontrol: release 23\n"
        "scontrol: suspend 99998\n"
        "Unexpected message received for job 99998\n"
        "scontrol: \n"
    )
    assert _attribute(sent, out) == [
        "scontrol: error: Could not load state information for job 99999: Invalid job id",
        "",
        "Unexpected message received for job 99998",
    ]
    assert _attribute(sent, "something else\n") is None
    assert _attribute(sent, "scontrol: release 23\n") is None


def test_runner_classifies_failures() -> None:
    class NoPing(CommandRunner):
        def controller_up(self) -> bool:
            return False

    r = CommandRunner(ping_on_error=False)
    bad = CommandResult(("scontrol", "release", "1"), 1, "", "Invalid job id specified")
    with pytest.raises(SlurmCommandError) as exc:
        r.check_failure(bad)
    assert exc.value.rc == 1 and "Invalid job id" in exc.value.stderr
    down = CommandResult(("squeue",), 1, "", "Unable to contact slurm controller (connect failure)")
    with pytest.raises(BackendUnavailableError):
        r.check_failure(down)
    ambiguous = CommandResult(("scontrol", "suspend", "1"), 1, "", "Unexpected message received")
    with pytest.raises(BackendUnavailableError):
        NoPing().check_failure(ambiguous)


def test_begin_time_updates_are_merged_into_job_lists_in_order() -> None:
    lines = [
        ("update", "JobId=1", "StartTime=now"),
        ("release", "2"),
        ("update", "JobId=3", "StartTime=now"),
        ("update", "JobId=4", "StartTime=now+120"),
        ("update", "JobId=5", "NodeList=a"),  # not a begin-time update
        ("update", "JobId=6,7", "StartTime=now"),  # already a list: left alone
    ]
    assert merge_begin_updates(lines) == [
        (("update", "JobId=1,3", "StartTime=now"), [0, 2]),
        (("release", "2"), [1]),
        (("update", "JobId=4", "StartTime=now+120"), [3]),
        (("update", "JobId=5", "NodeList=a"), [4]),
        (("update", "JobId=6,7", "StartTime=now"), [5]),
    ]
    many = [("update", f"JobId={i}", "StartTime=now") for i in range(LIST_UPDATE_MAX_JOBS + 1)]
    groups = merge_begin_updates(many)
    assert [len(m) for _, m in groups] == [LIST_UPDATE_MAX_JOBS, 1]
    assert sorted(i for _, m in groups for i in m) == list(range(len(many)))


class ListScontrol(CommandRunner):
    """The process boundary of scontrol as Slurm 22.05 answers a batch with job-list updates:
    an unknown job of a list is named in its error line."""

    def __init__(self, known: set[str], odd_error: str | None = None) -> None:
        super().__init__(ping_on_error=False)
        self.known = known
        self.odd_error = odd_error
        self.sent: list[str] = []

    def _exec(self, argv, stdin=None, merge_stderr=False):  # type: ignore[no-untyped-def]
        lines = (stdin or "").splitlines() if argv == ["scontrol"] else [" ".join(argv[1:])]
        out, rc = [], 0
        for line in lines:
            self.sent.append(line)
            out.append(f"scontrol: {line}")
            jobs = line.split()[1].removeprefix("JobId=").split(",")
            if self.odd_error and len(jobs) > 1:
                out.append(self.odd_error)
                rc = 1
                continue
            for j in jobs:
                if j not in self.known:
                    out.append(f"Invalid job id specified for job {j}")
                    rc = 1
        if argv != ["scontrol"]:  # one command per process: no echo
            return CommandResult(tuple(argv), rc, "", "\n".join(out[1:]))
        return CommandResult(tuple(argv), rc, "\n".join(out) + "\nscontrol: \n", "")


def test_job_list_update_results_are_split_per_job() -> None:
    runner = ListScontrol(known={"1", "2", "4"})
    lines = [("update", f"JobId={j}", "StartTime=now") for j in ("1", "99", "2")]
    lines.append(("update", "JobId=4", "NodeList=a"))
    out = runner.run_scontrol_batch(lines)
    assert runner.sent == ["update JobId=1,99,2 StartTime=now", "update JobId=4 NodeList=a"]
    assert [r.argv[1:] for r in out] == lines
    assert [r.rc for r in out] == [0, 1, 0, 0]
    assert out[1].stderr == "Invalid job id specified for job 99"


def test_job_list_error_naming_no_single_job_is_asked_per_job() -> None:
    runner = ListScontrol(known={"1", "2"}, odd_error="Invalid job id specified")
    lines = [("update", f"JobId={j}", "StartTime=now") for j in ("1", "99", "2")]
    out = runner.run_scontrol_batch(lines)
    assert runner.sent[1:] == [" ".join(x) for x in lines]  # one by one after the list
    assert [r.rc for r in out] == [0, 1, 0] and runner.batch_fallbacks == 1


def test_batch_that_stopped_early_reruns_only_the_lines_it_did_not_reach() -> None:
    class StopsAfterOne(CommandRunner):
        sent: list[str]

        def _exec(self, argv, stdin=None, merge_stderr=False):  # type: ignore[no-untyped-def]
            if argv == ["scontrol"]:  # ran the first line, then died
                first = (stdin or "").splitlines()[0]
                self.sent.append(first)
                return CommandResult(tuple(argv), 1, f"scontrol: {first}\n", "")
            self.sent.append(" ".join(argv[1:]))
            return CommandResult(tuple(argv), 0, "", "")

    runner = StopsAfterOne(ping_on_error=False)
    runner.sent = []
    out = runner.run_scontrol_batch([("release", "1"), ("release", "2"), ("release", "3")])
    assert runner.sent == ["release 1", "release 2", "release 3"]  # each exactly once
    assert [r.rc for r in out] == [0, 0, 0] and runner.batch_fallbacks == 1
    assert _attribute(["release 1", "release 2"], "scontrol: release 1\nerr\n") == ["err"]
