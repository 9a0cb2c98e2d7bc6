"""The ``apply`` of every backend: request ids and result collection here, the work in the backend.

Contract of :func:`apply_idempotent`, action by action in the order given:

- an action whose request id has a recorded result gets that result; nothing else happens;
- otherwise ``admit(index, action)`` checks it and either carries it out or reserves it:

  - raising one of ``rejections`` makes its result ``ActionResult(ok=False, error=str(exc))``,
    recorded at once (``on_rejected`` is told first);
  - returning None means it is done: ``ActionResult(ok=True)``, recorded at once;
  - returning anything else (the backend's *work*) defers its result to ``settle``;

- after the last action, ``settle`` gets every deferred action as :class:`Admitted` (in order)
  and yields one ``(index, result)`` for each, in any order; each result is recorded as it is
  yielded.

Recorded means stored in ``results_by_request`` under the action's request id (when it has
one), so that a later action with that id, in this call or a later one, gets it back. Returns one
result per action, in order. Exceptions other than ``rejections`` pass through unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from slurm_sched.backend import ActionRejected
from slurm_sched.model import Action, ActionResult

_Work = TypeVar("_Work")


@dataclass(frozen=True)
class Admitted(Generic[_Work]):
    """An action whose result waits for ``settle``: its place in the call and the backend's work."""

    index: int
    action: Action
    work: _Work


def apply_idempotent(
    actions: Sequence[Action],
    results_by_request: MutableMapping[str, ActionResult],
    admit: Callable[[int, Action], _Work | None],
    settle: Callable[[list[Admitted[_Work]]], Iterable[tuple[int, ActionResult]]] | None = None,
    *,
    rejections: tuple[type[Exception], ...] = (ActionRejected,),
    on_rejected: Callable[[Action, Exception], None] | None = None,
) -> list[ActionResult]:
    """Apply ``actions`` through the backend's ``admit`` and ``settle`` (module docstring).

    Raises:
        RuntimeError: ``settle`` left a deferred action without a result (a backend bug).
    """
    results: list[ActionResult | None] = []
    admitted: list[Admitted[_Work]] = []

    def record(action: Action, res: ActionResult) -> None:
        if action.request_id is not None:
            results_by_request[action.request_id] = res

    for action in actions:
        rid = action.request_id
        if rid is not None and rid in results_by_request:
            results.append(results_by_request[rid])
            continue
        index = len(results)
        try:
            work = admit(index, action)
        except rejections as exc:
            if on_rejected is not None:
                on_rejected(action, exc)
            res = ActionResult(action=action, ok=False, error=str(exc))
        else:
            if work is not None:
                admitted.append(Admitted(index, action, work))
                results.append(None)
                continue
            res = ActionResult(action=action, ok=True)
        record(action, res)
        results.append(res)
    if admitted:
        if settle is None:
            raise RuntimeError("admit deferred actions but no settle was given")
        deferred = {a.index: a.action for a in admitted}
        for index, res in settle(admitted):
            record(deferred[index], res)
            results[index] = res
    done = [r for r in results if r is not None]
    if len(done) != len(results):
        raise RuntimeError("settle left a deferred action without a result")
    return done
