"""GRES strings of Slurm 22.05-25.11, and the scheduler's model of a node's GPUs.

Forms read (each is in a test of ``tests/unit/slurm/test_gres.py``):

- node ``gres``: ``gpu:a100:4``, ``gpu:a100:4,shard:a100:32``, ``gpu:a100:4(S:0-1)``,
  ``gpu:h100:2,gpu:h200:4`` (two types), ``gpu:1g.10gb:21`` (MIG slices), ``tmp:300G``
  (other GRES, counts with a K/M/G/T suffix);
- node ``gres_used``: ``gpu:a100:2(IDX:0-1)``, ``gpu:a100:0(IDX:N/A)``, and for shards the
  per-GPU form ``shard:a100:3(3/8,0/8,0/8,0/8)`` (24.11) or ``shard:a100:3(IDX:0)`` (22.05);
- job ``tres_per_node`` / ``tres_per_job``: ``gres:gpu:a100:2`` (22.05-23.02),
  ``gres/gpu:a100:2`` (23.11 on), ``gres:shard:3``;
- job ``gres_detail``: ``gpu:a100:2(IDX:0-1)``, ``shard:a100:3(IDX:0)``; 24.11 may spread one
  job's shards over several GPUs: ``shard:a100:3(IDX:0-1)``.

The GPU model of a node (:func:`node_gpus`): Slurm numbers a node's GPUs 0..n-1 across all
types, in the order its ``gres`` lists them. The scheduler manages **one** type per node: the
type with the most GPUs (the first listed on a tie). The node keeps all n indices, so that the
indices the scheduler reads and pins are Slurm's own; the GPUs of every other type are
*reserved*: never free to the scheduler, like GPUs held by a job outside the managed
partitions. A MIG slice (``gpu:1g.10gb:7``) is one GPU of type ``1g.10gb``: Slurm schedules
it as one device. Non-GPU GRES are not GPUs and are ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SUFFIX = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}


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
    r"(?::(?P<count>\d+)(?P<suffix>[KMGTPkmgtp]?))?"
    r"(?:\((?P<extra>[^)]*)\))?$"
)
_SHARD_USE = re.compile(r"^\d+/\d+$")


def split_top(text: str) -> list[str]:
    """Split on commas outside brackets/parentheses (``a[1-2],b`` -> ``a[1-2]``, ``b``)."""
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


def _extra_indices(extra: str | None) -> tuple[int, ...] | None:
    """Device indices from ``IDX:0-1`` or from the per-GPU shard use ``3/8,0/8,...``."""
    if extra is None:
        return None
    if extra.startswith("IDX:"):
        return parse_index_list(extra[4:])
    uses = [u.strip() for u in extra.split(",")]
    if uses and all(_SHARD_USE.match(u) for u in uses):
        return tuple(i for i, u in enumerate(uses) if int(u.split("/")[0]) > 0)
    return None  # S:0-1 (sockets) and other annotations carry no device index


def parse_gres(text: str | None) -> list[GresItem]:
    """Parse a comma-separated GRES / TRES string into items (see the module docstring).

    Raises:
        ValueError: naming the item it cannot read.
    """
    items: list[GresItem] = []
    for part in split_top(text or ""):
        if not part or part == "(null)":
            continue
        m = _GRES_ITEM.match(part)
        if not m:
            raise ValueError(f"cannot parse GRES item {part!r}")
        count = 1
        if m["count"] is not None:
            count = int(m["count"]) * _SUFFIX[(m["suffix"] or "").upper()]
        items.append(GresItem(m["name"], m["type"], count, _extra_indices(m["extra"])))
    return items


# ---------------------------------------------------------------------- a node's GPUs
@dataclass(frozen=True)
class NodeGpus:
    """A node's GPUs as the scheduler models them (see the module docstring).

    ``count`` is every GPU of the node (Slurm's indices 0..count-1), ``gpu_type`` the managed
    type, ``types`` each type with its count in index order, ``reserved`` the indices of the
    GPUs of the other types, ``shards_per_gpu`` the gres/shard count per GPU (0 = none).
    ``shards_unregistered``: the node lists gres/shard with a count of 0 (``shard:0``), which
    is how slurmctld shows a node's shards until its slurmd registers after a slurmctld
    restart; the node's real count is not known then.
    """

    count: int = 0
    gpu_type: str | None = None
    types: tuple[tuple[str, int], ...] = ()
    reserved: tuple[int, ...] = ()
    shards_per_gpu: int = 0
    shards_unregistered: bool = False

    @property
    def managed(self) -> int:
        """GPUs of the managed type."""
        return self.count - len(self.reserved)


def node_gpus(gres: str | None, default_type: str) -> NodeGpus:
    """The :class:`NodeGpus` of a node's ``gres`` string.

    Raises:
        ValueError: an item that cannot be read.
    """
    groups: list[tuple[str, int]] = []
    shards = 0
    shard_items = 0
    for item in parse_gres(gres):
        if item.name == "gpu" and item.count > 0:
            groups.append((item.type or default_type, item.count))
        elif item.name == "shard":
            shards += item.count
            shard_items += 1
    count = sum(c for _, c in groups)
    if not count:
        return NodeGpus()
    by_type: dict[str, int] = {}
    for t, c in groups:
        by_type[t] = by_type.get(t, 0) + c
    managed = max(by_type, key=lambda t: by_type[t])  # first listed wins a tie (dict order)
    reserved: list[int] = []
    start = 0
    for t, c in groups:
        if t != managed:
            reserved.extend(range(start, start + c))
        start += c
    return NodeGpus(
        count=count,
        gpu_type=managed,
        types=tuple(groups),
        reserved=tuple(reserved),
        shards_per_gpu=shards // count,
        shards_unregistered=shard_items > 0 and shards == 0,
    )


def used_gpu_indices(gres_used: str | None) -> tuple[int, ...]:
    """GPU indices Slurm counts as used on a node (gpu and shard entries of ``gres_used``).

    An unreadable string counts as no index (the caller's own job view still holds).
    """
    used: set[int] = set()
    try:
        for item in parse_gres(gres_used):
            if item.name in ("gpu", "shard") and item.indices:
                used.update(item.indices)
    except ValueError:
        return ()
    return tuple(sorted(used))


# ---------------------------------------------------------------------- a job's request
@dataclass(frozen=True)
class GpuRequest:
    """How many GPUs a job asked for, and in which form.

    ``kind`` is ``"gpu"`` (exclusive devices), ``"shard"`` (a slice of a GPU) or None (no GPU
    GRES). ``per_node`` is set for ``--gres``/``TresPerNode`` requests, ``per_job`` for
    ``--gpus``. ``other`` lists GRES the scheduler does not understand (e.g. ``gres:foo:1``).
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
