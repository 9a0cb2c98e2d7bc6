"""The --slurm mode at the process boundary: sbatch command lines, chunking, waiting and
resubmitting, with a fake runner standing in for sbatch and squeue."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from slurm_sched.cli import main
from slurm_sched.sweep.cells import SCHEMA, cell_id, failed_path, result_path, write_atomic
from slurm_sched.sweep.grid import load_and_expand
from slurm_sched.sweep.run_slurm import (
    Result,
    Runner,
    SlurmOptions,
    array_spec,
    chunk,
    chunk_cells,
    read_manifest,
    sbatch_argv,
    submit_and_wait,
)


def test_chunks_cover_every_cell_once():
    ids = [f"c{i}" for i in range(7)]
    chunks = chunk(ids, 3)
    assert chunks == [["c0", "c3", "c6"], ["c1", "c4"], ["c2", "c5"]]
    assert chunk(ids, 50) == [[i] for i in ids]  # never an empty chunk
    assert sorted(i for c in chunk(ids, 4) for i in c) == sorted(ids)


def test_array_spec():
    assert array_spec(range(5), None) == "0-4"
    assert array_spec([0, 1, 2], 4) == "0-2%4"
    assert array_spec([1, 4], 2) == "1,4%2"
    assert array_spec([3], None) == "3"


def test_sbatch_command_line(tmp_path):
    grid, out, manifest = tmp_path / "g.toml", tmp_path / "out", tmp_path / "m.json"
    opts = SlurmOptions(partition="gpu", array_limit=8, time="01:00:00", job_name="sweep-g")
    argv = sbatch_argv(grid, out, manifest, 40, range(40), opts, python="/venv/bin/python")
    assert argv[:4] == ["sbatch", "--parsable", "--job-name=sweep-g", "--array=0-39%8"]
    assert f"--output={out.resolve()}/.sweep/logs/%A_%a.out" in argv
    assert "--partition=gpu" in argv and "--time=01:00:00" in argv
    wrap = argv[-1].removeprefix("--wrap=")
    assert shlex.split(wrap) == [
        "/venv/bin/python", "-m", "slurm_sched.cli", "sweep", "run-chunk", str(grid.resolve()),
        "--out", str(out.resolve()), "--chunks", "40", "--manifest", str(manifest.resolve()),
        "--chunk", "$SLURM_ARRAY_TASK_ID"]  # expanded by the shell of each array element
    plain = sbatch_argv(grid, out, manifest, 3, [1], SlurmOptions())
    assert "--array=1" in plain and not any(a.startswith("--partition") for a in plain)


def _fake_result(out: Path, cell) -> None:
    write_atomic(result_path(out, cell), {"schema": SCHEMA, "id": cell_id(cell),
                                          "cell": cell.to_dict(), "metrics": {"avg_jct_s": 1}})


class FakeSlurm(Runner):
    """sbatch 'runs' the tasks it is given at once (the ``kill`` ones write nothing, the
    ``fail`` cells get a failure record); squeue shows the array for one poll."""

    def __init__(self, cells, out: Path, kill: set[int], fail: set[str]) -> None:
        super().__init__()
        self.by_id = {cell_id(c): c for c in cells}
        self.out, self.kill, self.fail = out, kill, fail
        self.lines: list[list[str]] = []
        self.polls = 0

    def run(self, argv: Sequence[str]) -> Result:
        argv = list(argv)
        self.lines.append(argv)
        if argv[0] == "sbatch":
            spec = next(a for a in argv if a.startswith("--array=")).split("=")[1]
            indices = spec.split("%")[0]
            if "-" in indices:
                lo, hi = map(int, indices.split("-"))
                tasks = list(range(lo, hi + 1))
            else:
                tasks = [int(i) for i in indices.split(",")]
            manifest = Path(shlex.split(argv[-1])[-3])
            chunks = read_manifest(manifest)
            for t in tasks:
                if t in self.kill:
                    self.kill.discard(t)  # killed once, fine when run again
                    continue
                for cid in chunks[t]:
                    cell = self.by_id[cid]
                    if cid in self.fail:
                        write_atomic(failed_path(self.out, cell), {"error": "boom"})
                    else:
                        _fake_result(self.out, cell)
            return Result(0, f"{1000 + len(self.lines)};cluster\n", "")
        if argv[0] == "squeue":
            self.polls += 1
            return Result(0, "1001_0 RUNNING\n" if self.polls % 2 else "", "")
        raise AssertionError(argv)


def test_waits_and_resubmits_only_the_tasks_whose_cells_are_missing(write_grid, tmp_path):
    grid = write_grid()
    _, cells = load_and_expand(grid)
    out = tmp_path / "out"
    _fake_result(out, cells[0])  # done before: not submitted
    fake = FakeSlurm(cells, out, kill={1}, fail={cell_id(cells[5])})
    res = submit_and_wait(cells, grid, out, SlurmOptions(chunks=4, array_limit=2, poll_s=5),
                          runner=fake, sleep=lambda s: None)
    sbatch = [a for a in fake.lines if a[0] == "sbatch"]
    assert [next(x for x in a if x.startswith("--array=")) for a in sbatch] == [
        "--array=0-3%2", "--array=1%2"]  # only the killed task goes again
    chunks = read_manifest(res.manifest)
    assert sorted(i for c in chunks for i in c) == sorted(cell_id(c) for c in cells[1:])
    assert res.job_ids == ["1001", "1004"]
    assert res.failed == [cell_id(cells[5])] and res.missing == []
    assert all(result_path(out, c).exists() for c in cells if c is not cells[5])
    assert any(a[0] == "squeue" and "--jobs=1001" in a for a in fake.lines)


def test_no_wait_submits_once(write_grid, tmp_path):
    grid = write_grid()
    _, cells = load_and_expand(grid)
    fake = FakeSlurm(cells, tmp_path / "out", kill=set(range(100)), fail=set())
    res = submit_and_wait(cells, grid, tmp_path / "out", SlurmOptions(), runner=fake,
                          wait=False)
    assert len(res.job_ids) == 1 and [a[0] for a in fake.lines] == ["sbatch"]
    assert len(read_manifest(res.manifest)) == len(cells)  # default: one task per cell


def test_run_chunk_runs_its_manifest_chunk_and_skips_present_cells(write_grid, tmp_path,
                                                                   capsys):
    grid = write_grid()
    _, cells = load_and_expand(grid)
    out = tmp_path / "out"
    ids = [cell_id(c) for c in cells[:6]]
    manifest = tmp_path / "m.json"
    write_atomic(manifest, {"grid": str(grid), "chunks": chunk(ids, 2)})
    mine = chunk_cells(cells, manifest, 1, 2)
    assert [cell_id(c) for c in mine] == ids[1::2]
    _fake_result(out, mine[0])
    rc = main(["sweep", "run-chunk", str(grid), "--out", str(out), "--chunk", "1",
               "--chunks", "2", "--manifest", str(manifest)])
    _, err = capsys.readouterr()
    assert rc == 0, err
    assert "2 cell(s) run, 1 already done" in err
    assert {p.stem for p in out.glob("*.json")} == set(ids[1::2])
    assert chunk_cells(cells, None, 1, 7) == list(cells[1::7])
    with pytest.raises(ValueError, match="chunk 2 outside"):
        chunk_cells(cells, manifest, 2, 2)


def test_slurm_options_need_slurm(write_grid, tmp_path, capsys):
    rc = main(["sweep", "run", str(write_grid()), "--out", str(tmp_path), "--partition", "p"])
    assert rc == 2 and "need --slurm" in capsys.readouterr().err


def test_the_runner_runs_a_command():
    res = Runner().run([sys.executable, "-c", "print('hi')"])
    assert (res.rc, res.stdout) == (0, "hi\n")
