"""The reader of ``sacct --json``: Slurm 22.05's ``openapi/dbv0.0.38`` output and the
``data_parser`` plugins v0.0.39 to v0.0.44 (Slurm 23.02 to 25.11), see
``docs/accounting-input.md``.

The versions differ in the shape of the same facts, and every reader function accepts each
shape wherever it occurs:

* a number (time, count, limit, task id, return code) is a plain integer or Slurm's
  ``{"set": bool, "infinite": bool, "number": N}``; not set, infinite, 0 for a time and Slurm's
  ``NO_VAL``/``INFINITE`` integers (``0xfffffffe``/``0xffffffff``) mean "not given";
* ``state.current`` is a string (up to v0.0.39) or a list of a base state and flags;
* ``exit_code`` is an integer or ``{"status": ..., "return_code": N, "signal": ...}``;
* ``meta.Slurm`` (up to v0.0.39) or ``meta.slurm`` holds the version, with integer or string
  parts; ``meta.plugin.data_parser`` names the parser (absent in 22.05, whose
  ``meta.plugin.type`` is ``openapi/dbv0.0.38``).

A record is a job of ``jobs`` (its steps are inside it and are not read); messages name it by
its index, ``FILE: jobs[3]``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from slurm_sched.errors import TraceFormatError
from slurm_sched.traces.sacct_records import Accounting
from slurm_sched.traces.sacct_rules import (
    REQUEUED,
    Collector,
    Gpus,
    GpuTres,
    Malformed,
    base_state,
    choose_gpus,
    expand_nodes,
    is_gpu_name,
    read_hints,
)

#: Slurm's NO_VAL (0xfffffffe) and INFINITE (0xffffffff) for 32-bit fields, and anything above.
_NO_VAL_32 = 0xFFFFFFFE


def read_json(source: str, text: str) -> Accounting:
    """Read the text of one ``sacct --json`` file (see the module docstring)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise TraceFormatError(f"not valid JSON ({exc})", source=source) from None
    except RecursionError:
        raise TraceFormatError("not valid JSON (nested too deeply)", source=source) from None
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        raise TraceFormatError("not sacct --json output: no 'jobs' list", source=source)
    meta = data.get("meta")
    data_parser, slurm_version = _meta(meta if isinstance(meta, dict) else {})
    out = Collector(source, "json")
    for i, job in enumerate(data["jobs"]):
        where = f"{source}: jobs[{i}]"
        out.records += 1
        try:
            if not isinstance(job, dict):
                raise Malformed("job", job, "not a JSON object")
            _record(out, job, i, where)
        except Malformed as exc:
            out.malformed(where, exc)
    return out.finish(data_parser, slurm_version)


def _meta(meta: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(data parser, Slurm version) from ``meta``, each ``None`` when not stated."""
    plugin = meta.get("plugin")
    parser: str | None = None
    if isinstance(plugin, dict):
        named = plugin.get("data_parser")
        kind = plugin.get("type")
        if isinstance(named, str) and named:
            parser = named.removeprefix("data_parser/")
        elif isinstance(kind, str) and "v0.0." in kind:  # 22.05: "openapi/dbv0.0.38"
            parser = kind[kind.index("v0.0.") :]
    slurm = meta.get("slurm", meta.get("Slurm"))
    version: str | None = None
    if isinstance(slurm, dict):
        release = slurm.get("release")
        parts = slurm.get("version")
        if isinstance(release, str) and release:
            version = release
        elif isinstance(parts, dict):
            try:
                major, minor, micro = (int(parts[k]) for k in ("major", "minor", "micro"))
            except (KeyError, TypeError, ValueError):
                pass
            else:
                version = f"{major}.{minor:02d}.{micro}"
    return parser, version


def number(value: object, field: str) -> int | None:
    """An integer or ``{"set", "infinite", "number"}``; ``None`` when not set, infinite or
    absent. Raises :class:`Malformed` for anything else."""
    if value is None:
        return None
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite", False):
            return None
        return number(value.get("number"), field)
    if isinstance(value, bool):
        raise Malformed(field, value, "not a number")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise Malformed(field, value, "not a number")


def _epoch(value: object, field: str) -> float | None:
    """A time: epoch seconds, ``None`` when not set or 0 (Slurm's "not yet")."""
    n = number(value, field)
    if n is None or n == 0:
        return None
    if n < 0:
        raise Malformed(field, value, "not a time (negative)")
    return float(n)


def _text(job: Mapping[str, Any], key: str) -> str:
    value = job.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise Malformed(key, value, "not a string")
    return value.strip()


def _job_id(job: Mapping[str, Any]) -> str:
    """``123``, ``123_4`` (array task), ``123_[5-9]`` (pending array not yet split) or
    ``123+1`` (heterogeneous job component)."""
    job_id = number(job.get("job_id"), "job_id")
    if job_id is None or job_id <= 0:
        raise Malformed("job_id", job.get("job_id"), "missing value")
    array = job.get("array")
    if isinstance(array, dict):
        array_id = number(array.get("job_id"), "array.job_id") or 0
        task = number(array.get("task_id"), "array.task_id")
        if array_id and task is not None and task < _NO_VAL_32:
            return f"{array_id}_{task}"
        tasks = array.get("task")
        if isinstance(tasks, str) and tasks:
            return f"{array_id or job_id}_[{tasks}]"
    het = job.get("het")
    if isinstance(het, dict):
        het_id = number(het.get("job_id"), "het.job_id") or 0
        offset = number(het.get("job_offset"), "het.job_offset")
        if het_id and offset is not None and offset < _NO_VAL_32:
            return f"{het_id}+{offset}"
    return str(job_id)


def _state(job: Mapping[str, Any]) -> str:
    state = job.get("state")
    current = state.get("current") if isinstance(state, dict) else None
    if isinstance(current, str):
        words = current.split()
    elif isinstance(current, list) and all(isinstance(w, str) for w in current):
        words = current
    else:
        raise Malformed("state.current", current, "not a Slurm job state")
    if REQUEUED in words:  # a flag beside the base state: an earlier run of a requeued job
        return REQUEUED
    return base_state(words, "state.current", current)


def _exit_code(job: Mapping[str, Any]) -> int | None:
    value = job.get("exit_code")
    if isinstance(value, dict):
        return number(value.get("return_code"), "exit_code.return_code")
    return number(value, "exit_code")


def _time_limit(value: object) -> float | None:
    """``time.limit``, minutes; ``None`` for unlimited, not set or 0."""
    minutes = number(value, "time.limit")
    if minutes is None or minutes <= 0 or minutes >= _NO_VAL_32:
        return None
    return minutes * 60.0


def _tres(tres: Mapping[str, Any], key: str) -> Gpus:
    field = f"tres.{key}"
    items = tres.get(key)
    gpus = GpuTres()
    if items is None:
        return None, None
    if not isinstance(items, list):
        raise Malformed(field, items, "not a TRES list")
    for item in items:
        if not isinstance(item, dict):
            raise Malformed(field, item, "not a TRES entry")
        name = item.get("name")
        if item.get("type") == "gres" and isinstance(name, str) and is_gpu_name(name):
            count = number(item.get("count"), field)
            if count is None or count < 0:
                raise Malformed(field, item, "not a TRES entry (GPU count)")
            gpus.add(name, count)
    return gpus.count(), gpus.kind()


def _record(out: Collector, job: Mapping[str, Any], index: int, where: str) -> None:
    job_id = _job_id(job)
    state = _state(job)
    time = job.get("time")
    if not isinstance(time, dict):
        raise Malformed("time", time, "not a JSON object")
    submit = _epoch(time.get("submission"), "time.submission")
    if submit is None:
        raise Malformed("time.submission", time.get("submission"), "missing value")
    start = _epoch(time.get("start"), "time.start")
    end = _epoch(time.get("end"), "time.end")
    if start is not None and end is not None and end < start and state != "CANCELLED":
        raise Malformed("time.end", time.get("end"), f"before time.start {time.get('start')!r}")
    tres = job.get("tres")
    if tres is None:
        tres = {}
    if not isinstance(tres, dict):
        raise Malformed("tres", tres, "not a JSON object")
    alloc = _tres(tres, "allocated")
    req = _tres(tres, "requested")
    user, account = _text(job, "user"), _text(job, "account")
    partition, qos = _text(job, "partition"), _text(job, "qos")
    exit_code = _exit_code(job)
    eligible = _epoch(time.get("eligible"), "time.eligible")
    time_limit = _time_limit(time.get("limit"))
    nodes = expand_nodes(_text(job, "nodes"), "nodes")
    comment = job.get("comment")
    if isinstance(comment, dict):
        comment = comment.get("job")
    # Hints last: a record skipped as malformed gets one warning, never a hint warning too.
    hints, warning = read_hints(comment if isinstance(comment, str) else None, where)
    if warning is not None:
        out.warnings.append(warning)
    out.add(
        job_id,
        user,
        account,
        partition,
        qos,
        state,
        exit_code,
        submit,
        eligible,
        start,
        end,
        time_limit,
        choose_gpus(alloc, req),
        nodes,
        hints,
        index,
    )
