"""Standard output stays clean of native solver prints (:mod:`slurm_sched.policy.solver_output`).

The HiGHS anchor: Muri's typed matching over 7 profile types with the counts and pair weights
below (taken from a muri-s run on ``muri/cluster_trace.csv``) makes HiGHS print
``HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();`` twice to file
descriptor 1. The tests that use it check that it still prints without the guard, so they cannot
pass on a HiGHS that has gone quiet. With standard output a pipe, C stdio holds those lines in
its buffer until exit unless the guard flushes it: the children run buffered, as a script's
pipe is, and once more with ``PYTHONUNBUFFERED`` (which unbuffers C stdio too).
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from slurm_sched.policy.solver_output import silenced_stdout

ROOT = Path(__file__).resolve().parents[3]
HIGHS_LINE = "HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();"

#: profile types 0..6 and how many nodes of each are waiting
TYPE_COUNTS = [3, 2, 3, 4, 1, 2, 2]
#: the weight of every type pair the typed matching considers, in its order (a <= b)
PAIR_WEIGHTS = {
    (0, 0): 0.2583785697427425, (0, 1): 0.22611724323596713, (0, 2): 0.35364929559142694,
    (0, 3): 0.3408825120635492, (0, 4): 0.2882276152613778, (0, 5): 0.2744723082881487,
    (0, 6): 0.2424806408964996, (1, 1): 0.2132219112053924, (1, 2): 0.26678123736352605,
    (1, 3): 0.2625798390775994, (1, 4): 0.3652026840448445, (1, 5): 0.3639190927702923,
    (1, 6): 0.2977319944598337, (2, 2): 0.3667766825657894, (2, 3): 0.3527661959452201,
    (2, 4): 0.25356168337093976, (2, 5): 0.24818743286788397, (2, 6): 0.23910775459358455,
    (3, 3): 0.3401676188290493, (3, 4): 0.2593273673588613, (3, 5): 0.2532099273789024,
    (3, 6): 0.24240951006837713, (4, 5): 0.354645266827021, (4, 6): 0.29200374590783174,
    (5, 5): 0.3717874875868917, (5, 6): 0.30864077058675393, (6, 6): 0.36126876443941097,
}

#: a compare run whose Muri-S rounds (window 2: every bucket of 3+ nodes goes to the typed
#: matching) reach a matching that makes HiGHS print; about 2 s
COMPARE_ARGS = ["compare", "--trace", "muri/cluster_trace.csv", "--cluster", "4x8",
                "--restart-overhead-s", "10", "--policies", "muri-s", "-o", "window=2",
                "--limit", "20", "--format", "json", "--quiet"]

#: child-process prelude that replaces the guard at Muri's solver call by a no-op
UNGUARDED = ("import contextlib, slurm_sched.policy.muri as muri; "
             "muri.silenced_stdout = contextlib.nullcontext; ")


def _child(code: str, unbuffered: bool = False) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter on this tree; stdout and stderr captured apart.

    Without ``unbuffered`` the child's C stdio buffers its standard output (a pipe) as usual;
    ``PYTHONUNBUFFERED`` turns that buffer off, so native prints reach the pipe at once."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env |= {"PYTHONPATH": str(ROOT), "SLURM_SCHED_NATIVE": "off"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120, check=False)


def _typed_matching_code(prelude: str) -> str:
    return (prelude + "import json; from slurm_sched.policy.muri import _solve_type_matching; "
            f"w = {PAIR_WEIGHTS!r}; "
            f"got = _solve_type_matching(list(range(7)), {TYPE_COUNTS!r}, set(), "
            "lambda a, b: w[(a, b)]); "
            "import sys; sys.stderr.write(json.dumps(got))")


def test_highs_prints_to_stdout_in_the_unguarded_typed_matching() -> None:
    """The anchor: without the guard, this matching writes HiGHS's debug line to fd 1."""
    child = _child(_typed_matching_code(UNGUARDED))
    assert child.returncode == 0, child.stderr
    assert HIGHS_LINE in child.stdout


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
def test_typed_matching_writes_nothing_to_stdout_and_solves_the_same(unbuffered: bool) -> None:
    unguarded = _child(_typed_matching_code(UNGUARDED), unbuffered)
    guarded = _child(_typed_matching_code(""), unbuffered)
    assert HIGHS_LINE in unguarded.stdout
    assert guarded.returncode == 0, guarded.stderr
    assert guarded.stdout == ""
    assert json.loads(guarded.stderr) == json.loads(unguarded.stderr)
    assert json.loads(guarded.stderr)  # a real matching, not the empty one


def test_compare_json_is_parseable_where_highs_prints() -> None:
    """End to end: what a script piping ``compare --format json`` into a JSON parser sees."""
    run = "import sys; from slurm_sched.cli import main; sys.exit(main({}))"
    unguarded = _child(UNGUARDED + run.format(COMPARE_ARGS))
    assert unguarded.returncode == 0, unguarded.stderr
    assert HIGHS_LINE in unguarded.stdout  # this input really makes the solver print
    with pytest.raises(json.JSONDecodeError):
        json.loads(unguarded.stdout)
    guarded = _child(run.format(COMPARE_ARGS))
    assert guarded.returncode == 0, guarded.stderr
    rows = json.loads(guarded.stdout)
    assert [r["policy"] for r in rows] == ["muri-s"] and rows[0]["jobs"] == 20
    stray = [line for line in unguarded.stdout.splitlines(keepends=True)
             if line.strip() != HIGHS_LINE]
    assert guarded.stdout == "".join(stray)


# ---------------------------------------------------------------------- the guard's contract
def test_writes_inside_are_discarded_and_descriptor_1_comes_back(
        capfd: pytest.CaptureFixture[str]) -> None:
    os.write(1, b"before|")
    with silenced_stdout():
        os.write(1, b"inside\n")
    os.write(1, b"after\n")
    assert capfd.readouterr().out == "before|after\n"


def test_python_prints_before_come_out_and_inside_do_not() -> None:
    """In a child, where ``sys.stdout`` writes to descriptor 1 (under pytest it does not)."""
    child = _child("import os; from slurm_sched.policy.solver_output import silenced_stdout\n"
                   "print('before', end='|')\n"  # still in Python's buffer when the block starts
                   "with silenced_stdout():\n"
                   "    print('python inside')\n"
                   "print('after')\n")
    assert child.returncode == 0, child.stderr
    assert child.stdout == "before|after\n"


def test_blocks_nest(capfd: pytest.CaptureFixture[str]) -> None:
    with silenced_stdout():
        with silenced_stdout():
            os.write(1, b"inner\n")
        os.write(1, b"outer, after the inner block\n")
    os.write(1, b"after\n")
    assert capfd.readouterr().out == "after\n"


def test_descriptor_1_comes_back_when_the_block_raises(capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(RuntimeError), silenced_stdout():
        os.write(1, b"inside\n")
        raise RuntimeError("solver failed")
    os.write(1, b"after\n")
    assert capfd.readouterr().out == "after\n"


def test_overlapping_blocks_in_two_threads(capfd: pytest.CaptureFixture[str]) -> None:
    """The last block to exit restores descriptor 1, whichever thread entered first."""
    entered, main_done, written = threading.Event(), threading.Event(), threading.Event()

    def worker() -> None:
        with silenced_stdout():
            entered.set()
            main_done.wait(10)
            os.write(1, b"worker inside, after main's block ended\n")
        written.set()

    t = threading.Thread(target=worker)
    t.start()
    assert entered.wait(10)
    with silenced_stdout():
        os.write(1, b"main inside\n")
    main_done.set()
    assert written.wait(10)
    t.join(10)
    os.write(1, b"after\n")
    assert capfd.readouterr().out == "after\n"


def test_stderr_is_left_alone(capfd: pytest.CaptureFixture[str]) -> None:
    with silenced_stdout():
        os.write(2, b"an error\n")
    assert capfd.readouterr().err == "an error\n"


@pytest.mark.skipif(not hasattr(ctypes.CDLL(None), "printf"), reason="no C library symbols")
def test_buffered_c_stdio_output_is_discarded_not_written_later() -> None:
    """printf into a pipe is block-buffered: the guard flushes it into /dev/null on exit
    rather than leaving it to come out on the restored descriptor."""
    child = _child("import ctypes, os\n"
                   "from slurm_sched.policy.solver_output import silenced_stdout\n"
                   "libc = ctypes.CDLL(None)\n"
                   "with silenced_stdout():\n"
                   "    libc.printf(b'native printf inside\\n')\n"
                   "os.write(1, b'after\\n')\n"
                   "libc.fflush(None)\n")
    assert child.returncode == 0, child.stderr
    assert child.stdout == "after\n"
