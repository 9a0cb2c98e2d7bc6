"""The scheduler's view of Slurm, read from the JSON of every supported release (22.05-25.11).

No I/O here: every function takes decoded JSON and returns typed records. What is read:

- jobs: ``squeue --json``, ``scontrol show job --json`` and slurmrestd ``GET /jobs``
  (``{"jobs": [...]}`` in every release) -> :func:`read_jobs`;
- nodes: ``scontrol show node --json``, slurmrestd ``GET /nodes`` and 22.05's ``sinfo --json``
  (``{"nodes": [...]}``, one record per node), and ``sinfo --json`` from 23.02 on
  (``{"sinfo": [...]}``, one record per *group* of alike nodes and partition, the node names
  under ``nodes.nodes``) -> :func:`read_nodes`.

Each document declares the Slurm release that wrote it (:mod:`slurm_sched.slurm.version`); a
release outside the supported range is refused. Fields differ across releases (every one is
checked by ``tests/unit/slurm/test_version.py`` against outputs of each release):

- ``job_state``: a string up to 23.02, a list of base state and flags from 23.11
  (:mod:`slurm_sched.slurm.states`); node ``state``: lower-case string plus ``state_flags``
  in 22.05, an upper-case list from 23.02;
- numbers: plain in 22.05; from 23.02 counts and limits, from 23.11 timestamps too, are
  ``{"set": bool, "infinite": bool, "number": N}`` (:func:`number`);
- ``exit_code``: an integer up to 23.02, ``{"status": [...], "return_code": {...}}`` after;
- ``job_resources``: ``allocated_nodes[].nodename`` up to 23.11, ``nodes.allocation[].name``
  from 24.05;
- node ``features``: a comma string in 22.05, a list later; ``free_memory`` became
  ``free_mem``; GRES strings: :mod:`slurm_sched.slurm.gres`.

A field that a release may omit has a default. A document that lacks what the scheduler cannot
do without (a job's ``job_id`` or ``job_state``, a node's ``name``), or holds a value of the
wrong kind there, raises :class:`SlurmJsonError` naming the document, the field and the release.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from slurm_sched.model import Cluster, Node
from slurm_sched.model.cluster import DEFAULT_GPU_TYPE
from slurm_sched.slurm.document_errors import SlurmJsonError, check_errors
from slurm_sched.slurm.gres import (
    GpuRequest,
    GresItem,
    node_gpus,
    parse_gpu_request,
    parse_gres,
    parse_index_list,
    split_top,
    used_gpu_indices,
)
from slurm_sched.slurm.states import (
    FINAL_JOB_STATES,
    NodeStatus,
    SlurmJobState,
    SlurmNodeState,
    job_state,
    node_state,
)
from slurm_sched.slurm.version import SlurmVersion, version_of

__all__ = [
    "GpuRequest",
    "GresItem",
    "NodeAlloc",
    "SlurmJob",
    "SlurmNode",
    "check_errors",
    "cluster_from_nodes",
    "expand_hostlist",
    "parse_gpu_request",
    "parse_gres",
    "parse_gres_detail",
    "parse_index_list",
    "parse_job",
    "read_jobs",
    "read_nodes",
    "read_partition_states",
]

HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin"})
#: Partition states under which Slurm starts no job of the partition (a ``DRAIN`` partition
#: takes no new job but still starts the queued ones)
UNAVAILABLE_PARTITION_STATES = frozenset({"DOWN", "INACTIVE"})
#: The reason Slurm gives a job an operator held with ``scontrol hold`` (a user's ``uhold``, a
#: ``requeuehold`` and an older plugin's submit hold read ``JobHeldUser``)
ADMIN_HOLD_REASON = "JobHeldAdmin"


def read_partition_states(text: str) -> dict[str, str]:
    """``scontrol show partition -o`` (one ``Key=Value ...`` line per partition, the same on
    every supported release) -> ``{name: State}`` (upper case: ``UP``, ``DOWN``, ``DRAIN``,
    ``INACTIVE``); lines without both keys are skipped."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        fields = dict(t.split("=", 1) for t in line.split() if "=" in t)
        name, state = fields.get("PartitionName"), fields.get("State")
        if name and state:
            out[name] = state.upper()
    return out


def _document(
    data: Any, source: str, fallback: SlurmVersion | None, key: str | tuple[str, ...]
) -> tuple[SlurmVersion, str, list[Any]]:
    """Check a document's errors and version; return the version, the list's key and the list."""
    if not isinstance(data, Mapping):
        raise SlurmJsonError.bad(source, "(document)", data, "not a JSON object", None)
    check_errors(data, source)
    version = version_of(data, source, fallback)
    keys = (key,) if isinstance(key, str) else key
    for k in keys:
        if k in data:
            items = data[k]
            if not isinstance(items, list):
                raise SlurmJsonError.bad(source, k, items, "not a list", version)
            return version, k, items
    raise SlurmJsonError.missing(source, " or ".join(keys), version)


# ---------------------------------------------------------------------- values
def number(value: Any, default: float = 0.0) -> float:
    """A number in any release's form: plain, or ``{"set", "infinite", "number"}`` (unset or
    infinite -> ``default``). Anything else -> ``default``."""
    if isinstance(value, Mapping):
        if not value.get("set", True) or value.get("infinite"):
            return default
        value = value.get("number", default)
    if value is None or isinstance(value, bool):
        return default
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def is_infinite(value: Any) -> bool:
    """``{"infinite": true}`` (23.02 on) or the 22.05 spelling of an unlimited limit (null)."""
    return value is None or (isinstance(value, Mapping) and bool(value.get("infinite")))


def _text(value: Any) -> str:
    """A string field: strings as they are; lists (23.02-on ``features``) comma-joined."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value if v is not None and str(v) != "")
    if isinstance(value, Mapping):  # sinfo's {"description": ..} reason, {"total": ..} features
        for key in ("description", "total", "available", "name"):
            if key in value:
                return _text(value[key])
        return ""
    return str(value)


def _exit_code(value: Any) -> int:
    """``exit_code``: an integer up to 23.02; ``{"return_code": {..}, "signal": {..}}`` after."""
    if isinstance(value, Mapping) and "return_code" in value:
        return int(number(value.get("return_code")))
    return int(number(value))


# ---------------------------------------------------------------------- hostlists
_BRACKET = re.compile(r"^(?P<pre>[^\[]*)\[(?P<body>[^\]]+)\](?P<post>.*)$")


def expand_hostlist(text: str) -> list[str]:
    """``"a100-[1-2],v100-1"`` -> ``["a100-1", "a100-2", "v100-1"]`` (zero padding kept)."""
    out: list[str] = []
    for part in split_top(text or ""):
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


# ---------------------------------------------------------------------- nodes
@dataclass(frozen=True)
class SlurmNode:
    """One node as the scheduler sees it. GPUs follow :func:`slurm_sched.slurm.gres.node_gpus`:
    ``num_gpus`` counts every GPU (Slurm's indices), ``gpu_type`` is the managed type and
    ``reserved_gpus`` the indices of GPUs of other types, never free to the scheduler."""

    name: str
    state: SlurmNodeState
    flags: tuple[str, ...]
    partitions: tuple[str, ...]
    cpus: int
    mem_mb: int
    num_gpus: int
    gpu_type: str
    shards_per_gpu: int
    features: tuple[str, ...] = ()
    reason: str = ""
    #: GPU indices Slurm itself counts as used (``gres_used``: gpu and shard entries). On
    #: 22.05.8 this can miss a GPU that a shard job still holds (see docs/slurm-backend.md).
    used_gpus: tuple[int, ...] = ()
    gpu_types: tuple[tuple[str, int], ...] = ()
    reserved_gpus: tuple[int, ...] = ()
    #: the node's ``gres`` and ``gres_used`` as Slurm printed them
    gres: str = ""
    gres_used: str = ""
    #: ``shard:0`` in ``gres``: its slurmd has not registered since slurmctld restarted, and
    #: its shard count is not known (see :class:`~slurm_sched.slurm.gres.NodeGpus`)
    shards_unregistered: bool = False

    @property
    def status(self) -> NodeStatus:
        return NodeStatus(self.state, self.flags)

    @property
    def available(self) -> bool:
        """Whether new jobs can start here (not down, drained, draining, powered down, nor
        with its GRES unknown until its slurmd registers)."""
        return self.status.available and not self.shards_unregistered

    @property
    def availability(self) -> str:
        """Its state as the scheduler reports it: Slurm's state and flags, plus
        ``GRES_UNREGISTERED`` while its shard count is not known."""
        text = str(self.status)
        return f"{text}+GRES_UNREGISTERED" if self.shards_unregistered else text


def read_nodes(
    data: Any, source: str = "nodes JSON", fallback: SlurmVersion | None = None
) -> tuple[SlurmVersion, list[SlurmNode]]:
    """Any node document (see the module docstring) -> its release and one record per node,
    in document order. A node in several sinfo groups (one per partition) is merged."""
    version, key, items = _document(data, source, fallback, ("nodes", "sinfo"))
    rows: list[tuple[str, Any, str | None]]
    if key == "nodes":
        rows = [(f"nodes[{i}]", n, None) for i, n in enumerate(items)]
    else:
        rows = list(_sinfo_rows(items, source, version))
    order: list[str] = []
    by_name: dict[str, SlurmNode] = {}
    for where, raw, name in rows:
        node = _node(raw, name, f"{source}: {where}", version)
        prev = by_name.get(node.name)
        if prev is None:
            order.append(node.name)
            by_name[node.name] = node
        else:
            parts = prev.partitions + tuple(p for p in node.partitions if p not in prev.partitions)
            by_name[node.name] = replace(prev, partitions=parts)
    return version, [by_name[n] for n in order]


def _sinfo_rows(
    groups: list[Any], source: str, version: SlurmVersion
) -> Iterable[tuple[str, Mapping[str, Any], str]]:
    """sinfo's node groups (23.02 on) as one flat record per node name."""
    for i, g in enumerate(groups):
        where = f"sinfo[{i}]"
        if not isinstance(g, Mapping):
            raise SlurmJsonError.bad(source, where, g, "not an object", version)
        members = g.get("nodes")
        names = members.get("nodes") if isinstance(members, Mapping) else None
        if not names:
            raise SlurmJsonError.missing(source, f"{where}.nodes.nodes", version)
        cpus = g.get("cpus") or {}
        memory = g.get("memory") or {}
        partition = g.get("partition") or {}
        gres = g.get("gres") or {}
        flat = {
            "state": (g.get("node") or {}).get("state"),
            "partitions": [partition.get("name")] if partition.get("name") else [],
            "cpus": cpus.get("maximum", cpus.get("total")),
            "real_memory": memory.get("maximum", memory.get("minimum")),
            "gres": gres.get("total", ""),
            "gres_used": gres.get("used", ""),
            "features": _text(g.get("features")),
            "reason": _text(g.get("reason")),
        }
        for name in names:
            for host in expand_hostlist(str(name)):
                yield f"{where}.nodes.nodes[{host}]", flat, host


def _node(
    n: Any, name: str | None, where: str, version: SlurmVersion
) -> SlurmNode:
    if not isinstance(n, Mapping):
        raise SlurmJsonError.bad(where, "node", n, "not an object", version)
    if name is None:
        if not n.get("name"):
            raise SlurmJsonError.missing(where, "name", version)
        name = str(n["name"])
    where = f"{where} ({name})" if name not in where else where
    try:
        status = node_state(n.get("state") or "unknown", n.get("state_flags") or ())
    except ValueError as exc:
        raise SlurmJsonError.bad(where, "state", n.get("state"), str(exc), version) from exc
    gres, gres_used = _text(n.get("gres")), _text(n.get("gres_used"))
    try:
        gpus = node_gpus(gres, DEFAULT_GPU_TYPE)
    except ValueError as exc:
        raise SlurmJsonError.bad(where, "gres", n.get("gres"), str(exc), version) from exc
    partitions = n.get("partitions") or ()
    if isinstance(partitions, str):
        partitions = [p for p in partitions.split(",") if p]
    return SlurmNode(
        name=name,
        state=status.state,
        flags=status.flags,
        partitions=tuple(str(p) for p in partitions),
        cpus=int(number(n.get("cpus"), 1)) or 1,
        mem_mb=int(number(n.get("real_memory"), 1)) or 1,
        num_gpus=gpus.count,
        gpu_type=gpus.gpu_type or DEFAULT_GPU_TYPE,
        shards_per_gpu=gpus.shards_per_gpu,
        features=tuple(f for f in _text(n.get("features")).split(",") if f),
        reason=_text(n.get("reason")),
        used_gpus=used_gpu_indices(gres_used),
        gpu_types=gpus.types,
        reserved_gpus=gpus.reserved,
        gres=gres,
        gres_used=gres_used,
        shards_unregistered=gpus.shards_unregistered,
    )


def cluster_from_nodes(nodes: Iterable[SlurmNode], partitions: Iterable[str]) -> Cluster:
    """The :class:`Cluster` of every node in at least one of ``partitions`` (document order)."""
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
    """One job record, typed. Times are epoch seconds (0 = unset).

    ``state`` is what Slurm 22.05 prints (a flag such as ``COMPLETING`` or ``REQUEUED`` wins
    over the base state), ``base_state`` the base state, ``state_flags`` every flag.
    """

    job_id: str
    name: str
    state: SlurmJobState
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
    #: Slurm may requeue it (``--requeue``, the cluster's ``JobRequeue`` default); False for
    #: ``--no-requeue``: ``scontrol requeue`` is refused, so it cannot be preempted or moved
    requeue: bool = True
    base_state: SlurmJobState = SlurmJobState.UNKNOWN
    state_flags: frozenset[SlurmJobState] = frozenset()

    @property
    def final(self) -> bool:
        return self.state in FINAL_JOB_STATES

    @property
    def held(self) -> bool:
        return self.state is SlurmJobState.PENDING and (
            self.reason in HELD_REASONS or self.priority == 0
        )

    @property
    def admin_held(self) -> bool:
        """Held by an operator (``scontrol hold``): the scheduler neither starts nor releases
        it; only ``scontrol release`` does."""
        return self.held and self.reason == ADMIN_HOLD_REASON

    @property
    def holds_resources(self) -> bool:
        """Running or suspended: holds CPUs (running only), memory and GRES."""
        return self.state in (SlurmJobState.RUNNING, SlurmJobState.SUSPENDED)

    def gpu_slots(self) -> dict[str, tuple[int, ...]]:
        return {a.node: a.gpus for a in self.alloc if a.gpus}

    def executed_s(self, now_s: float) -> float:
        """Wall seconds this run has spent RUNNING (suspended time excluded) up to ``now_s``.

        Slurm keeps ``pre_sus_time`` (run seconds before the last suspend) and ``suspend_time``
        (time of the last suspend or resume).
        """
        if self.start_time_s <= 0:
            return 0.0
        if self.state is SlurmJobState.SUSPENDED:
            return max(0.0, self.pre_sus_time_s)
        if self.state is SlurmJobState.RUNNING:
            since = max(self.start_time_s, self.suspend_time_s)
            return max(0.0, self.pre_sus_time_s + now_s - since)
        if self.final and self.end_time_s >= self.start_time_s:
            since = max(self.start_time_s, self.suspend_time_s)
            return max(0.0, self.pre_sus_time_s + self.end_time_s - since)
        return 0.0


def _requested_nodes(j: Mapping[str, Any], state: SlurmJobState) -> int:
    """The job's node count: allocated when it runs, else the ``node=`` of ``tres_req_str``.

    A requeued job's ``node_count`` (and ``scontrol show job``'s NumNodes) stays at its last
    run's count even after ``update NumNodes=2-2`` (checked on 22.05.8); ``tres_req_str``
    follows the update.
    """
    count = int(number(j.get("node_count"), 1))
    if state is not SlurmJobState.PENDING:
        return count
    for item in str(j.get("tres_req_str") or "").split(","):
        name, _, value = item.partition("=")
        if name == "node" and value.isdigit() and int(value) > 0:
            return int(value)
    return count


def _allocated_nodes(res: Any) -> list[str]:
    """Node names of ``job_resources``: ``allocated_nodes[].nodename`` (22.05-23.11) or
    ``nodes.allocation[].name`` (24.05 on)."""
    if not isinstance(res, Mapping):
        return []
    nodes = res.get("nodes")
    if isinstance(nodes, Mapping):
        names = [str(a.get("name")) for a in nodes.get("allocation") or () if a.get("name")]
        return names or expand_hostlist(str(nodes.get("list") or ""))
    return [str(n.get("nodename")) for n in res.get("allocated_nodes") or () if n.get("nodename")]


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


def parse_job(
    j: Mapping[str, Any], where: str = "job", version: SlurmVersion | None = None
) -> SlurmJob:
    """One job record of any release (see the module docstring)."""
    if not isinstance(j, Mapping):
        raise SlurmJsonError.bad(where, "job", j, "not an object", version)
    if j.get("job_id") in (None, ""):
        raise SlurmJsonError.missing(where, "job_id", version)
    job_id = str(int(number(j["job_id"], -1))) if not isinstance(j["job_id"], str) else j["job_id"]
    if job_id == "-1":
        raise SlurmJsonError.bad(where, "job_id", j["job_id"], "not a job id", version)
    where = f"{where} (job {job_id})"
    if "job_state" not in j:
        raise SlurmJsonError.missing(where, "job_state", version)
    try:
        status = job_state(j["job_state"])
    except ValueError as exc:
        raise SlurmJsonError.bad(where, "job_state", j["job_state"], str(exc), version) from exc
    alloc_names = _allocated_nodes(j.get("job_resources"))
    nodes = alloc_names or expand_hostlist(str(j.get("nodes") or ""))
    tres_per_node = _text(j.get("tres_per_node"))
    tres_per_job = _text(j.get("tres_per_job"))
    try:
        request = parse_gpu_request(
            tres_per_node, tres_per_job, _text(j.get("tres_per_task")),
            _text(j.get("tres_per_socket")),
        )
    except ValueError as exc:
        request = GpuRequest(other=(str(exc),))
    detail = tuple(str(d) for d in j.get("gres_detail") or ())
    try:
        alloc = parse_gres_detail(nodes, detail)
    except ValueError:
        alloc = ()
    limit = j.get("time_limit")
    limit_min = -1.0 if is_infinite(limit) else number(limit, -1.0)
    mpn = number(j.get("memory_per_node"))
    return SlurmJob(
        job_id=job_id,
        name=_text(j.get("name")),
        state=status.state,
        reason=_text(j.get("state_reason")),
        priority=int(number(j.get("priority"))),
        partition=_text(j.get("partition")),
        user=_text(j.get("user_name") or j.get("user_id")),
        account=_text(j.get("account")),
        comment=_text(j.get("comment")),
        admin_comment=_text(j.get("admin_comment")),
        submit_time_s=number(j.get("submit_time")),
        start_time_s=number(j.get("start_time")),
        end_time_s=number(j.get("end_time")),
        eligible_time_s=number(j.get("eligible_time")),
        suspend_time_s=number(j.get("suspend_time")),
        pre_sus_time_s=number(j.get("pre_sus_time")),
        time_limit_s=limit_min * 60.0 if limit_min > 0 else None,
        restart_cnt=int(number(j.get("restart_cnt"))),
        node_count=_requested_nodes(j, status.state),
        max_nodes=int(number(j.get("max_nodes"))),
        nodes=tuple(nodes),
        required_nodes=tuple(expand_hostlist(_text(j.get("required_nodes")))),
        features=_text(j.get("features")),
        tres_per_node=tres_per_node,
        tres_per_job=tres_per_job,
        gpu_request=request,
        alloc=alloc,
        cpus=int(number(j.get("cpus"), 1)),
        memory_per_node_mb=int(mpn) if mpn > 0 else None,
        exit_code=_exit_code(j.get("exit_code")),
        raw_gres_detail=detail,
        # absent from no release we support; absent means Slurm's default (requeue allowed)
        requeue=j.get("requeue") is not False,
        base_state=status.base,
        state_flags=status.flags,
    )


def read_jobs(
    data: Any, source: str = "jobs JSON", fallback: SlurmVersion | None = None
) -> tuple[SlurmVersion, list[SlurmJob]]:
    """Any job document (``squeue``/``scontrol show job``/slurmrestd) -> release and jobs."""
    version, _, items = _document(data, source, fallback, "jobs")
    return version, [parse_job(j, f"{source}: jobs[{i}]", version) for i, j in enumerate(items)]
