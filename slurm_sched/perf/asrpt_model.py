"""A-SRPT's job model: mixed-parallel jobs as graphs of stage replicas, the per-iteration time
model (Eqs. 4-7), the Heavy-Edge GPU mapping, alpha_min / alpha_max and the Theorem 1 bound.

Paper: Z. Luo, J. Liu, M. Lee, N. B. Shroff, "Prediction-Assisted Online Distributed Deep
Learning Workload Scheduling in GPU Clusters" (arXiv 2501.05563); spec ``shared/specs/a-srpt.md``.

Model (spec section 1.2-1.4). A job trains for ``n`` iterations; it is split into stages, stage
``s`` replicated data-parallel on ``k_s`` replicas. Every replica is a vertex of the job graph:
consecutive stages are joined by complete bipartite edges of weight ``2 d_in_s / k_(s-1)`` bytes
per iteration and the replicas of a stage by an AllReduce ring (RAR, ``2 (k-1) h / k``) or
NCCL's double binary tree (TAR, half of it per tree edge). The per-iteration time of a placement
is that of the bottleneck (server, stage) pair (asynchronous pipeline, Eq. 7):

    beta(m, s) = p_f + p_b + tp_comm                                          (4, + TP)
               + g * inter(m, s) / (t_s * B_inter) + intra(m, s) / B_intra     (5, reading B1)
               + allreduce(m, s)                                               (6, reading B2)

A stage with ``x`` replicas on a server reserves ``x * t_s / g`` of its NIC, so its cross-server
traffic takes ``g * inter / (t_s * B_inter)`` whatever ``x`` is.

Tensor parallelism (spec section 2.10, an extension the paper discusses but does not evaluate;
the formulas are this module's, [R]): a stage may have a tensor-parallel degree ``t_s``; then a
replica is a TP group of ``t_s`` GPUs that must sit on ONE server (one graph vertex of weight
``t_s``). ``p_f``/``p_b`` are the group's times, and the group all-reduces ``tp_bytes`` per
iteration over ``B_intra`` (ring: ``2 (t-1)/t * tp_bytes / B_intra``). A job uses one TP degree
for all its stages, so servers hold whole groups and Heavy-Edge works on the groups. With
``t = 1`` everything reduces to the paper's model.

Units: bytes, bytes/s, seconds (the profile table stores ms and MB for readability).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

import networkx as nx

from slurm_sched.model import Cluster, JobSpec, JobView, Placement
from slurm_sched.perf.progress import ProgressModel

Vertex = tuple[int, int]  # (stage, replica)
AllReduceKind = Literal["rar", "tar"]

#: 10 Gbps server NIC (the paper's simulation), bytes per second.
DEFAULT_B_INTER_BPS = 10e9 / 8
#: NVLink inside a server (V100 spec, the paper's simulation), bytes per second.
DEFAULT_B_INTRA_BPS = 300e9
#: alpha_max / alpha_min at or above which a job is communication-heavy (paper's experiments).
COMM_HEAVY = 1.5
MB = 1e6


@dataclass(frozen=True)
class Network:
    """Bandwidths of the cluster (bidirectional, bytes per second)."""

    b_inter_Bps: float = DEFAULT_B_INTER_BPS
    b_intra_Bps: float = DEFAULT_B_INTRA_BPS

    def __post_init__(self) -> None:
        if not self.b_inter_Bps > 0:
            raise ValueError(f"b_inter_Bps must be > 0, got {self.b_inter_Bps}")
        if not self.b_intra_Bps > 0:
            raise ValueError(f"b_intra_Bps must be > 0, got {self.b_intra_Bps}")


@dataclass(frozen=True)
class Stage:
    """One pipeline stage: ``k`` replicas, each a TP group of ``tp`` GPUs (1 = no TP).

    Times are per iteration on one replica; sizes are per iteration (d_in/d_out: activations in
    the forward pass, the same size of gradients flows back; h: trainable parameters).
    """

    k: int
    pf_s: float
    pb_s: float
    d_in_B: float = 0.0
    d_out_B: float = 0.0
    h_B: float = 0.0
    tp: int = 1
    tp_B: float = 0.0

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"stage k must be >= 1, got {self.k}")
        if self.tp < 1:
            raise ValueError(f"stage tp must be >= 1, got {self.tp}")
        for name in ("pf_s", "pb_s", "d_in_B", "d_out_B", "h_B", "tp_B"):
            v = getattr(self, name)
            if not (v >= 0 and math.isfinite(v)):
                raise ValueError(f"stage {name} must be finite and >= 0, got {v}")


@dataclass(frozen=True)
class JobProfile:
    """A job's parallel configuration and per-stage profile (hashable: used as a cache key)."""

    stages: tuple[Stage, ...]
    allreduce: AllReduceKind = "rar"
    name: str = "custom"

    def __post_init__(self) -> None:
        if not self.stages:
            raise ValueError("a job profile needs at least one stage")
        if self.allreduce not in ("rar", "tar"):
            raise ValueError(f"allreduce must be 'rar' or 'tar', got {self.allreduce!r}")
        if len({s.tp for s in self.stages}) != 1:
            raise ValueError(
                f"profile {self.name}: all stages need the same tp degree, got "
                f"{[s.tp for s in self.stages]}"
            )

    @property
    def tp(self) -> int:
        return self.stages[0].tp

    @property
    def num_gpus(self) -> int:
        """g_i = sum over stages of k_s * t_s."""
        return sum(s.k * s.tp for s in self.stages)

    @property
    def num_replicas(self) -> int:
        return sum(s.k for s in self.stages)

    def vertices(self) -> list[Vertex]:
        return [(s, r) for s, st in enumerate(self.stages) for r in range(st.k)]

    # ---------------------------------------------------------------- (de)serialisation
    def to_json(self) -> dict[str, Any]:
        """Compact JSON form (ms and MB) for ``JobSpec.attrs["asrpt_stages"]``."""
        return {
            "name": self.name,
            "allreduce": self.allreduce,
            "stages": [
                [s.k, s.tp, s.pf_s * 1e3, s.pb_s * 1e3, s.d_in_B / MB, s.d_out_B / MB,
                 s.h_B / MB, s.tp_B / MB]
                for s in self.stages
            ],
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> JobProfile:
        try:
            rows = obj["stages"]
            stages = tuple(
                Stage(k=int(r[0]), tp=int(r[1]), pf_s=float(r[2]) / 1e3, pb_s=float(r[3]) / 1e3,
                      d_in_B=float(r[4]) * MB, d_out_B=float(r[5]) * MB, h_B=float(r[6]) * MB,
                      tp_B=float(r[7]) * MB)
                for r in rows
            )
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise ValueError(f"asrpt_stages = {obj!r}: not a valid profile ({e})") from e
        return cls(stages=stages, allreduce=obj.get("allreduce", "rar"),
                   name=str(obj.get("name", "custom")))


# ====================================================================== job graph (section 2.1)
def _tree_edges(n: int) -> list[tuple[int, int]]:
    """Heap-ordered binary tree over positions 0..n-1: edge (parent(p), p)."""
    return [((p - 1) // 2, p) for p in range(1, n)]


@lru_cache(maxsize=4096)
def build_graph(profile: JobProfile) -> nx.Graph:
    """The job graph: one vertex per stage replica (a TP group), edge weights in bytes/iteration.

    Vertices carry ``size`` = GPUs of the replica (its TP degree).
    """
    gr = nx.Graph()
    st = profile.stages
    for v in profile.vertices():
        gr.add_node(v, size=st[v[0]].tp)

    def add(u: Vertex, v: Vertex, w: float) -> None:
        if w <= 0:
            return
        if gr.has_edge(u, v):
            gr[u][v]["weight"] += w
        else:
            gr.add_edge(u, v, weight=w)

    for s in range(1, len(st)):
        w = 2 * st[s].d_in_B / st[s - 1].k  # reading B3: 2 d_in_s / k_(s-1)
        for a in range(st[s - 1].k):
            for b in range(st[s].k):
                add((s - 1, a), (s, b), w)
    for s, stage in enumerate(st):
        n = stage.k
        if n < 2:
            continue
        ring_w = 2 * (n - 1) / n * stage.h_B
        if profile.allreduce == "rar":
            pairs = [(0, 1)] if n == 2 else [(r, (r + 1) % n) for r in range(n)]
            for a, b in pairs:
                add((s, a), (s, b), ring_w)
        else:  # TAR: tree A over [0..n-1], tree B over the reversed list; each half the data
            order_b = list(range(n - 1, -1, -1))
            for a, b in _tree_edges(n):
                add((s, a), (s, b), ring_w / 2)
            for a, b in _tree_edges(n):
                add((s, order_b[a]), (s, order_b[b]), ring_w / 2)
    return gr


def cut_weight(graph: nx.Graph, assign: Mapping[Vertex, Any]) -> float:
    """Total weight of edges whose ends are on different servers (inter-server bytes/iter)."""
    return sum(d["weight"] for u, v, d in graph.edges(data=True) if assign[u] != assign[v])


# ================================================================== Heavy-Edge (section 2.2)
def heavy_edge(
    graph: nx.Graph,
    caps: Sequence[tuple[Any, int]],
    *,
    weight_to: Literal["unassigned", "all"] = "unassigned",
    rng: random.Random | None = None,
) -> dict[Vertex, Any]:
    """Greedy Heavy-Edge partition of ``graph`` over servers ``caps`` = [(server, GPUs)].

    The GPU counts must add up to the job's GPUs and each must be a multiple of the job's TP
    degree. Servers are filled in descending capacity (ties: the order of ``caps``). A server of
    one vertex takes the vertex of least edge weight (``weight_to``: to unassigned vertices,
    reading B4, or to all vertices, the literal reading); a bigger one grows from the heaviest
    edge among unassigned vertices, adding the endpoint of the heaviest edge that leaves the set.
    Ties go to the vertex order (stage, replica) exactly as the spec's Appendix A. Where no edge
    leaves the set, the first unassigned vertex is taken, or a random one if ``rng`` is given.
    """
    order = sorted(graph.nodes)
    pos = {v: i for i, v in enumerate(order)}
    unit = graph.nodes[order[0]]["size"] if order else 1
    total = sum(c for _, c in caps)
    if total != len(order) * unit:
        raise ValueError(f"caps add up to {total} GPUs; the job has {len(order) * unit}")
    for sid, c in caps:
        if c < 0 or c % unit:
            raise ValueError(f"server {sid!r}: {c} GPUs is not a multiple of the TP degree {unit}")
    adj: dict[Vertex, dict[Vertex, float]] = {
        v: {u: d["weight"] for u, d in graph.adj[v].items()} for v in order
    }
    unassigned: dict[Vertex, None] = dict.fromkeys(order)  # insertion order = vertex order
    full_deg = {v: sum(adj[v].values()) for v in order}
    out: dict[Vertex, Any] = {}

    def take(v: Vertex, sid: Any) -> None:
        out[v] = sid
        del unassigned[v]

    def weight_to_unassigned(v: Vertex) -> float:
        # summed afresh (not updated by subtraction) so that float ties stay exact ties
        return sum(w for u, w in adj[v].items() if u in unassigned and u != v)

    indexed = sorted(enumerate(caps), key=lambda ic: (-ic[1][1], ic[0]))
    for _, (sid, cap_gpus) in indexed:
        cap = cap_gpus // unit
        if cap == 0:
            continue
        if len(unassigned) == cap:  # case 1: the rest fits here
            for v in list(unassigned):
                take(v, sid)
            break
        if cap == 1:  # case 2: the vertex that costs least to cut off
            if weight_to == "unassigned":
                v = min(unassigned, key=lambda x: (weight_to_unassigned(x), pos[x]))
            else:
                v = min(unassigned, key=lambda x: (full_deg[x], pos[x]))
            take(v, sid)
            continue
        # case 3: seed with the heaviest edge inside U, then grow along the heaviest edges
        seed: tuple[float, int, int] | None = None
        for a in unassigned:
            pa = pos[a]
            for b, w in adj[a].items():
                if b in unassigned and pos[b] > pa and w > 0:
                    key = (w, -pa, -pos[b])
                    if seed is None or key > seed:
                        seed = key
        node_set: list[Vertex] = (
            [order[-seed[1]], order[-seed[2]]] if seed is not None else [next(iter(unassigned))]
        )
        # best[v] = (heaviest edge weight from node_set, -index in node_set of its other end)
        best: dict[Vertex, tuple[float, int]] = {}

        for v in node_set:
            take(v, sid)
        for i, v in enumerate(node_set):
            _absorb(adj[v], i, unassigned, best)
        while len(node_set) < cap:
            cands = [(wi, v) for v, wi in best.items() if v in unassigned]
            if cands:
                (_, _), v = max(cands, key=lambda c: (c[0][0], c[0][1], -pos[c[1]]))
            elif rng is not None:
                v = rng.choice(list(unassigned))
            else:
                v = next(iter(unassigned))
            best.pop(v, None)
            take(v, sid)
            node_set.append(v)
            _absorb(adj[v], len(node_set) - 1, unassigned, best)
    if unassigned:
        raise ValueError(f"{len(unassigned)} vertices left unassigned (caps {list(caps)})")
    return out


def _absorb(
    nbrs: Mapping[Vertex, float],
    idx: int,
    unassigned: Mapping[Vertex, None],
    best: dict[Vertex, tuple[float, int]],
) -> None:
    """Update each unassigned neighbour's heaviest edge into the growing set (first end wins)."""
    for b, w in nbrs.items():
        if b in unassigned and w > 0:
            cur = best.get(b)
            if cur is None or w > cur[0]:
                best[b] = (w, -idx)


def exhaustive_min_cut(
    graph: nx.Graph, caps: Sequence[tuple[Any, int]]
) -> tuple[float, dict[Vertex, Any]]:
    """The optimal partition by exhaustive search (small graphs only: the ILP stand-in)."""
    order = sorted(graph.nodes)
    unit = graph.nodes[order[0]]["size"] if order else 1
    left = {sid: c // unit for sid, c in caps}
    sids = [sid for sid, _ in caps]
    edges = [(order.index(u), order.index(v), d["weight"]) for u, v, d in graph.edges(data=True)]
    nbrs: list[list[tuple[int, float]]] = [[] for _ in order]
    for a, b, w in edges:
        lo, hi = min(a, b), max(a, b)
        nbrs[hi].append((lo, w))  # check an edge when its later vertex is placed
    best: list[Any] = [math.inf, None]
    cur: list[Any] = [None] * len(order)

    def rec(i: int, cost: float) -> None:
        if cost >= best[0]:
            return
        if i == len(order):
            best[0], best[1] = cost, list(cur)
            return
        tried: set[tuple[int, ...]] = set()
        for sid in sids:
            if left[sid] == 0:
                continue
            # servers with the same remaining capacity and no vertex yet are interchangeable
            if all(c != sid for c in cur[:i]):
                sig = (left[sid], -1)
                if sig in tried:
                    continue
                tried.add(sig)
            add = sum(w for j, w in nbrs[i] if cur[j] != sid)
            cur[i] = sid
            left[sid] -= 1
            rec(i + 1, cost + add)
            left[sid] += 1
            cur[i] = None

    rec(0, 0.0)
    return best[0], dict(zip(order, best[1], strict=True))


# ============================================================ per-iteration time (section 1.4)
def stage_counts(profile: JobProfile, assign: Mapping[Vertex, Any]) -> dict[Any, list[int]]:
    """x[m][s] = replicas of stage s on server m."""
    x: dict[Any, list[int]] = {}
    for (s, _), m in assign.items():
        x.setdefault(m, [0] * len(profile.stages))[s] += 1
    return x


def alpha_of_counts(
    profile: JobProfile,
    x: Mapping[Any, Sequence[int]],
    gpus_per_server: int | Mapping[Any, int],
    net: Network = Network(),
) -> float:
    """Eq. 7: the bottleneck stage time over (server, stage) pairs with x > 0 (seconds)."""
    st = profile.stages
    S = len(st)
    b_inter, b_intra = net.b_inter_Bps, net.b_intra_Bps
    worst = 0.0
    for m, xm in x.items():
        g = gpus_per_server if isinstance(gpus_per_server, int) else gpus_per_server[m]
        for s in range(S):
            xs = xm[s]
            if xs == 0:
                continue
            stage = st[s]
            inter = intra = 0.0
            if s > 0:
                kp = st[s - 1].k
                inter += 2 * stage.d_in_B * (kp - xm[s - 1]) / kp
                intra += 2 * stage.d_in_B * xm[s - 1] / kp
            if s < S - 1:
                kn = st[s + 1].k
                inter += 2 * stage.d_out_B * (kn - xm[s + 1]) / kn
                intra += 2 * stage.d_out_B * xm[s + 1] / kn
            t = stage.tp
            # inter * xs / ((xs * t / g) * B_inter): the stage's NIC share is xs*t/g
            comm = g * inter / (t * b_inter) + intra / b_intra
            k = stage.k
            if k == 1:
                ar = 0.0
            elif xs < k:  # spans servers: NIC-bound
                ar = g * 2 * (k - 1) * stage.h_B / (t * k * b_inter)
            else:
                ar = 2 * (k - 1) * stage.h_B / (t * k * b_intra)
            tp_comm = 2 * (t - 1) / t * stage.tp_B / b_intra if t > 1 else 0.0
            worst = max(worst, stage.pf_s + stage.pb_s + tp_comm + comm + ar)
    return worst


def alpha_of_assignment(
    profile: JobProfile,
    assign: Mapping[Vertex, Any],
    gpus_per_server: int | Mapping[Any, int],
    net: Network = Network(),
) -> float:
    return alpha_of_counts(profile, stage_counts(profile, assign), gpus_per_server, net)


@lru_cache(maxsize=65536)
def alpha_of_shape(
    profile: JobProfile, shape: tuple[int, ...], gpus_per_server: int, net: Network
) -> float:
    """alpha of Heavy-Edge on servers with ``shape`` GPUs each (ids 0..), all of size g."""
    caps = [(i, c) for i, c in enumerate(shape) if c > 0]
    assign = heavy_edge(build_graph(profile), caps)
    return alpha_of_assignment(profile, assign, gpus_per_server, net)


def consolidated_shape(profile: JobProfile, gpus_per_server: int) -> tuple[int, ...]:
    """The fewest-servers shape (section 2.3): full servers then the remainder (TP-aligned)."""
    unit = profile.tp
    per = (gpus_per_server // unit) * unit
    if per == 0:
        raise ValueError(
            f"profile {profile.name}: TP degree {unit} exceeds {gpus_per_server} GPUs per server"
        )
    g = profile.num_gpus
    full, rest = divmod(g, per)
    return tuple([per] * full + ([rest] if rest else []))


def alpha_min_est(
    profile: JobProfile, gpus_per_server: int, net: Network = Network()
) -> float:
    """alpha~_min: Heavy-Edge on ceil(g_i/g) empty servers (section 2.3)."""
    return alpha_of_shape(profile, consolidated_shape(profile, gpus_per_server),
                          gpus_per_server, net)


def alpha_max(profile: JobProfile, gpus_per_server: int, net: Network = Network()) -> float:
    """alpha_max: every replica alone on its own server, NIC share t/g (section 2.3)."""
    x = {i: [1 if s == v[0] else 0 for s in range(len(profile.stages))]
         for i, v in enumerate(profile.vertices())}
    return alpha_of_counts(profile, x, gpus_per_server, net)


# ================================================================ Theorem 1 (section 2.7)
def theorem1_bound(
    rho: float, tau: float, G: int, g_max: int, a_max: float, a_min: float, eps_bar: float
) -> float:
    """Competitive ratio bound of Theorem 1 (needs g_max < G)."""
    if g_max >= G:
        raise ValueError(f"theorem 1 needs g_max < G, got g_max={g_max}, G={G}")
    if a_min <= 0:
        raise ValueError(f"a_min must be > 0, got {a_min}")
    frac = G / (G - g_max)
    return (2 + tau + rho * frac) * rho + (2 * rho * g_max * a_max / a_min) * (
        1 + tau + (1 + rho) * frac
    ) * eps_bar


# ================================================ synthetic profile table (spec section 5.3)
#: SYNTHETIC. The paper publishes no per-stage profile; this table is the spec's recommended
#: stand-in: FLOP-count compute at F_eff on a V100, fp32 gradients, fp16 boundary activations.
F_EFF_FLOPS = 30e12
SEQ_LEN = 512


@dataclass(frozen=True)
class ModelSpec:
    """One Table I model. ``kind``: cnn (fwd GFLOPs/sample) or transformer (hidden, layers)."""

    name: str
    params: float
    batch: int
    kind: Literal["cnn", "transformer"]
    fwd_gflops: float = 0.0
    hidden: int = 0
    layers: int = 0
    fits_one_gpu: bool = True
    configs: tuple[tuple[int, int, int], ...] = field(default=())  # (S, k, tp)


_DP = tuple((1, k, 1) for k in (1, 2, 4, 8, 16, 32))
_PP = tuple((s, k, 1) for s in (4, 8, 16, 32) for k in (1, 2) if s * k <= 32)

MODELS: tuple[ModelSpec, ...] = (
    ModelSpec("vgg19", 144e6, 32, "cnn", fwd_gflops=19.6, configs=_DP),
    ModelSpec("resnet152", 60e6, 4, "cnn", fwd_gflops=11.3, configs=_DP),
    ModelSpec("inception-v3", 24e6, 32, "cnn", fwd_gflops=5.7, configs=_DP),
    ModelSpec("bert-large", 340e6, 4, "transformer", hidden=1024, layers=24, configs=_DP),
    ModelSpec("xlnet-large", 550e6, 4, "transformer", hidden=1024, layers=24, configs=_DP),
    ModelSpec("t5-11b", 11e9, 8, "transformer", hidden=1024, layers=48, fits_one_gpu=False,
              configs=_PP),
    ModelSpec("gpt-6.7b", 6.7e9, 32, "transformer", hidden=4096, layers=32, fits_one_gpu=False,
              configs=(*_PP, (2, 1, 4), (4, 1, 4))),
    ModelSpec("gpt-13b", 13e9, 32, "transformer", hidden=5120, layers=40, fits_one_gpu=False,
              configs=(*_PP, (2, 1, 4), (4, 1, 4), (2, 2, 4))),
    ModelSpec("gpt-175b", 175e9, 16, "transformer", hidden=12288, layers=96, fits_one_gpu=False,
              configs=((16, 1, 1), (32, 1, 1), (16, 2, 1), (4, 1, 8))),
)


def make_profile(model: ModelSpec, stages: int, k: int, tp: int = 1) -> JobProfile:
    """A uniform configuration: ``stages`` stages, ``k`` replicas each, TP degree ``tp``."""
    if stages < 1 or k < 1 or tp < 1:
        raise ValueError(f"{model.name}: stages, k and tp must be >= 1, got {stages}, {k}, {tp}")
    if model.kind == "cnn":
        if stages != 1:
            raise ValueError(f"{model.name}: CNN profiles are data-parallel only (stages=1)")
        fwd_s = model.fwd_gflops * 1e9 * model.batch / F_EFF_FLOPS
        d_B = 0.0
        tp_B = 0.0
    else:
        tokens = model.batch * SEQ_LEN
        fwd_s = 2 * model.params / stages * tokens / F_EFF_FLOPS
        d_B = model.batch * SEQ_LEN * model.hidden * 2.0  # fp16 boundary activations
        # Megatron-style TP: 2 all-reduces forward + 2 backward of the activations per layer
        tp_B = 4 * (model.layers / stages) * d_B if tp > 1 else 0.0
    h_B = model.params / stages * 4.0  # fp32 gradients
    st = []
    for s in range(stages):
        st.append(Stage(
            k=k, tp=tp, pf_s=fwd_s / tp, pb_s=2 * fwd_s / tp,
            d_in_B=d_B if s > 0 else 0.0, d_out_B=d_B if s < stages - 1 else 0.0,
            h_B=h_B, tp_B=tp_B,
        ))
    tag = f"dp{k}" if stages == 1 and tp == 1 else f"pp{stages}x{k}" + (f"tp{tp}" if tp > 1 else "")
    return JobProfile(stages=tuple(st), allreduce="rar", name=f"{model.name}/{tag}")


@lru_cache(maxsize=1)
def synthetic_profiles() -> dict[str, JobProfile]:
    """Every (model, configuration) of the synthetic table, by name ``model/config``."""
    out: dict[str, JobProfile] = {}
    for m in MODELS:
        for s, k, tp in m.configs:
            p = make_profile(m, s, k, tp)
            out[p.name] = p
    return out


# ========================================================== profile of a job (policy + world)
def profile_of(spec: JobSpec) -> JobProfile | None:
    """The job's profile from its attrs, or None (an opaque job: no A-SRPT hints).

    ``attrs["asrpt_stages"]`` (inline, :meth:`JobProfile.to_json`) wins over
    ``attrs["asrpt_profile"]`` (a name of :func:`synthetic_profiles`). A profile whose GPU count
    differs from the job's request is ignored (the request is what Slurm allocates).
    """
    attrs = spec.attrs
    prof: JobProfile | None = None
    inline = attrs.get("asrpt_stages")
    if isinstance(inline, Mapping):
        prof = _cached_inline(_freeze(inline))
    else:
        name = attrs.get("asrpt_profile")
        if isinstance(name, str):
            prof = synthetic_profiles().get(name)
    if prof is None or prof.num_gpus != spec.num_gpus:
        return None
    return prof


def _freeze(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return tuple(sorted((k, _freeze(v)) for k, v in obj.items()))
    if isinstance(obj, list | tuple):
        return tuple(_freeze(v) for v in obj)
    return obj


def _thaw(obj: Any) -> Any:
    if isinstance(obj, tuple) and obj and all(
        isinstance(e, tuple) and len(e) == 2 and isinstance(e[0], str) for e in obj
    ):
        return {k: _thaw(v) for k, v in obj}
    if isinstance(obj, tuple):
        return [_thaw(v) for v in obj]
    return obj


@lru_cache(maxsize=4096)
def _cached_inline(frozen: Any) -> JobProfile:
    return JobProfile.from_json(_thaw(frozen))


def placement_shape(placement: Placement) -> dict[str, int]:
    """GPUs per node of a placement."""
    return {p.node: len(p.gpus) for p in placement.parts}


def alpha_on_placement(
    profile: JobProfile, placement: Placement, cluster: Cluster, net: Network
) -> float:
    """alpha of the job mapped by Heavy-Edge onto ``placement``'s per-node GPU counts."""
    by_name = cluster.by_name
    counts = placement_shape(placement)
    sizes = {by_name[n].num_gpus for n in counts}
    if len(sizes) == 1:  # homogeneous servers: the shape alone decides (cached)
        shape = tuple(sorted(counts.values(), reverse=True))
        return alpha_of_shape(profile, shape, sizes.pop(), net)
    caps = sorted(counts.items(), key=lambda kv: -kv[1])
    assign = heavy_edge(build_graph(profile), caps)
    return alpha_of_assignment(profile, assign, {n: by_name[n].num_gpus for n in counts}, net)


class AsrptProgress(ProgressModel):
    """The simulated world of A-SRPT: a job runs ``n * alpha(x)`` seconds on placement x.

    ``JobSpec.duration_s`` is the job's run time at its reference per-iteration time (the
    workload uses alpha~_min), so the rate is ``duration_s / (iterations * alpha(x))``; without
    ``iterations`` the reference is alpha~_min on this cluster. NIC shares are reserved (x/g),
    so co-located jobs do not slow each other and the rate is fixed for the whole run. Jobs
    without a profile run at their isolated speed (rate 1).
    """

    def __init__(self, net: Network | None = None) -> None:
        self.net = net or Network()

    def plan_speed(self, job: JobView, placement: Placement) -> float:
        return 1.0  # the placement-dependent part needs the cluster: see rate()

    def rate(
        self,
        job: JobView,
        placement: Placement,
        co_located: Sequence[JobView],
        cluster: Cluster,
    ) -> float:
        prof = profile_of(job.spec)
        if prof is None:
            return 1.0
        a = alpha_on_placement(prof, placement, cluster, self.net)
        if a <= 0:
            return 1.0
        n = job.spec.iterations
        if n:
            return job.spec.duration_s / (n * a)
        return alpha_min_est(prof, cluster.max_gpus_per_node, self.net) / a


PROGRESS_MODELS = {"a-srpt": AsrptProgress}
