"""Slurm's time strings (sbatch(1) ``--time``, slurm.conf(5) durations) as seconds.

Forms: ``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S``. The words a caller takes for
"no limit" (``UNLIMITED``, ``INFINITE``, ``Partition_Limit``, ...) differ between Slurm's outputs,
so each caller checks its own before calling :func:`slurm_duration_s`.
"""

from __future__ import annotations

import re

_DURATION = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def slurm_duration_s(text: str) -> float:
    """Seconds of ``text`` in one of the forms above (0 for a zero duration).

    Raises:
        ValueError: ``text`` is in none of them.
    """
    m = _DURATION.match(text)
    if m is None:
        raise ValueError(f"not a Slurm time: {text!r}")
    days, a, b, c = m.groups()
    n = int(a)
    if days is not None:  # D-H, D-H:M, D-H:M:S
        return float(int(days) * 86400 + n * 3600 + int(b or 0) * 60 + int(c or 0))
    if c is not None:  # H:M:S
        return float(n * 3600 + int(b) * 60 + int(c))
    if b is not None:  # M:S
        return float(n * 60 + int(b))
    return float(n * 60)  # M
