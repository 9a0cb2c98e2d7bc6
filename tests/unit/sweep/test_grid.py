"""Grid files: expansion, stable cell ids, and validation errors that name entry, field, cell."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from slurm_sched.cli import main
from slurm_sched.errors import InputError
from slurm_sched.sweep.cells import cell_id
from slurm_sched.sweep.grid import expand, load_and_expand, load_grid
from slurm_sched.traces import DATA_DIR
from tests.unit.sweep.conftest import GRID, TINY


def test_cells_are_the_cross_product(write_grid):
    _, cells = load_and_expand(write_grid())
    # (file trace: 1 + generator: 2 loads x 2 seeds) x 2 clusters x 2 policies
    assert len(cells) == (1 + 2 * 2) * 2 * 2
    file_cells = [c for c in cells if c.load is None]
    assert len(file_cells) == 4 and all(c.seed is None for c in file_cells)
    assert {(c.load, c.seed) for c in cells if c.load} == {(3, 1), (3, 2), (4, 1), (4, 2)}
    assert {c.policy for c in cells} == {"fifo", "tiresias-10"}
    assert all(c.restart_overhead_s == 0.0 and c.world == "auto" for c in cells)


def test_exclude_and_include(write_grid):
    text = GRID + '\n[[exclude]]\npolicy = "fifo"\ncluster = "1x4"\n'
    _, cells = load_and_expand(write_grid(text))
    assert len(cells) == 20 - 5
    assert not any(c.policy == "fifo" and c.cluster == "1x4" for c in cells)
    text = GRID + '\n[[include]]\nload = 4\n'
    _, cells = load_and_expand(write_grid(text))
    assert len(cells) == 2 * 2 * 2 and all(c.load == 4 for c in cells)


def test_a_list_in_a_match_entry_matches_any_of_its_values(write_grid):
    text = GRID + '\n[[include]]\nload = [3, 4]\npolicy = ["fifo"]\n'
    _, cells = load_and_expand(write_grid(text))
    assert len(cells) == 2 * 2 * 2 and {c.policy for c in cells} == {"fifo"}
    text = GRID + '\n[[exclude]]\ncluster = ["1x4", "2x4"]\npolicy = "fifo"\n'
    _, cells = load_and_expand(write_grid(text))
    assert len(cells) == 10 and {c.policy for c in cells} == {"tiresias-10"}
    assert "field 'include[0].load' = []: an empty list matches no cell" in _error(
        write_grid, GRID + "\n[[include]]\nload = []\n")


def test_cell_ids_are_stable_unique_and_readable(write_grid):
    _, a = load_and_expand(write_grid())
    _, b = load_and_expand(write_grid(name="again.toml"))
    ids = [cell_id(c) for c in a]
    assert ids == [cell_id(c) for c in b]
    assert len(set(ids)) == len(ids)
    gen = next(c for c in a if c.load == 3 and c.seed == 2 and c.policy == "tiresias-10")
    assert cell_id(gen).startswith("tiresias-10_sjf-bsbf_n3_1x4_s2_")


def _error(write_grid, text: str) -> str:
    with pytest.raises(InputError) as e:
        load_and_expand(write_grid(text))
    return e.value.one_line()


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('name = "tiresias"', 'name = "fastest"',
         "field 'policies[1].name' = 'fastest': unknown policy"),
        ("thresholds_gpu_s = [10]", "round_s = 5",
         "field 'policies[1].options.round_s' = 'round_s=5': policy 'tiresias' has no option"),
        ("thresholds_gpu_s = [10]", 'thresholds_gpu_s = "abc"',
         "field 'policies[1].options.thresholds_gpu_s' = 'thresholds_gpu_s=abc': policy "
         "'tiresias' refused its options"),
        (f'file = "{TINY}"', 'file = "no/such.csv"',
         "field 'traces[0].file' = 'no/such.csv': no such file"),
        ('"2x4"]', '"2by4"]', "field 'clusters' = '2by4'"),
    ],
)
def test_validation_names_entry_field_and_cell(write_grid, old, new, expected):
    msg = _error(write_grid, GRID.replace(old, new))
    assert msg.startswith(str(write_grid().parent / "grid.toml") + ": ")
    assert expected in msg, msg
    assert "(used by cell " in msg, msg


def test_policy_error_counts_the_cells_that_use_it(write_grid):
    msg = _error(write_grid, GRID.replace('name = "tiresias"', 'name = "fastest"'))
    first = next(c for c in expand(load_grid(write_grid(GRID.replace(
        'name = "tiresias"', 'name = "fastest"')))).cells if c.policy == "tiresias-10")
    assert f"(used by cell {cell_id(first)} and 9 more)" in msg


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ('\n[[exclude]]\npolcy = "fifo"\n', "field 'exclude[0].polcy'"),
        ('\n[[exclude]]\npolicy = "sjf"\n', "field 'exclude[0]' = {'policy': 'sjf'}: matches no"),
        ('\n[[traces]]\ngenerator = "nope"\njobs = [3]\n', "field 'traces[2].generator'"),
        ('\n[[traces]]\ngenerator = "sjf-bsbf"\njobs = [3]\nlarge = 1\n',
         "field 'traces[2].large' = 1: generator 'sjf-bsbf' has no parameter"),
        ('\n[[traces]]\ngenerator = "sjf-bsbf"\njobs = [3]\nlarge_fraction = 2\n',
         "field 'traces[2].jobs' = [3]: generator 'sjf-bsbf' refused it: large_fraction"),
        ('\n[[traces]]\nfile = "x.csv"\ngenerator = "sjf-bsbf"\n', "needs exactly one of"),
    ],
)
def test_more_validation_errors(write_grid, extra, expected):
    assert expected in _error(write_grid, GRID + extra)


def test_an_unreadable_trace_is_named_by_its_file(write_grid, tmp_path):
    bad = tmp_path / "cluster.csv"
    bad.write_text("num_switch,num_node_p_switch\n1,2\n")
    msg = _error(write_grid, GRID + f'\n[[traces]]\nfile = "{bad}"\n')
    assert f"field 'traces[2].file' = '{bad}': " in msg and "cannot detect the trace" in msg


def test_top_level_errors(write_grid):
    assert "field 'metrics[0]' = 'avg_jct'" in _error(
        write_grid, 'metrics = ["avg_jct"]\n' + GRID)
    assert "field 'colors'" in _error(write_grid, 'colors = 1\n' + GRID)
    assert "field 'worlds' = 'flat'" in _error(write_grid, 'worlds = ["flat"]\n' + GRID)
    assert "not valid TOML" in _error(write_grid, GRID + "\n[[")


def test_plan_prints_count_table_and_how_the_estimate_is_made(write_grid, capsys):
    rc = main(["sweep", "plan", str(write_grid()), "--calibrate-jobs", "2", "-j", "2"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert out.startswith("grid tiny: 20 cells")
    assert "tiresias-10_sjf-bsbf_n3_1x4_s2_" in out
    assert "estimate: " in out and "with -j 2" in out
    assert "how: each policy's first cell run on its trace's first 2 jobs" in out


def test_plan_error_is_one_line_exit_2(write_grid, capsys):
    rc = main(["sweep", "plan", str(write_grid(GRID.replace('"fifo"', '"fifoo"')))])
    _, err = capsys.readouterr()
    assert rc == 2 and err.count("\n") == 1 and "policies[0].name" in err


def test_the_bundled_grid_is_valid_and_has_120_cells():
    _, cells = load_and_expand(DATA_DIR / "grids" / "sjf-bsbf-fig6a.toml")
    assert len(cells) == 5 * 4 * 6
    assert {c.world for c in cells} == {"sjf-bsbf"}
    assert sorted({c.load for c in cells}) == [120, 180, 240, 360, 480]


def test_the_benchmark_grid_pairs_each_family_with_its_world_in_200_cells():
    grid = Path(__file__).resolve().parents[3] / "benchmarks" / "grids" / "all-policies-200.toml"
    _, cells = load_and_expand(grid)
    assert len(cells) == 200
    per_world = Counter(c.world for c in cells)
    assert per_world == {"sjf-bsbf": 108 + 14, "muri": 40, "rubick": 8, "a-srpt": 18,
                         "gpu-generations": 12}
    assert {c.policy for c in cells if c.world == "muri"} >= {"muri-s", "muri-l"}
    assert all(c.restart_overhead_s == 10.0 for c in cells if c.world == "muri")


def test_run_with_a_bad_grid_fails_before_anything_runs(write_grid, tmp_path, capsys):
    out = tmp_path / "out"
    grid = write_grid(GRID.replace(f'file = "{TINY}"', 'file = "no/such.csv"'))
    assert main(["sweep", "run", str(grid), "--out", str(out)]) == 2
    _, err = capsys.readouterr()
    assert "field 'traces[0].file' = 'no/such.csv'" in err and "(used by cell fifo_such_" in err
    assert not out.exists()
