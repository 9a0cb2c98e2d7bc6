"""SlurmBackend's fail-safe behaviour, driven by recorded ``squeue``/``sinfo`` output.

The runner is the process boundary; here it is replaced by a fake that answers with JSON
recorded on the mini cluster (``tests/golden/slurm/``) and records the commands it is given.
These tests need no Slurm; the contract suite covers the real cluster.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slurm_sched.errors import BackendUnavailableError
from slurm_sched.model import JobState, Migrate, Placement, Preempt, Reconfigure, Share, Start
from slurm_sched.slurm.backend import REQUEUE_GRACE_S, SlurmBackend
from tests.contract.recorded import NOW, FakeRunner, recorded, squeue_with

#: a one-GPU managed job waiting under its lease, as squeue shows it (over recorded job 28)
LEASED_1_GPU = {"job_state": "PENDING", "state_reason": "BeginTime", "priority": 5,
                "eligible_time": NOW + 100, "tres_per_node": "gres:gpu:1", "node_count": 1,
                "gres_detail": [], "job_resources": None}  # fmt: skip


def recorded_job(job_id: str) -> dict[str, Any]:
    """A job record of the recording, by id."""
    [job] = [j for j in recorded("squeue_mixed.json")["jobs"] if str(j["job_id"]) == job_id]
    return job


def make(doc: dict[str, Any], tmp_path: Path, **kw: Any) -> tuple[SlurmBackend, FakeRunner]:
    runner = FakeRunner(doc)
    clock = kw.pop("clock", lambda: NOW)
    kw.setdefault("min_query_interval_s", 0.0)
    backend = SlurmBackend(
        runner, partitions=["sched"], settings_dir=tmp_path / "settings", clock=clock, **kw
    )
    return backend, runner


def test_snapshot_of_recorded_cluster(tmp_path: Path) -> None:
    backend, runner = make(recorded("squeue_mixed.json"), tmp_path)
    snap = backend.snapshot()
    by_id = snap.by_id
    # managed, unfinished, understood jobs only; the direct-partition job is foreign load
    assert sorted(by_id, key=int) == ["28", "29", "30", "31", "32", "33", "37", "38", "39"]
    assert by_id["28"].state is JobState.PENDING and by_id["28"].spec.gpu_type == "a100"
    assert by_id["28"].spec.iterations == 1000 and by_id["28"].spec.duration_s == 600
    assert by_id["37"].spec.user == "team-a" and by_id["37"].spec.gpu_type == "v100"
    assert by_id["30"].placement == Placement.of({"v100-1": [0, 1, 2, 3], "v100-2": [0]})
    assert by_id["32"].state is JobState.SUSPENDED
    assert by_id["33"].preemptions == 1 and by_id["33"].placement is None
    assert snap.occupancy[("a100-2", 0)] == ("31", "39")  # two shard jobs on one GPU
    free = snap.free_gpus
    assert free["a100-1"] == (2, 3)
    assert 2 not in free["a100-2"]  # held by the foreign job 36
    assert free["v100-1"] == () and free["v100-2"] == (1, 2, 3)
    # jobs that had finished before the first look are not reported as completed
    assert backend.completed() == []
    # job 38 is pending and its begin time has passed (Slurm could start it any moment): it
    # gets a fresh lease; held jobs (28, 33, 37) need none, Slurm will not start them
    assert runner.lines == ["update JobId=38 StartTime=now+120"]


def test_unmanageable_jobs_are_released_to_slurm_not_dropped(tmp_path: Path) -> None:
    doc = squeue_with(
        ("50", {"comment": '{"v":1,"batch_size":-3}'}),
        ("51", {"tres_per_node": "gres:foo:1"}),
        ("52", {"tres_per_node": ""}),
        ("53", {"tres_per_node": "gres:gpu:a100:64"}),
    )
    backend, runner = make(doc, tmp_path)
    snap = backend.snapshot()
    for jid in ("50", "51", "52", "53"):
        assert jid not in snap.by_id
        # held in the recording (an older plugin): released; and its begin time set to now
        assert f"update JobId={jid} StartTime=now" in runner.lines
        assert f"release {jid}" in runner.lines
    left = backend.left_to_slurm
    assert "batch_size" in left["50"] and "foo" in left["51"]
    assert "no GPU" in left["52"] and "64 GPU" in left["53"]
    runner.lines.clear()
    backend.snapshot()  # handed over once, not again
    assert not [x for x in runner.lines if "50" in x or "51" in x or "52" in x or "53" in x]
    # when one of them finishes, finished() counts it, completed() does not invent a record
    backend.expect(["50"])
    runner.squeue = squeue_with(
        ("50", {"comment": '{"v":1,"batch_size":-3}', "job_state": "COMPLETED"}),
    )
    backend.snapshot()
    assert backend.finished()
    assert [c.spec.job_id for c in backend.completed()] == []


def test_start_then_failure_in_slurm_is_data_and_rolled_back(tmp_path: Path) -> None:
    backend, runner = make(recorded("squeue_mixed.json"), tmp_path)
    backend.snapshot()
    # job 28 is held in the recording (an older plugin), without a begin time: the node list
    # changes, then StartTime=now, and the release would follow
    bad_pin = "update JobId=28 ResetAccrueTime NodeList=a100-1"
    runner.errors[bad_pin] = "Requested node configuration is not available"
    [r] = backend.apply([Start(job_id="28", placement=Placement.of({"a100-1": [2, 3]}))])
    assert not r.ok and "node configuration" in (r.error or "")
    # never let go or released after a failed pin
    assert "release 28" not in runner.lines
    assert "update JobId=28 StartTime=now" not in runner.lines
    snap = backend.snapshot()
    assert snap.job("28").state is JobState.PENDING
    assert snap.free_gpus["a100-1"] == (2, 3)


def test_start_is_shown_until_slurm_confirms_then_times_out(tmp_path: Path) -> None:
    now = [NOW]
    backend, runner = make(
        recorded("squeue_mixed.json"), tmp_path, clock=lambda: now[0], start_timeout_s=30
    )
    backend.snapshot()
    [r] = backend.apply([Start(job_id="28", placement=Placement.of({"a100-1": [2, 3]}))])
    assert r.ok
    assert runner.lines[-1] == "release 28"
    now[0] += 5  # Slurm has not started it yet (recorded output: still pending)
    snap = backend.snapshot()
    assert snap.job("28").state is JobState.RUNNING
    assert snap.free_gpus["a100-1"] == ()
    assert settings_gpus(backend, "28") == {"a100-1": [2, 3]}
    now[0] += 60  # still not running: the GPUs were not free after all; take the start back
    runner.squeue = squeue_with(
        ("28", {"state_reason": "Resources", "priority": 1, "eligible_time": NOW})
    )
    runner.lines.clear()
    snap = backend.snapshot()
    assert snap.job("28").state is JobState.PENDING
    assert "update JobId=28 StartTime=now+120" in runner.lines  # a lease again, no hold
    assert not [x for x in runner.lines if x.split()[0] in ("hold", "uhold")]
    assert backend.stats.start_timeouts == 1


def test_start_whose_launch_failed_goes_back_to_the_policy_at_once(tmp_path: Path) -> None:
    """Slurm 24.11 under load sent a batch launch twice; the second failed on the first's spool
    files and Slurm requeued the job held ("launch failed requeued held"). Waiting out
    ``start_timeout_s`` for it left the job idle for a minute; it is handed back at once, and its
    next start releases the hold."""
    now = [NOW]
    backend, runner = make(
        recorded("squeue_mixed.json"), tmp_path, clock=lambda: now[0], start_timeout_s=60
    )
    backend.snapshot()
    restarts = recorded_job("28").get("restart_cnt", 0)
    [r] = backend.apply([Start(job_id="28", placement=Placement.of({"a100-1": [2, 3]}))])
    assert r.ok
    now[0] += 3  # well within the start timeout
    runner.squeue = squeue_with(
        ("28", {"job_state": "PENDING", "state_reason": "JobHeldUser", "priority": 0,
                "restart_cnt": restarts + 1, "eligible_time": NOW})
    )  # fmt: skip
    snap = backend.snapshot()
    assert snap.job("28").state is JobState.PENDING
    assert backend.stats.launch_failures == 1
    assert backend.stats.start_timeouts == 0
    now[0] += 5  # past the requeue grace on a100-1
    runner.lines.clear()
    [r] = backend.apply([Start(job_id="28", placement=Placement.of({"a100-1": [2, 3]}))])
    assert r.ok
    assert runner.lines[-1] == "release 28"


def settings_gpus(backend: SlurmBackend, jid: str) -> dict[str, list[int]]:
    doc = backend.store.read_settings(jid)
    assert doc is not None
    return doc["gpu_indices"]


def test_preempt_and_completion_bookkeeping(tmp_path: Path) -> None:
    now = [NOW]
    backend, runner = make(recorded("squeue_mixed.json"), tmp_path, clock=lambda: now[0])
    backend.expect(["29"])
    backend.snapshot()
    [r] = backend.apply([Preempt(job_id="29")])
    assert r.ok
    assert runner.lines[-2:] == ["scancel --batch --signal=USR1 29", "requeue 29"]
    snap = backend.snapshot()
    assert snap.job("29").state is JobState.PENDING and snap.job("29").placement is None
    assert 0 in snap.free_gpus["a100-1"]
    # Slurm requeued it, then it ran again and completed
    runner.squeue = squeue_with(
        (
            "29",
            {
                "job_state": "PENDING",
                "state_reason": "BeginTime",  # plain requeue: not held, eligible ~121 s later
                "restart_cnt": 1,
                "gres_detail": [],
                "start_time": NOW + 121,
                "eligible_time": NOW + 121,
            },
        ),
    )
    now[0] += 1
    assert backend.snapshot().job("29").preemptions == 1
    runner.squeue = squeue_with(
        (
            "29",
            {
                "job_state": "COMPLETED",
                "restart_cnt": 1,
                "start_time": NOW + 10,
                "end_time": NOW + 20,
                "gres_detail": [],
            },
        ),
    )
    now[0] += 30
    snap = backend.snapshot()
    assert "29" not in snap.by_id
    backend.snapshot()
    [rec] = backend.completed()
    assert rec.spec.job_id == "29" and rec.preemptions == 1
    assert rec.executed_s == pytest.approx(NOW - 1795367962 + 10)  # first run + second run
    assert backend.finished()


def test_unreachable_controller_raises_backend_unavailable(tmp_path: Path) -> None:
    backend, runner = make(recorded("squeue_mixed.json"), tmp_path)
    backend.snapshot()
    runner.up = False
    with pytest.raises(BackendUnavailableError):
        backend.snapshot()
    with pytest.raises(BackendUnavailableError):
        backend.apply([Start(job_id="28", placement=Placement.of({"a100-1": [2, 3]}))])


def test_start_refused_where_slurm_lost_count_of_shards(tmp_path: Path) -> None:
    """Slurm 22.05.8 forgets a GPU's shard use when one of two co-located shard jobs ends; a
    start that Slurm would put on that GPU is refused instead of double-booking it."""
    backend, runner = make(recorded("squeue_mixed.json"), tmp_path)
    backend.snapshot()  # a100-2: GPU 0 holds shard jobs 31 and 39, GPU 2 the foreign job 36
    start = Start(job_id="28", placement=Placement.of({"a100-2": [1, 3]}))
    [ok] = backend.apply([start])  # Slurm's view is right: it picks 1 and 3 as well
    assert ok.ok, ok.error
    backend, runner = make(recorded("squeue_mixed.json"), tmp_path / "b")
    nodes = runner.sinfo["nodes"]
    nodes[1]["gres_used"] = "gpu:a100:1(IDX:2),shard:a100:0(IDX:N/A)"  # the lost count
    backend.snapshot()
    [bad] = backend.apply([start])
    assert not bad.ok and "a100-2:0" in (bad.error or "") and "31" in (bad.error or "")


def test_lease_renewed_only_where_due(tmp_path: Path) -> None:
    """A pending managed job's begin time is kept within [now + lease/2, now + lease + slack]."""
    doc = squeue_with(
        ("38", {"eligible_time": NOW - 5}),  # lease ran out: due
        ("60", {"job_state": "PENDING", "state_reason": "BeginTime", "priority": 5,
                "eligible_time": NOW + 100, "gres_detail": [], "job_resources": None}),
        ("61", {"job_state": "PENDING", "state_reason": "BeginTime", "priority": 5,
                "eligible_time": NOW + 300, "gres_detail": [],
                "job_resources": None}),  # a longer lease (plugin setting): shortened
        ("62", {"job_state": "PENDING", "state_reason": "BeginTime", "priority": 5,
                "eligible_time": NOW + 50, "gres_detail": [], "job_resources": None}),
    )  # fmt: skip
    backend, runner = make(doc, tmp_path)
    backend.snapshot()
    assert sorted(runner.lines) == [
        "update JobId=38 StartTime=now+120",
        "update JobId=61 StartTime=now+120",
        "update JobId=62 StartTime=now+120",
    ]  # 60 is fine; held jobs (28, 33, 37) cannot start anyway
    assert backend.stats.lease_renewals == 3 and backend.renewed_at["38"] == NOW
    # no lease configured (a cluster whose plugin still holds jobs): nothing renewed
    backend, runner = make(doc, tmp_path / "b", lease_s=None)
    backend.snapshot()
    assert runner.lines == []


def test_failed_renewal_is_counted_not_raised(tmp_path: Path) -> None:
    backend, runner = make(recorded("squeue_mixed.json"), tmp_path)
    runner.errors["update JobId=38 StartTime=now+120"] = "Invalid job id specified"
    backend.snapshot()
    assert backend.stats.lease_failures == 1 and backend.stats.lease_renewals == 0


def test_preempt_of_a_pinned_job_not_started_yet_gives_it_a_lease_again(tmp_path: Path) -> None:
    doc = squeue_with(("60", LEASED_1_GPU))
    backend, runner = make(doc, tmp_path)
    backend.snapshot()
    [r] = backend.apply([Start(job_id="60", placement=Placement.of({"v100-2": [1]}))])
    assert r.ok, r.error
    assert runner.lines[-2:] == [  # the pin and the go, no release
        "update JobId=60 NodeList=v100-2",
        "update JobId=60 StartTime=now",
    ]
    [p] = backend.apply([Preempt(job_id="60")])  # Slurm still shows it pending
    assert p.ok, p.error
    assert runner.lines[-1] == "update JobId=60 StartTime=now+120"
    assert backend.snapshot().job("60").state is JobState.PENDING


def test_a_start_placed_again_while_its_go_is_in_flight_is_pinned_pending_only(
    tmp_path: Path,
) -> None:
    """A job let go whose GPUs were taken meanwhile is shown PENDING and may be placed again,
    while Slurm may start it on the first pin at any moment (even if the snapshot still shows its
    old begin time): the second pin carries ResetAccrueTime, so that it cannot shrink the job
    that Slurm started in between. The first pin, of a job under its lease, goes without it."""
    doc = squeue_with(("60", LEASED_1_GPU))
    backend, runner = make(doc, tmp_path)
    backend.snapshot()
    [r] = backend.apply([Start(job_id="60", placement=Placement.of({"v100-2": [1]}))])
    assert r.ok, r.error
    assert runner.lines[-2:] == ["update JobId=60 NodeList=v100-2", "update JobId=60 StartTime=now"]
    on_v100_2 = {"nodes": "v100-2", "allocated_nodes": [{"nodename": "v100-2"}]}
    busy = {"job_state": "RUNNING", "partition": "direct", "nodes": "v100-2",
            "gres_detail": ["gpu:v100:3(IDX:1-3)"], "tres_per_node": "gres:gpu:3",
            "job_resources": on_v100_2}  # fmt: skip
    runner.squeue = squeue_with(("60", LEASED_1_GPU), ("36", busy))
    snap = backend.snapshot()
    assert snap.job("60").state is JobState.PENDING  # its GPUs are taken: placed again
    [again] = backend.apply([Start(job_id="60", placement=Placement.of({"a100-1": [2]}))])
    assert again.ok, again.error
    assert "update JobId=60 ResetAccrueTime NodeList=a100-1" in runner.lines


def test_pin_sets_numnodes_unless_slurm_holds_the_job_to_exactly_that_count(
    tmp_path: Path,
) -> None:
    """A requeued job (Slurm's max_nodes 0: unknown) last pinned to 2 nodes, now asked onto
    one: without ``NumNodes=1-1`` Slurm keeps min 2 and adds a node to the pinned one (seen in
    the integration suite: a 2-GPU job ran as 2 nodes x 2 GPUs)."""
    pending = {**LEASED_1_GPU, "tres_per_node": "gres:gpu:2"}
    doc = squeue_with(
        ("61", {**pending, "restart_cnt": 1, "node_count": 1, "max_nodes": 0,
                "tres_per_node": "gres:gpu:1", "tres_req_str": "cpu=2,node=2"}),
        ("62", {**pending, "node_count": 1, "max_nodes": 1, "tres_req_str": "cpu=1,node=1"}),
        ("63", {**pending, "node_count": 1, "max_nodes": 4, "tres_req_str": "cpu=1,node=1"}),
    )  # fmt: skip
    backend, runner = make(doc, tmp_path)
    backend.snapshot()
    results = backend.apply(
        [Start(job_id=j, placement=Placement.of({n: g}))
         for j, n, g in (("61", "v100-2", [1, 2]), ("62", "a100-1", [2, 3]),
                         ("63", "a100-2", [1, 3]))]
    )  # fmt: skip
    assert all(r.ok for r in results), results
    assert (
        "update JobId=61 NodeList=v100-2 NumNodes=1-1 TresPerNode=gres:gpu:2"
        in runner.lines
    )
    assert "update JobId=62 NodeList=a100-1" in runner.lines  # -N 1: nothing to set
    assert "update JobId=63 NodeList=a100-2 NumNodes=1-1" in runner.lines  # -N 1-4


def test_start_waits_while_a_shared_gpu_below_it_may_look_free_to_slurm(tmp_path: Path) -> None:
    """a100-2:0 runs shard jobs 31 and 39; 28 (2 GPUs) would get a100-2:1,3. If 39 ends before
    Slurm allocates 28, Slurm 22.05.8 drops GPU 0's shard usage and gives 28 GPUs 0,1 (GPU 0
    still runs 31): so the start waits while 39 is about to end."""
    started = recorded("squeue_mixed.json")
    hint = '{"v":1,"duration_s":%d}'
    ran_s = NOW - recorded_job("39")["start_time"]
    ends_soon = squeue_with(("39", {"comment": hint % (ran_s + 5)}))
    backend, runner = make(ends_soon, tmp_path)
    backend.snapshot()
    [r] = backend.apply([Start(job_id="28", placement=Placement.of({"a100-2": [1, 3]}))])
    assert not r.ok and "a100-2:0 is shared by" in (r.error or ""), r
    assert not any(line.startswith("update JobId=28") for line in runner.lines)
    # an hour left: no reason to wait
    backend, runner = make(started, tmp_path / "later")
    backend.snapshot()
    [r] = backend.apply([Start(job_id="28", placement=Placement.of({"a100-2": [1, 3]}))])
    assert r.ok, r.error


def test_share_waits_while_an_exclusive_start_below_it_is_not_allocated(tmp_path: Path) -> None:
    """Job 64 is pinned to a100-2:0,1 and job 65 would join 31 on a100-2:3 in the same call.
    Slurm allocates the two in its own order: if 65 comes first, GPUs 0 and 1 are empty in its
    view and the shard goes to GPU 0 (seen in the integration suite), so the Share waits."""
    pending = {**LEASED_1_GPU, "max_nodes": 1, "tres_req_str": "cpu=1,node=1", "comment": ""}
    doc = squeue_with(
        ("31", {"gres_detail": ["shard:a100:3(IDX:3)"]}),
        ("64", {**pending, "tres_per_node": "gres:gpu:2"}),
        ("65", {**pending, "tres_per_node": "gres:shard:1"}),
        drop=["39"],
    )  # fmt: skip
    backend, runner = make(doc, tmp_path, max_jobs_per_gpu=2)
    [a100_2] = [n for n in runner.sinfo["nodes"] if n["name"] == "a100-2"]
    a100_2["gres_used"] = "gpu:a100:1(IDX:2),shard:a100:3(IDX:3)"
    backend.snapshot()
    start, share = backend.apply(
        [Start(job_id="64", placement=Placement.of({"a100-2": [0, 1]})),
         Share(job_id="65", placement=Placement.of({"a100-2": [3]}))]
    )  # fmt: skip
    assert start.ok, start.error
    assert not share.ok and "pinned to GPU a100-2:0 but not started yet" in (share.error or "")
    # once Slurm runs 64 there, the Share goes through
    doc = squeue_with(
        ("31", {"gres_detail": ["shard:a100:3(IDX:3)"]}),
        ("64", {**pending, "job_state": "RUNNING", "state_reason": "None", "nodes": "a100-2",
                "gres_detail": ["gpu:2(IDX:0-1)"], "tres_per_node": "gres:gpu:2",
                "job_resources": {"nodes": "a100-2",
                                  "allocated_nodes": [{"nodename": "a100-2"}]}}),
        ("65", {**pending, "tres_per_node": "gres:shard:1"}),
        drop=["39"],
    )  # fmt: skip
    runner.squeue = doc
    backend.snapshot()
    [share] = backend.apply([Share(job_id="65", placement=Placement.of({"a100-2": [3]}))])
    assert share.ok, share.error


def test_go_of_a_job_that_already_left_pending_is_a_start_not_a_failure(tmp_path: Path) -> None:
    """A go answered "no longer pending": the job started on its pin already (the go was re-run
    after unreadable scontrol output, or its lease ran out). Reporting the Start as failed made
    the policy place the job elsewhere while Slurm ran it on the pin (CI, muri-l)."""
    doc = squeue_with(("60", LEASED_1_GPU))
    backend, runner = make(doc, tmp_path)
    backend.snapshot()
    runner.errors["update JobId=60 StartTime=now"] = "Job is no longer pending execution"
    [r] = backend.apply([Start(job_id="60", placement=Placement.of({"v100-2": [1]}))])
    assert r.ok, r.error
    assert backend.snapshot().job("60").state is JobState.RUNNING  # started, as far as we know
    # any other failure of the go still fails the start
    backend, runner = make(doc, tmp_path / "other")
    backend.snapshot()
    runner.errors["update JobId=60 StartTime=now"] = "Access/permission denied"
    [r] = backend.apply([Start(job_id="60", placement=Placement.of({"v100-2": [1]}))])
    assert not r.ok and "permission denied" in (r.error or "")


def test_share_is_refused_where_slurm_lost_a_full_gpus_shard_usage(tmp_path: Path) -> None:
    """a100-2:0 is full (31 and 39, C = 2) but Slurm lost its shard usage (not in its used
    list): a Share meant for 66 on a100-2:1 would be put on GPU 0 by Slurm, a third job there
    (the integration suite saw five 1-shard jobs on one GPU)."""
    running = {"job_state": "RUNNING", "state_reason": "None", "nodes": "a100-2",
               "tres_per_node": "gres:shard:3", "gres_detail": ["shard:a100:3(IDX:1)"],
               "job_resources": {"nodes": "a100-2", "allocated_nodes": [{"nodename": "a100-2"}]}}
    doc = squeue_with(
        ("65", {**LEASED_1_GPU, "tres_per_node": "gres:shard:1"}),
        ("66", {**recorded_job("31"), **running, "job_id": 66}),
    )  # fmt: skip
    backend, runner = make(doc, tmp_path, max_jobs_per_gpu=2)
    [a100_2] = [n for n in runner.sinfo["nodes"] if n["name"] == "a100-2"]
    a100_2["gres_used"] = "gpu:a100:1(IDX:2),shard:a100:3(IDX:1)"
    backend.snapshot()
    [r] = backend.apply([Share(job_id="65", placement=Placement.of({"a100-2": [1]}))])
    assert not r.ok and "a100-2:0 already holds 2 job(s)" in (r.error or ""), r
    # with Slurm's view intact the Share joins 66
    a100_2["gres_used"] = "gpu:a100:1(IDX:2),shard:a100:7(IDX:0-1)"
    backend, runner = make(doc, tmp_path / "intact", max_jobs_per_gpu=2)
    runner.sinfo["nodes"] = [n if n["name"] != "a100-2" else a100_2
                             for n in runner.sinfo["nodes"]]
    backend.snapshot()
    [r] = backend.apply([Share(job_id="65", placement=Placement.of({"a100-2": [1]}))])
    assert r.ok, r.error


def test_share_waits_while_a_full_gpu_below_its_target_is_about_to_free_up(
    tmp_path: Path,
) -> None:
    """a100-2:0 is full (31 and 39, C = 2); a Share joins 66 on a100-2:1. If 39 ends before
    Slurm allocates the shard, GPU 0 has room (or, 22.05.8, no shard usage at all) and Slurm
    puts the shard there instead (the integration suite saw three 1-shard jobs on one GPU):
    the Share waits while 39 is about to end, and goes through when it is not."""
    running = {"job_state": "RUNNING", "state_reason": "None", "nodes": "a100-2",
               "tres_per_node": "gres:shard:3", "gres_detail": ["shard:a100:3(IDX:1)"],
               "job_resources": {"nodes": "a100-2", "allocated_nodes": [{"nodename": "a100-2"}]}}
    hint = '{"v":1,"duration_s":%d}'
    ran_s = NOW - recorded_job("39")["start_time"]
    share = Share(job_id="65", placement=Placement.of({"a100-2": [1]}))
    for ends_in_s, ok in ((5, False), (3600, True)):
        doc = squeue_with(
            ("39", {"comment": hint % (ran_s + ends_in_s)}),
            ("65", {**LEASED_1_GPU, "tres_per_node": "gres:shard:1"}),
            ("66", {**recorded_job("31"), **running, "job_id": 66}),
        )  # fmt: skip
        backend, runner = make(doc, tmp_path / str(ends_in_s), max_jobs_per_gpu=2)
        [a100_2] = [n for n in runner.sinfo["nodes"] if n["name"] == "a100-2"]
        a100_2["gres_used"] = "gpu:a100:1(IDX:2),shard:a100:7(IDX:0-1)"
        backend.snapshot()
        [r] = backend.apply([share])
        assert r.ok is ok, r
        if not ok:
            assert "job 39 on GPU a100-2:0 ends within 30s" in (r.error or ""), r
            assert not any(line.startswith("update JobId=65") for line in runner.lines)


def test_dry_run_backend_changes_nothing_and_forgets_its_actions(tmp_path: Path) -> None:
    backend, runner = make(recorded("squeue_mixed.json"), tmp_path, dry_run=True)
    backend.snapshot()
    [r] = backend.apply([Start(job_id="28", placement=Placement.of({"a100-1": [2, 3]}))])
    assert r.ok, r.error
    assert runner.lines == []  # nothing reached Slurm: no start, no renewal, no hold
    assert backend.dry_commands == [
        "scontrol update JobId=28 ResetAccrueTime NodeList=a100-1",
        "scontrol update JobId=28 StartTime=now",
        "scontrol release 28",
    ]
    assert backend.last_commands == [tuple(backend.dry_commands)]
    snap = backend.snapshot()
    assert snap.job("28").state is JobState.PENDING  # no intent left behind
    assert snap.free_gpus["a100-1"] == (2, 3)
    assert not (tmp_path / "settings").exists() or not list((tmp_path / "settings").iterdir())


def test_unmanageable_pending_job_under_a_lease_is_handed_to_slurm_at_once(tmp_path: Path) -> None:
    doc = squeue_with(
        ("70", {"job_state": "PENDING", "state_reason": "BeginTime", "priority": 5,
                "eligible_time": NOW + 100, "tres_per_node": "gres:foo:1", "gres_detail": [],
                "job_resources": None}),
    )  # fmt: skip
    backend, runner = make(doc, tmp_path)
    backend.snapshot()
    assert "update JobId=70 StartTime=now" in runner.lines
    assert "release 70" not in runner.lines  # not held: the begin time is all that holds it
    assert "70" in backend.left_to_slurm


def test_phantom_gpus_of_a_slurm_accounting_leak_are_not_offered(tmp_path: Path) -> None:
    """Slurm counts GPUs as used that no job holds (22.05.8 after a slurmctld restart): after
    two fresh looks they are kept from the policy, and offered again once Slurm agrees."""
    backend, runner = make(recorded("squeue_mixed.json"), tmp_path, sinfo_refresh_s=0.0)
    assert backend.snapshot().free_gpus["v100-2"] == (1, 2, 3)
    v100_2 = next(n for n in runner.sinfo["nodes"] if n["name"] == "v100-2")
    v100_2["gres_used"] = "gpu:v100:3(IDX:0-2),shard:v100:0(IDX:N/A)"  # 1, 2 held by nobody
    assert backend.snapshot().free_gpus["v100-2"] == (1, 2, 3)  # one look: could be a race
    assert backend.snapshot().free_gpus["v100-2"] == (3,)
    assert backend.phantom_gpus == {("v100-2", 1), ("v100-2", 2)}
    v100_2["gres_used"] = "gpu:v100:1(IDX:0),shard:v100:0(IDX:N/A)"  # scontrol reconfigure
    assert backend.snapshot().free_gpus["v100-2"] == (1, 2, 3)


def test_release_held_gives_a_lease_before_the_release(tmp_path: Path) -> None:
    backend, runner = make(recorded("squeue_mixed.json"), tmp_path)
    backend.snapshot()
    assert sorted(backend.held_jobs(), key=int) == ["28", "33", "37"]
    runner.lines.clear()
    out = backend.release_held(["28"])
    assert out == {"28": None}
    assert runner.lines == ["update JobId=28 StartTime=now+120", "release 28"]


def test_requeued_job_is_not_relaunched_on_its_node_in_the_same_second(tmp_path: Path) -> None:
    """slurmd revokes a requeued job's credential at the requeue time (whole seconds); a launch
    there within that second fails the job ("Job credential revoked"), seen with muri-l."""
    now = [NOW]
    backend, _ = make(recorded("squeue_mixed.json"), tmp_path, clock=lambda: now[0])
    backend.snapshot()
    [p] = backend.apply([Preempt(job_id="29")])  # runs on a100-1
    assert p.ok, p.error
    same = Start(job_id="29", placement=Placement.of({"a100-1": [0]}))
    [r] = backend.apply([same])
    assert not r.ok and "credential revoked" in (r.error or "") and "retry" in (r.error or "")
    [other] = backend.apply([Start(job_id="29", placement=Placement.of({"v100-2": [1]}))])
    assert other.ok, other.error  # another node: no revoked credential there
    now[0] += 2.0
    backend2, _ = make(recorded("squeue_mixed.json"), tmp_path / "b", clock=lambda: now[0])
    backend2.snapshot()
    backend2.apply([Preempt(job_id="29")])
    now[0] += 2.0  # later than the grace: allowed on the same node
    [late] = backend2.apply([same])
    assert late.ok, late.error


# ---------------------------------------------------------------------- requeue, then re-pin
#: job 29 runs on GPU 0 of a100-1 in the recording (restart_cnt 0); these are Slurm's views of
#: it while a requeue is under way and after it
REQUEUE_RUNNING = {"job_state": "RUNNING"}
REQUEUED = {"job_state": "PENDING", "state_reason": "BeginTime", "restart_cnt": 1,
            "eligible_time": NOW + 120, "nodes": "", "gres_detail": [],
            "job_resources": None}  # fmt: skip


def _requeue_then_repin(
    tmp_path: Path, action: Migrate | Reconfigure, pin: list[str], grace_s: float = 0.0
) -> None:
    now = [NOW]
    backend, runner = make(recorded("squeue_mixed.json"), tmp_path, clock=lambda: now[0])
    backend.snapshot()
    runner.lines.clear()
    [res] = backend.apply([action])
    assert res.ok, res.error
    assert runner.lines == ["requeue 29"]  # the pin waits until Slurm has requeued the job
    asked = action.placement
    snap = backend.snapshot()  # Slurm still shows it running on a100-1: nothing yet
    assert (snap.job("29").state, snap.job("29").placement) == (JobState.RUNNING, asked)
    assert not [x for x in runner.lines[1:] if "JobId=29" in x]
    runner.squeue = squeue_with(("29", REQUEUED))
    if grace_s:
        now[0] += grace_s / 2  # requeued, but within the second of its revoked credential
        runner.lines.clear()
        backend.snapshot()
        assert not [x for x in runner.lines if "JobId=29" in x], runner.lines
        assert backend.in_flight == {"29"}
    now[0] += max(grace_s, 1.0)
    runner.lines.clear()
    snap = backend.snapshot()
    assert [x for x in runner.lines if "JobId=29" in x] == pin
    assert (snap.job("29").state, snap.job("29").placement) == (JobState.RUNNING, asked)
    (node, gpus), = asked.as_dict.items()
    runner.squeue = squeue_with(("29", {
        "job_state": "RUNNING", "restart_cnt": 1, "nodes": node,
        "gres_detail": [f"gpu:a100:{len(gpus)}(IDX:{','.join(map(str, gpus))})"],
        "job_resources": {"allocated_nodes": [{"nodename": node}]},
    }))  # fmt: skip
    snap = backend.snapshot()
    assert backend.in_flight == frozenset() and not backend.mismatches
    assert (snap.job("29").state, snap.job("29").placement) == (JobState.RUNNING, asked)


def test_migrate_requeues_then_pins_where_asked_once_slurm_shows_the_requeue(
    tmp_path: Path,
) -> None:
    _requeue_then_repin(
        tmp_path,
        Migrate(job_id="29", placement=Placement.of({"a100-2": [3]})),
        ["update JobId=29 ResetAccrueTime NodeList=a100-2 NumNodes=1-1 TresPerNode=gres:gpu:1",
         "update JobId=29 StartTime=now"],
    )  # fmt: skip


def test_migrate_on_its_own_node_waits_out_the_revoked_credential(tmp_path: Path) -> None:
    """Back on a100-1 (its node): slurmd refuses a launch within the second of the requeue."""
    _requeue_then_repin(
        tmp_path,
        Migrate(job_id="29", placement=Placement.of({"a100-1": [2]})),
        ["update JobId=29 ResetAccrueTime NodeList=a100-1 NumNodes=1-1 TresPerNode=gres:gpu:1",
         "update JobId=29 StartTime=now"],
        grace_s=REQUEUE_GRACE_S,
    )  # fmt: skip


def test_reconfigure_to_two_gpus_pins_the_new_count(tmp_path: Path) -> None:
    _requeue_then_repin(
        tmp_path,
        Reconfigure(job_id="29", placement=Placement.of({"a100-2": [1, 3]})),
        ["update JobId=29 ResetAccrueTime NodeList=a100-2 NumNodes=1-1 TresPerNode=gres:gpu:2",
         "update JobId=29 StartTime=now"],
    )  # fmt: skip
