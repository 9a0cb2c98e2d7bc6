"""Automated GPU trading between users (Gandiva_fair, slides "Automated Resource Trading").

Entitlements ``e[u][g]`` are GPUs of pool (generation) ``g`` that user ``u`` is owed; the base,
before trading, is each pool split in ticket proportion (:func:`base_entitlements`). A user's
value of one fast GPU in slow GPUs is its bid ``r[u][f] / r[u][s]`` (its profiled speed-ups;
the slides: "use speedup as bids in a Vickrey auction").

Mechanism (DESIGN; the slides give the idea, the spec's volumes and order, this module makes it
incentive-compatible, see ``docs/reproductions/gandiva-fair.md``):

- **Pair slices.** For every pair of pools (f faster than s), each user's entitlement of a pool
  is split equally over the pairs that contain that pool (P - 1 of them with P pools). The pair
  markets are then independent, and a user's true gain is the sum of its gains in each pair.
- **Pair auction (Vickrey, second price).** Users are ranked by bid (ties by user id). The
  highest bidder buys fast GPUs; the price ``p`` is the second-highest bid (the "pivot", who does
  not trade); every user ranked below the pivot sells at ``p``. With bids 1.2, 6 and 2 the
  6-bidder buys from the 1.2-bidder at p = 2, as on the slides. The volume is
  ``min(buyer's slow slice / p, sellers' fast slices)``, and when the sellers offer more than the
  buyer can pay, each sells in proportion to its own slice (never by bid).
- Fewer than three users: no trade. With two, the second price is the seller's own bid, so the
  seller could raise its price by lying; no truthful budget-balanced trade exists then.

Properties (tested): per pool the entitlements still sum to the pool size and none is negative;
every user's true throughput ``sum_g e[u][g] * r[u][g]`` is at least its no-trade one; and no
user can raise its true throughput by reporting other speed-ups, whatever the others report:
in a pair, the price a buyer pays and a seller gets does not depend on its own bid (only on
whether it buys, sells or sits out), the buyer's volume depends only on the price and the
sellers' slices, a seller's share only on the slices, and moving to another role by lying means
trading at a price no better than its true value.

The spec's alternative (the highest bidder trades only with the lowest, repeatedly, on the full
entitlements) is not incentive-compatible: a middle user that inflates its bid raises the price
at which it later sells (shown in the reproduction notes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Entitlements = dict[str, dict[str, float]]

#: Volumes below this many GPUs are not traded (floating-point dust).
MIN_TRADE_GPUS = 1e-9


@dataclass(frozen=True)
class Trade:
    """``buyer`` got ``fast_gpus`` of pool ``fast`` from ``seller`` for ``price`` slow GPUs each."""

    fast: str
    slow: str
    buyer: str
    seller: str
    price: float
    fast_gpus: float

    @property
    def slow_gpus(self) -> float:
        return self.price * self.fast_gpus


def base_entitlements(
    pool_gpus: Mapping[str, float], tickets: Mapping[str, float]
) -> Entitlements:
    """Each pool split in proportion to the users' tickets (no trading)."""
    total = sum(tickets.values())
    if total <= 0:
        raise ValueError(f"tickets must sum to > 0, got {dict(tickets)}")
    for u, t in tickets.items():
        if t < 0:
            raise ValueError(f"user {u!r}: tickets must be >= 0, got {t}")
    return {u: {g: n * t / total for g, n in pool_gpus.items()} for u, t in tickets.items()}


def throughput(ent: Mapping[str, Mapping[str, float]],
               speedups: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Each user's entitled throughput ``sum_g e[u][g] * r[u][g]`` (in speed-up units)."""
    return {u: sum(e * speedups[u][g] for g, e in pools.items()) for u, pools in ent.items()}


def pair_auction(
    bids: Mapping[str, float],
    fast_slice: Mapping[str, float],
    slow_slice: Mapping[str, float],
    fast: str = "fast",
    slow: str = "slow",
) -> list[Trade]:
    """One pair market (module docstring): the top bidder buys from everyone below the pivot at
    the pivot's bid. Returns one trade per selling user with a positive volume."""
    for u, b in bids.items():
        if not b > 0:
            raise ValueError(f"user {u!r}: bid must be > 0, got {b}")
    ranked = sorted(bids, key=lambda u: (bids[u], u))
    if len(ranked) < 3:
        return []
    buyer, pivot, sellers = ranked[-1], ranked[-2], ranked[:-2]
    price = bids[pivot]
    if bids[buyer] <= price:
        return []
    supply = sum(fast_slice.get(u, 0.0) for u in sellers)
    volume = min(slow_slice.get(buyer, 0.0) / price, supply)
    if volume <= MIN_TRADE_GPUS:
        return []
    trades = []
    for u in sellers:
        q = volume * fast_slice.get(u, 0.0) / supply
        if q > MIN_TRADE_GPUS:
            trades.append(Trade(fast, slow, buyer, u, price, q))
    return trades


def trade(
    ent: Mapping[str, Mapping[str, float]],
    speedups: Mapping[str, Mapping[str, float]],
    pool_order: Sequence[str],
) -> tuple[Entitlements, list[Trade]]:
    """Trade every pair of pools (``pool_order`` fastest first) on equal slices of the
    entitlements. ``speedups[u][g]`` is the speed-up user ``u`` reports for pool ``g``; users
    missing from ``speedups`` keep their entitlement and do not trade.

    Returns the new entitlements (same users and pools) and the trades made.
    """
    pools = [g for g in pool_order if any(g in e for e in ent.values())]
    out: Entitlements = {u: dict(e) for u, e in ent.items()}
    traders = [u for u in ent if u in speedups]
    if len(pools) < 2 or len(traders) < 3:
        return out, []
    share = 1.0 / (len(pools) - 1)
    trades: list[Trade] = []
    for i, f in enumerate(pools):
        for s in pools[i + 1:]:
            bids = {u: speedups[u][f] / speedups[u][s] for u in traders}
            fast_slice = {u: ent[u].get(f, 0.0) * share for u in traders}
            slow_slice = {u: ent[u].get(s, 0.0) * share for u in traders}
            for t in pair_auction(bids, fast_slice, slow_slice, f, s):
                out[t.seller][f] -= t.fast_gpus
                out[t.buyer][f] = out[t.buyer].get(f, 0.0) + t.fast_gpus
                out[t.buyer][s] -= t.slow_gpus
                out[t.seller][s] = out[t.seller].get(s, 0.0) + t.slow_gpus
                trades.append(t)
    for e in out.values():  # clamp dust from floating point
        for g, v in e.items():
            if -1e-9 < v < 0:
                e[g] = 0.0
    return out, trades


def efficiency_gain(
    before: Mapping[str, Mapping[str, float]],
    after: Mapping[str, Mapping[str, float]],
    speedups: Mapping[str, Mapping[str, float]],
) -> float:
    """Relative gain of the total entitled throughput (0.1 = +10%)."""
    b = sum(throughput(before, speedups).values())
    a = sum(throughput(after, speedups).values())
    return a / b - 1.0 if b > 0 else 0.0


def highest_lowest_trade(
    ent: Mapping[str, Mapping[str, float]],
    speedups: Mapping[str, Mapping[str, float]],
    pool_order: Sequence[str],
) -> tuple[Entitlements, list[Trade]]:
    """The spec's literal TRADE (for comparison only, not used by the policy): per pool pair,
    widest speed gap first, the highest bidder with slow GPUs left buys from the lowest bidder
    with fast GPUs left at the second-highest bid of all users (clamped to the two bids),
    repeated until the bids cross. Individually rational but not incentive-compatible."""
    pools = [g for g in pool_order if any(g in e for e in ent.values())]
    out: Entitlements = {u: dict(e) for u, e in ent.items()}
    users = [u for u in ent if u in speedups]

    def gap(pair: tuple[str, str]) -> float:
        f, s = pair
        return sum(speedups[u][f] / speedups[u][s] for u in users) / max(1, len(users))

    pairs = sorted(
        ((f, s) for i, f in enumerate(pools) for s in pools[i + 1:]), key=lambda p: -gap(p)
    )
    trades: list[Trade] = []
    for f, s in pairs:
        bids = {u: speedups[u][f] / speedups[u][s] for u in users}
        ranked = sorted(users, key=lambda u: (bids[u], u))
        second = bids[ranked[-2]] if len(ranked) >= 2 else 0.0
        for _ in range(4 * len(users)):
            buyers = [u for u in ranked if out[u].get(s, 0.0) > MIN_TRADE_GPUS]
            if not buyers:
                break
            h = buyers[-1]
            sellers = [u for u in ranked if u != h and out[u].get(f, 0.0) > MIN_TRADE_GPUS]
            if not sellers or bids[h] <= bids[sellers[0]]:
                break
            lo = sellers[0]
            price = min(max(second, bids[lo]), bids[h])
            q = min(out[lo][f], out[h][s] / price)
            out[lo][f] -= q
            out[h][f] = out[h].get(f, 0.0) + q
            out[h][s] -= price * q
            out[lo][s] = out[lo].get(s, 0.0) + price * q
            trades.append(Trade(f, s, h, lo, price, q))
    return out, trades
