"""Slurm time strings as seconds: every form sbatch --time takes, and what is not one."""

from __future__ import annotations

import pytest

from slurm_sched.model.slurm_time import slurm_duration_s


@pytest.mark.parametrize(("text", "seconds"), [
    ("30", 1800.0), ("0", 0.0), ("30:15", 1815.0), ("1:30:00", 5400.0), ("2-03", 183600.0),
    ("2-03:04", 183840.0), ("2-03:04:05", 183845.0), ("7-00:00:00", 604800.0),
])  # fmt: skip
def test_every_form(text: str, seconds: float) -> None:
    assert slurm_duration_s(text) == seconds


@pytest.mark.parametrize("text", ["", "UNLIMITED", " 30", "1:2:3:4", "-5", "1-", "a:10", "1.5"])
def test_not_a_slurm_time(text: str) -> None:
    with pytest.raises(ValueError, match="not a Slurm time"):
        slurm_duration_s(text)
