"""JSON-lines decision log: one line per action the controller applied, with its reason.

Each line: ``{"t": <unix s>, "cycle": n, "policy": ..., "kind": ..., "job_id": ...,
"ok": bool, "error": str|null, "reason": ..., "action": {...full action...}}``, plus
``"commands": [...]`` (the Slurm command lines of the action) when known and ``"dry_run": true``
in shadow mode (nothing was run). An action the safety limits dropped is a line with
``"refused": true`` and the limit's reason in ``"error"``. Other daemon events (start-up
reconciliation, shadow-mode summaries, reloads, and what the Slurm backend noticed an operator or
Slurm change: ``node_unavailable``/``node_available``, ``admin_hold``/``admin_release``,
``start_taken_back``, ``start_lost``, ``time_limit``, ``job_end``; see
``SlurmBackend.take_notices``) are lines
with ``"event": <name>`` and their own fields. The file is opened in append mode and flushed per
cycle, so a crash loses at most the cycle in flight.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from slurm_sched.model import Action, ActionResult


class DecisionLog:
    def __init__(self, path: str | Path, policy: str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.policy = policy
        self.cycle = 0
        self._f: TextIO | None = self.path.open("a", encoding="utf-8")

    def record(
        self,
        now_s: float,
        results: list[ActionResult],
        *,
        commands: Sequence[Sequence[str]] | None = None,
        refusals: Sequence[tuple[Action, str]] = (),
        dry_run: bool = False,
    ) -> None:
        """Append one line per result (the controller's ``on_cycle`` hook) and per refusal.

        ``commands[i]``: the command lines of ``results[i]`` (same order), when known.
        """
        self.cycle += 1
        if (not results and not refusals) or self._f is None:
            return
        for i, r in enumerate(results):
            line = self._line(now_s, r.action, ok=r.ok, error=r.error)
            if commands is not None and i < len(commands) and commands[i]:
                line["commands"] = list(commands[i])
            if dry_run:
                line["dry_run"] = True
            self._write(line)
        for action, why in refusals:
            line = self._line(now_s, action, ok=False, error=why)
            line["refused"] = True
            self._write(line)
        self._f.flush()

    def event(self, now_s: float, name: str, /, **fields: Any) -> None:
        """Append one event line (``{"t", "cycle", "policy", "event": name, **fields}``)."""
        if self._f is None:
            return
        line: dict[str, Any] = {"t": round(now_s, 3), "cycle": self.cycle, "policy": self.policy}
        line["event"] = name
        line.update(fields)
        self._write(line)
        self._f.flush()

    def _line(self, now_s: float, a: Action, *, ok: bool, error: str | None) -> dict[str, Any]:
        return {
            "t": round(now_s, 3),
            "cycle": self.cycle,
            "policy": self.policy,
            "kind": a.kind,
            "job_id": a.job_id,
            "ok": ok,
            "error": error,
            "reason": a.reason,
            "action": a.model_dump(mode="json"),
        }

    def _write(self, line: dict[str, Any]) -> None:
        assert self._f is not None
        self._f.write(json.dumps(line, separators=(",", ":"), default=str) + "\n")

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


def read_decisions(path: str | Path) -> list[dict[str, Any]]:
    """All records of a decision log (skips a torn last line from a crash)."""
    out = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out
