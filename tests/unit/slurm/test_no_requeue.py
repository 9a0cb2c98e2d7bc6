"""A job submitted with ``--no-requeue`` (``"requeue": false`` in squeue's JSON) cannot be
requeued, so the Slurm backend rejects its preempt, migrate and resize before any command;
a pending one may still be pinned anew. The runner is the recorded fake of
``tests/contract/recorded.py``."""

from __future__ import annotations

from pathlib import Path

from slurm_sched.model import Migrate, Placement, Preempt, Reconfigure, Start
from slurm_sched.slurm.backend import SlurmBackend
from slurm_sched.slurm.parse import read_jobs
from tests.contract.recorded import NOW, FakeRunner, recorded, squeue_with


def backend_for(doc: dict[str, object], tmp_path: Path) -> tuple[SlurmBackend, FakeRunner]:
    runner = FakeRunner(doc)
    backend = SlurmBackend(runner, partitions=["sched"], settings_dir=tmp_path / "settings",
                           clock=lambda: NOW, min_query_interval_s=0.0)
    return backend, runner


def test_requeue_flag_is_read_and_defaults_to_slurms_default() -> None:
    doc = squeue_with(("29", {"requeue": False}), ("36", {"requeue": True}))
    _, jobs = read_jobs(doc, "squeue --json")
    by_id = {j.job_id: j for j in jobs}
    assert (by_id["29"].requeue, by_id["36"].requeue) == (False, True)
    assert "requeue" not in recorded("squeue_mixed.json")["jobs"][0]
    assert by_id["39"].requeue  # no field: requeue allowed, as Slurm's default


def test_no_requeue_job_is_neither_preempted_nor_moved(tmp_path: Path) -> None:
    backend, runner = backend_for(squeue_with(("29", {"requeue": False})), tmp_path)
    backend.snapshot()
    results = backend.apply([
        Preempt(job_id="29"),
        Migrate(job_id="29", placement=Placement.of({"v100-1": [3]})),
        Reconfigure(job_id="29", placement=Placement.of({"a100-1": [0]})),
    ])
    assert [r.ok for r in results] == [False, False, False]
    for r in results:
        assert r.error is not None and "--no-requeue" in r.error and "job 29" in r.error
    assert not [x for x in runner.lines if "29" in x.split()[-1] or "JobId=29" in x]
    # a job that may be requeued is preempted as before
    [r] = backend.apply([Preempt(job_id="31")])
    assert r.ok and "requeue 31" in runner.lines, r.error


def test_pending_no_requeue_job_still_starts(tmp_path: Path) -> None:
    backend, _ = backend_for(squeue_with(("38", {"requeue": False})), tmp_path)
    backend.snapshot()
    [r] = backend.apply([Start(job_id="38", placement=Placement.of({"a100-1": [2, 3]}))])
    assert r.ok, r.error
