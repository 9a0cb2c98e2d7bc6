"""SlurmBackend's fail-safe behaviour, driven by recorded ``squeue``/``sinfo`` output.

The runner is the process boundary; here it is replaced by a fake that answers with JSON
recorded on the mini cluster (``tests/golden/slurm/``) and records the commands it is given.
These tests need no Slurm; the contract suite covers the real cluster.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from slurm_sched.errors import BackendUnavailableError
from slurm_sched.model import JobState, Placement, Preempt, Start
from slurm_sched.slurm.backend import SlurmBackend
from slurm_sched.slurm.runner import CommandResult, CommandRunner

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "slurm"
NOW = 1795368100.0


def recorded(name: str) -> dict[str, Any]:
    return json.loads((GOLDEN / name).read_text())


class FakeRunner(CommandRunner):
    """Answers Slurm commands from recorded documents; ``errors`` maps scontrol lines to the
    error text scontrol would print for them."""

    def __init__(self, squeue: dict[str, Any]) -> None:
        super().__init__(env={})
        self.squeue = squeue
        self.sinfo = recorded("sinfo.json")
        self.errors: dict[str, str] = {}
        self.lines: list[str] = []
        self.up = True

    def _exec(
        self, argv: Sequence[str], stdin: str | None = None, merge_stderr: bool = False
    ) -> CommandResult:
        argv = tuple(argv)
        if argv == ("squeue", "--json"):
            doc = self.squeue if self.up else recorded("squeue_unreachable.json")
            return CommandResult(argv, 0, json.dumps(doc), "")
        if argv == ("sinfo", "--json"):
            return CommandResult(argv, 0, json.dumps(self.sinfo), "")
        if argv == ("scontrol", "ping"):
            state = "UP" if self.up else "DOWN"
            return CommandResult(
                argv, 0 if self.up else 1, f"Slurmctld(primary) at vm is {state}", ""
            )
        if argv == ("scontrol",):  # batch on stdin
            out, rc = [], 0
            for line in (stdin or "").splitlines():
                self.lines.append(line)
                out.append(f"scontrol: {line}")
                if not self.up:
                    out.append("Unable to contact slurm controller (connect failure)")
                    rc = 1
                elif line in self.errors:
                    out.append(self.errors[line])
                    rc = 1
            out.append("scontrol: ")
            return CommandResult(argv, rc, "\n".join(out) + "\n", "")
        line = " ".join(argv[1:]) if argv[0] == "scontrol" else " ".join(argv)
        self.lines.append(line)
        if not self.up:
            return CommandResult(argv, 1, "", "Unable to contact slurm controller")
        if line in self.errors:
            return CommandResult(argv, 1, "", self.errors[line])
        return CommandResult(argv, 0, "", "")


def squeue_with(*changes: tuple[str, dict[str, Any]], drop: Sequence[str] = ()) -> dict[str, Any]:
    doc = copy.deepcopy(recorded("squeue_mixed.json"))
    jobs = {str(j["job_id"]): j for j in doc["jobs"]}
    for jid, fields in changes:
        if jid in jobs:
            jobs[jid].update(fields)
        else:
            base = copy.deepcopy(jobs["28"])
            base.update({"job_id": int(jid), **fields})
            jobs[jid] = base
    doc["jobs"] = [j for k, j in jobs.items() if k not in drop]
    return doc


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
    # job 38 was released by someone else (no intent of ours): held again
    assert "hold 38" in runner.lines


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
        assert f"release {jid}" in runner.lines
    left = backend.left_to_slurm
    assert "batch_size" in left["50"] and "foo" in left["51"]
    assert "no GPU" in left["52"] and "64 GPU" in left["53"]
    runner.lines.clear()
    backend.snapshot()  # released once, not again
    assert not [x for x in runner.lines if x.startswith("release")]
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
    bad_pin = "update JobId=28 NodeList=a100-1"  # a fresh job: only the node list changes
    runner.errors[bad_pin] = "Requested node configuration is not available"
    [r] = backend.apply([Start(job_id="28", placement=Placement.of({"a100-1": [2, 3]}))])
    assert not r.ok and "node configuration" in (r.error or "")
    assert "release 28" not in runner.lines  # never released after a failed pin
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
    now[0] += 60  # still not running: the GPUs were not free after all; hold it again
    runner.squeue = squeue_with(("28", {"state_reason": "Resources", "priority": 1}))
    snap = backend.snapshot()
    assert snap.job("28").state is JobState.PENDING
    assert "hold 28" in runner.lines
    assert backend.stats.start_timeouts == 1


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
    assert runner.lines[-2:] == ["scancel --batch --signal=USR1 29", "requeuehold 29"]
    snap = backend.snapshot()
    assert snap.job("29").state is JobState.PENDING and snap.job("29").placement is None
    assert 0 in snap.free_gpus["a100-1"]
    # Slurm requeued it, then it ran again and completed
    runner.squeue = squeue_with(
        (
            "29",
            {
                "job_state": "PENDING",
                "state_reason": "JobHeldUser",
                "priority": 0,
                "restart_cnt": 1,
                "gres_detail": [],
                "start_time": NOW + 121,
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
