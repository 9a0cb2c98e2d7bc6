"""JSON-lines decision log: one line per action the controller applied, with its reason.

Each line: ``{"t": <unix s>, "cycle": n, "policy": ..., "kind": ..., "job_id": ...,
"ok": bool, "error": str|null, "reason": ..., "action": {...full action...}}``. The file is
opened in append mode and flushed per cycle, so a crash loses at most the cycle in flight.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TextIO

from slurm_sched.model import ActionResult


class DecisionLog:
    def __init__(self, path: str | Path, policy: str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.policy = policy
        self.cycle = 0
        self._f: TextIO | None = self.path.open("a", encoding="utf-8")

    def record(self, now_s: float, results: list[ActionResult]) -> None:
        """Append one line per result (the controller's ``on_cycle`` hook)."""
        self.cycle += 1
        if not results or self._f is None:
            return
        for r in results:
            a = r.action
            self._f.write(json.dumps({
                "t": round(now_s, 3),
                "cycle": self.cycle,
                "policy": self.policy,
                "kind": a.kind,
                "job_id": a.job_id,
                "ok": r.ok,
                "error": r.error,
                "reason": a.reason,
                "action": a.model_dump(mode="json"),
            }, separators=(",", ":")) + "\n")
        self._f.flush()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


def read_decisions(path: str | Path) -> list[dict]:
    """All records of a decision log (skips a torn last line from a crash)."""
    out = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out
