"""The audit of a chaos run (``tests/soak/chaos_run.py``): Slurm's accounting against the
daemon's decision log and the run's own fault timeline. Pure functions, no Slurm.

Inputs:

- ``runs``: every run of every job from ``sacct -X -D`` (a requeued job has one record per run);
- ``decisions``: the daemon's decision log (``read_decisions``), actions and events;
- ``windows``: the intervals in which Slurm, not the daemon, may start a managed job (the
  daemon killed, slurmctld down, each stretched by the lease and a scheduling pass: fail-open);
- ``crashes``: the node crashes, ``(node, time)``.

Each run start must be explained by one of: a logged start of the daemon (``start``, ``share``,
``migrate``, ``reconfigure``, ``resume`` for that job, ok, after the previous run began); Slurm's
own start inside a fail-open window; or a daemon SIGKILLed within seconds after the start (the
cycle in flight is not logged; its start is adopted at the next reconciliation). Each run that
ended without finishing the job (requeued, preempted, node failure) must be explained by an
ok ``preempt``/``migrate``/``reconfigure`` of the job in that run, a crash of one of its
nodes while it ran, or a slurmctld crash shortly before it ended (``ctld_crashes``: a SIGKILL
loses what slurmctld had not saved yet, and Slurm then acts on its older state). What no rule
explains is listed as a problem.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: sacct states that end a job for good (NODE_FAIL only ends one that may not be requeued)
ENDING = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY"})
#: decision-log kinds that start (or restart) a job
STARTING = frozenset({"start", "share", "migrate", "reconfigure", "resume"})
#: decision-log kinds that end a run without ending the job
STOPPING = frozenset({"preempt", "migrate", "reconfigure"})
#: a start this close before a daemon SIGKILL may have been lost with the cycle in flight
LOST_CYCLE_S = 5.0


@dataclass(frozen=True)
class Run:
    """One record of ``sacct -X -D``: a job's run (or its only record when it never ran)."""

    job_id: str
    state: str
    start_s: float | None
    end_s: float | None
    nodes: tuple[str, ...]


@dataclass
class Audit:
    """What the audit found: counts by explanation, and the problems (empty: all accounted)."""

    jobs: int = 0
    final_states: Counter[str] = field(default_factory=Counter)
    starts: Counter[str] = field(default_factory=Counter)
    stops: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "jobs": self.jobs,
            "final_states": dict(sorted(self.final_states.items())),
            "run_starts_by_cause": dict(sorted(self.starts.items())),
            "run_stops_by_cause": dict(sorted(self.stops.items())),
            "problems": list(self.problems),
        }


def parse_sacct(text: str, epoch: Any) -> list[Run]:
    """``sacct -X -D -n -P -o JobIDRaw,State,Start,End,NodeList`` output as runs.

    ``epoch(s)`` turns Slurm's ``YYYY-MM-DDTHH:MM:SS`` into unix seconds; ``Unknown``/``None``
    become None. A state with a reason (``CANCELLED by 0``) keeps its first word.
    """
    runs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) < 5:
            raise ValueError(f"sacct line with {len(parts)} fields, expected 5: {line!r}")
        jid, state, start, end, nodes = parts[:5]
        runs.append(
            Run(
                job_id=jid,
                state=state.split()[0] if state.strip() else "",
                start_s=_time(start, epoch),
                end_s=_time(end, epoch),
                nodes=tuple(expand_nodes(nodes)),
            )
        )
    return runs


def _time(text: str, epoch: Any) -> float | None:
    text = text.strip()
    if not text or text in ("Unknown", "None"):
        return None
    return float(epoch(text))


def expand_nodes(text: str) -> list[str]:
    """``a100-[1-2],v100-1`` -> ``[a100-1, a100-2, v100-1]`` (``None assigned`` -> [])."""
    text = text.strip()
    if not text or text.startswith("None"):
        return []
    out: list[str] = []
    depth = 0
    item = ""
    for ch in text + ",":
        if ch == "," and depth == 0:
            out.extend(_expand_one(item))
            item = ""
            continue
        depth += ch == "["
        depth -= ch == "]"
        item += ch
    return out


def _expand_one(item: str) -> list[str]:
    if "[" not in item:
        return [item] if item else []
    prefix, _, rest = item.partition("[")
    body, _, suffix = rest.partition("]")
    names: list[str] = []
    for part in body.split(","):
        lo, _, hi = part.partition("-")
        if hi:
            width = len(lo)
            names.extend(f"{prefix}{i:0{width}d}{suffix}" for i in range(int(lo), int(hi) + 1))
        else:
            names.append(f"{prefix}{lo}{suffix}")
    return names


def in_any(t: float, windows: Iterable[tuple[float, float]]) -> bool:
    return any(a <= t <= b for a, b in windows)


def audit(
    job_ids: Sequence[str],
    runs: Sequence[Run],
    decisions: Sequence[dict[str, Any]],
    *,
    windows: Sequence[tuple[float, float]],
    crashes: Sequence[tuple[str, float]],
    daemon_kills: Sequence[float],
    ctld_crashes: Sequence[tuple[float, float]] = (),
    no_requeue: frozenset[str] = frozenset(),
) -> Audit:
    """Check every job's accounting and explain every run start and stop (module docstring)."""
    result = Audit(jobs=len(job_ids))
    by_job: dict[str, list[Run]] = {}
    for r in runs:
        by_job.setdefault(r.job_id, []).append(r)
    actions: dict[str, list[dict[str, Any]]] = {}
    for d in decisions:
        if "kind" in d and d.get("ok") and not d.get("dry_run"):
            actions.setdefault(str(d["job_id"]), []).append(d)
    unknown = sorted(set(by_job) - set(job_ids))
    if unknown:
        result.problems.append(f"accounting has jobs the run never submitted: {unknown[:10]}")
    for jid in job_ids:
        records = sorted(by_job.get(jid, []), key=lambda r: (r.start_s or float("inf")))
        if not records:
            result.problems.append(f"job {jid}: no accounting record")
            continue
        last = records[-1]
        result.final_states[last.state] += 1
        allowed = {"COMPLETED", "NODE_FAIL"} if jid in no_requeue else {"COMPLETED"}
        if last.state not in allowed:
            result.problems.append(f"job {jid}: last record {last.state}, expected {allowed}")
        early = [r.state for r in records[:-1] if r.state in ENDING]
        if early:
            result.problems.append(f"job {jid}: ended {early} before its last record {last.state}")
        mine = actions.get(jid, [])
        prev_start = float("-inf")
        for i, r in enumerate(records):
            if r.start_s is None:
                continue
            cause = _start_cause(r.start_s, prev_start, mine, windows, daemon_kills)
            result.starts[cause] += 1
            if cause == "unexplained":
                result.problems.append(f"job {jid}: run {i + 1} started at {r.start_s:.0f} "
                                       f"with no decision and no fail-open window")
            prev_start = r.start_s
            if r is last:
                continue
            stop = _stop_cause(r, mine, crashes, ctld_crashes)
            result.stops[stop] += 1
            if stop == "unexplained":
                result.problems.append(f"job {jid}: run {i + 1} ended {r.state} at {r.end_s} "
                                       f"with no preempt decision and no crash of its nodes")
    return result


def _start_cause(
    start_s: float,
    prev_start_s: float,
    actions: Sequence[dict[str, Any]],
    windows: Sequence[tuple[float, float]],
    daemon_kills: Sequence[float],
) -> str:
    # the decision's time is taken before its commands run: it precedes Slurm's start time,
    # which has whole-second resolution (hence the second of slack on both sides)
    if any(
        a["kind"] in STARTING and prev_start_s + 1 < float(a["t"]) <= start_s + 1 for a in actions
    ):
        return "daemon decision"
    if in_any(start_s, windows):
        return "Slurm after the lease (fail-open)"
    if any(0 <= k - start_s <= LOST_CYCLE_S for k in daemon_kills):
        return "daemon cycle lost to its SIGKILL"
    return "unexplained"


def _stop_cause(
    run: Run,
    actions: Sequence[dict[str, Any]],
    crashes: Sequence[tuple[str, float]],
    ctld_crashes: Sequence[tuple[float, float]],
) -> str:
    start = run.start_s if run.start_s is not None else float("-inf")
    end = run.end_s if run.end_s is not None else float("inf")
    if any(a["kind"] in STOPPING and start - 1 <= float(a["t"]) <= end + 1 for a in actions):
        return "daemon decision"
    if any(n in run.nodes and start - 1 <= t <= end + 1 for n, t in crashes):
        return "node crash"
    if in_any(end, ctld_crashes):
        return "slurmctld crash (its unsaved state lost)"
    return "unexplained"
