"""The chaos run's audit (``tests/soak/chaos_audit.py``) on made-up accounting: what it
explains, and that it names what it cannot."""

from __future__ import annotations

from tests.soak.chaos_audit import Run, audit, expand_nodes, parse_sacct


def run(jid: str, state: str, start: float | None, end: float | None, *nodes: str) -> Run:
    return Run(jid, state, start, end, tuple(nodes))


def act(kind: str, jid: str, t: float, ok: bool = True) -> dict[str, object]:
    return {"t": t, "kind": kind, "job_id": jid, "ok": ok}


def test_expand_nodes() -> None:
    assert expand_nodes("a100-[1-2],v100-1") == ["a100-1", "a100-2", "v100-1"]
    assert expand_nodes("n[01-03,7]") == ["n01", "n02", "n03", "n7"]
    assert expand_nodes("None assigned") == []


def test_parse_sacct_keeps_the_first_word_of_a_state() -> None:
    text = "7|CANCELLED by 0|10|20|a100-1\n7|COMPLETED|Unknown|Unknown|None assigned\n"
    runs = parse_sacct(text, float)
    assert runs == [run("7", "CANCELLED", 10, 20, "a100-1"), run("7", "COMPLETED", None, None)]


def test_every_start_and_stop_explained() -> None:
    runs = [
        run("1", "REQUEUED", 100, 130, "a100-1"),  # preempted by the daemon
        run("1", "COMPLETED", 150, 170, "a100-2"),
        run("2", "NODE_FAIL", 100, 140, "v100-1"),  # its node crashed
        run("2", "COMPLETED", 205, 230, "v100-2"),  # started by Slurm while the daemon was down
        run("3", "COMPLETED", 299, 310, "a100-1"),  # started just before the daemon's SIGKILL
        run("4", "REQUEUED", 400, 420, "a100-2"),  # requeued by Slurm after a slurmctld crash
        run("4", "COMPLETED", 440, 460, "a100-2"),
    ]
    decisions = [
        act("start", "1", 99.6), act("preempt", "1", 129.5), act("start", "1", 149.2),
        act("start", "2", 99.8), act("start", "3", 250, ok=False),
        {"t": 300, "event": "reconcile", "running": ["3"]},
        act("start", "4", 399.5), act("start", "4", 439.7),
    ]
    a = audit(["1", "2", "3", "4"], runs, decisions, windows=[(190, 220)],
              crashes=[("v100-1", 120)], daemon_kills=[302.0], ctld_crashes=[(410, 430)])
    assert a.problems == []
    assert a.final_states == {"COMPLETED": 4}
    assert a.starts == {"daemon decision": 5, "Slurm after the lease (fail-open)": 1,
                        "daemon cycle lost to its SIGKILL": 1}
    assert a.stops == {"daemon decision": 1, "node crash": 1,
                       "slurmctld crash (its unsaved state lost)": 1}


def test_what_it_cannot_explain_is_named() -> None:
    runs = [
        run("1", "REQUEUED", 100, 130, "a100-1"),  # no preempt, no crash
        run("1", "COMPLETED", 150, 170, "a100-1"),  # no start decision after the first
        run("2", "COMPLETED", 100, 110, "a100-1"),
        run("2", "COMPLETED", 120, 130, "a100-1"),  # ran twice
        run("4", "PENDING", None, None),
    ]
    a = audit(["1", "2", "3", "4"], runs, [act("start", "1", 99), act("start", "2", 99),
                                           act("start", "2", 119)],
              windows=[], crashes=[("v100-1", 120)], daemon_kills=[], no_requeue=frozenset())
    text = "\n".join(a.problems)
    assert "job 1: run 1 ended REQUEUED" in text
    assert "job 1: run 2 started at 150" in text
    assert "job 2: ended ['COMPLETED'] before its last record" in text
    assert "job 3: no accounting record" in text
    assert "job 4: last record PENDING" in text


def test_a_no_requeue_job_may_end_in_node_fail() -> None:
    runs = [run("5", "NODE_FAIL", 100, 140, "v100-1")]
    decisions = [act("start", "5", 99.5)]
    ok = audit(["5"], runs, decisions, windows=[], crashes=[("v100-1", 120)], daemon_kills=[],
               no_requeue=frozenset({"5"}))
    assert ok.problems == []
    bad = audit(["5"], runs, decisions, windows=[], crashes=[("v100-1", 120)], daemon_kills=[])
    assert bad.problems == ["job 5: last record NODE_FAIL, expected {'COMPLETED'}"]
