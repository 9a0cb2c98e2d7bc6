"""What the Slurm backend and the daemon do when an operator changes the cluster under them:
``scontrol hold``, a drained node, a changed time limit, ``scancel``, a start Slurm does not carry
out. The runner (the process boundary) is the recorded fake of ``tests/contract/recorded.py``."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from slurm_sched.model import JobState, Placement, Start
from slurm_sched.service.config import ServiceConfig
from slurm_sched.service.daemon import Daemon
from slurm_sched.service.decision_log import read_decisions
from slurm_sched.service.sd_notify import Notifier
from slurm_sched.slurm.backend import SlurmBackend
from tests.contract.recorded import NOW, FakeRunner, recorded, squeue_with

#: recorded job 28 (2 a100 GPUs, pending) as an operator's ``scontrol hold`` leaves it, its lease
#: due for renewal
ADMIN_HELD = {"job_state": "PENDING", "state_reason": "JobHeldAdmin", "priority": 0,
              "eligible_time": NOW + 2}  # fmt: skip
#: ... and after ``scontrol release``
RELEASED = {"job_state": "PENDING", "state_reason": "BeginTime", "priority": 5,
            "eligible_time": NOW + 100}  # fmt: skip


def make(doc: dict[str, Any], tmp_path: Path, **kw: Any) -> tuple[SlurmBackend, FakeRunner]:
    runner = FakeRunner(doc)
    clock = kw.pop("clock", lambda: NOW)
    backend = SlurmBackend(
        runner,
        partitions=["sched"],
        settings_dir=tmp_path / "settings",
        clock=clock,
        min_query_interval_s=0.0,
        **kw,
    )
    return backend, runner


def events(backend: SlurmBackend, name: str) -> list[dict[str, Any]]:
    return [f for e, f in backend.take_notices() if e == name]


def test_operator_hold_is_not_offered_not_released_and_keeps_its_lease(tmp_path: Path) -> None:
    backend, runner = make(squeue_with(("28", ADMIN_HELD)), tmp_path)
    snap = backend.snapshot()
    assert "28" not in {v.job_id for v in snap.jobs}  # the policy never sees it
    assert backend.admin_held == {"28"}
    # its lease is renewed like any pending job's, so its release hands it to the policy
    assert "update JobId=28 StartTime=now+120" in runner.lines
    # the older plugin's holds (JobHeldUser) are still the scheduler's to release, not this one
    assert sorted(backend.held_jobs(), key=int) == ["33", "37"]
    [r] = backend.apply([Start(job_id="28", placement=Placement.of({"a100-1": [2, 3]}))])
    assert not r.ok
    assert not [x for x in runner.lines if x.startswith("release 28") or "JobId=28 Node" in x]
    [held] = events(backend, "admin_hold")
    assert held["job_id"] == "28" and "not released" in held["why"]
    # renewed once per renewal window, even where Slurm shows a held job without a begin time
    runner.squeue = squeue_with(("28", {**ADMIN_HELD, "eligible_time": 0}))
    backend.snapshot()
    assert runner.lines.count("update JobId=28 StartTime=now+120") == 1
    assert events(backend, "admin_hold") == []  # noticed once
    # the operator releases it: the policy gets it back, pending under its lease
    runner.squeue = squeue_with(("28", RELEASED))
    snap = backend.snapshot()
    assert snap.job("28").state is JobState.PENDING
    assert backend.admin_held == set()
    assert events(backend, "admin_release") == [{"job_id": "28", "state": "PENDING"}]
    [r] = backend.apply([Start(job_id="28", placement=Placement.of({"a100-1": [2, 3]}))])
    assert r.ok


def test_changed_time_limit_and_cancelled_job_are_noticed(tmp_path: Path) -> None:
    backend, runner = make(recorded("squeue_mixed.json"), tmp_path)
    backend.snapshot()
    assert backend.take_notices() == []  # jobs that ended before the first look: no notice
    runner.squeue = squeue_with(("38", {"time_limit": 3}))
    backend.snapshot()
    assert events(backend, "time_limit") == [
        {"job_id": "38", "limit_was_s": None, "limit_s": 180.0}
    ]
    assert not [x for x in runner.lines if "timelimit" in x.lower()]  # never set by us
    runner.squeue = squeue_with(
        ("38", {"time_limit": 3, "job_state": "CANCELLED", "end_time": NOW}),
        ("29", {"job_state": "CANCELLED", "end_time": NOW}),
    )
    backend.snapshot()
    ends = {f["job_id"]: f["state"] for f in events(backend, "job_end")}
    assert ends == {"38": "CANCELLED", "29": "CANCELLED"}
    backend.snapshot()
    assert events(backend, "job_end") == []  # once


def test_start_slurm_does_not_carry_out_is_taken_back_with_slurms_reason(tmp_path: Path) -> None:
    now = [NOW]
    backend, runner = make(
        recorded("squeue_mixed.json"), tmp_path, clock=lambda: now[0], start_timeout_s=30
    )
    backend.snapshot()
    [r] = backend.apply([Start(job_id="28", placement=Placement.of({"a100-1": [2, 3]}))])
    assert r.ok
    now[0] += 31
    runner.squeue = squeue_with(
        ("28", {"state_reason": "PartitionDown", "priority": 1, "eligible_time": NOW})
    )
    backend.snapshot()
    [back] = events(backend, "start_taken_back")
    assert (back["job_id"], back["nodes"], back["slurm_reason"]) == ("28", ["a100-1"],
                                                                     "PartitionDown")
    assert back["after_s"] == 31.0


def test_drained_node_is_noticed_and_gets_no_placement(tmp_path: Path) -> None:
    backend, runner = make(recorded("squeue_mixed.json"), tmp_path)
    sinfo = copy.deepcopy(runner.sinfo)
    [node] = [n for n in sinfo["nodes"] if n["name"] == "a100-1"]
    node.update(state="draining", state_flags=["DRAIN"], reason="maintenance")
    runner.sinfo = sinfo
    snap = backend.snapshot()
    assert snap.free_gpus["a100-1"] == ()
    assert backend.unavailable_nodes == {"a100-1": "MIXED+DRAIN"}
    [seen] = events(backend, "node_unavailable")
    assert (seen["node"], seen["state"], seen["reason"]) == ("a100-1", "MIXED+DRAIN", "maintenance")
    [r] = backend.apply([Start(job_id="38", placement=Placement.of({"a100-1": [2]}))])
    assert not r.ok
    node.update(state="mixed", state_flags=[], reason="")
    backend.sinfo_refresh_s = 0.0
    backend.snapshot()
    assert events(backend, "node_available") == [{"node": "a100-1", "state": "MIXED"}]


def test_daemon_logs_what_it_noticed_and_never_releases_an_operators_hold(tmp_path: Path) -> None:
    runner = FakeRunner(squeue_with(("28", ADMIN_HELD)))
    [node] = [n for n in runner.sinfo["nodes"] if n["name"] == "v100-1"]
    node.update(state="drained", state_flags=["DRAIN"], reason="bad fan")
    cfg = ServiceConfig(
        policy="fifo",
        period_s=0.05,
        settings_dir=tmp_path / "settings",
        state_dir=tmp_path / "state",
        observability={"decision_log": tmp_path / "decisions.jsonl", "metrics_port": None},
    )
    d = Daemon(cfg, runner=runner, notifier=Notifier({}), once=True)
    d.backend.min_query_interval_s = 0.0
    assert d.run() == 0
    assert d.report is not None and sorted(d.report.released, key=int) == ["33", "37"]
    assert not [x for x in runner.lines if x.startswith("release 28") or "JobId=28 Node" in x]
    rows = read_decisions(tmp_path / "decisions.jsonl")
    assert rows[0]["event"] == "reconcile"
    noticed = {(r["event"], r.get("job_id") or r.get("node")) for r in rows if "event" in r}
    assert {("admin_hold", "28"), ("node_unavailable", "v100-1")} <= noticed
    starts = [r for r in rows if r.get("kind") == "start"]
    assert starts and all(r["job_id"] != "28" for r in starts)
    assert all(p["node"] != "v100-1" for r in starts for p in r["action"]["placement"]["parts"])


def test_partition_down_offers_none_of_its_pending_jobs_until_up_again(tmp_path: Path) -> None:
    backend, runner = make(recorded("squeue_mixed.json"), tmp_path, sinfo_refresh_s=0.0)
    runner.partitions = (
        "PartitionName=sched AllowGroups=ALL Nodes=a100-[1-2],v100-[1-2] State=DOWN TotalNodes=4\n"
        "PartitionName=direct State=UP\n"
    )
    snap = backend.snapshot()
    assert [v.job_id for v in snap.pending] == []  # 38 and the held jobs wait for the partition
    assert {v.job_id for v in snap.running} >= {"29", "30", "31", "39"}  # running ones go on
    [down] = events(backend, "partition_unavailable")
    assert (down["partition"], down["state"]) == ("sched", "DOWN")
    [r] = backend.apply([Start(job_id="38", placement=Placement.of({"a100-1": [2]}))])
    assert not r.ok
    runner.partitions = "PartitionName=sched State=UP\nPartitionName=direct State=UP\n"
    snap = backend.snapshot()
    assert "38" in {v.job_id for v in snap.pending}
    assert events(backend, "partition_available") == [{"partition": "sched", "state": "UP"}]


def test_partition_states_are_read_from_scontrols_one_line_form() -> None:
    from slurm_sched.slurm.parse import read_partition_states

    text = (
        "PartitionName=sched AllowGroups=ALL Default=YES State=INACTIVE TotalCPUs=8\n"
        "PartitionName=direct State=up\n\nnot a partition line\n"
    )
    assert read_partition_states(text) == {"sched": "INACTIVE", "direct": "UP"}


def test_decision_log_event_takes_any_field_name(tmp_path: Path) -> None:
    """A notice's fields go into the event line whatever their names, ``now_s`` and ``name``
    included (the method's own parameters are positional-only)."""
    from slurm_sched.service.decision_log import DecisionLog

    log = DecisionLog(tmp_path / "d.jsonl", "fifo")
    log.event(5.0, "time_limit", now_s=180.0, name="x", job_id="1")
    log.close()
    [row] = read_decisions(tmp_path / "d.jsonl")
    assert (row["event"], row["now_s"], row["name"], row["t"]) == ("time_limit", 180.0, "x", 5.0)
