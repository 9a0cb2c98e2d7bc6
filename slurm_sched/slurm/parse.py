"""Pure parsers for Slurm 22.05 JSON output (``sinfo --json``, ``squeue --json``; openapi v0.0.38).

No I/O here: every function takes decoded JSON (or strings) and returns typed records. Samples
recorded on the mini cluster live in ``tests/golden/slurm/`` and drive ``tests/unit/
test_slurm_parse.py``.

Formats seen on 22.05.8 (recorded):

- node ``gres``: ``"gpu:a100:4"``, ``"gpu:a100:4,shard:a100:16"``, ``"gpu:a100:4(S:0)"``;
- job ``tres_per_node`` / ``tres_per_job``: ``"gres:gpu:a100:2"``, ``"gres:gpu:1"``,
  ``"gres:shard:3"``, ``""``;
- job ``gres_detail`` (one entry per allocated node, in node order): ``"gpu:a100:2(IDX:0-1)"``,
  ``"gpu:v100:4(IDX:0-3)"``, ``"shard:a100:3(IDX:0)"`` (a 22.05 shard job takes all its shards
  from ONE GPU per node: the index of that GPU), ``"gpu:a100:0(IDX:)"`` (none);
- ``time_limit`` in minutes, ``null`` when unlimited; times in epoch seconds, 0 when unset;
- ``squeue --json`` exits 0 with an ``errors`` list and no jobs when slurmctld is unreachable:
  :func:`check_errors` turns that into :class:`SlurmJsonError`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from slurm_sched.errors import SlurmSchedError
from slurm_sched.model import Cluster, Node
from slurm_sched.model.cluster import DEFAULT_GPU_TYPE

#: Job states after which a job never runs again.
FINAL_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "OUT_OF_MEMORY",
        "SPECIAL_EXIT",
        "REVOKED",
    }
)
HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin"})
#: Node states / flags under which no new job can start on the node.
UNAVAILABLE_NODE_STATES = frozenset(
    {
        "down",
        "drained",
        "draining",
        "fail",
        "failing",
        "future",
        "unknown",
        "maint",
        "reboot",
        "power_down",
        "inval",
    }
)
UNAVAILABLE_NODE_FLAGS = frozenset(
    {
        "DRAIN",
        "DRAINING",
        "DRAINED",
        "FAIL",
        "MAINTENANCE",
        "REBOOT_REQUESTED",
        "POWERED_DOWN",
        "NOT_RESPONDING",
        "INVALID_REG",
        "POWER_DOWN",
        "FUTURE",
    }
)


class SlurmJsonError(SlurmSchedError):
    """A Slurm JSON document carries errors (``squeue --json`` exits 0 even then)."""

    def __init__(self, source: str, errors: Sequence[Mapping[str, Any]]) -> None:
        self.source = source
        self.errors = list(errors)
        text = "; ".join(
            " ".join(str(e.get(k)) for k in ("source", "description", "error") if e.get(k))
            for e in errors
        )
        super().__init__(f"{source} reported errors: {text or errors!r}")


def check_errors(data: Mapping[str, Any], source: str) -> None:
    """Raise :class:`SlurmJsonError` if the document has a non-empty ``errors`` list."""
    errors = data.get("errors") or []
    if errors:
        raise SlurmJsonError(source, errors)


# ---------------------------------------------------------------------- hostlists and ranges
_BRACKET = re.compile(r"^(?P<pre>[^\[]*)\[(?P<body>[^\]]+)\](?P<post>.*)$")


def expand_hostlist(text: str) -> list[str]:
    """``"a100-[1-2],v100-1"`` -> ``["a100-1", "a100-2", "v100-1"]`` (zero padding kept)."""
    out: list[str] = []
    for part in _split_top(text or ""):
        m = _BRACKET.match(part)
        if not m:
            out.append(part)
            continue
        for item in m["body"].split(","):
            if "-" in item:
                lo, hi = item.split("-", 1)
                width = len(lo) if lo.startswith("0") else 0
                for i in range(int(lo), int(hi) + 1):
                    out.extend(expand_hostlist(f"{m['pre']}{i:0{width}d}{m['post']}"))
            else:
                out.extend(expand_hostlist(f"{m['pre']}{item}{m['post']}"))
    return out


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets/parentheses."""
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for c in text:
        if c in "[(":
            depth += 1
        elif c in "])":
            depth -= 1
        if c == "," and depth == 0:
            if cur:
                parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    if cur and "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def parse_index_list(text: str) -> tuple[int, ...]:
    """``"0-1,3"`` -> ``(0, 1, 3)``; ``""`` and ``"N/A"`` -> ``()``."""
    out: list[int] = []
    for item in (text or "").split(","):
        item = item.strip()
        if not item or item.upper() == "N/A":
            continue
        if "-" in item:
            lo, hi = item.split("-", 1)
            out.extend(range(int(lo), int(hi) + 1))
        else:
            out.append(int(item))
    return tuple(sorted(set(out)))


# ---------------------------------------------------------------------- GRES strings
@dataclass(frozen=True)
class GresItem:
    """One GRES item: ``name[:type]:count`` plus the device indices when Slurm printed them."""

    name: str
    type: str | None
    count: int
    indices: tuple[int, ...] | None = None


_GRES_ITEM = re.compile(
    r"^(?:gres[:/])?(?P<name>[A-Za-z0-9_]+)"
    r"(?::(?P<type>[A-Za-z0-9_.-]+?))??"
    r"(?::(?P<count>\d+))?"
    r"(?:\((?P<extra>[^)]*)\))?$"
)


def parse_gres(text: str | None) -> list[GresItem]:
    """Parse a comma-separated GRES / TRES string.

    Accepts ``gpu:a100:4``, ``gres:gpu:2``, ``gres/gpu:2``, ``shard:a100:3(IDX:0)``,
    ``gpu:a100:4(S:0)``, ``gpu`` (count 1). Raises ValueError on an item it cannot read.
    """
    items: list[GresItem] = []
    for part in _split_top(text or ""):
        if not part or part == "(null)":
            continue
        m = _GRES_ITEM.match(part)
        if not m:
            raise ValueError(f"cannot parse GRES item {part!r}")
        count = int(m["count"]) if m["count"] is not None else 1
        indices: tuple[int, ...] | None = None
        extra = m["extra"]
        if extra is not None and extra.startswith("IDX:"):
            indices = parse_index_list(extra[4:])
        items.append(GresItem(m["name"], m["type"], count, indices))
    return items


@dataclass(frozen=True)
class GpuRequest:
    """How many GPUs a job asked for, and in which form.

    ``kind`` is ``"gpu"`` (exclusive devices), ``"shard"`` (a slice of one GPU per node; 22.05
    cannot spread one job's shards over several GPUs of a node) or None (no GPU GRES).
    ``per_node`` is set for ``--gres``/``TresPerNode`` requests, ``per_job`` for ``--gpus``.
    ``other`` lists GRES the scheduler does not understand (e.g. ``gres:foo:1``).
    """

    kind: str | None = None
    gpu_type: str | None = None
    per_node: int | None = None
    per_job: int | None = None
    form: str = "none"  # "node" (TresPerNode), "job" (TresPerJob) or "none"
    other: tuple[str, ...] = ()

    def total(self, node_count: int) -> int:
        """Total GPUs (a shard request counts as one GPU per node)."""
        if self.kind is None:
            return 0
        if self.kind == "shard":
            return max(1, node_count)
        if self.per_job is not None:
            return self.per_job
        return (self.per_node or 0) * max(1, node_count)


def parse_gpu_request(
    tres_per_node: str | None,
    tres_per_job: str | None = None,
    tres_per_task: str | None = None,
    tres_per_socket: str | None = None,
) -> GpuRequest:
    """Read a job's GPU request from its TRES fields (see :class:`GpuRequest`)."""
    other: list[str] = []
    kind: str | None = None
    gpu_type: str | None = None
    per_node: int | None = None
    per_job: int | None = None
    form = "none"
    for field_name, text in (("node", tres_per_node), ("job", tres_per_job)):
        for item in parse_gres(text):
            if item.name in ("gpu", "shard") and item.count > 0:
                if kind is not None:
                    other.append(f"{item.name}:{item.count} (second GPU request)")
                    continue
                kind, gpu_type, form = item.name, item.type, field_name
                if field_name == "node":
                    per_node = item.count
                else:
                    per_job = item.count
            elif item.name not in ("gpu", "shard"):
                other.append(f"{item.name}:{item.count}")
    for label, text in (("per task", tres_per_task), ("per socket", tres_per_socket)):
        for item in parse_gres(text):
            if item.name in ("gpu", "shard"):
                other.append(f"{item.name}:{item.count} {label}")
    return GpuRequest(kind, gpu_type, per_node, per_job, form, tuple(other))


# ---------------------------------------------------------------------- nodes
@dataclass(frozen=True)
class SlurmNode:
    name: str
    state: str
    flags: tuple[str, ...]
    partitions: tuple[str, ...]
    cpus: int
    mem_mb: int
    num_gpus: int
    gpu_type: str
    shards_per_gpu: int
    features: tuple[str, ...] = ()
    reason: str = ""
    #: GPU indices Slurm itself counts as used (``gres_used``: gpu and shard IDX lists). On
    #: 22.05.8 this can miss a GPU that a shard job still holds (see docs/slurm-backend.md).
    used_gpus: tuple[int, ...] = ()

    @property
    def available(self) -> bool:
        """Whether new jobs can start here (not down, drained, failing...)."""
        base = self.state.lower().split("+")
        if any(s in UNAVAILABLE_NODE_STATES for s in base):
            return False
        return not any(f.upper() in UNAVAILABLE_NODE_FLAGS for f in self.flags)


def parse_sinfo(data: Mapping[str, Any]) -> list[SlurmNode]:
    """``sinfo --json`` -> nodes (one per node name, sinfo order)."""
    check_errors(data, "sinfo --json")
    nodes: list[SlurmNode] = []
    seen: set[str] = set()
    for n in data.get("nodes", []):
        name = str(n["name"])
        if name in seen:
            continue
        seen.add(name)
        gpus = 0
        gpu_type: str | None = None
        shards = 0
        for item in parse_gres(n.get("gres")):
            if item.name == "gpu":
                gpus += item.count
                gpu_type = gpu_type or item.type
            elif item.name == "shard":
                shards += item.count
        used: set[int] = set()
        try:
            for item in parse_gres(n.get("gres_used")):
                if item.name in ("gpu", "shard") and item.indices:
                    used.update(item.indices)
        except ValueError:
            pass
        features = tuple(f for f in str(n.get("features") or "").split(",") if f)
        nodes.append(
            SlurmNode(
                name=name,
                state=str(n.get("state") or "unknown"),
                flags=tuple(str(f) for f in n.get("state_flags") or ()),
                partitions=tuple(str(p) for p in n.get("partitions") or ()),
                cpus=int(n.get("cpus") or 1),
                mem_mb=int(n.get("real_memory") or 1),
                num_gpus=gpus,
                gpu_type=gpu_type or DEFAULT_GPU_TYPE,
                shards_per_gpu=shards // gpus if gpus else 0,
                features=features,
                reason=str(n.get("reason") or ""),
                used_gpus=tuple(sorted(used)),
            )
        )
    return nodes


def cluster_from_nodes(nodes: Iterable[SlurmNode], partitions: Iterable[str]) -> Cluster:
    """The :class:`Cluster` of every node in at least one of ``partitions`` (sinfo order)."""
    wanted = set(partitions)
    out = []
    for n in nodes:
        if not wanted.intersection(n.partitions):
            continue
        out.append(
            Node(
                name=n.name,
                num_gpus=n.num_gpus,
                gpu_type=n.gpu_type,
                cpus=max(1, n.cpus),
                mem_gb=max(n.mem_mb, 1) / 1024.0,
                partitions=n.partitions,
            )
        )
    return Cluster(nodes=tuple(out))


# ---------------------------------------------------------------------- jobs
@dataclass(frozen=True)
class NodeAlloc:
    """What a job holds on one node: GPU indices, and the shard count when it holds shards."""

    node: str
    gpus: tuple[int, ...]
    shards: int = 0


@dataclass(frozen=True)
class SlurmJob:
    """One ``squeue --json`` job record, typed. Times are epoch seconds (0 = unset)."""

    job_id: str
    name: str
    state: str
    reason: str
    priority: int
    partition: str
    user: str
    account: str
    comment: str
    admin_comment: str
    submit_time_s: float
    start_time_s: float
    end_time_s: float
    eligible_time_s: float
    suspend_time_s: float
    pre_sus_time_s: float
    time_limit_s: float | None
    restart_cnt: int
    #: nodes it holds (running) or asks for (pending, from ``tres_req_str``: after a requeue
    #: Slurm's ``node_count`` keeps the last run's count, even over a later ``NumNodes`` update)
    node_count: int
    #: the most nodes Slurm may give it; 0 = not known (Slurm reports 0 once a job has run)
    max_nodes: int
    nodes: tuple[str, ...]
    required_nodes: tuple[str, ...]
    features: str
    tres_per_node: str
    tres_per_job: str
    gpu_request: GpuRequest
    alloc: tuple[NodeAlloc, ...]
    cpus: int
    memory_per_node_mb: int | None
    exit_code: int
    raw_gres_detail: tuple[str, ...] = field(default=(), repr=False)

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def held(self) -> bool:
        return self.state == "PENDING" and (self.reason in HELD_REASONS or self.priority == 0)

    @property
    def holds_resources(self) -> bool:
        """Running or suspended: holds CPUs (running only), memory and GRES."""
        return self.state in ("RUNNING", "SUSPENDED")

    def gpu_slots(self) -> dict[str, tuple[int, ...]]:
        return {a.node: a.gpus for a in self.alloc if a.gpus}

    def executed_s(self, now_s: float) -> float:
        """Wall seconds this run has spent RUNNING (suspended time excluded) up to ``now_s``.

        Slurm keeps ``pre_sus_time`` (run seconds before the last suspend) and ``suspend_time``
        (time of the last suspend or resume).
        """
        if self.start_time_s <= 0:
            return 0.0
        if self.state == "SUSPENDED":
            return max(0.0, self.pre_sus_time_s)
        if self.state == "RUNNING":
            since = max(self.start_time_s, self.suspend_time_s)
            return max(0.0, self.pre_sus_time_s + now_s - since)
        if self.final and self.end_time_s >= self.start_time_s:
            since = max(self.start_time_s, self.suspend_time_s)
            return max(0.0, self.pre_sus_time_s + self.end_time_s - since)
        return 0.0


def _num(value: Any, default: float = 0.0) -> float:
    """Numbers in 22.05 JSON are plain; later versions wrap them as {"set":..,"number":..}."""
    if isinstance(value, Mapping):
        if not value.get("set", True) or value.get("infinite"):
            return default
        value = value.get("number", default)
    if value is None:
        return default
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def _requested_nodes(j: Mapping[str, Any]) -> int:
    """The job's node count: allocated when it runs, else the ``node=`` of ``tres_req_str``.

    A requeued job's ``node_count`` (and ``scontrol show job``'s NumNodes) stays at its last
    run's count even after ``update NumNodes=2-2`` (checked on 22.05.8); ``tres_req_str``
    follows the update.
    """
    count = int(_num(j.get("node_count"), 1))
    if str(j.get("job_state") or "").upper() != "PENDING":
        return count
    for item in str(j.get("tres_req_str") or "").split(","):
        name, _, value = item.partition("=")
        if name == "node" and value.isdigit() and int(value) > 0:
            return int(value)
    return count


def parse_gres_detail(nodes: Sequence[str], detail: Sequence[str]) -> tuple[NodeAlloc, ...]:
    """Pair ``gres_detail`` entries with the job's nodes (same order) -> per-node allocation."""
    out: list[NodeAlloc] = []
    for i, entry in enumerate(detail):
        if i >= len(nodes):
            break
        gpus: set[int] = set()
        shards = 0
        for item in parse_gres(entry):
            if item.name == "gpu" and item.count > 0 and item.indices:
                gpus.update(item.indices)
            elif item.name == "shard" and item.count > 0 and item.indices:
                gpus.update(item.indices)
                shards += item.count
        out.append(NodeAlloc(nodes[i], tuple(sorted(gpus)), shards))
    return tuple(out)


def parse_job(j: Mapping[str, Any]) -> SlurmJob:
    """One job record of ``squeue --json``."""
    res = j.get("job_resources") or {}
    alloc_names = [str(n.get("nodename")) for n in res.get("allocated_nodes") or ()]
    nodes = alloc_names or expand_hostlist(str(j.get("nodes") or ""))
    tres_per_node = str(j.get("tres_per_node") or "")
    tres_per_job = str(j.get("tres_per_job") or "")
    try:
        request = parse_gpu_request(
            tres_per_node,
            tres_per_job,
            str(j.get("tres_per_task") or ""),
            str(j.get("tres_per_socket") or ""),
        )
    except ValueError as exc:
        request = GpuRequest(other=(str(exc),))
    detail = tuple(str(d) for d in j.get("gres_detail") or ())
    try:
        alloc = parse_gres_detail(nodes, detail)
    except ValueError:
        alloc = ()
    limit = j.get("time_limit")
    limit_min = _num(limit, -1.0)
    mpn = j.get("memory_per_node")
    return SlurmJob(
        job_id=str(j["job_id"]),
        name=str(j.get("name") or ""),
        state=str(j.get("job_state") or "UNKNOWN").upper(),
        reason=str(j.get("state_reason") or ""),
        priority=int(_num(j.get("priority"))),
        partition=str(j.get("partition") or ""),
        user=str(j.get("user_name") or j.get("user_id") or ""),
        account=str(j.get("account") or ""),
        comment=str(j.get("comment") or ""),
        admin_comment=str(j.get("admin_comment") or ""),
        submit_time_s=_num(j.get("submit_time")),
        start_time_s=_num(j.get("start_time")),
        end_time_s=_num(j.get("end_time")),
        eligible_time_s=_num(j.get("eligible_time")),
        suspend_time_s=_num(j.get("suspend_time")),
        pre_sus_time_s=_num(j.get("pre_sus_time")),
        time_limit_s=limit_min * 60.0 if limit_min > 0 else None,
        restart_cnt=int(_num(j.get("restart_cnt"))),
        node_count=_requested_nodes(j),
        max_nodes=int(_num(j.get("max_nodes"))),
        nodes=tuple(nodes),
        required_nodes=tuple(expand_hostlist(str(j.get("required_nodes") or ""))),
        features=str(j.get("features") or ""),
        tres_per_node=tres_per_node,
        tres_per_job=tres_per_job,
        gpu_request=request,
        alloc=alloc,
        cpus=int(_num(j.get("cpus"), 1)),
        memory_per_node_mb=int(_num(mpn)) if mpn not in (None, 0) else None,
        exit_code=int(_num(j.get("exit_code"))),
        raw_gres_detail=detail,
    )


def parse_squeue(data: Mapping[str, Any]) -> list[SlurmJob]:
    """``squeue --json`` -> every job record (all partitions, finished ones within MinJobAge)."""
    check_errors(data, "squeue --json")
    return [parse_job(j) for j in data.get("jobs", [])]
