"""Tiny grids for the sweep tests: a 4-job CSV and 3-4 job generated workloads."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

TINY = Path(__file__).resolve().parents[2] / "data" / "sweep" / "tiny.csv"

GRID = f"""
name = "tiny"
seeds = [1, 2]
clusters = ["1x4", "2x4"]
restart_overhead_s = 0

[[traces]]
file = "{TINY}"

[[traces]]
generator = "sjf-bsbf"
jobs = [3, 4]

[[policies]]
name = "fifo"

[[policies]]
name = "tiresias"
label = "tiresias-10"
options = {{ thresholds_gpu_s = [10] }}
"""


@pytest.fixture
def write_grid(tmp_path: Path) -> Callable[[str], Path]:
    def write(text: str = GRID, name: str = "grid.toml") -> Path:
        p = tmp_path / name
        p.write_text(text)
        return p

    return write
