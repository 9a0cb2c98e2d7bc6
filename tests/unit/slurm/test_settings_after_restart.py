"""A scheduler started while a job runs (a restart) shows the job with the settings its run was
started with: the document of its settings file written for the nodes Slurm runs it on, not the
newest one (a decision for other nodes that never landed) and not the defaults. The runner is the
recorded fake of ``tests/contract/recorded.py`` (job 29 runs on one GPU of a100-1)."""

from __future__ import annotations

from pathlib import Path

from slurm_sched.model import JobSettings, Placement
from slurm_sched.protocol.settings_file import SettingsStore
from slurm_sched.slurm.backend import SlurmBackend
from tests.contract.recorded import NOW, FakeRunner, squeue_with


def fresh_backend(tmp_path: Path) -> SlurmBackend:
    return SlurmBackend(FakeRunner(squeue_with()), partitions=["sched"],
                        settings_dir=tmp_path / "settings", clock=lambda: NOW,
                        min_query_interval_s=0.0)  # fmt: skip


def view_of(backend: SlurmBackend, job_id: str) -> JobSettings:
    [view] = [v for v in backend.snapshot().jobs if v.job_id == job_id]
    return view.settings


def test_a_running_job_is_shown_with_the_settings_written_for_its_nodes(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path / "settings")
    store.write_settings("29", JobSettings(accumulation_steps=3), Placement.of({"a100-1": [0]}))
    # a later decision for other nodes, cut short before its pin landed
    store.write_settings("29", JobSettings(accumulation_steps=8), Placement.of({"v100-2": [3]}))
    assert view_of(fresh_backend(tmp_path), "29") == JobSettings(accumulation_steps=3)


def test_a_running_job_without_a_decision_for_its_nodes_has_the_defaults(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path / "settings")
    store.write_settings("29", JobSettings(accumulation_steps=8), Placement.of({"v100-2": [3]}))
    assert view_of(fresh_backend(tmp_path), "29") == JobSettings()


def test_a_malformed_settings_file_gives_the_defaults(tmp_path: Path) -> None:
    (tmp_path / "settings").mkdir()
    (tmp_path / "settings" / "29.json").write_text(
        '{"accumulation_steps": 0, "gpus_per_node": {"a100-1": 1}}'
    )
    assert view_of(fresh_backend(tmp_path), "29") == JobSettings()
