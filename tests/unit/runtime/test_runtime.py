"""The job runtime's torch-free parts: sub-batch splitting, plan codes, the job's settings,
progress reports in the backend's format, the profile file and its fit, the Muri coordinator
between real processes, and the launcher's helpers."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from slurm_sched.errors import InputError
from slurm_sched.model import JobSettings, Placement
from slurm_sched.protocol.settings_file import SettingsStore
from slurm_sched.runtime import launch
from slurm_sched.runtime.accumulation import micro_batch_sizes, shard_bounds
from slurm_sched.runtime.interleave import StageInterleaver, StageRecord, alternation, overlap_s
from slurm_sched.runtime.job import load_job_context, settings_dir
from slurm_sched.runtime.plans import parse_plan
from slurm_sched.runtime.profile import (
    InterferencePair,
    ModelProfile,
    Profile,
    Sample,
    fit_linear,
    from_json,
    interference,
    iter_model,
    memory_model,
    read_profile,
    write_pollux_placements,
)
from slurm_sched.runtime.progress import IterationTimer, ProgressReporter


# ---------------------------------------------------------------------------------- sub-batches
@pytest.mark.parametrize(
    ("local", "sub", "steps", "expected"),
    [
        (16, None, 1, [16]),
        (16, None, 4, [4, 4, 4, 4]),
        (10, None, 4, [3, 3, 2, 2]),
        (16, 3, 1, [3, 3, 3, 3, 3, 1]),
        (16, 8, 7, [8, 8]),  # the sub-batch size wins over the step count
        (3, None, 8, [1, 1, 1]),  # never an empty sub-batch
        (4, 64, 1, [4]),
    ],
)
def test_micro_batch_sizes(local, sub, steps, expected):
    sizes = micro_batch_sizes(local, sub_batch_size=sub, accumulation_steps=steps)
    assert sizes == expected
    assert sum(sizes) == local


def test_micro_batch_sizes_rejects_bad_values():
    with pytest.raises(ValueError, match="sub_batch_size"):
        micro_batch_sizes(8, sub_batch_size=0)
    with pytest.raises(ValueError, match="local_batch"):
        micro_batch_sizes(0)


def test_shards_cover_the_global_batch_once():
    for world in (1, 2, 3, 4):
        bounds = [shard_bounds(10, r, world) for r in range(world)]
        assert bounds[0][0] == 0 and bounds[-1][1] == 10
        assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
        assert max(b - a for a, b in bounds) - min(b - a for a, b in bounds) <= 1


# ---------------------------------------------------------------------------------- plans
@pytest.mark.parametrize(
    ("code", "sharded", "offload", "gc", "pure_dp"),
    [
        (None, False, False, False, True),
        ("dp", False, False, False, True),
        ("ga", False, False, False, True),
        ("gc", False, False, True, True),
        ("zero-dp", True, False, False, True),
        ("zero-offload", True, True, False, True),
        ("zero-dp-gc", True, False, True, True),
        ("1-1-4", False, False, False, True),
        ("2-2-1", False, False, False, False),
    ],
)
def test_plan_codes(code, sharded, offload, gc, pure_dp):
    plan = parse_plan(code)
    assert (plan.sharded, plan.offload, plan.activation_checkpointing) == (sharded, offload, gc)
    assert plan.is_pure_data_parallel == pure_dp


def test_unknown_plan_names_the_code():
    with pytest.raises(ValueError, match="'pipedream'"):
        parse_plan("pipedream")


# ---------------------------------------------------------------------------------- settings
def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"SLURM_JOB_ID": "42", "SLURM_SCHED_SETTINGS_DIR": str(tmp_path), **extra}


def test_settings_file_written_by_the_backend_wins_over_hints(tmp_path):
    SettingsStore(tmp_path).write_settings(
        "42",
        JobSettings(accumulation_steps=4, sub_batch_size=8, plan="zero-dp", group_id="g7", slot=1),
        None,
    )
    hints = '{"v":1,"batch_size":64,"iterations":100,"plans":["gc","dp"]}'
    ctx = load_job_context(env=_env(tmp_path, SLURM_SCHED_HINTS=hints))
    assert ctx.settings_source == "file"
    assert ctx.settings == JobSettings(
        accumulation_steps=4, sub_batch_size=8, plan="zero-dp", group_id="g7", slot=1
    )
    assert ctx.plan == "zero-dp"
    assert (ctx.hints.batch_size, ctx.hints.iterations) == (64, 100)
    assert ctx.progress_path == tmp_path / "42.progress.json"


def test_without_a_settings_file_the_submitted_plan_is_used(tmp_path):
    ctx = load_job_context(env=_env(tmp_path, SLURM_SCHED_HINTS='{"v":1,"plans":["gc","dp"]}'))
    assert ctx.settings_source == "hints"
    assert ctx.settings == JobSettings()
    assert ctx.plan == "gc"


def test_bad_settings_file_and_bad_hints_fall_back_with_warnings(tmp_path):
    (tmp_path / "42.json").write_text('{"job_id":"42","accumulation_steps":0}')
    ctx = load_job_context(env=_env(tmp_path, SLURM_SCHED_HINTS='{"v":1,"batch_size":-3}'))
    assert ctx.settings_source == "default"
    assert ctx.settings == JobSettings()
    assert any("accumulation_steps" in w and "= 0" in w for w in ctx.warnings)
    assert any("batch_size" in w for w in ctx.warnings)


def test_a_run_takes_the_settings_written_for_its_own_nodes(tmp_path):
    """A job released on a100-1 and placed again on a100-2 may still be started by Slurm on
    a100-1 (the earlier go) after the second file was written: it runs with the first one."""
    store = SettingsStore(tmp_path)
    store.write_settings("42", JobSettings(accumulation_steps=2), Placement.of({"a100-1": [0]}))
    store.write_settings("42", JobSettings(accumulation_steps=4), Placement.of({"a100-2": [1]}))
    on = {"SLURM_SCHED_HINTS": '{"v":1}', "SLURM_JOB_NUM_NODES": "1"}
    first = load_job_context(env=_env(tmp_path, SLURMD_NODENAME="a100-1", **on))
    second = load_job_context(env=_env(tmp_path, SLURMD_NODENAME="a100-2", **on))
    assert (first.settings.accumulation_steps, second.settings.accumulation_steps) == (2, 4)
    assert first.settings_doc["gpus_per_node"] == {"a100-1": 1}
    assert "earlier" not in first.settings_doc
    assert first.warnings == second.warnings == ()


def test_a_run_on_nodes_the_scheduler_did_not_choose_ignores_the_file(tmp_path):
    SettingsStore(tmp_path).write_settings(
        "42", JobSettings(accumulation_steps=4), Placement.of({"a100-1": [0], "a100-2": [0]})
    )
    hints = '{"v":1,"plans":["gc"]}'
    elsewhere = load_job_context(
        env=_env(
            tmp_path, SLURMD_NODENAME="a100-3", SLURM_JOB_NUM_NODES="2", SLURM_SCHED_HINTS=hints
        )
    )
    assert (elsewhere.settings_source, elsewhere.settings, elsewhere.plan) == (
        "hints",
        JobSettings(),
        "gc",
    )
    assert any("no settings for this run on a100-3" in w for w in elsewhere.warnings)
    one_node = load_job_context(
        env=_env(
            tmp_path, SLURMD_NODENAME="a100-1", SLURM_JOB_NUM_NODES="1", SLURM_SCHED_HINTS=hints
        )
    )
    assert one_node.settings_source == "hints"
    both = load_job_context(
        env=_env(
            tmp_path, SLURMD_NODENAME="a100-2", SLURM_JOB_NUM_NODES="2", SLURM_SCHED_HINTS=hints
        )
    )
    assert both.settings.accumulation_steps == 4


def test_settings_dir_defaults_to_the_mini_clusters():
    assert settings_dir({"MINI_SLURM_STATE": "/tmp/x"}) == Path("/tmp/x/job-settings")
    assert settings_dir({"SLURM_SCHED_SETTINGS_DIR": "/a", "MINI_SLURM_STATE": "/b"}) == Path("/a")
    assert settings_dir({}) is None


# ---------------------------------------------------------------------------------- progress
def test_progress_report_is_read_by_the_backend(tmp_path):
    path = SettingsStore(tmp_path).progress_path("42")
    rep = ProgressReporter(path, every_s=3600, static={"iterations_total": 50})
    assert rep.report(7, 0.25, force=True)
    assert not rep.report(8, 0.25)  # throttled
    prog = SettingsStore(tmp_path).read_progress("42")
    assert prog is not None
    assert (prog.iterations_done, prog.iteration_time_s) == (7, 0.25)
    assert abs(prog.timestamp_s - time.time()) < 60
    doc = json.loads(path.read_text())
    assert doc["iterations_total"] == 50 and doc["state"] == "running"


def test_iteration_timer_skips_the_first_step_after_a_start():
    timer = IterationTimer(window=3)
    assert timer.recent_s() is None
    timer.add(5.0)
    assert timer.recent_s() == 5.0  # only the warm-up step so far
    for t in (1.0, 1.2, 0.9, 1.1):
        timer.add(t)
    assert timer.recent_s() == 1.1  # median of the last 3, warm-up step left out


# ---------------------------------------------------------------------------------- profiles
def test_linear_fit_recovers_alpha_and_beta():
    b = [1, 2, 4, 8, 16, 32]
    fit = fit_linear(b, [0.004 + 0.0015 * x for x in b])
    assert fit.intercept == pytest.approx(0.004, rel=1e-9)
    assert fit.slope == pytest.approx(0.0015, rel=1e-9)
    assert fit.max_rel_err < 1e-9
    with pytest.raises(ValueError, match="distinct"):
        fit_linear([4, 4], [1.0, 1.1])


def _profile() -> Profile:
    samples = [Sample(b, 0.002 + 0.001 * b, 0.0001, 0.3 + 0.01 * b, 5) for b in (1, 4, 16, 64)]
    prof = Profile(provenance={"device": "cpu"})
    prof.models["toy"] = ModelProfile("toy", "cpu", samples, 1000, "cpu_peak_rss")
    prof.interference = [
        InterferencePair("toy", 4, "other", 8, 0.006, 0.009),
        InterferencePair("toy", 64, "other", 8, 0.066, 0.070),
    ]
    return prof


def test_profile_file_round_trip(tmp_path):
    path = _profile().write(tmp_path / "p.json")
    doc = json.loads(path.read_text())
    assert doc["format"] == "slurm_sched.profile" and doc["version"] == 1
    assert doc["models"]["toy"]["compute"]["alpha_s"] == pytest.approx(0.002)
    assert doc["models"]["toy"]["memory"]["m1_gb"] == pytest.approx(0.01)
    assert doc["interference"][0]["xi"] == pytest.approx(1.5)
    back = read_profile(path)
    assert back.models["toy"].samples == _profile().models["toy"].samples
    assert back.interference == _profile().interference


def test_bad_profile_names_the_field():
    doc = _profile().to_json()
    doc["models"]["toy"]["samples"][1]["iter_time_s"] = -1
    with pytest.raises(InputError, match=r"models\.toy\.samples\[1\]"):
        from_json(doc)
    with pytest.raises(InputError, match="version"):
        from_json({**_profile().to_json(), "version": 7})


def test_profile_adapters_for_sjf_bsbf(tmp_path):
    from slurm_sched.perf.sjf_bsbf_model import fit_iter_model

    prof = _profile()
    m = prof.models["toy"]
    im = iter_model(m)
    assert im.t_comp(10) == pytest.approx(0.012)
    assert im.t_iter(5, 2, 1, 1) == pytest.approx(2 * (0.002 + 0.005))  # eq. 7, one replica
    assert memory_model(m).mem_gb(10) == pytest.approx(0.4)
    xi = interference(prof, default=1.7)
    assert xi.xi("toy", 4, "other", 8) == pytest.approx(1.5)
    assert xi.xi("toy", 50, "other", 8) == pytest.approx(0.070 / 0.066)  # nearest batch
    assert xi.xi("toy", 4, "unknown", 8) == 1.7
    # the samples in Pollux's layout go through SJF-BSBF's own fitting code
    write_pollux_placements(m, tmp_path)
    fitted = fit_iter_model("toy", tmp_path)
    for b in (1, 4, 16, 64):
        assert fitted.t_comp(b) == pytest.approx(0.002 + 0.001 * b, rel=0.02)


# ---------------------------------------------------------------------------------- interleaving
def test_overlap_and_alternation_of_records():
    a = [StageRecord(0, "compute", 0.0, 1.0), StageRecord(2, "compute", 2.0, 3.0)]
    b = [StageRecord(1, "compute", 1.0, 2.0), StageRecord(3, "compute", 2.5, 3.5)]
    assert overlap_s(a, b) == pytest.approx(0.5)
    assert alternation({"A": a, "B": b}) == ["A", "B", "A", "B"]


_MEMBER = textwrap.dedent(
    """
    import json, sys, time
    from slurm_sched.runtime.interleave import StageInterleaver
    slot, n, out, state = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    with StageInterleaver("grp", slot, ("load", "compute", "sync"), state_dir=state,
                          node="n1", record=True, stall_timeout_s=2.0) as turns:
        while len(turns.members()) < 3:   # start together: all three joined
            time.sleep(0.005)
        for _ in range(n):
            for stage in ("load", "compute", "sync"):
                with turns.stage(stage):
                    time.sleep(0.01)
    json.dump([r.__dict__ for r in turns.records], open(out, "w"))
    """
)


def test_three_processes_take_turns_per_stage(tmp_path):
    """Three members with three stages: in every slot each runs a different stage (Eq. 3), no
    stage ever runs in two processes at once, and each one's stages go in order."""
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _MEMBER,
                str(q),
                "8",
                str(tmp_path / f"{q}.json"),
                str(tmp_path / "state"),
            ]
        )
        for q in range(3)
    ]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0]
    recs = {
        q: [StageRecord(**r) for r in json.loads((tmp_path / f"{q}.json").read_text())]
        for q in range(3)
    }
    by_slot: dict[int, dict[int, str]] = {}
    for q, rs in recs.items():
        assert [r.stage for r in rs] == ["load", "compute", "sync"] * 8
        for r in rs:
            by_slot.setdefault(r.slot, {})[q] = r.stage
    shared = [stages for stages in by_slot.values() if len(stages) == 3]
    assert len(shared) >= 20
    assert all(len(set(stages.values())) == 3 for stages in shared)
    for stage in ("load", "compute", "sync"):
        for q1 in range(3):
            for q2 in range(q1 + 1, 3):
                s1 = [r for r in recs[q1] if r.stage == stage]
                s2 = [r for r in recs[q2] if r.stage == stage]
                assert overlap_s(s1, s2) == 0.0


def test_a_dead_member_does_not_block_the_group(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    state = tmp_path / "state" / "n1"
    state.mkdir(parents=True)
    # a member (slot 1) that died without leaving, in the middle of slot 0
    (state / "grp.json").write_text(
        json.dumps(
            {"slot": 0, "members": {"1": {"pid": dead.pid, "arrived": -1, "seen_at": time.time()}}}
        )
    )
    turns = StageInterleaver(
        "grp", 0, ("data", "compute"), state_dir=tmp_path / "state", node="n1", stall_timeout_s=60
    )
    t0 = time.monotonic()
    with turns:
        for _ in range(3):
            with turns.stage("data"):
                pass
            with turns.stage("compute"):
                pass
    assert time.monotonic() - t0 < 5.0
    assert turns.members() == {}


def test_a_slot_is_taken_once_per_node(tmp_path):
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        state = tmp_path / "n1"
        state.mkdir()
        (state / "grp.json").write_text(
            json.dumps(
                {
                    "slot": 0,
                    "members": {"0": {"pid": other.pid, "arrived": -1, "seen_at": time.time()}},
                }
            )
        )
        with pytest.raises(RuntimeError, match="slot 0 is already taken"):
            StageInterleaver("grp", 0, state_dir=tmp_path, node="n1").join()
    finally:
        other.kill()
        other.wait()


# ---------------------------------------------------------------------------------- launcher
def test_launcher_worker_count_and_program():
    assert launch.workers_per_node({"CUDA_VISIBLE_DEVICES": "0,1,3"}) == 3
    assert launch.workers_per_node({"CUDA_VISIBLE_DEVICES": "", "SLURM_GPUS_ON_NODE": "2"}) == 2
    assert launch.workers_per_node({}) == 1
    assert launch.workers_per_node({"CUDA_VISIBLE_DEVICES": "0,1"}, requested=1) == 1
    assert launch.worker_threads({"SLURM_CPUS_ON_NODE": "1"}, 2) == 1
    assert launch.worker_threads({"SLURM_CPUS_ON_NODE": "2"}, 1) == min(2, launch.usable_cpus())
    assert launch.program_argv(["t.py", "-x"]) == [sys.executable, "t.py", "-x"]
    assert launch.program_argv(["-m", "pkg.mod"]) == [sys.executable, "-m", "pkg.mod"]
    assert launch.program_argv(["./run", "a"]) == ["./run", "a"]
    with pytest.raises(ValueError, match="no program"):
        launch.program_argv([])


def test_launcher_forwards_the_signal_and_returns_the_workers_status(tmp_path):
    """Two workers; SIGUSR1 to the launcher reaches both; their exit status comes back."""
    script = tmp_path / "w.py"
    script.write_text(
        textwrap.dedent(
            """
        import os, signal, sys, time
        got = []
        signal.signal(signal.SIGUSR1, lambda s, f: got.append(s))
        open(sys.argv[1] + os.environ["RANK"], "w").write(os.environ["WORLD_SIZE"])
        t0 = time.time()
        while not got and time.time() - t0 < 30:
            time.sleep(0.01)
        sys.exit(143 if got else 1)
        """
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "slurm_sched.runtime.launch",
            "--nproc-per-node",
            "2",
            "--",
            str(script),
            str(tmp_path / "ready"),
        ],
        env=env,
    )
    ready = [tmp_path / "ready0", tmp_path / "ready1"]
    t0 = time.monotonic()
    while not all(p.exists() for p in ready):
        assert time.monotonic() - t0 < 30, "workers did not start"
        time.sleep(0.02)
    proc.send_signal(signal.SIGUSR1)
    assert proc.wait(timeout=30) == 143
    assert [p.read_text() for p in ready] == ["2", "2"]


def test_workers_die_with_a_killed_launcher(tmp_path):
    """SIGKILL (Slurm's last resort) cannot be forwarded: the workers must not outlive it."""
    script = tmp_path / "w.py"
    script.write_text(
        textwrap.dedent(
            """
            import os, signal, sys, time
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            open(sys.argv[1], "w").write(str(os.getpid()))
            time.sleep(60)
            """
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "slurm_sched.runtime.launch",
            "--",
            str(script),
            str(tmp_path / "p"),
        ],
        env=env,
    )
    pid_file = tmp_path / "p"
    t0 = time.monotonic()
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() - t0 < 30, "worker did not start"
        time.sleep(0.02)
    worker = int(pid_file.read_text())
    proc.kill()
    proc.wait(timeout=10)
    t0 = time.monotonic()
    while Path(f"/proc/{worker}").exists() and "Z" not in _proc_state(worker):
        assert time.monotonic() - t0 < 10, "the worker outlived its launcher"
        time.sleep(0.05)


def _proc_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except (OSError, IndexError):
        return "Z"
