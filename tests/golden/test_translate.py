"""Golden files: the Slurm commands each action becomes, and the per-job settings file.

The expected text is checked in under ``tests/golden/``. After an intended change, regenerate and
review the diff::

    SLURM_SCHED_UPDATE_GOLDEN=1 python -m pytest tests/golden
    git diff tests/golden
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from slurm_sched.model import (
    Action,
    JobSettings,
    Migrate,
    Placement,
    Preempt,
    Reconfigure,
    Resume,
    Share,
    Start,
    Suspend,
)
from slurm_sched.protocol.settings_file import SettingsStore
from slurm_sched.slurm.parse import GpuRequest, parse_gpu_request
from slurm_sched.slurm.translate import (
    JobContext,
    ShardConfig,
    TranslateError,
    render,
    translate,
)

HERE = Path(__file__).parent
UPDATE = os.environ.get("SLURM_SCHED_UPDATE_GOLDEN") == "1"
SHARDS = ShardConfig(shards_per_gpu=4, max_jobs_per_gpu=2)


def P(alloc: dict[str, list[int]]) -> Placement:
    return Placement.of(alloc)


def ctx(
    job_id: str,
    tres_per_node: str = "gres:gpu:2",
    tres_per_job: str = "",
    *,
    held: bool = False,
    active: bool = False,
) -> JobContext:
    return JobContext(job_id, parse_gpu_request(tres_per_node, tres_per_job), held, active)


CASES: list[tuple[str, Action, JobContext]] = [
    ("start, one node", Start(job_id="101", placement=P({"a100-1": [0, 1]})), ctx("101")),
    (
        "start, fresh job under its lease: NodeList and StartTime=now, nothing else (no guard)",
        Start(job_id="121", placement=P({"a100-1": [0, 1]})),
        JobContext(
            "121",
            parse_gpu_request("gres:gpu:2"),
            node_count=1,
            tres_per_node="gres:gpu:2",
            tres_per_job="",
            may_start=False,
        ),
    ),
    (
        "start, fresh job split over two nodes: node count and per-node GPUs change",
        Start(job_id="122", placement=P({"a100-1": [0], "a100-2": [0]})),
        JobContext(
            "122",
            parse_gpu_request("gres:gpu:2"),
            node_count=1,
            tres_per_node="gres:gpu:2",
            tres_per_job="",
            may_start=False,
        ),
    ),
    (
        "start, held job past its begin time (an older plugin's hold): pin, then release",
        Start(job_id="123", placement=P({"a100-1": [0, 1]})),
        JobContext(
            "123",
            parse_gpu_request("gres:gpu:2"),
            held=True,
            node_count=1,
            tres_per_node="gres:gpu:2",
            tres_per_job="",
            begin_now=False,
        ),
    ),
    (
        "start, typed GRES kept typed, two nodes with the same count",
        Start(job_id="102", placement=P({"a100-1": [0, 1], "a100-2": [2, 3]})),
        ctx("102", "gres:gpu:a100:4"),
    ),
    (
        "start, different counts per node: TresPerJob (cleared TresPerNode first)",
        Start(job_id="103", placement=P({"a100-1": [0, 1, 2], "v100-2": [0, 1]})),
        ctx("103", "gres:gpu:5"),
    ),
    (
        "start, job submitted with --gpus, same count per node: back to TresPerNode",
        Start(job_id="104", placement=P({"v100-1": [0, 1], "v100-2": [0, 1]})),
        ctx("104", "", "gres:gpu:4"),
    ),
    (
        "start, held by requeuehold (begin time ahead): pin with StartTime=now, then release",
        Start(job_id="105", placement=P({"v100-1": [3]})),
        ctx("105", "gres:gpu:1", held=True),
    ),
    (
        "start, lease run out and the GRES form changes: held around the clearing update",
        Start(job_id="124", placement=P({"v100-1": [0, 1], "v100-2": [0, 1]})),
        JobContext("124", parse_gpu_request("", "gres:gpu:4"), eligible=True),
    ),
    (
        "start, GRES lost by an interrupted re-pin: gpu again",
        Start(job_id="106", placement=P({"v100-2": [1]})),
        JobContext("106", GpuRequest(kind="gpu", gpu_type="v100", form="none")),
    ),
    (
        "start, shard job: S - (C - 1) shards, so it never lands on a used GPU",
        Start(job_id="107", placement=P({"a100-2": [0]})),
        ctx("107", "gres:shard:1"),
    ),
    (
        "share, shard job joins: 1 shard",
        Share(job_id="108", placement=P({"a100-2": [0]}), with_jobs=("107",)),
        ctx("108", "gres:shard:1"),
    ),
    (
        "share, gpu job: impossible on 22.05",
        Share(job_id="109", placement=P({"a100-2": [0]}), with_jobs=("107",)),
        ctx("109", "gres:gpu:1"),
    ),
    ("suspend", Suspend(job_id="110"), ctx("110", active=True)),
    ("resume", Resume(job_id="110"), ctx("110", active=True)),
    ("preempt", Preempt(job_id="111"), ctx("111", active=True)),
    (
        "migrate a running job",
        Migrate(job_id="112", placement=P({"v100-1": [2, 3]})),
        ctx("112", active=True),
    ),
    (
        "reconfigure a running job: new GPU count, CPUs and memory",
        Reconfigure(
            job_id="113",
            placement=P({"a100-1": [0, 1], "a100-2": [0, 1]}),
            settings=JobSettings(plan="zero-dp", accumulation_steps=2, cpus=8, mem_gb=30),
        ),
        ctx("113", active=True),
    ),
    (
        "reconfigure a pending job: pinned at once",
        Reconfigure(
            job_id="114", placement=P({"v100-2": [0]}), settings=JobSettings(plan="gc", cpus=4)
        ),
        ctx("114"),
    ),
]


def rendered() -> str:
    parts = []
    for title, action, c in CASES:
        try:
            tr = translate(action, c, SHARDS)
        except TranslateError as exc:
            parts.append(f"# {action.kind} job {action.job_id} -> error: {exc}\n")
            continue
        parts.append(f"## {title}\n" + render([(action, tr)]))
    return "\n".join(parts)


def check_golden(name: str, text: str) -> None:
    path = HERE / name
    if UPDATE:
        path.write_text(text)
        pytest.skip(f"regenerated {path}")
    assert path.exists(), f"{path} missing: run with SLURM_SCHED_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{path} differs (regenerate with SLURM_SCHED_UPDATE_GOLDEN=1)"


def test_translations_match_golden() -> None:
    check_golden("translate.txt", rendered())


def test_settings_file_matches_golden(tmp_path: Path) -> None:
    doc = SettingsStore.settings_document(
        "113",
        JobSettings(plan="zero-dp", accumulation_steps=2, sub_batch_size=16, cpus=8, mem_gb=30),
        P({"a100-1": [0, 1], "a100-2": [0, 1]}),
        shares_with=(),
        now_s=1_700_000_000.0,
    )
    check_golden("settings_113.json", json.dumps(doc, indent=1, sort_keys=True) + "\n")
    # and the store writes exactly that document, atomically
    store = SettingsStore(tmp_path)
    store.write_settings(
        "113",
        JobSettings(plan="zero-dp", accumulation_steps=2, sub_batch_size=16, cpus=8, mem_gb=30),
        P({"a100-1": [0, 1], "a100-2": [0, 1]}),
    )
    written = json.loads((tmp_path / "113.json").read_text())
    written["written_at"] = doc["written_at"]
    assert written == doc
    assert [p.name for p in tmp_path.iterdir()] == ["113.json"]


def test_every_command_is_safe_for_an_scontrol_batch() -> None:
    """Tokens piped into one scontrol process must not need quoting."""
    for _, action, c in CASES:
        try:
            tr = translate(action, c, SHARDS)
        except TranslateError:
            continue
        for cmd in tr.commands():
            for tok in cmd.argv:
                assert tok and not any(ch.isspace() or ch in "'\"\\#" for ch in tok), tok
