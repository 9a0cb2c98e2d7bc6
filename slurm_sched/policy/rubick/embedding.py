"""Placing a shape on nodes for Rubick: which nodes give a job its GPUs (:func:`embed`,
:func:`embed_free`, :func:`fill_in_order`) and the order in which a job's candidates are tried
(:func:`in_flatness_order`, the 1% flatness rule).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from slurm_sched.perf.rubick.shapes import Shape
from slurm_sched.policy.rubick.allocations import State
from slurm_sched.policy.rubick.candidates import Cand
from slurm_sched.policy.rubick.curves import EPS_FLAT


def embed(shape: Shape | None, gpus: int, avail: dict[str, int], prefer: dict[str, int],
          order: list[str]) -> dict[str, int] | None:
    """Choose nodes for a shape given per-node availability: node -> GPUs, or None.

    Uniform shapes take the nodes the job already holds most on, then the ones needing the
    fewest extra GPUs (``prefer`` = GPUs already owned there), then cluster order. ``shape``
    None (a rigid job) packs onto the fewest nodes."""
    pos = {n: i for i, n in enumerate(order)}
    if shape is None:
        fits = [n for n in avail if avail[n] >= gpus]
        if fits:
            best = min(fits, key=lambda n: (-min(prefer.get(n, 0), gpus), avail[n], pos[n]))
            return {best: gpus}
        out: dict[str, int] = {}
        need = gpus
        for n in sorted(avail, key=lambda n: (-prefer.get(n, 0), -avail[n], pos[n])):
            if avail[n] <= 0:
                continue
            take = min(avail[n], need)
            out[n] = take
            need -= take
            if need == 0:
                return out
        return None
    parts = sorted(shape, reverse=True)
    out = {}
    used: set[str] = set()
    for k in parts:
        choices = [n for n in avail if n not in used and avail[n] >= k]
        if not choices:
            return None
        n = min(choices, key=lambda n: (-min(prefer.get(n, 0), k), avail[n] - k, pos[n]))
        out[n] = k
        used.add(n)
    return out


def embed_free(shape: Shape | None, gpus: int, own: dict[str, int], state: State
               ) -> dict[str, int] | None:
    """:func:`embed` with ``avail`` = GPUs owned (``own``, also ``prefer``) + free on every node
    of ``state`` in cluster order, through the free-GPU index: a node the job holds GPUs on
    always beats one it does not (``-min(prefer, k)`` < 0), and among the others the key is the
    best fit (fewest free, then cluster order), so only the job's own nodes are scanned."""
    index, nodes, pos = state.free_index, state.nodes, state.pos

    def avail(n: str) -> int:
        return own.get(n, 0) + len(nodes[n].free_gpus)

    if shape is None:
        mine = [n for n in own if avail(n) >= gpus]
        if mine:
            return {min(mine, key=lambda n: (-min(own[n], gpus), avail(n), pos[n])): gpus}
        other = index.best_fit(gpus, own)
        if other is not None:
            return {other: gpus}
        held = sorted(own, key=lambda n: (-own[n], -avail(n), pos[n]))
        return fill_in_order(held + [n for n in index.by_most() if n not in own], avail, gpus)
    out: dict[str, int] = {}
    used: set[str] = set()
    for k in sorted(shape, reverse=True):
        mine = [n for n in own if n not in used and avail(n) >= k]
        if mine:
            n = min(mine, key=lambda n: (-min(own[n], k), avail(n) - k, pos[n]))
        else:
            found = index.best_fit(k, _Skip(used, own))
            if found is None:
                return None
            n = found
        out[n] = k
        used.add(n)
    return out


def fill_in_order(order: Iterable[str], avail: Callable[[str], int], gpus: int
                  ) -> dict[str, int] | None:
    """``gpus`` spread over the nodes in ``order``, each giving all it has (``avail``) until
    the need is met; None when they do not hold enough."""
    out: dict[str, int] = {}
    need = gpus
    for n in order:
        a = avail(n)
        if a <= 0:
            continue
        take = min(a, need)
        out[n] = take
        need -= take
        if need == 0:
            return out
    return None


def in_flatness_order(by_speed: Iterable[tuple[float, Cand]],
                      by_size: Iterable[tuple[float, Cand]],
                      fit: Callable[[Cand], dict[str, int] | None]
                      ) -> Iterator[tuple[float, Cand, dict[str, int]]]:
    """(speed, candidate, embedding) of the candidates that fit, in the order of the 1%
    flatness rule [X]: those within 1% of the fastest that fits first, then the others, each
    part in ``by_size`` order (fewest GPUs first...). ``by_speed`` holds the same candidates,
    fastest first, and ``by_size`` must be iterable twice.

    Lazy: ``fit`` (an embedding, or None) is asked for the fastest candidates until one fits,
    then along ``by_size`` only as far as the caller reads, where sorting every fit would
    embed every candidate (a big cluster's pass asks this for thousands of jobs)."""
    best = next((s for s, c in by_speed if fit(c) is not None), None)
    if best is None:
        return
    bar = (1 - EPS_FLAT) * best
    for flat in (True, False):
        for s, c in by_size:
            if (s >= bar) is flat:
                emb = fit(c)
                if emb is not None:
                    yield s, c, emb


class _Skip:
    """Membership in either of two collections (nodes to skip)."""

    def __init__(self, a: set[str], b: dict[str, int]) -> None:
        self.a, self.b = a, b

    def __contains__(self, x: object) -> bool:
        return x in self.a or x in self.b
