"""A sweep's grid file (TOML): parse, expand into cells, validate before anything runs.

The format (``docs/sweeps.md`` has the full reference)::

    name = "fig6a"                     # optional: titles of the report
    seeds = [1, 2, 3, 4]               # the generated traces' seeds (default [1])
    clusters = ["16x4"]                # --cluster specs
    worlds = ["sjf-bsbf"]              # progress models; "auto" = what simulate picks
    restart_overhead_s = 30.0          # a number or a list (default 30)
    metrics = ["avg_jct_s", "p99_jct_s"]   # RunMetrics fields kept (default: every scalar one)
    keep_jcts = true                   # keep each job's JCT in the cell file (for CDFs)

    [[traces]]                         # a generated workload: one trace per load and seed
    generator = "sjf-bsbf"
    jobs = [120, 240, 480]             # the load axis
    large_fraction = 0.125             # other generator parameters

    [[traces]]                         # a file: a bundled name or a path (relative to the grid)
    file = "muri/trace1.csv"
    format = "muri"                    # optional, detected from the header
    limit = 100                        # optional: the first N jobs

    [[policies]]                       # or policies = ["fifo", "sjf"]
    name = "tiresias"
    label = "tiresias-10"              # default: the name
    options = { thresholds_gpu_s = [10] }

    [[exclude]]                        # drop the cells that match every key given
    policy = "pollux"
    load = [360, 480]                  # a list matches any of its values

Cells are the cross product trace x load x seed x cluster x policy x world x restart overhead,
less the ``exclude`` matches (and, when ``include`` is given, only the cells that match one of
its entries). A file trace has no load and no seed: it gives one cell per other combination.

Errors are :class:`~slurm_sched.errors.InputError` naming the grid file, the entry and field
(``policies[1].options``) and, once cells exist, the first cell that uses the bad entry.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from slurm_sched import traces
from slurm_sched.errors import InputError
from slurm_sched.model import parse_cluster_spec
from slurm_sched.perf import registry as perf_registry
from slurm_sched.policy import registry
from slurm_sched.sim.metrics import RunMetrics
from slurm_sched.sweep import workload
from slurm_sched.sweep.cells import Cell, cell_id

#: RunMetrics fields a grid may keep; ``per_tenant`` only when listed.
METRIC_FIELDS: tuple[str, ...] = tuple(RunMetrics.model_fields)
DEFAULT_METRICS: tuple[str, ...] = tuple(f for f in METRIC_FIELDS if f != "per_tenant")
#: Keys of an ``exclude`` / ``include`` entry (the cell's axes).
MATCH_KEYS = ("trace", "load", "seed", "cluster", "policy", "world", "restart_overhead_s")
_TOP_KEYS = {"name", "seeds", "clusters", "worlds", "restart_overhead_s", "metrics", "keep_jcts",
             "traces", "policies", "exclude", "include"}


@dataclass(frozen=True)
class TraceEntry:
    """One ``[[traces]]`` entry: a file, or a generator with its loads."""

    index: int
    label: str
    file: str | None = None  # a bundled name as written, or an absolute path
    format: str | None = None
    limit: int | None = None
    generator: str | None = None
    loads: tuple[int, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)
    found: bool = True  # False: the file is neither a path nor a bundled trace (validate says so)

    @property
    def where(self) -> str:
        return f"traces[{self.index}]"


@dataclass(frozen=True)
class PolicyEntry:
    index: int
    label: str
    name: str
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"policies[{self.index}]"


@dataclass(frozen=True)
class Grid:
    path: Path
    name: str
    traces: tuple[TraceEntry, ...]
    policies: tuple[PolicyEntry, ...]
    clusters: tuple[str, ...]
    worlds: tuple[str, ...]
    seeds: tuple[int, ...]
    restart_overheads_s: tuple[float, ...]
    metrics: tuple[str, ...]
    keep_jcts: bool
    exclude: tuple[dict[str, Any], ...] = ()
    include: tuple[dict[str, Any], ...] = ()


def _err(grid: Path, where: str, value: object, why: str) -> InputError:
    return InputError(why, source=str(grid), field=where, value=value)


def _list(doc: Mapping[str, Any], key: str, default: Sequence[Any], kind: type | tuple[type, ...],
          path: Path) -> tuple[Any, ...]:
    raw = doc.get(key, list(default))
    items = raw if isinstance(raw, list) else [raw]
    if not items:
        raise _err(path, key, raw, "must not be empty")
    for i, v in enumerate(items):
        # bool is an int to Python: refuse it where a number is wanted
        if not isinstance(v, kind) or (isinstance(v, bool) and bool not in _kinds(kind)):
            raise _err(path, f"{key}[{i}]", v, f"expected {_kind_name(kind)}")
    if len(set(map(repr, items))) != len(items):
        raise _err(path, key, raw, "repeats a value")
    return tuple(items)


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    return " or ".join(k.__name__ for k in _kinds(kind))


def load_grid(path: str | Path) -> Grid:
    """Parse a grid file (no trace is read, no policy built: see :func:`validate`)."""
    p = Path(path)
    try:
        doc = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("no such grid file", field="grid", value=str(p)) from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"not valid TOML: {e}", source=str(p)) from None
    unknown = sorted(set(doc) - _TOP_KEYS)
    if unknown:
        raise _err(p, unknown[0], doc[unknown[0]],
                   f"unknown key; known: {', '.join(sorted(_TOP_KEYS))}")
    name = doc.get("name", p.stem)
    if not isinstance(name, str):
        raise _err(p, "name", name, "expected a string")
    metrics = _list(doc, "metrics", DEFAULT_METRICS, str, p)
    for i, m in enumerate(metrics):
        if m not in METRIC_FIELDS:
            raise _err(p, f"metrics[{i}]", m,
                       f"not a RunMetrics field; known: {', '.join(METRIC_FIELDS)}")
    keep_jcts = doc.get("keep_jcts", True)
    if not isinstance(keep_jcts, bool):
        raise _err(p, "keep_jcts", keep_jcts, "expected true or false")
    overheads = _list(doc, "restart_overhead_s", [30.0], (int, float), p)
    for i, o in enumerate(overheads):
        if o < 0:
            raise _err(p, f"restart_overhead_s[{i}]", o, "must be >= 0")
    if "traces" not in doc:
        raise _err(p, "traces", None, "missing: at least one [[traces]] entry")
    if "policies" not in doc:
        raise _err(p, "policies", None, "missing: at least one policy")
    if "clusters" not in doc:
        raise _err(p, "clusters", None, "missing: at least one --cluster spec")
    return Grid(
        path=p,
        name=name,
        traces=tuple(_trace(p, i, t) for i, t in enumerate(_tables(p, doc, "traces"))),
        policies=_policies(p, doc["policies"]),
        clusters=_list(doc, "clusters", [], str, p),
        worlds=_list(doc, "worlds", ["auto"], str, p),
        seeds=_list(doc, "seeds", [1], int, p),
        restart_overheads_s=tuple(float(o) for o in overheads),
        metrics=metrics,
        keep_jcts=keep_jcts,
        exclude=tuple(_match(p, "exclude", i, e) for i, e in enumerate(_tables(p, doc, "exclude"))),
        include=tuple(_match(p, "include", i, e) for i, e in enumerate(_tables(p, doc, "include"))),
    )


def _tables(p: Path, doc: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    raw = doc.get(key, [])
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        raise _err(p, key, raw, f"expected a list of tables ([[{key}]])")
    if key == "traces" and not raw:
        raise _err(p, key, raw, "must not be empty")
    return raw


def _trace(p: Path, i: int, t: dict[str, Any]) -> TraceEntry:
    where = f"traces[{i}]"
    label = t.get("label")
    if label is not None and not isinstance(label, str):
        raise _err(p, f"{where}.label", label, "expected a string")
    if ("file" in t) == ("generator" in t):
        raise _err(p, where, t, "needs exactly one of 'file' and 'generator'")
    if "file" in t:
        extra = sorted(set(t) - {"file", "format", "limit", "label"})
        if extra:
            raise _err(p, f"{where}.{extra[0]}", t[extra[0]],
                       "unknown key of a file trace; known: file, format, limit, label")
        file, fmt, limit = t["file"], t.get("format"), t.get("limit")
        if not isinstance(file, str) or not file:
            raise _err(p, f"{where}.file", file, "expected a file path or bundled trace name")
        if fmt is not None and fmt not in traces.TRACE_FORMATS:
            raise _err(p, f"{where}.format", fmt,
                       f"unknown trace format; known: {', '.join(traces.TRACE_FORMATS)}")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)
                                  or limit < 1):
            raise _err(p, f"{where}.limit", limit, "expected an integer >= 1")
        resolved = _resolve_file(p, file)
        return TraceEntry(i, label or Path(file).stem, file=resolved or file, format=fmt,
                          limit=limit, found=resolved is not None)
    gen = t["generator"]
    if gen not in workload.GENERATORS:
        raise _err(p, f"{where}.generator", gen,
                   f"unknown generator; known: {', '.join(workload.GENERATORS)}")
    loads = _list(t, "jobs", [], int, p) if "jobs" in t else ()
    if not loads or any(n < 1 for n in loads) or any(isinstance(n, bool) for n in loads):
        raise _err(p, f"{where}.jobs", t.get("jobs"),
                   "expected a list of job counts >= 1 (the load axis)")
    params = {k: v for k, v in t.items() if k not in ("generator", "jobs", "label")}
    known = workload.GENERATORS[gen].params
    for k in params:
        if k not in known:
            raise _err(p, f"{where}.{k}", params[k],
                       f"generator {gen!r} has no parameter {k!r}; known: "
                       f"{', '.join(known) or 'none'}")
    return TraceEntry(i, label or gen, generator=gen, loads=loads, params=params)


def _resolve_file(p: Path, file: str) -> str | None:
    """A path (relative to the grid file's folder) made absolute, a bundled name as is, or
    None when it is neither (reported by :func:`validate`, which names the cells using it)."""
    as_path = Path(file) if Path(file).is_absolute() else p.parent / file
    if as_path.is_file():
        return str(as_path.resolve())
    try:
        traces.bundled(file)
    except InputError:
        return None
    return file


def _policies(p: Path, raw: object) -> tuple[PolicyEntry, ...]:
    items = raw if isinstance(raw, list) else [raw]
    if not items:
        raise _err(p, "policies", raw, "must not be empty")
    out: list[PolicyEntry] = []
    for i, item in enumerate(items):
        where = f"policies[{i}]"
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise _err(p, where, item, "expected a policy name or a table with 'name'")
        extra = sorted(set(item) - {"name", "label", "options"})
        if extra:
            raise _err(p, f"{where}.{extra[0]}", item[extra[0]],
                       "unknown key; known: name, label, options")
        options = item.get("options", {})
        if not isinstance(options, dict):
            raise _err(p, f"{where}.options", options, "expected a table of KEY = VALUE")
        label = item.get("label", item["name"])
        if not isinstance(label, str) or not label:
            raise _err(p, f"{where}.label", label, "expected a non-empty string")
        out.append(PolicyEntry(i, label, item["name"], dict(options)))
    labels = [e.label for e in out]
    for e in out:
        if labels.count(e.label) > 1:
            raise _err(p, f"{e.where}.label", e.label,
                       "two policies share this label; give each a distinct 'label'")
    return tuple(out)


def _match(p: Path, key: str, i: int, entry: dict[str, Any]) -> dict[str, Any]:
    for k in entry:
        if k not in MATCH_KEYS:
            raise _err(p, f"{key}[{i}].{k}", entry[k],
                       f"unknown key; known: {', '.join(MATCH_KEYS)}")
    if not entry:
        raise _err(p, f"{key}[{i}]", entry, "empty: it would match every cell")
    for k, v in entry.items():
        if isinstance(v, list) and not v:
            raise _err(p, f"{key}[{i}].{k}", v, "an empty list matches no cell")
    return entry


def _matches(cell: Cell, entry: Mapping[str, Any]) -> bool:
    axes = {"trace": cell.trace_label, "load": cell.load, "seed": cell.seed,
            "cluster": cell.cluster, "policy": cell.policy, "world": cell.world,
            "restart_overhead_s": cell.restart_overhead_s}
    # a list matches any of its values
    return all(axes[k] in v if isinstance(v, list) else axes[k] == v for k, v in entry.items())


@dataclass(frozen=True)
class Expanded:
    """The cells of a grid, with the entries each came from (for error messages)."""

    cells: tuple[Cell, ...]
    origin: dict[str, tuple[TraceEntry, PolicyEntry]]


def expand(grid: Grid) -> Expanded:
    """The grid's cells in a stable order (trace, load, seed, cluster, policy, world,
    overhead), less the excluded ones."""
    cells: list[Cell] = []
    origin: dict[str, tuple[TraceEntry, PolicyEntry]] = {}
    for t in grid.traces:
        variants: list[tuple[int | None, int | None]] = (
            [(n, s) for n in t.loads for s in grid.seeds] if t.generator else [(None, None)])
        for load, seed in variants:
            trace: dict[str, Any] = (
                {"label": t.label, "generator": t.generator, "jobs": load, "seed": seed,
                 "params": dict(sorted(t.params.items()))}
                if t.generator else
                {"label": t.label, "file": t.file, "format": t.format, "limit": t.limit})
            for cluster in grid.clusters:
                for pol in grid.policies:
                    for world in grid.worlds:
                        for overhead in grid.restart_overheads_s:
                            cell = Cell(trace=trace, cluster=cluster, policy=pol.label,
                                        policy_name=pol.name, options=pol.options, world=world,
                                        restart_overhead_s=overhead, metrics=grid.metrics,
                                        keep_jcts=grid.keep_jcts)
                            cells.append(cell)
                            origin[cell_id(cell)] = (t, pol)
    for key, entries in (("exclude", grid.exclude), ("include", grid.include)):
        for i, e in enumerate(entries):
            if not any(_matches(c, e) for c in cells):
                raise _err(grid.path, f"{key}[{i}]", e, "matches no cell of the grid")
    kept = [c for c in cells if not any(_matches(c, e) for e in grid.exclude)]
    if grid.include:
        kept = [c for c in kept if any(_matches(c, e) for e in grid.include)]
    if not kept:
        raise _err(grid.path, "exclude", None, "every cell is excluded")
    ids = [cell_id(c) for c in kept]
    return Expanded(tuple(kept), {i: origin[i] for i in ids})


def validate(grid: Grid, expanded: Expanded) -> None:
    """Check every entry a cell uses, once each: the policy name and options (as ``simulate -o``
    checks them), the cluster spec, the world, and that each file trace reads. The first error
    is raised, naming the entry, the field and the first cell that uses it."""
    seen: set[tuple[str, str]] = set()
    for cell in expanded.cells:
        cid = cell_id(cell)
        t, pol = expanded.origin[cid]
        checks: list[tuple[tuple[str, str], Callable[[], object]]] = [
            (("policy", pol.where), partial(_check_policy, pol)),
            (("cluster", cell.cluster), partial(parse_cluster_spec, cell.cluster)),
            (("world", cell.world), partial(_check_world, cell.world)),
            (("trace", t.where), partial(_check_trace, t, cell)),
        ]
        for key, check in checks:
            if key in seen:
                continue
            seen.add(key)
            try:
                check()
            except InputError as e:
                trace_field = f"{t.where}.file" if t.file else f"{t.where}.jobs"
                where = {"policy": _policy_field(pol, e), "cluster": "clusters",
                         "world": "worlds", "trace": trace_field}[key[0]]
                entry_value = {"policy": pol.name, "cluster": cell.cluster,
                               "world": cell.world,
                               "trace": t.file if t.file else list(t.loads)}[key[0]]
                shown = e.value if e.value is not None and key[0] != "trace" else entry_value
                msg = e.message if e.source is None or key[0] != "trace" else e.one_line()
                n = sum(1 for o in expanded.origin.values() if o[1] is pol)
                used = f"cell {cid}" + (f" and {n - 1} more" if key[0] == "policy" and n > 1
                                         else "")
                raise InputError(f"{msg} (used by {used})", source=str(grid.path),
                                 field=where, value=shown) from None


def _policy_field(pol: PolicyEntry, e: InputError) -> str:
    if e.field == "policy":
        return f"{pol.where}.name"
    key = str(e.value).partition("=")[0]
    return f"{pol.where}.options.{key}" if key in pol.options else f"{pol.where}.options"


def _check_trace(t: TraceEntry, cell: Cell) -> None:
    """A file trace must read; a generator must build its largest load (first seed)."""
    if t.file is not None:
        if not t.found:
            raise InputError("no such file (relative to the grid file's folder) nor a bundled "
                             "trace of that name", value=t.file)
        workload.load_jobs(cell.trace)
        return
    trace = {**cell.trace, "jobs": max(t.loads)}
    try:
        workload.load_jobs(trace)
    except (ValueError, TypeError) as e:
        raise InputError(f"generator {t.generator!r} refused it: {e}",
                         value=list(t.loads)) from None


def _check_world(world: str) -> None:
    if world != "auto":
        perf_registry.create(world)


def _check_policy(pol: PolicyEntry) -> None:
    registry.create(pol.name, pol.options)


def load_and_expand(path: str | Path) -> tuple[Grid, tuple[Cell, ...]]:
    """Parse, expand and validate a grid: the cells, ready to run."""
    grid = load_grid(path)
    expanded = expand(grid)
    validate(grid, expanded)
    return grid, expanded.cells
