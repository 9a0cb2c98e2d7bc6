"""Facts about the machine that benchmark and profile results record beside their numbers."""

from __future__ import annotations

from pathlib import Path


def cpu_model() -> str | None:
    """The CPU's model name from ``/proc/cpuinfo`` (Linux); None where it cannot be read."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None
