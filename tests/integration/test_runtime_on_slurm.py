"""A real PyTorch training job on the mini cluster, preempted by the scheduler's backend and
restarted on two GPUs with another plan: it resumes at its checkpoint, finishes with the right
iteration count and weights, and its progress reports reach the scheduler's snapshots."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from slurm_sched.model import (  # noqa: E402
    JobSettings,
    JobState,
    Placement,
    Preempt,
    Reconfigure,
    Start,
)
from slurm_sched.protocol.hints import JobHints, encode_hints  # noqa: E402
from slurm_sched.runtime.models import workload  # noqa: E402
from slurm_sched.slurm.backend import SlurmBackend  # noqa: E402

TEMPLATE = Path(__file__).resolve().parents[2] / "sbatch_templates" / "torch_train.sh"
ITERATIONS = 24
BATCH = 16
NODE = "a100-2"


def _wait(what: str, check: Callable[[], bool], timeout_s: float) -> None:
    t0 = time.monotonic()
    while not check():
        if time.monotonic() - t0 > timeout_s:
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(0.2)


def _apply(backend: SlurmBackend, action, timeout_s: float = 30.0) -> None:
    """Apply, retrying while the backend says Slurm is still busy with the job."""
    t0 = time.monotonic()
    while True:
        backend.snapshot()
        (result,) = backend.apply([action])
        if result.ok:
            return
        assert "retry" in (result.error or ""), result.error
        assert time.monotonic() - t0 < timeout_s, result.error
        time.sleep(0.3)


def _reference_weights() -> dict:
    """One rank, the full batch, never interrupted: what the job must end with."""
    torch.set_num_threads(1)
    w = workload("tiny-transformer")
    torch.manual_seed(0)
    model = w.build()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(ITERATIONS):
        opt.zero_grad()
        w.loss(model, w.make_batch(BATCH, step, 0)).backward()
        opt.step()
    return model.state_dict()


def test_preempted_training_job_resumes_and_finishes(slurm_cluster, tmp_path):
    backend = SlurmBackend.for_mini_cluster(slurm_cluster)
    store = backend.store
    out = tmp_path / "out.txt"
    weights = tmp_path / "final.pt"
    hints = JobHints(
        model="tiny-transformer", batch_size=BATCH, iterations=ITERATIONS, duration_s=60.0
    )
    env = (
        f"ALL,SLURM_SCHED_PYTHON={sys.executable},"
        f"SLURM_SCHED_SETTINGS_DIR={store.directory},OMP_NUM_THREADS=1"
    )
    proc = subprocess.run(
        [
            "sbatch",
            "--parsable",
            f"--chdir={tmp_path}",
            "-o",
            str(out),
            "--gres=gpu:a100:1",
            "--comment",
            encode_hints(hints),
            f"--export={env}",
            str(TEMPLATE),
            "--data-delay-s",
            "0.15",
            "--optimizer",
            "sgd",
            "--lr",
            "0.1",
            "--report-every-s",
            "0",
            "--save-weights",
            str(weights),
        ],
        env=slurm_cluster.env,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    jid = proc.stdout.strip().split(";")[0]
    backend.expect([jid])
    try:
        _run(backend, jid, out, weights, tmp_path)
    finally:
        subprocess.run(["scancel", jid], env=slurm_cluster.env, check=False, timeout=30)


def _run(backend: SlurmBackend, jid: str, out: Path, weights: Path, tmp_path: Path) -> None:
    store = backend.store
    _wait("the job in the snapshot", lambda: jid in backend.snapshot().by_id, 15)
    assert backend.snapshot().by_id[jid].state is JobState.PENDING

    # 1. start on one GPU with 2 sub-batches per step (SJF-BSBF-style settings)
    _apply(
        backend,
        Start(
            job_id=jid,
            placement=Placement.of({NODE: [0]}),
            settings=JobSettings(accumulation_steps=2),
        ),
    )

    def progress() -> dict:
        try:
            return json.loads(store.progress_path(jid).read_text())
        except (FileNotFoundError, ValueError):
            return {}

    # the timeouts are upper bounds for a loaded machine; on an idle one the test takes ~45 s
    _wait("6 iterations reported", lambda: progress().get("iterations_done", 0) >= 6, 150)
    # the report reaches the scheduler: work done = iterations done x duration_s / iterations
    # (a whole number of 2.5 s iterations, not the executed time it would fall back to)
    view = backend.snapshot().by_id[jid]
    assert view.state is JobState.RUNNING
    per_iteration_s = 60.0 / ITERATIONS
    iterations_seen = view.work_done_s / per_iteration_s
    assert 6 <= round(iterations_seen) <= ITERATIONS
    assert iterations_seen == pytest.approx(round(iterations_seen), abs=1e-9)
    assert progress()["sub_batch_sizes"] == [8, 8] and progress()["settings_source"] == "file"

    # 2. preempt: SIGUSR1 (checkpoint) then requeue (SIGTERM): checkpoint and stop
    _apply(backend, Preempt(job_id=jid))
    _wait("the preempted report", lambda: progress().get("state") == "preempted", 60)
    stopped_at = progress()["iterations_done"]
    assert 6 <= stopped_at < ITERATIONS
    ckpt_meta = json.loads((tmp_path / "checkpoints" / jid / "checkpoint.json").read_text())
    assert ckpt_meta["step"] == stopped_at

    # 3. restart on two GPUs with data parallel and a sub-batch of 4 (Rubick-style reconfigure)
    _apply(
        backend,
        Reconfigure(
            job_id=jid,
            placement=Placement.of({NODE: [0, 1]}),
            settings=JobSettings(plan="dp", sub_batch_size=4),
        ),
        120,
    )
    _wait("the job to finish", lambda: (backend.snapshot(), backend.finished())[1], 240)

    report = progress()
    assert (report["iterations_done"], report["state"]) == (ITERATIONS, "completed")
    assert report["world_size"] == 2 and report["data_parallel"] == "ddp"
    assert report["resumed_from"] == stopped_at and report["restarts"] == 1
    assert report["sub_batch_sizes"] == [4, 4]
    text = out.read_text()
    results = [
        json.loads(line.split("result: ", 1)[1])
        for line in text.splitlines()
        if line.startswith("result: ")
    ]
    assert len(results) == 1, text  # the first run stopped without a result
    assert results[0]["iterations_done"] == ITERATIONS
    assert results[0]["resumed_from"] == stopped_at
    assert text.count("[torch-train") == 2  # two runs of the batch script
    final = torch.load(weights)
    for k, v in _reference_weights().items():
        torch.testing.assert_close(final[k], v, atol=1e-5, rtol=1e-4)
    (record,) = [c for c in backend.completed() if c.spec.job_id == jid]
    assert record.spec.iterations == ITERATIONS
