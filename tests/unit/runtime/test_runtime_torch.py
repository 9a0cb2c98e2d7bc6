"""The job runtime with real torch: accumulation, preemption and resume, sharded multi-rank
training, Muri turn-taking between two training processes, and profiles feeding SJF-BSBF.

Needs torch (``pip install -e '.[torch]'``); every test runs on the CPU with one thread.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from click.testing import CliRunner  # noqa: E402

from slurm_sched.model import JobSettings  # noqa: E402
from slurm_sched.protocol.settings_file import SettingsStore  # noqa: E402
from slurm_sched.runtime import checkpoint  # noqa: E402
from slurm_sched.runtime.interleave import StageRecord, alternation, overlap_s  # noqa: E402
from slurm_sched.runtime.job import JobContext  # noqa: E402
from slurm_sched.runtime.models import workload  # noqa: E402
from slurm_sched.runtime.profile import (  # noqa: E402
    Profile,
    iter_model,
    memory_model,
    read_profile,
    write_pollux_placements,
)
from slurm_sched.runtime.session import EXIT_PREEMPTED, JobPreempted, TrainingSession  # noqa: E402

W = workload("tiny-transformer")
BATCH = 16


def _sgd(params):
    # linear in the gradients: runs that differ only by float rounding stay close (Adam
    # normalises each element's step, so rounding noise on near-zero gradients becomes a full
    # lr-sized step and hides real differences)
    return torch.optim.SGD(params, lr=0.1, momentum=0.9)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _state(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _train(
    settings: JobSettings,
    ckpt: Path,
    total: int,
    *,
    init_seed: int = 0,
    job_dir: Path | None = None,
    signals_at: dict[int, int] | None = None,
    make_optimizer=lambda p: torch.optim.AdamW(p, lr=1e-3),
):
    """The loop of ``slurm_sched.runtime.train`` in this process; sends itself real signals."""
    torch.manual_seed(init_seed)
    model = W.build()
    session = TrainingSession(
        model,
        make_optimizer,
        global_batch_size=BATCH,
        total_iterations=total,
        job=JobContext("77", settings, directory=job_dir),
        checkpoint_dir=ckpt,
        report_every_s=0.0,
        device="cpu",
    )
    with session:
        for step in session.steps():
            with session.stage("data"):
                batch = session.shard(W.make_batch(BATCH, step, 0))
            session.train_step(batch, W.loss)
            if signals_at and step in signals_at:
                os.kill(os.getpid(), signals_at[step])
    return model, session


# ---------------------------------------------------------------------------------- accumulation
@pytest.mark.parametrize(
    "settings",
    [
        JobSettings(accumulation_steps=4),
        JobSettings(sub_batch_size=3),  # 16 = 5 x 3 + 1: uneven sub-batches
        JobSettings(sub_batch_size=5, plan="gc"),  # plus activation checkpointing
    ],
    ids=["s=4", "b=3-uneven", "b=5-gc"],
)
def test_accumulated_step_gives_the_full_batch_update(settings, tmp_path):
    torch.manual_seed(0)
    init = _state(W.build())
    sgd = lambda p: torch.optim.SGD(p, lr=0.5)  # noqa: E731
    full_model, full = _train(JobSettings(), tmp_path / "full", 1, make_optimizer=sgd)
    acc_model, acc = _train(settings, tmp_path / "acc", 1, make_optimizer=sgd)
    assert full.micro_batch_sizes == [BATCH]
    assert len(acc.micro_batch_sizes) > 1 and sum(acc.micro_batch_sizes) == BATCH
    assert acc.applied.activation_checkpointing == (settings.plan == "gc")
    moved = max((full_model.state_dict()[k] - init[k]).abs().max().item() for k in init)
    assert moved > 1e-3  # a real update (1000x the tolerance), not a no-op
    for k, v in _state(acc_model).items():
        torch.testing.assert_close(v, full_model.state_dict()[k], atol=2e-6, rtol=1e-5)


# ---------------------------------------------------------------------------------- preemption
def test_preempted_run_resumes_at_the_same_step_with_the_same_weights(tmp_path):
    ref_model, _ = _train(JobSettings(), tmp_path / "ref", 8)

    ckpt = tmp_path / "run"
    # SIGUSR1 after step 1: checkpoint and go on; SIGTERM after step 4: checkpoint and stop
    with pytest.raises(JobPreempted) as stopped:
        _train(
            JobSettings(),
            ckpt,
            8,
            job_dir=tmp_path,
            signals_at={1: signal.SIGUSR1, 4: signal.SIGTERM},
        )
    assert stopped.value.step == 5 and stopped.value.code == EXIT_PREEMPTED
    assert checkpoint.read_meta(ckpt)["step"] == 5
    assert checkpoint.read_meta(ckpt)["reason"] == "stop"
    report = json.loads((tmp_path / "77.progress.json").read_text())
    assert (report["iterations_done"], report["state"]) == (5, "preempted")
    assert SettingsStore(tmp_path).read_progress("77").iterations_done == 5
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handlers restored

    shutil.copytree(ckpt, tmp_path / "run-reconfigured")
    # restart: a different initialisation, overwritten by the checkpoint
    model, session = _train(JobSettings(), ckpt, 8, init_seed=123, job_dir=tmp_path)
    assert (session.start_step, session.step, session.restarts) == (5, 8, 1)
    for k, v in _state(model).items():
        assert torch.equal(v, ref_model.state_dict()[k]), k  # bit-identical
    report = json.loads((tmp_path / "77.progress.json").read_text())
    assert (report["iterations_done"], report["state"]) == (8, "completed")

    # the same checkpoint restarted under another plan and sub-batch (Rubick reconfiguration):
    # equal up to float rounding (Adam turns rounding on near-zero gradients into lr-sized steps,
    # hence the tolerance of a few lr)
    model, session = _train(
        JobSettings(plan="gc", sub_batch_size=6), tmp_path / "run-reconfigured", 8, init_seed=7
    )
    assert session.start_step == 5 and session.micro_batch_sizes == [6, 6, 4]
    for k, v in _state(model).items():
        torch.testing.assert_close(v, ref_model.state_dict()[k], atol=5e-3, rtol=0)


def test_end_of_run_reports_completed_stopped_or_failed(tmp_path):
    def report() -> dict:
        return json.loads((tmp_path / "77.progress.json").read_text())

    # periodic checkpoints up to the last step, then completion
    torch.manual_seed(0)
    s = TrainingSession(
        W.build(),
        _sgd,
        global_batch_size=BATCH,
        total_iterations=4,
        job=JobContext("77", JobSettings(), directory=tmp_path),
        device="cpu",
        checkpoint_dir=tmp_path / "a",
        checkpoint_every=2,
        report_every_s=0,
    )
    with s:
        for step in s.steps():
            s.train_step(W.make_batch(BATCH, step, 0), W.loss)
    assert (report()["state"], report()["iterations_done"]) == ("completed", 4)
    assert checkpoint.read_meta(tmp_path / "a")["step"] == 4

    # leaving the loop early: a checkpoint where it stopped, and a restart resumes there
    for total, stop_after in ((6, 2), (6, None)):
        s = TrainingSession(
            W.build(),
            _sgd,
            global_batch_size=BATCH,
            total_iterations=total,
            job=JobContext("77", JobSettings(), directory=tmp_path),
            device="cpu",
            checkpoint_dir=tmp_path / "b",
            report_every_s=0,
        )
        with s:
            for step in s.steps():
                s.train_step(W.make_batch(BATCH, step, 0), W.loss)
                if step == stop_after:
                    break
        if stop_after is not None:
            assert (report()["state"], report()["iterations_done"]) == ("stopped", 3)
        else:
            assert s.start_step == 3 and report()["state"] == "completed"

    # a crash: a failed report naming the error, no checkpoint of a half-done step
    s = TrainingSession(
        W.build(),
        _sgd,
        global_batch_size=BATCH,
        total_iterations=4,
        job=JobContext("77", JobSettings(), directory=tmp_path),
        device="cpu",
        checkpoint_dir=tmp_path / "c",
        report_every_s=0,
    )
    with pytest.raises(ZeroDivisionError), s:
        for step in s.steps():
            s.train_step(W.make_batch(BATCH, step, 0), W.loss)
            if step == 1:
                _ = 1 / 0
    assert report()["state"] == "failed" and "ZeroDivisionError" in report()["error"]
    assert not checkpoint.checkpoint_exists(tmp_path / "c")


def _launch_env(tmp_path: Path, job_id: str, settings: JobSettings) -> dict[str, str]:
    SettingsStore(tmp_path).write_settings(job_id, settings, None)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "MINI_SLURM"))}
    env.update(
        SLURM_JOB_ID=job_id,
        SLURM_SCHED_SETTINGS_DIR=str(tmp_path),
        SLURM_SCHED_HINTS="{}",
        SLURM_SCHED_INTERLEAVE_DIR=str(tmp_path / "il"),
        OMP_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
        CUDA_VISIBLE_DEVICES="",
    )
    return env


def _wait_progress(path: Path, at_least: int, proc: subprocess.Popen, timeout_s: float) -> None:
    t0 = time.monotonic()
    while True:
        try:
            if json.loads(path.read_text())["iterations_done"] >= at_least:
                return
        except (FileNotFoundError, ValueError):
            pass
        assert proc.poll() is None, f"training exited early with {proc.returncode}"
        assert time.monotonic() - t0 < timeout_s, f"no progress >= {at_least} in {path}"
        time.sleep(0.05)


def test_sharded_two_rank_run_preempted_then_resumed_on_one_rank(tmp_path):
    """zero-dp (FSDP2, gloo) on 2 ranks with 2 sub-batches each, stopped by SIGTERM through the
    launcher, resumed on 1 rank with activation checkpointing: same weights as one rank
    training uninterrupted with the full batch."""
    total = 8
    ref_model, _ = _train(JobSettings(), tmp_path / "ref", total, make_optimizer=_sgd)
    env = _launch_env(tmp_path, "fs1", JobSettings(plan="zero-dp", accumulation_steps=2))
    ckpt = tmp_path / "ckpt"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "slurm_sched.runtime.launch",
            "--nproc-per-node",
            "2",
            "--",
            "-m",
            "slurm_sched.runtime.train",
            "--model",
            "tiny-transformer",
            "--iterations",
            str(total),
            "--batch-size",
            str(BATCH),
            "--data-delay-s",
            "0.2",
            "--optimizer",
            "sgd",
            "--lr",
            "0.1",
            "--report-every-s",
            "0",
            "--checkpoint-dir",
            str(ckpt),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        _wait_progress(tmp_path / "fs1.progress.json", 2, proc, timeout_s=120)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == EXIT_PREEMPTED, out
    meta = checkpoint.read_meta(ckpt)
    assert meta["world_size"] == 2 and meta["plan"] == "zero-dp"
    assert 2 <= meta["step"] < total
    report = json.loads((tmp_path / "fs1.progress.json").read_text())
    assert report["data_parallel"] == "fsdp" and report["world_size"] == 2
    assert report["sub_batch_sizes"] == [4, 4] and report["state"] == "preempted"

    model, session = _train(
        JobSettings(plan="gc", sub_batch_size=5), ckpt, total, init_seed=9, make_optimizer=_sgd
    )
    assert session.start_step == meta["step"] and session.world_size == 1
    moved = max(
        (ref_model.state_dict()[k] - v).abs().max().item() for k, v in _state(W.build()).items()
    )
    assert moved > 1e-2
    for k, v in _state(model).items():
        torch.testing.assert_close(v, ref_model.state_dict()[k], atol=1e-5, rtol=1e-4)


# ---------------------------------------------------------------------------------- Muri
def test_two_colocated_training_processes_alternate_their_stages(tmp_path):
    """Two training jobs in one Muri group (slot 0 in this process, slot 1 in another): the
    measured stage times show their compute stages never overlap and alternate A, B, A, B,
    while each one's data stage runs during the other's compute stage."""
    iterations = 25
    env = _launch_env(tmp_path, "B", JobSettings(group_id="g1", slot=1))
    other = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "slurm_sched.runtime.train",
            "--model",
            "tiny-transformer",
            "--iterations",
            str(iterations),
            "--batch-size",
            str(BATCH),
            "--data-delay-s",
            "0.03",
            "--checkpoint-dir",
            str(tmp_path / "ckpt-B"),
            "--report-every-s",
            "0",
            "--stage-log",
            str(tmp_path / "stages-B.json"),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        torch.manual_seed(0)
        session = TrainingSession(
            W.build(),
            lambda p: torch.optim.AdamW(p, lr=1e-3),
            global_batch_size=BATCH,
            total_iterations=iterations,
            checkpoint_dir=tmp_path / "ckpt-A",
            record_stages=True,
            job=JobContext("A", JobSettings(group_id="g1", slot=0), directory=tmp_path),
            interleave_dir=tmp_path / "il",
            device="cpu",
        )
        with session:
            t0 = time.monotonic()
            while len(session.interleaver.members()) < 2:  # B is still importing torch
                assert other.poll() is None and time.monotonic() - t0 < 120
                time.sleep(0.02)
            for step in session.steps():
                with session.stage("data"):
                    time.sleep(0.03)
                    batch = W.make_batch(BATCH, step, 0)
                session.train_step(batch, W.loss)
        out, _ = other.communicate(timeout=120)
    finally:
        if other.poll() is None:
            other.kill()
    assert other.returncode == 0, out
    recs = {
        "A": list(session.interleaver.records or []),
        "B": [StageRecord(**r) for r in json.loads((tmp_path / "stages-B.json").read_text())],
    }
    # the window in which both were members: from the later first stage to the earlier last
    start = max(rs[0].start_s for rs in recs.values())
    end = min(rs[-1].end_s for rs in recs.values())
    compute = {
        n: [r for r in rs if r.stage == "compute" and start <= r.start_s and r.end_s <= end]
        for n, rs in recs.items()
    }
    data = {
        n: [r for r in rs if r.stage == "data" and start <= r.start_s and r.end_s <= end]
        for n, rs in recs.items()
    }
    assert min(len(c) for c in compute.values()) >= 10
    assert overlap_s(compute["A"], compute["B"]) == 0.0
    order = alternation(compute)
    assert all(a != b for a, b in itertools.pairwise(order)), "".join(order)
    # interleaved, not just mutually exclusive: in a slot where one loads data the other
    # computes, so the two overlap for about the shorter of the two stages
    for me, other_name in (("A", "B"), ("B", "A")):
        data_s = sum(r.end_s - r.start_s for r in data[me])
        compute_s = sum(r.end_s - r.start_s for r in compute[other_name])
        assert overlap_s(data[me], compute[other_name]) > 0.5 * min(data_s, compute_s)
    # each member runs its stages in its own slots (Eq. 3: slot + position)
    for n, slot in (("A", 0), ("B", 1)):
        for r in recs[n]:
            assert ("data", "compute")[(r.slot + slot) % 2] == r.stage
    reports = {n: json.loads((tmp_path / f"{n}.progress.json").read_text()) for n in recs}
    assert all(
        r["interleave_group"] == "g1" and r["iterations_done"] == iterations
        for r in reports.values()
    )


# ---------------------------------------------------------------------------------- profiles
def test_measured_profile_feeds_the_sjf_bsbf_iteration_model(tmp_path):
    from slurm_sched.perf.sjf_bsbf_model import JobProfile, fit_iter_model
    from slurm_sched.runtime.measure import measure_model

    name = "tiny-transformer"
    measured = measure_model(name, [1, 8, 32, 64], device=torch.device("cpu"), warmup=2, iters=5)
    prof = Profile(models={name: measured}, provenance={"device": "cpu"})
    back = read_profile(prof.write(tmp_path / "profile.json")).models[name]
    assert [s.batch_size for s in back.samples] == [1, 8, 32, 64]
    assert all(s.iter_time_s > 0 and s.mem_gb and s.mem_gb > 0.05 for s in back.samples)

    im = iter_model(back)  # the profile's alpha/beta as SJF-BSBF's eq. (3)
    fit = back.compute_fit()
    assert (im.alpha_c, im.beta_c) == (fit.intercept, fit.slope)
    # SJF-BSBF's own fitting code reads the profile's placements file and finds the same line.
    # Its least squares are in log space and the profile's are not, so on noisy measurements
    # (a loaded CI machine) the two lines differ by more than noise; on samples that lie exactly on
    # the profile's line both must recover it.
    on_line = dataclasses.replace(
        back, samples=[dataclasses.replace(s, iter_time_s=fit(s.batch_size)) for s in back.samples]
    )
    write_pollux_placements(on_line, tmp_path / "models")
    theirs = fit_iter_model(name, tmp_path / "models")
    for s in back.samples:
        assert theirs.t_comp(s.batch_size) == pytest.approx(im.t_comp(s.batch_size), rel=1e-3)
    errors = sorted(abs(im.t_comp(s.batch_size) / s.iter_time_s - 1) for s in back.samples)
    assert errors[len(errors) // 2] < 0.3  # t(b) = alpha + beta b describes the measurements

    # ... and drives a decision the runtime applies: a sub-batch of 16 for a batch of 64
    job = JobProfile(
        app=name,
        num_gpus=1,
        batch_size=64,
        local_bsz=64,
        solo_b=64,
        iterations=100,
        iter_model=im,
        memory=memory_model(back),
    )
    assert job.t_iter(16) == pytest.approx(4 * im.t_comp(16))
    settings = job.settings_for(16)
    assert settings == JobSettings(accumulation_steps=4, sub_batch_size=16)
    w = workload("mlp")
    session = TrainingSession(
        w.build(),
        lambda p: torch.optim.SGD(p, lr=0.1),
        global_batch_size=64,
        total_iterations=1,
        device="cpu",
        job=JobContext("p1", settings),
        checkpoint_dir=tmp_path / "c",
    )
    with session:
        for step in session.steps():
            session.train_step(w.make_batch(64, step, 0), w.loss)
    assert session.micro_batch_sizes == [16, 16, 16, 16]


def test_profile_command_writes_a_profile_with_interference(tmp_path):
    from slurm_sched.runtime.profile_cli import profile

    out = tmp_path / "p.json"
    result = CliRunner().invoke(
        profile,
        [
            "--model",
            "mlp",
            "--batch-sizes",
            "2,32",
            "--iters",
            "3",
            "--warmup",
            "1",
            "--device",
            "cpu",
            "--threads",
            "1",
            "--pair",
            "mlp:8,tiny-transformer:4",
            "--pair-seconds",
            "0.5",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "t(b) =" in result.output and "xi =" in result.output
    prof = read_profile(out)
    assert prof.provenance["device"] == "cpu" and prof.provenance["torch"] == torch.__version__
    assert set(prof.models) == {"mlp"}
    pairs = {(p.model, p.co_model): p for p in prof.interference}
    assert set(pairs) == {("mlp", "tiny-transformer"), ("tiny-transformer", "mlp")}
    assert all(p.solo_iter_time_s > 0 and p.shared_iter_time_s > 0 for p in pairs.values())

    bad = CliRunner().invoke(profile, ["--model", "nope", "--out", str(tmp_path / "x.json")])
    assert bad.exit_code != 0 and "nope" in str(bad.exception or bad.output)
