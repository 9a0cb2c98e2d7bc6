"""snapshot files (exact round trip, errors), replay (decide once, --simulate), explain: offline,
on snapshots taken from the simulator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurm_sched.cli import main
from slurm_sched.controller import Controller
from slurm_sched.errors import InputError, SimulationStalledError
from slurm_sched.model import (
    ClusterSnapshot,
    JobSettings,
    JobState,
    JobView,
    Placement,
    parse_cluster_spec,
)
from slurm_sched.policy import registry
from slurm_sched.service.snapshot_io import (
    FORMAT,
    SnapshotFile,
    capture_live,
    load_snapshot,
    simulate_from,
    snapshot_document,
    write_snapshot,
)
from slurm_sched.service.tools_cli import explain_job, queue_order
from slurm_sched.sim.backend import SimulatedBackend
from slurm_sched.sim.clock import SimulatedClock
from tests.builders import job

CLUSTER = "1x4:a100,1x4:v100"


def workload():
    return [
        job("a", 0, 4, 500, model="resnet50", attrs={"plans": ("dp", "gc"), "n": {"k": [1, 2.5]}}),
        job("b", 2, 2, 300, gpu_type="v100", user="alice"),
        job("c", 4, 2, 900, gpu_type="v100", batch_size=64, iterations=90),
        job("d", 6, 4, 200, stage_times_ms=(1.5, 2.0, 0.25)),
        job("e", 8, 1, 100),
        job("f", 10, 8, 50),
        job("g", 12, 2, 400, gpu_type="a100"),
    ]


def mid_run(policy: str = "srtf", until_s: float = 100.0) -> SimulatedBackend:
    sim = SimulatedBackend(parse_cluster_spec(CLUSTER), workload(), restart_overhead_s=30,
                           max_jobs_per_gpu=1)
    Controller(sim, registry.create(policy), SimulatedClock(sim)).run(until_s=until_s)
    return sim


def save(tmp_path: Path, sim: SimulatedBackend, name: str = "snap.json") -> Path:
    sf = SnapshotFile(snapshot=sim.snapshot(), captured_at_s=1.7e9, source="simulator",
                      partitions=("sched",), notes={"why": ("a", 1)})
    return write_snapshot(sf, tmp_path / name)


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(list(args))
    out = capsys.readouterr()
    return rc, out.out, out.err


# ------------------------------------------------------------------ files
def test_round_trip_is_exact(tmp_path):
    sim = mid_run()
    snap = sim.snapshot()
    states = {j.state for j in snap.jobs}
    assert JobState.RUNNING in states and JobState.PENDING in states
    assert any(j.preemptions for j in snap.jobs) or any(j.stall_until_s for j in snap.jobs)
    path = save(tmp_path, sim)
    sf = load_snapshot(path)
    got = sf.snapshot
    assert got.now_s == snap.now_s and got.cluster == snap.cluster
    assert got.jobs == snap.jobs, "every JobView field, progress included"
    assert got.free_gpus == snap.free_gpus and got.pending == snap.pending
    a = got.by_id["a"].spec.attrs
    assert a["plans"] == ("dp", "gc") and isinstance(a["plans"], tuple)
    assert a["n"] == {"k": [1, 2.5]}
    assert got.by_id["d"].spec.stage_times_ms == (1.5, 2.0, 0.25)
    assert (sf.captured_at_s, sf.source, sf.partitions) == (1.7e9, "simulator", ("sched",))
    assert sf.notes == {"why": ("a", 1)}
    again = write_snapshot(sf, tmp_path / "again.json")
    assert again.read_text() == path.read_text(), "writing what was read gives the same file"
    doc = json.loads(path.read_text())
    assert doc["format"] == FORMAT and doc["version"] == 1 and doc["captured_at"].endswith("Z")


def test_round_trip_of_settings_and_suspended_jobs(tmp_path):
    c = parse_cluster_spec("1x4")
    jobs = (
        JobView(spec=job("s", 0, 2, 50), state=JobState.SUSPENDED,
                placement=Placement.of({"node-1": [0, 1]}),
                settings=JobSettings(accumulation_steps=2, sub_batch_size=8, plan="2-2-1",
                                     group_id="g1", slot=1, cpus=3, mem_gb=1.5),
                first_start_s=1.0, accounted_at_s=9.0, executed_s=7.25, work_done_s=6.5,
                stall_until_s=3.0, preemptions=2),
        JobView(spec=job("p", 1, 1, 20)),
    )
    snap = ClusterSnapshot(now_s=9.0, cluster=c, jobs=jobs, known_free_gpus={"node-1": (3,)})
    path = write_snapshot(SnapshotFile(snap, 5.0, "test"), tmp_path / "s.json")
    got = load_snapshot(path).snapshot
    assert got.jobs == jobs and got.free_gpus == {"node-1": (3,)}


def _doc(tmp_path: Path) -> dict:
    return json.loads(save(tmp_path, mid_run()).read_text())


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d.update(format="x"), "field 'format' = 'x': not a snapshot file"),
        (lambda d: d.update(version=2), "field 'version' = 2: unsupported snapshot version"),
        (lambda d: d.update(version=True), "field 'version' = True"),
        (lambda d: d.pop("jobs"), "field 'jobs': missing key"),
        (lambda d: d.update(now_s="soon"), "field 'now_s' = 'soon': wrong type"),
        (lambda d: d["jobs"][0]["spec"].update(num_gpus=0), "field 'jobs[0].spec.num_gpus' = 0"),
        (lambda d: d["jobs"][1].update(state="lost"), "field 'jobs[1].state' = 'lost'"),
        (lambda d: d["jobs"].append(d["jobs"][0]), "duplicate job id"),
        (lambda d: d["cluster"]["nodes"][0].update(num_gpus=-1),
         "field 'cluster.nodes.0.num_gpus' = -1"),
        (lambda d: d["free_gpus"].update(nowhere=[0]), "field 'free_gpus' = 'nowhere'"),
        (lambda d: d["free_gpus"].update({"a100-1": [9]}), "field 'free_gpus.a100-1' = 9"),
    ],
)
def test_bad_snapshot_files_are_one_line_input_errors(tmp_path, change, expected):
    doc = _doc(tmp_path)
    change(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError) as e:
        load_snapshot(path)
    assert expected in str(e.value) and str(path) in str(e.value)
    assert "\n" not in str(e.value)


def test_placement_on_a_missing_gpu_and_free_gpu_held_are_refused(tmp_path):
    doc = _doc(tmp_path)
    run = next(j for j in doc["jobs"] if j["state"] == "running")
    run["placement"]["parts"][0]["gpus"] = [7]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="no such GPU in the cluster"):
        load_snapshot(path)
    doc = _doc(tmp_path)
    run = next(j for j in doc["jobs"] if j["state"] == "running")
    part = run["placement"]["parts"][0]
    doc["free_gpus"][part["node"]].append(part["gpus"][0])
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="not a free GPU of this node"):
        load_snapshot(path)


@pytest.mark.parametrize(("content", "expected"), [
    (None, "no such snapshot file"),
    (b"\xff\xfe", "not UTF-8"),
    (b"{", "not valid JSON"),
    (b"[1]", "not an object"),
])
def test_unreadable_files(tmp_path, content, expected):
    path = tmp_path / "f.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(InputError, match=expected):
        load_snapshot(path)


# ------------------------------------------------------------------ replay
@pytest.mark.parametrize(("policy", "until_s"), [("srtf", 100.0), ("fifo", 20.0)])
def test_simulating_from_a_snapshot_continues_the_run_exactly(tmp_path, policy, until_s):
    """Stateless policies: replaying from a mid-run snapshot ends exactly like the whole run."""
    whole = SimulatedBackend(parse_cluster_spec(CLUSTER), workload(), restart_overhead_s=30)
    Controller(whole, registry.create(policy), SimulatedClock(whole)).run()
    expected = {c.spec.job_id: (c.finish_s, c.first_start_s, c.preemptions, c.executed_s)
                for c in whole.completed()}
    sim = mid_run(policy, until_s)
    assert sim.snapshot().running and len(sim.snapshot().jobs) + len(sim.completed()) == 7
    done_before = {c.spec.job_id for c in sim.completed()}
    snap = load_snapshot(save(tmp_path, sim)).snapshot
    res = simulate_from(snap, registry.create(policy), restart_overhead_s=30)
    got = {c.spec.job_id: (c.finish_s, c.first_start_s, c.preemptions, c.executed_s)
           for c in res.completed}
    assert set(got) == set(expected) - done_before
    for jid, values in got.items():
        assert values == pytest.approx(expected[jid], abs=1e-6), jid
    assert res.metrics.jobs == len(got) and not res.blocked_gpus
    assert res.metrics.makespan_s == pytest.approx(max(v[0] for v in got.values()) - snap.now_s)


def test_replay_prints_the_actions_and_metrics(tmp_path, capsys):
    path = save(tmp_path, mid_run("fifo", until_s=0))
    rc, out, err = run_cli(capsys, "replay", str(path), "--policy", "srtf", "--simulate")
    assert rc == 0, err
    assert "srtf would now take" in out and "start" in out
    assert "avg JCT (h)" in out and "srtf" in out
    rc, out, err = run_cli(capsys, "replay", str(path), "--policy", "srtf", "--simulate",
                           "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["policy"] == "srtf" and doc["actions"][0]["kind"] in ("start", "preempt")
    assert doc["metrics"]["jobs"] == len(load_snapshot(path).snapshot.jobs)


def test_replay_with_safety_reports_refusals(tmp_path, capsys):
    """SRTF preempts the long job that just started; the minimum run time refuses it."""
    c = parse_cluster_spec("1x4")
    long = JobView(spec=job("long", 0, 4, 5000), state=JobState.RUNNING,
                   placement=Placement.of({"node-1": [0, 1, 2, 3]}), first_start_s=90.0,
                   accounted_at_s=100.0, executed_s=10.0, work_done_s=10.0, rate=1.0)
    short = JobView(spec=job("short", 95, 4, 10))
    snap = ClusterSnapshot(now_s=100.0, cluster=c, jobs=(long, short))
    path = write_snapshot(SnapshotFile(snap, 100.0, "test"), tmp_path / "s.json")
    rc, out, _ = run_cli(capsys, "replay", str(path), "--policy", "srtf", "--format", "json")
    assert [a["kind"] for a in json.loads(out)["actions"]] == ["preempt", "start"]
    rc, out, err = run_cli(capsys, "replay", str(path), "--policy", "srtf", "--safety",
                           "--format", "json", "--simulate")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["actions"] == []
    assert [r["action"]["job_id"] for r in doc["refusals"]] == ["long", "short"]
    assert "minimum before a restart is 300 s" in doc["refusals"][0]["why"]
    assert doc["metrics"]["jobs"] == 2


@pytest.mark.parametrize(("args", "expected"), [
    (["--policy", "nope"], "field 'policy' = 'nope': unknown policy"),
    (["--policy", "fifo", "--progress-model", "nope"], "nope"),
])
def test_replay_bad_input_is_one_line(tmp_path, capsys, args, expected):
    path = save(tmp_path, mid_run())
    rc, _, err = run_cli(capsys, "replay", str(path), *args)
    assert rc == 2 and expected in err and err.count("\n") == 1


def test_replay_of_a_missing_file_names_it(tmp_path, capsys):
    rc, _, err = run_cli(capsys, "replay", str(tmp_path / "gone.json"), "--policy", "fifo")
    assert rc == 2 and "gone.json: no such snapshot file" in err and err.count("\n") == 1


def test_unavailable_gpus_stay_unavailable_in_the_replay():
    c = parse_cluster_spec("1x4")
    jobs = (JobView(spec=job("x", 0, 2, 10)), JobView(spec=job("y", 0, 3, 10)))
    # GPU 3 is held by a job the snapshot does not show
    snap = ClusterSnapshot(now_s=0.0, cluster=c, jobs=jobs, known_free_gpus={"node-1": (0, 1, 2)})
    res = simulate_from(snap, registry.create("fifo"), restart_overhead_s=0)
    assert res.blocked_gpus == (("node-1", 3),)
    done = {x.spec.job_id: x for x in res.completed}
    assert done["y"].first_start_s == pytest.approx(10.0), "y never got GPU 3: waited for x"
    big = (JobView(spec=job("z", 0, 4, 10)),)
    snap = ClusterSnapshot(now_s=0.0, cluster=c, jobs=big, known_free_gpus={"node-1": (0, 1, 2)})
    with pytest.raises(SimulationStalledError, match="z"):
        simulate_from(snap, registry.create("fifo"))


# ------------------------------------------------------------------ explain
def test_explain_a_waiting_job(tmp_path, capsys):
    sim = mid_run("fifo", until_s=50)
    snap = sim.snapshot()
    waiting = [j.job_id for j in snap.pending]
    assert "f" in waiting, "the 8-GPU job waits behind the others"
    path = save(tmp_path, sim)
    rc, out, err = run_cli(capsys, "explain", "f", "--policy", "fifo", "--snapshot", str(path))
    assert rc == 0, err
    assert "job f: pending; asks for 8 GPU(s) of any type" in out
    assert f"of {len(waiting)} waiting job(s) by submission (fifo exposes no queue order)" in out
    assert "free GPUs (free/total per type): a100 " in out and "8 needed" in out
    assert "does not fit now" in out and "would fit if these ended or moved: job " in out
    assert "fifo says: job f waits: it needs 8 GPU(s)" in out


def test_explain_running_job_queue_of_tiresias_and_safety_lines():
    sim = mid_run("tiresias", until_s=50)
    snap = sim.snapshot()
    run = snap.running[0].job_id
    lines = explain_job(snap, registry.create("tiresias"), run)
    assert lines[0].startswith(f"job {run}: running") and lines[1].startswith("runs on ")
    assert any("queue Q0" in line for line in lines)
    order = queue_order(registry.create("tiresias"), snap, snap.now_s)
    assert order is not None and set(order[0]) == {j.job_id for j in snap.pending}
    assert "queues (Q0 first)" in order[1]
    assert queue_order(registry.create("fifo"), snap, snap.now_s) is None


def test_explain_a_job_that_never_fits_and_one_that_fits():
    c = parse_cluster_spec("1x4:a100,1x2:v100")
    jobs = (JobView(spec=job("big", 0, 3, 10, gpu_type="v100")),
            JobView(spec=job("ok", 1, 1, 10, gpu_type="a100")))
    snap = ClusterSnapshot(now_s=5.0, cluster=c, jobs=jobs)
    lines = explain_job(snap, registry.create("fifo"), "big")
    assert any("never fits: the cluster has 2 GPU(s) of type v100" in x for x in lines)
    lines = explain_job(snap, registry.create("sjf"), "ok")
    assert any(x.startswith("fits now") for x in lines)
    assert any(x.startswith("sjf now: start ok a100-1[") for x in lines)


def test_explain_unknown_job_is_one_line(tmp_path, capsys):
    path = save(tmp_path, mid_run())
    rc, _, err = run_cli(capsys, "explain", "nope", "--policy", "fifo", "--snapshot", str(path))
    assert rc == 2 and "field 'job_id' = 'nope': not an active job" in err
    assert err.count("\n") == 1


# ------------------------------------------------------------------ live capture (recorded)
def _recorded_backend(tmp_path: Path):
    from slurm_sched.slurm.backend import SlurmBackend
    from tests.contract.recorded import NOW, FakeRunner, recorded

    fake = FakeRunner(recorded("squeue_mixed.json"))
    backend = SlurmBackend(fake, partitions=["sched"], settings_dir=tmp_path / "settings",
                           clock=lambda: NOW, min_query_interval_s=0.0, dry_run=True)
    return backend, fake


def test_live_capture_changes_nothing_and_round_trips(tmp_path):
    """A recorded Slurm cluster (foreign job, shard jobs, suspended, requeued): the capture runs
    read-only commands only, writes no file, lists what it did not run, and reads back equal."""
    backend, fake = _recorded_backend(tmp_path)
    sf = capture_live(backend, "recorded")
    assert all(line.split()[0] in ("squeue", "sinfo", "ping", "show") for line in fake.lines), \
        fake.lines
    assert not (tmp_path / "settings").exists() or not any((tmp_path / "settings").iterdir())
    # a live backend would renew job 38's lease here (test_slurm_failsafe); dry-run does not
    assert not any("update" in line for line in fake.lines)
    assert isinstance(sf.notes["not_run"], list)
    assert sf.partitions == ("sched",) and sf.source == "recorded"
    snap = sf.snapshot
    assert snap.by_id["32"].state is JobState.SUSPENDED
    assert snap.occupancy[("a100-2", 0)] == ("31", "39")
    got = load_snapshot(write_snapshot(sf, tmp_path / "live.json"))
    assert got.snapshot.jobs == snap.jobs and got.snapshot.free_gpus == snap.free_gpus
    assert got.notes == sf.notes


def test_replay_and_explain_of_a_recorded_cluster(tmp_path, capsys):
    backend, _ = _recorded_backend(tmp_path)
    path = write_snapshot(capture_live(backend, "recorded"), tmp_path / "live.json")
    rc, out, err = run_cli(capsys, "replay", str(path), "--policy", "tiresias", "--simulate",
                           "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["metrics"]["jobs"] == len(load_snapshot(path).snapshot.jobs)
    assert "a100-2:2" in doc["unavailable_gpus"], "held by a job of another partition"
    assert doc["resumed_jobs"] == ["32"], "tiresias never resumes; the replay does at the end"
    rc, out, err = run_cli(capsys, "explain", "28", "--policy", "fifo", "--snapshot", str(path))
    assert rc == 0, err
    assert "job 28: pending; asks for" in out and "of type a100" in out
    assert "held outside the managed partitions" in out or "fits now" in out


def test_snapshot_command_writes_a_file_from_the_live_cluster(tmp_path, capsys, monkeypatch):
    """The CLI path end to end, with the process boundary answered from recordings."""
    from slurm_sched.slurm.runner import CommandRunner
    from tests.contract.recorded import FakeRunner, recorded

    fake = FakeRunner(recorded("squeue_mixed.json"))
    monkeypatch.setattr(CommandRunner, "_exec",
                        lambda self, argv, stdin=None, merge_stderr=False:
                        fake._exec(argv, stdin, merge_stderr))
    out_file = tmp_path / "s.json"
    rc, _, err = run_cli(capsys, "snapshot", "--out", str(out_file), "--partition", "sched",
                         "--settings-dir", str(tmp_path / "settings"))
    assert rc == 0, err
    assert "job(s):" in err and "written to" in err
    assert not fake.lines or all(x.split()[0] in ("sinfo", "squeue") for x in fake.lines)
    assert load_snapshot(out_file).snapshot.by_id["30"].placement is not None


def test_snapshot_document_names_a_value_that_cannot_be_written():
    c = parse_cluster_spec("1x1")
    snap = ClusterSnapshot(now_s=0.0, cluster=c,
                           jobs=(JobView(spec=job("x", 0, 1, 1, attrs={"k": {1, 2}})),))
    with pytest.raises(InputError, match=r"field 'jobs\[0\].spec.attrs.k'"):
        snapshot_document(SnapshotFile(snap, 0.0, "t"))
