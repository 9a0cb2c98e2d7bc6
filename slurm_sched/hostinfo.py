"""Facts about the machine that benchmark and profile results record beside their numbers."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
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


#: The numeric stack whose versions move simulated results (least-squares fits, forests).
RESULT_PACKAGES = ("numpy", "scipy", "scikit-learn", "networkx", "pydantic")


def package_versions(names: tuple[str, ...] = RESULT_PACKAGES) -> dict[str, str | None]:
    """Installed versions of ``names`` (distribution names), None for a missing one: results
    files record them, since ``pyproject.toml`` sets lower bounds only and a fresh setup takes
    the newest releases (Rubick's model fits moved with SciPy 1.17, see
    docs/reproductions/rubick.md)."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out
