"""``slurm-sched sweep run --slurm`` on the mini cluster: a 40-cell grid as one job array, one
array task killed while it runs, and still exactly 40 result files, each equal in its metrics
and job completion times to the same grid run locally.

The array goes to the unmanaged partition (plain Slurm scheduling, no lease): the sweep is an
ordinary batch workload, not a training job our scheduler places.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from slurm_sched.slurm.cluster import MiniCluster
from slurm_sched.sweep.cells import cell_id, read_result, result_path
from slurm_sched.sweep.grid import load_and_expand
from slurm_sched.sweep.run_local import run_cells

REPO = Path(__file__).resolve().parents[2]
CHUNKS = 4

# 2 loads x 5 seeds x 4 policies = 40 cells of about 0.3 s each: a chunk of 10 runs for a few
# seconds, long enough to be killed between two of its cells.
GRID = """
name = "live40"
seeds = [1, 2, 3, 4, 5]
clusters = ["16x4"]
worlds = ["sjf-bsbf"]
restart_overhead_s = 30.0

[[traces]]
label = "calibrated"
generator = "sjf-bsbf"
jobs = [120, 180]

[[policies]]
name = "fifo"

[[policies]]
name = "sjf"

[[policies]]
name = "tiresias"

[[policies]]
name = "sjf-bsbf"
"""

_LOG = re.compile(r"^(\d+)_(\d+)\.out$")


def _started_tasks(out: Path) -> dict[int, str]:
    """Array index -> ``JOBID_INDEX`` of the tasks whose log file exists (they started)."""
    logs = out / ".sweep" / "logs"
    found = {}
    for p in logs.glob("*.out") if logs.is_dir() else ():
        m = _LOG.match(p.name)
        if m:
            found[int(m.group(2))] = f"{m.group(1)}_{m.group(2)}"
    return found


def _manifest_chunks(out: Path) -> list[list[str]] | None:
    found = sorted((out / ".sweep").glob("manifest-*.json"))
    if not found:
        return None
    chunks: list[list[str]] = json.loads(found[0].read_text())["chunks"]
    return chunks


def test_job_array_survives_a_killed_task_and_equals_the_local_run(
        slurm_cluster: MiniCluster, tmp_path: Path) -> None:
    grid = tmp_path / f"live40-{os.getpid()}.toml"
    grid.write_text(GRID)
    _, cells = load_and_expand(grid)
    assert len(cells) == 40
    local, remote = tmp_path / "local", tmp_path / "slurm"
    assert not run_cells(cells, local, workers=1).failed

    env = slurm_cluster.env
    env["PYTHONPATH"] = str(REPO)  # the array tasks import this checkout, as the test does
    partition = slurm_cluster.unmanaged_partitions[0]
    argv = [sys.executable, "-m", "slurm_sched.cli", "sweep", "run", str(grid), "--out",
            str(remote), "--slurm", "--partition", partition, "--chunks", str(CHUNKS),
            "--poll-s", "1", "--quiet"]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path)
    killed: tuple[int, str] | None = None
    before_kill: dict[str, int] = {}  # cell id -> inode of the result files present at the kill
    try:
        deadline = time.monotonic() + 120
        while killed is None and proc.poll() is None and time.monotonic() < deadline:
            chunks = _manifest_chunks(remote)
            for index, task in sorted(_started_tasks(remote).items()) if chunks else ():
                arrived = [c for c in chunks[index] if (remote / f"{c}.json").exists()]
                if 0 < len(arrived) < len(chunks[index]):
                    subprocess.run(["scancel", task], env=env, check=True, timeout=30)
                    killed = (index, task)
                    before_kill = {c: (remote / f"{c}.json").stat().st_ino
                                   for c in chunks[index] if (remote / f"{c}.json").exists()}
                    break
            time.sleep(0.05)
        if killed is None:
            proc.kill()
            raise AssertionError("no array task was caught between two of its cells; sweep "
                                 f"run said: {proc.communicate()[1]}")
        _, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr
    job_ids = re.search(r"submitted array job\(s\) ([\d, ]+);", stderr)
    assert job_ids is not None, stderr
    first, *again = job_ids.group(1).split(", ")
    assert killed[1].startswith(f"{first}_")
    assert len(again) == 1, f"the killed task is submitted once more: {stderr}"

    # Exactly the 40 cells arrived, and the cells the killed task finished were not run again.
    files = sorted(p.name for p in remote.glob("*.json"))
    assert files == sorted(f"{cell_id(c)}.json" for c in cells)
    chunks = _manifest_chunks(remote)
    assert chunks is not None
    for cid, inode in before_kill.items():
        assert (remote / f"{cid}.json").stat().st_ino == inode, f"{cid} was written twice"
    rerun_logs = list((remote / ".sweep" / "logs").glob(f"{again[0]}_*.out"))
    assert [p.name for p in rerun_logs] == [f"{again[0]}_{killed[0]}.out"]
    log = rerun_logs[0].read_text()
    ran, skipped = map(int, re.search(r"(\d+) cell\(s\) run, (\d+) already done", log).groups())
    assert ran + skipped == len(chunks[killed[0]]) and skipped >= len(before_kill), log

    for cell in cells:
        mine, theirs = read_result(result_path(remote, cell), cell), read_result(
            result_path(local, cell), cell)
        assert mine is not None and theirs is not None
        assert mine["metrics"] == theirs["metrics"], cell_id(cell)
        assert mine["jcts_s"] == theirs["jcts_s"], cell_id(cell)
