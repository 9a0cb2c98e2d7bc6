"""Our shell scripts run under ``set -o pipefail``: no pipe may end in a reader that stops early.

``producer | grep -q x`` exits at the first match; a producer still writing then dies of SIGPIPE
and, under pipefail, the pipeline fails although the match was found. Whether it does depends on
scheduling, so it fails at random (``cluster.sh node start`` refused a node it knew this way).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPTS = sorted([
    ROOT / "slurm_sched" / "slurm" / "cluster.sh",
    ROOT / ".ci" / "run",
    *(ROOT / "scripts").glob("*.sh"),
    *(ROOT / "docker").glob("*.sh"),
])
# a pipe into grep with -q or -m, or into head
EARLY_READER = re.compile(r"\|\s*(grep\s+(-\w*[qm]\w*\b|--quiet|--max-count)|head\b)")


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_pipe_ends_in_an_early_reader(script: Path) -> None:
    text = script.read_text()
    assert "pipefail" in text, f"{script} does not set pipefail; this check assumes it does"
    bad = [
        f"{script.relative_to(ROOT)}:{n}: {line.strip()}"
        for n, line in enumerate(text.splitlines(), 1)
        if not line.lstrip().startswith("#") and EARLY_READER.search(line)
    ]
    assert not bad, "pipes into an early reader under pipefail:\n" + "\n".join(bad)


def test_the_failure_this_guards_against_is_real() -> None:
    """A producer longer than the pipe buffer, piped into ``grep -q`` that matches at once."""
    proc = subprocess.run(
        ["bash", "-c", "set -o pipefail; seq 1 200000 | grep -qx 1"], check=False,
    )
    assert proc.returncode == 141
    proc = subprocess.run(
        ["bash", "-c", "set -o pipefail; seq 1 200000 | grep -x 1 >/dev/null"], check=False,
    )
    assert proc.returncode == 0
