"""``scripts/slurm-build.sh``: its usage, and a finished build answered from the cache.

The build itself (minutes, Debian's source archive) runs in ``scripts/test.sh`` before the
conformance suite; here only what needs neither network nor compiler.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "slurm-build.sh"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, **(env or {})},
    )


def test_unknown_release_is_a_usage_error() -> None:
    for args in ((), ("21.08",), ("24.11.5",)):
        proc = run(*args)
        assert proc.returncode == 2, proc
        assert proc.stderr.strip() == "usage: slurm-build.sh 22.05|24.11"
        assert proc.stdout == ""


def test_a_cached_build_prints_its_prefix_on_the_last_line(tmp_path: Path) -> None:
    prefix = tmp_path / "slurm-24.11.5"
    (prefix / "sbin").mkdir(parents=True)
    for daemon in ("slurmctld", "slurmd"):
        (prefix / "sbin" / daemon).write_text("#!/bin/sh\n")
        (prefix / "sbin" / daemon).chmod(0o755)
    (prefix / ".slurm-sched-build").write_text("Slurm 24.11.5, built for this test\n")
    # slurmdbd's MySQL plugin: a build without it is made again
    (prefix / "lib" / "slurm").mkdir(parents=True)
    (prefix / "lib" / "slurm" / "accounting_storage_mysql.so").write_text("")
    proc = run("24.11", env={"SLURM_BUILD_CACHE": str(tmp_path), "SLURM_BUILD_FROM_SOURCE": "1"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == str(prefix)
    assert "cached build" in proc.stderr

