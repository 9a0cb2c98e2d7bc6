"""Native solver output kept off standard output.

HiGHS, the MILP solver behind :func:`scipy.optimize.milp`, prints some diagnostics with a bare
C ``printf`` that no solver option turns off (``disp``, ``output_flag`` and ``log_to_console``
leave them on), e.g. ``HighsMipSolverData::transformNewIntegerFeasibleSolution
tmpSolver.run();`` from its sub-MIP heuristic. They go to file descriptor 1, where
``slurm-sched compare --format json`` writes the JSON that scripts read, so every solver call
runs inside :func:`silenced_stdout`.

Contract of ``with silenced_stdout():``

- While at least one such block is active anywhere in the process, file descriptor 1 is
  ``/dev/null``: everything written to standard output meanwhile, by native code or by
  Python, from any thread, is discarded. The redirection is process-wide because file
  descriptors are.
- Standard error is left alone: the stray prints go to standard output, and errors written
  during a solve stay visible.
- On entry to the first active block, Python's ``sys.stdout`` and the C library's stdio
  buffers are flushed, so what was written before reaches the real standard output. On exit
  from the last active block, also when it raises, both are flushed again (what was written
  inside goes to ``/dev/null``, not out later from a buffer) and descriptor 1 is restored to
  the very file it was.
- Blocks nest, and blocks in several threads may overlap: a lock-guarded count makes the first
  entry redirect and the last exit restore. The lock is held only for that bookkeeping, never
  while the solver runs.
- When descriptor 1 is not open, or ``/dev/null`` cannot be opened, the block runs without
  redirection.

Cost: a handful of system calls per outermost block (microseconds); a ``milp`` call takes
milliseconds.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
from collections.abc import Callable, Iterator

_STDOUT_FD = 1


def _find_c_fflush() -> Callable[[None], int] | None:
    """The C library's ``fflush`` (called with NULL it flushes every stdio stream), or None
    where the running process exposes no C library symbols."""
    try:
        fflush = ctypes.CDLL(None).fflush
    except (OSError, TypeError, AttributeError):
        return None
    fflush.argtypes = [ctypes.c_void_p]
    fflush.restype = ctypes.c_int
    return fflush


_c_fflush = _find_c_fflush()
_lock = threading.Lock()
_depth = 0
#: a duplicate of the real descriptor 1 while a block is active (None: not redirected)
_saved_fd: int | None = None


def _flush_stdout() -> None:
    """Push buffered standard output, Python's and native code's, to descriptor 1 now."""
    stream = sys.stdout
    if stream is not None:
        with contextlib.suppress(OSError, ValueError):  # a closed or broken stream
            stream.flush()
    if _c_fflush is not None:
        _c_fflush(None)


def _redirect_to_devnull() -> int | None:
    """Point descriptor 1 at ``/dev/null``; the duplicate of the old one, None if impossible."""
    try:
        saved = os.dup(_STDOUT_FD)
    except OSError:  # descriptor 1 is not open: nothing to protect
        return None
    try:
        null = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        os.close(saved)
        return None
    try:
        os.dup2(null, _STDOUT_FD)
    finally:
        os.close(null)
    return saved


def _enter() -> None:
    global _depth, _saved_fd
    with _lock:
        if _depth == 0:
            _flush_stdout()
            _saved_fd = _redirect_to_devnull()
        _depth += 1


def _exit() -> None:
    global _depth, _saved_fd
    with _lock:
        _depth -= 1
        if _depth == 0 and _saved_fd is not None:
            _flush_stdout()
            os.dup2(_saved_fd, _STDOUT_FD)
            os.close(_saved_fd)
            _saved_fd = None


@contextlib.contextmanager
def silenced_stdout() -> Iterator[None]:
    """Discard everything written to file descriptor 1 inside the block (module docstring)."""
    _enter()
    try:
        yield
    finally:
        _exit()
