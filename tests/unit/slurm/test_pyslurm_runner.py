"""The pyslurm transport (slurm_sched/slurm/pyslurm_runner.py) against a fake ``pyslurm``.

Fakes sit only at the library boundaries: a fake ``pyslurm`` module in ``sys.modules`` that
mirrors the 25.11 API (``Job(job_id)`` with ``modify/hold/release/suspend/unsuspend/requeue``,
``JobSubmitDescription(**attrs)`` accepting only the attribute names of 25.11's
``submission.pxd``, ``RPCError(errno, msg)``) and records every call, and the CLI process boundary
(``CommandRunner._exec``) for the lines that stay on scontrol.

Every scontrol line of tests/golden/translate.txt (and the lease / hand-over lines the backend
builds itself) is checked against an expectation stated here, independently of the module's
tables: a verb or ``update`` key that is neither mapped nor explicitly routed to the CLI fails the
test until someone decides which it is.
"""

from __future__ import annotations

import re
import sys
import types
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from slurm_sched.errors import BackendUnavailableError, InputError
from slurm_sched.slurm.lease import Lease
from slurm_sched.slurm.pyslurm_runner import (
    CliFallback,
    PyslurmCall,
    PyslurmRunner,
    make_runner,
    plan_line,
)
from slurm_sched.slurm.runner import CommandResult, CommandRunner

GOLDEN = Path(__file__).parents[2] / "golden" / "translate.txt"
_GOLDEN_CMD = re.compile(r"^\[(?:requeued )?\d+\] scontrol (?P<line>.+?)(?:  \(optional\))?$")

#: The attribute names of ``JobSubmitDescription`` in pyslurm 25.11.0 (``cdef public`` in
#: pyslurm/core/job/submission.pxd); the fake refuses any other name, as the Cython class does.
_SUBMIT_ATTR_NAMES = """
    name account user_id group_id priority site_factor wckey array batch_constraints
    begin_time clusters cluster_constraints comment admin_comment requires_contiguous_nodes
    cores_reserved_for_system threads_reserved_for_system working_directory cpu_frequency nodes
    deadline delay_boot_time dependencies excluded_nodes required_nodes constraints
    kill_on_node_fail licenses mail_user mail_types mcs_label memory_per_cpu memory_per_node
    memory_per_gpu network nice log_files_open_mode overcommit partitions profile_types
    accounting_gather_frequency qos requires_node_reboot is_requeueable reservations script
    script_args environment resource_sharing distribution time_limit time_limit_min container
    container_id cpus_per_task cpus_per_gpu sockets_per_node cores_per_socket threads_per_core
    gpus gpus_per_socket gpus_per_task gres_per_node gpu_binding ntasks ntasks_per_node
    ntasks_per_socket ntasks_per_core ntasks_per_gpu switches signal standard_in standard_output
    standard_error kill_on_invalid_dependency spreads_over_nodes use_min_nodes gres_binding
    gres_tasks_per_sharing temporary_disk_per_node get_user_environment min_cpus_per_node
    wait_all_nodes selinux_context segment_size reserved_ports extra"""
SUBMIT_ATTRS = frozenset(_SUBMIT_ATTR_NAMES.split())

# ---------------------------------------------------------------------- the expectation
#: scontrol ``update`` key -> (JobSubmitDescription attribute, value conversion)
EXPECTED_ATTR: dict[str, tuple[str, type]] = {
    "NodeList": ("required_nodes", str),
    "StartTime": ("begin_time", str),
    "TresPerNode": ("gres_per_node", str),
    "TresPerJob": ("gpus", str),
    "MinMemoryNode": ("memory_per_node", int),
}
#: keys our commands use that must go to the CLI (see the module docstring for why)
EXPECTED_CLI_KEYS = {"NumNodes", "NumCPUs"}
#: scontrol verb -> (pyslurm.Job method, keyword arguments)
EXPECTED_VERBS: dict[str, tuple[str, dict[str, Any]]] = {
    "hold": ("hold", {}),
    "uhold": ("hold", {"mode": "user"}),
    "release": ("release", {}),
    "suspend": ("suspend", {}),
    "resume": ("unsuspend", {}),
    "requeue": ("requeue", {}),
    "requeuehold": ("requeue", {"hold": True}),
}


def golden_scontrol_lines() -> list[str]:
    lines = []
    for raw in GOLDEN.read_text().splitlines():
        m = _GOLDEN_CMD.match(raw)
        if m:
            lines.append(m.group("line"))
    return lines


#: lines the backend builds outside translate.py: lease renewal, hand-over, un-start
OTHER_LINES = [
    " ".join(Lease(lease_s=120).renew_argv("7")),
    "update JobId=8 StartTime=now",
    "hold 9",
    "release 9",
]
ALL_LINES = sorted(set(golden_scontrol_lines()) | set(OTHER_LINES))


def expected_route(line: str) -> tuple[str, Any]:
    """("pyslurm", (method, job_id, payload)) or ("cli", None), from the expectation above."""
    verb, *args = line.split()
    if verb in EXPECTED_VERBS:
        method, kwargs = EXPECTED_VERBS[verb]
        return "pyslurm", (method, int(args[0]), kwargs)
    if verb != "update":
        pytest.fail(
            f"new scontrol verb {verb!r} in {line!r}: map it in pyslurm_runner.py "
            "(and EXPECTED_VERBS here) or route it to the CLI explicitly"
        )
    job_id, changes, to_cli = 0, {}, False
    for tok in args:
        key, _, value = tok.partition("=")
        if key == "JobId":
            job_id = int(value)
        elif key in EXPECTED_CLI_KEYS or value == "":
            to_cli = True
        elif key in EXPECTED_ATTR:
            attr, conv = EXPECTED_ATTR[key]
            changes[attr] = conv(value)
        else:
            pytest.fail(
                f"new update key {key!r} in {line!r}: map it in pyslurm_runner.py "
                "(and EXPECTED_ATTR here) or route it to the CLI (CLI_ONLY_KEYS, "
                "EXPECTED_CLI_KEYS)"
            )
    if to_cli:
        return "cli", None
    return "pyslurm", ("modify", job_id, changes)


# ---------------------------------------------------------------------- fakes
class FakeRPCError(Exception):
    """pyslurm.RPCError: ``errno`` and ``msg`` (the slurm_strerror text)."""

    def __init__(self, errno: int = -1, msg: str | None = None) -> None:
        self.errno = errno
        self.msg = msg
        super().__init__(msg)


@dataclass
class FakePyslurm:
    """What the fake module recorded; ``failures[job_id]`` is raised by that job's next call."""

    calls: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)
    failures: dict[int, BaseException] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)
    module: types.ModuleType = field(default_factory=lambda: types.ModuleType("pyslurm"))


def build_fake(rec: FakePyslurm, version: str = "25.11.0") -> types.ModuleType:
    mod = rec.module
    mod.__version__ = version  # type: ignore[attr-defined]

    class JobSubmitDescription:
        def __init__(self, **kwargs: Any) -> None:
            for k, v in kwargs.items():
                if k not in SUBMIT_ATTRS:
                    raise AttributeError(
                        f"'pyslurm.JobSubmitDescription' object has no attribute '{k}'"
                    )
                setattr(self, k, v)

    class Job:
        def __init__(self, job_id: int) -> None:
            if not isinstance(job_id, int):
                raise TypeError(f"job_id must be int, got {job_id!r}")
            self.id = job_id

        def _rpc(self, method: str, payload: dict[str, Any]) -> None:
            rec.calls.append((method, self.id, payload))
            rec.events.append(f"pyslurm {method} {self.id}")
            exc = rec.failures.pop(self.id, None)
            if exc is not None:
                raise exc

        def modify(self, changes: JobSubmitDescription) -> None:
            if not isinstance(changes, JobSubmitDescription):
                raise TypeError("modify() takes a JobSubmitDescription")
            self._rpc("modify", dict(vars(changes)))

        def hold(self, mode: str | None = None) -> None:
            self._rpc("hold", {} if mode is None else {"mode": mode})

        def release(self) -> None:
            self._rpc("release", {})

        def suspend(self) -> None:
            self._rpc("suspend", {})

        def unsuspend(self) -> None:
            self._rpc("unsuspend", {})

        def requeue(self, hold: bool = False) -> None:
            self._rpc("requeue", {"hold": True} if hold else {})

    mod.Job = Job  # type: ignore[attr-defined]
    mod.JobSubmitDescription = JobSubmitDescription  # type: ignore[attr-defined]
    mod.RPCError = FakeRPCError  # type: ignore[attr-defined]
    return mod


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakePyslurm]:
    rec = FakePyslurm()
    monkeypatch.setitem(sys.modules, "pyslurm", build_fake(rec))
    yield rec


@dataclass
class FakeCli:
    """The scontrol process boundary: echoes batch lines like scontrol does on a pipe."""

    rec: FakePyslurm
    lines: list[str] = field(default_factory=list)
    processes: int = 0
    up: bool = True

    def __call__(
        self, argv: Sequence[str], stdin: str | None = None, merge_stderr: bool = False
    ) -> CommandResult:
        argv = tuple(argv)
        if argv == ("scontrol", "ping"):
            state = "UP" if self.up else "DOWN"
            return CommandResult(argv, 0, f"Slurmctld(primary) at vm is {state}", "")
        self.processes += 1
        if argv == ("scontrol",):
            sent = [ln for ln in (stdin or "").splitlines() if ln]
            self.lines.extend(sent)
            self.rec.events.extend(f"cli {ln}" for ln in sent)
            echo = "".join(f"scontrol: {ln}\n" for ln in sent) + "scontrol: \n"
            return CommandResult(argv, 0, echo, "")
        line = " ".join(argv[1:])
        self.lines.append(line)
        self.rec.events.append(f"cli {line}")
        return CommandResult(argv, 0, "", "")


def runner_with_cli(
    monkeypatch: pytest.MonkeyPatch, rec: FakePyslurm
) -> tuple[PyslurmRunner, FakeCli]:
    runner = PyslurmRunner(env={})
    cli = FakeCli(rec)
    monkeypatch.setattr(runner, "_exec", cli)
    return runner, cli


def argv_of(line: str) -> list[str]:
    return line.split()


# ---------------------------------------------------------------------- mapping
def test_golden_file_yields_every_verb_we_generate() -> None:
    lines = golden_scontrol_lines()
    verbs = {ln.split()[0] for ln in lines}
    assert len(lines) >= 15
    assert {"update", "suspend", "resume", "requeue", "release", "uhold"} <= verbs


@pytest.mark.parametrize("line", ALL_LINES)
def test_every_generated_line_is_mapped_or_routed_to_the_cli(
    line: str, fake: FakePyslurm, monkeypatch: pytest.MonkeyPatch
) -> None:
    route, call = expected_route(line)
    runner, cli = runner_with_cli(monkeypatch, fake)
    (res,) = runner.run_scontrol_batch([argv_of(line)])
    assert res.ok and res.argv == ("scontrol", *argv_of(line))
    if route == "pyslurm":
        assert fake.calls == [call]
        assert cli.lines == []
        assert (runner.pyslurm_lines, runner.cli_fallback_lines) == (1, 0)
    else:
        assert fake.calls == []
        assert cli.lines == [line]
        assert (runner.pyslurm_lines, runner.cli_fallback_lines) == (0, 1)
        (reason,) = runner.fallback_reasons
        # routed on purpose (CLI_ONLY_KEYS or an empty value), never by not knowing the key
        parts = reason.removeprefix("update: ").split("; ")
        assert all("CLI-only" in p or "empty" in p for p in parts), reason


def test_pin_with_node_count_goes_whole_to_the_cli() -> None:
    plan = plan_line(
        argv_of(
            "update JobId=101 NodeList=a100-1 NumNodes=1-1 StartTime=now TresPerNode=gres:gpu:2"
        )
    )
    assert isinstance(plan, CliFallback) and "NumNodes" in plan.reason


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("update JobId=12_3 StartTime=now", "JobId"),  # array task: not a plain id
        ("hold 1,2", "hold"),
        ("release", "release"),
        ("update JobId=5 StartTime=now StartTime=now+60", "twice"),
        ("update JobId=5 StartTime=2030-01-01T00:00:00", "StartTime"),
        ("update JobId=5 TresPerJob=gres:shard:2", "TresPerJob"),  # gpus= would make it gpu
        ("update JobId=5 TresPerNode=gres:gpu:1,gres:shard:1", "TresPerNode"),
        ("update JobId=5 MinMemoryNode=15G", "MinMemoryNode"),
        ("update JobId=5 TresPerNode=", "empty"),
        ("update JobId=5 Partition=x", "Partition"),
        ("update JobId=5", "nothing"),
        ("update StartTime=now", "JobId"),
        ("update JobId=5 Nice", "KEY=VALUE"),
    ],
)
def test_unmapped_lines_fall_back_with_a_reason(line: str, why: str) -> None:
    plan = plan_line(argv_of(line))
    assert isinstance(plan, CliFallback)
    assert why in plan.reason


def test_plan_line_parses_a_string_with_shlex() -> None:
    assert plan_line("update JobId=7 'StartTime=now+120'") == PyslurmCall(
        7, "modify", changes={"begin_time": "now+120"}
    )


def test_typed_gres_and_memory_are_passed_as_pyslurm_expects() -> None:
    plan = plan_line(
        argv_of("update JobId=3 NodeList=a,b TresPerJob=gres:gpu:a100:5 MinMemoryNode=15360")
    )
    assert plan == PyslurmCall(
        3,
        "modify",
        changes={"required_nodes": "a,b", "gpus": "gres:gpu:a100:5", "memory_per_node": 15360},
    )


# ---------------------------------------------------------------------- batches and failures
def test_mixed_batch_keeps_order_and_shares_one_process_per_cli_run(
    fake: FakePyslurm, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner, cli = runner_with_cli(monkeypatch, fake)
    lines = [
        "update JobId=1 StartTime=now+120",
        "update JobId=2 NodeList=n1 NumNodes=1-1 StartTime=now",
        "update JobId=3 TresPerJob=",
        "release 4",
        "update JobId=5 NodeList=n2 NumNodes=1-1 StartTime=now",
    ]
    out = runner.run_scontrol_batch([argv_of(ln) for ln in lines])
    assert [r.line for r in out] == [f"scontrol {ln}" for ln in lines]
    assert all(r.ok for r in out)
    assert fake.events == [
        "pyslurm modify 1",
        "cli update JobId=2 NodeList=n1 NumNodes=1-1 StartTime=now",
        "cli update JobId=3 TresPerJob=",
        "pyslurm release 4",
        "cli update JobId=5 NodeList=n2 NumNodes=1-1 StartTime=now",
    ]
    assert cli.processes == 2  # lines 2-3 in one scontrol, line 5 in another
    assert (runner.pyslurm_lines, runner.cli_fallback_lines) == (2, 3)


def test_a_failed_line_is_attributed_and_later_lines_still_run(
    fake: FakePyslurm, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner, _ = runner_with_cli(monkeypatch, fake)
    fake.failures[22] = FakeRPCError(2017, "Invalid job id specified")
    out = runner.run_scontrol_batch([["release", "21"], ["release", "22"], ["suspend", "23"]])
    assert [r.rc for r in out] == [0, 1, 0]
    assert out[1].stderr == "Invalid job id specified for job 22"
    assert out[1].line == "scontrol release 22"
    assert [c[:2] for c in fake.calls] == [("release", 21), ("release", 22), ("suspend", 23)]


def test_unreachable_controller_raises_backend_unavailable(
    fake: FakePyslurm, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner, _ = runner_with_cli(monkeypatch, fake)
    fake.failures[7] = FakeRPCError(1001, "Unable to contact slurm controller (connect failure)")
    with pytest.raises(BackendUnavailableError, match="update JobId=7 StartTime=now"):
        runner.run_scontrol_batch([["update", "JobId=7", "StartTime=now+120"]])


@pytest.mark.parametrize("up", [True, False])
def test_ambiguous_error_is_confirmed_with_scontrol_ping(
    up: bool, fake: FakePyslurm, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner, cli = runner_with_cli(monkeypatch, fake)
    cli.up = up
    fake.failures[5] = FakeRPCError(-1, "Unexpected message received")
    if up:
        (res,) = runner.run_scontrol_batch([["suspend", "5"]])
        assert res.rc == 1 and "Unexpected message received" in res.stderr
    else:
        with pytest.raises(BackendUnavailableError, match="ping: DOWN"):
            runner.run_scontrol_batch([["suspend", "5"]])


def test_a_value_pyslurm_refuses_is_a_failed_line_not_an_exception(
    fake: FakePyslurm, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner, _ = runner_with_cli(monkeypatch, fake)
    fake.failures[6] = ValueError("Invalid Time Specification: now+1")
    out = runner.run_scontrol_batch([["update", "JobId=6", "StartTime=now+1"], ["hold", "7"]])
    assert out[0].rc == 1 and "ValueError" in out[0].stderr
    assert out[1].ok


def test_unsafe_token_is_refused_like_the_cli(
    fake: FakePyslurm, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner, _ = runner_with_cli(monkeypatch, fake)
    with pytest.raises(ValueError, match="quoting"):
        runner.run_scontrol_batch([["update", "JobId=1", "Comment=a b"]])
    assert fake.calls == []


def test_queries_stay_on_the_cli(fake: FakePyslurm, monkeypatch: pytest.MonkeyPatch) -> None:
    runner, cli = runner_with_cli(monkeypatch, fake)
    runner.run(["scontrol", "show", "job", "1"])
    assert cli.lines == ["show job 1"] and fake.calls == []


# ---------------------------------------------------------------------- import and factory
def test_missing_pyslurm_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyslurm", None)  # makes `import pyslurm` fail
    with pytest.raises(BackendUnavailableError) as exc:
        PyslurmRunner()
    msg = str(exc.value)
    assert "pip install 'slurm_sched[pyslurm]'" in msg and "libslurm" in msg
    assert "\n" not in msg


def test_other_pyslurm_line_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyslurm", build_fake(FakePyslurm(), version="26.5.0"))
    with pytest.raises(BackendUnavailableError, match=r"26\.5\.0 is not the 25\.11 line"):
        PyslurmRunner()


def test_slurm_conf_is_exported_before_libslurm_initialises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a pyslurm that records the SLURM_CONF it saw at import, as libslurm's slurm_init does
    (tmp_path / "pyslurm.py").write_text(
        "import os\n"
        "SEEN_CONF = os.environ.get('SLURM_CONF')\n"
        "__version__ = '25.11.0'\n"
        "class Job: pass\n"
        "class JobSubmitDescription: pass\n"
        "class RPCError(Exception): pass\n"
    )
    monkeypatch.delitem(sys.modules, "pyslurm", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("SLURM_CONF", raising=False)
    PyslurmRunner(env={"SLURM_CONF": "/etc/site/slurm.conf"})
    assert sys.modules["pyslurm"].SEEN_CONF == "/etc/site/slurm.conf"
    with pytest.raises(BackendUnavailableError, match="one cluster per process"):
        PyslurmRunner(env={"SLURM_CONF": "/other/slurm.conf"})


def test_make_runner(fake: FakePyslurm) -> None:
    cli = make_runner("cli", {"SLURM_CONF": "/x"}, 12.0)
    assert type(cli) is CommandRunner and cli.timeout_s == 12.0 and cli.env == {"SLURM_CONF": "/x"}
    assert type(make_runner()) is CommandRunner
    ps = make_runner("pyslurm", None, 5.0)
    assert isinstance(ps, PyslurmRunner) and ps.timeout_s == 5.0
    with pytest.raises(InputError) as exc:
        make_runner("slurmrestd")
    assert exc.value.field == "transport" and exc.value.value == "slurmrestd"
    assert "field 'transport' = 'slurmrestd'" in exc.value.one_line()
