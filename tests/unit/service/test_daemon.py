"""The daemon (``slurm-sched run``) without Slurm: recorded squeue/sinfo output behind the runner
(the process boundary), a real unix datagram socket for sd_notify, real signals."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from slurm_sched.errors import InputError
from slurm_sched.model import ActionResult, ClusterSnapshot, Placement, Start
from slurm_sched.policy.base import Policy
from slurm_sched.service.config import ServiceConfig, load_config
from slurm_sched.service.daemon import Daemon, ShadowTracker
from slurm_sched.service.decision_log import read_decisions
from slurm_sched.service.reconcile import reconcile
from slurm_sched.service.sd_notify import Notifier
from slurm_sched.slurm.backend import SlurmBackend
from slurm_sched.slurm.lease import Lease
from slurm_sched.slurm.parse import parse_job
from tests.contract.recorded import FakeRunner, recorded

MUTATING = ("update", "release", "hold", "requeue", "suspend", "resume", "scancel")


# ---------------------------------------------------------------------------- sd_notify
@pytest.fixture
def notify_socket(tmp_path: Path):
    path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(5)
    yield path, sock
    sock.close()


def test_sd_notify_sends_ready_status_and_watchdog_to_the_socket(notify_socket):
    path, sock = notify_socket
    n = Notifier({"NOTIFY_SOCKET": str(path), "WATCHDOG_USEC": "2000000"})
    assert n.enabled and n.watchdog_s == 2.0
    assert n.ready("live: policy fifo")
    assert sock.recv(4096) == b"READY=1\nSTATUS=live: policy fifo"
    assert n.watchdog()
    assert sock.recv(4096) == b"WATCHDOG=1"
    assert not n.watchdog()  # rate-limited to a quarter of the interval
    assert n.watchdog(force=True)
    assert sock.recv(4096) == b"WATCHDOG=1"
    assert n.stopping()
    assert sock.recv(4096) == b"STOPPING=1"


def test_sd_notify_abstract_socket_and_no_socket():
    name = f"slurm-sched-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(5)
        assert Notifier({"NOTIFY_SOCKET": "@" + name}).status("hello")
        assert sock.recv(100) == b"STATUS=hello"
    off = Notifier({})
    assert not off.enabled and not off.ready() and not off.watchdog(force=True)
    # a watchdog meant for another process is not ours to feed
    env = {"NOTIFY_SOCKET": "/nonexistent", "WATCHDOG_USEC": "1000", "WATCHDOG_PID": "1"}
    other = Notifier(env)
    assert other.watchdog_s is None


def test_sd_notify_to_a_dead_socket_is_not_fatal(tmp_path: Path):
    n = Notifier({"NOTIFY_SOCKET": str(tmp_path / "gone.sock")})
    assert not n.ready() and not n.ready()


# ---------------------------------------------------------------------------- lease rules
def test_lease_due_window():
    lease = Lease(120)
    now = 1000.0
    assert lease.due(0, now)  # no begin time: eligible now
    assert lease.due(now - 1, now)  # ran out
    assert lease.due(now + 59, now)  # less than half left
    assert not lease.due(now + 61, now)
    assert not lease.due(now + 124, now)  # within the slack
    assert lease.due(now + 126, now)  # longer than the lease (requeue, plugin): shortened
    assert lease.renew_argv("7") == ("update", "JobId=7", "StartTime=now+120")
    with pytest.raises(ValueError, match="renew_before_s"):
        Lease(10, renew_before_s=10)
    with pytest.raises(ValueError, match="lease_s"):
        Lease(0)


# ---------------------------------------------------------------------------- config
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("period_s = 40", "field 'period_s' = 40.0: must be at most lease_s / 4 = 30"),
        ('policy = "fifo"\n[policy_options]\nfoo = 1', "field 'policy_options.foo' = 1"),
        ("max_jobs_per_gpu = 0", "field 'max_jobs_per_gpu' = 0"),
        ("[observability]\nmetrics_port = 70000", "field 'observability.metrics_port'"),
    ],
)
def test_daemon_config_errors_name_field_and_value(tmp_path: Path, text: str, expected: str):
    p = tmp_path / "c.toml"
    p.write_text(text)
    with pytest.raises(InputError) as e:
        load_config(p)
    assert expected in str(e.value) and "\n" not in str(e.value)


def test_settings_dir_defaults(tmp_path: Path):
    assert ServiceConfig().job_settings_dir == Path("/var/lib/slurm-sched/job-settings")
    assert ServiceConfig(mini_cluster=tmp_path).job_settings_dir == tmp_path / "job-settings"
    cfg = ServiceConfig(mini_cluster=tmp_path, settings_dir=tmp_path / "s")
    assert cfg.job_settings_dir == tmp_path / "s"


# ---------------------------------------------------------------------------- the daemon
def config(tmp_path: Path, **kw: Any) -> ServiceConfig:
    base: dict[str, Any] = {
        "policy": "fifo",
        "period_s": 0.05,
        "settings_dir": tmp_path / "settings",
        "state_dir": tmp_path / "state",
        "observability": {"decision_log": tmp_path / "decisions.jsonl", "metrics_port": None},
    }
    base.update(kw)
    return ServiceConfig(**base)


def make_daemon(tmp_path: Path, **kw: Any) -> tuple[Daemon, FakeRunner]:
    runner = FakeRunner(recorded("squeue_mixed.json"))
    once = kw.pop("once", True)
    d = Daemon(config(tmp_path, **kw), runner=runner, notifier=Notifier({}), once=once)
    d.backend.min_query_interval_s = 0.0
    return d, runner


def test_once_reconciles_then_runs_one_cycle_with_leases_and_pins(tmp_path: Path):
    d, runner = make_daemon(tmp_path)
    assert d.run() == 0
    report = d.report
    assert report is not None
    assert report.running == ["29", "30", "31", "39"]
    assert report.resumed == ["32"]  # suspended by a daemon that is gone
    assert sorted(report.released, key=int) == ["28", "33", "37"]  # held: released, leased
    assert report.leased == ["38"]
    lines = runner.lines
    assert lines.index("update JobId=28 StartTime=now+120") < lines.index("release 28")
    assert "resume 32" in lines
    assert not [x for x in lines if x.split()[0] in ("hold", "uhold")]
    rows = read_decisions(tmp_path / "decisions.jsonl")
    assert rows[0]["event"] == "reconcile" and rows[0]["resumed"] == ["32"]
    starts = [r for r in rows if r.get("kind") == "start"]
    assert starts and all(r["ok"] and r["commands"] for r in starts)
    pin = "scontrol update JobId={} ResetAccrueTime NodeList="
    assert all(r["commands"][0].startswith(pin.format(r["job_id"])) for r in starts)
    pin_38 = next(r["commands"] for r in starts if r["job_id"] == "38")  # under its lease
    assert pin_38 == [  # the pin, then the go
        "scontrol update JobId=38 ResetAccrueTime NodeList=a100-2 NumNodes=1-1 "
        "TresPerNode=gres:gpu:2",
        "scontrol update JobId=38 StartTime=now",
    ]
    assert rows[-1]["event"] == "stop"
    body = d.metrics.render()
    assert 'slurm_sched_reconciled_total{what="resumed"} 1' in body
    assert 'slurm_sched_info{mode="live",policy="fifo"} 1' in body
    assert "slurm_sched_cycle_latency_seconds_count 1" in body
    status = json.loads((tmp_path / "state" / "daemon.json").read_text())
    assert status["pid"] == os.getpid() and status["mode"] == "live" and status["metrics"] is None


def test_shadow_mode_runs_no_mutating_command_and_logs_what_it_would(tmp_path: Path, caplog):
    d, runner = make_daemon(tmp_path, dry_run=True)
    caplog.set_level("INFO", logger="slurm_sched")
    assert d.run() == 0
    assert runner.lines == []  # not one command that changes Slurm reached the runner
    assert "would run: scontrol resume 32" in caplog.text
    assert "would run: scontrol update JobId=28 StartTime=now+120" in caplog.text
    assert "shadow cycle:" in caplog.text
    rows = read_decisions(tmp_path / "decisions.jsonl")
    acted = [r for r in rows if "kind" in r]
    assert acted and all(r["dry_run"] for r in acted)
    assert not list((tmp_path / "settings").glob("*.json"))  # no settings file, no ledger


def test_shadow_tracker_compares_would_be_placements_with_slurms():
    t = ShadowTracker()
    base = recorded("squeue_mixed.json")["jobs"]
    job = next(j for j in base if j["job_id"] == 29)  # running on a100-1
    running = {"29": parse_job(job)}
    assert t.update([], running, {"29"}) == Counter()  # running before we looked
    start = Start(job_id="40", placement=Placement.of({"a100-1": [0]}))
    other = Start(job_id="41", placement=Placement.of({"v100-2": [0]}))
    results = [ActionResult(action=start, ok=True), ActionResult(action=other, ok=True)]
    jobs = dict(running)
    jobs["40"] = parse_job({**job, "job_id": 40, "start_time": job["start_time"] + 10})
    jobs["41"] = parse_job({**job, "job_id": 41, "start_time": job["start_time"] + 10})
    jobs["42"] = parse_job({**job, "job_id": 42, "start_time": job["start_time"] + 10})
    cycle = t.update(results, jobs, {"29", "40", "41", "42"})
    assert cycle == Counter({"agreed": 1, "disagreed": 1, "unpredicted": 1})
    assert t.update([], jobs, {"29", "40", "41", "42"}) == Counter()  # each run counted once


def test_unreachable_slurmctld_is_counted_not_fatal(tmp_path: Path):
    d, runner = make_daemon(tmp_path)
    reconcile(d.backend)
    runner.up = False
    d._reconcile = lambda: True  # type: ignore[method-assign]  (done above)
    assert d.run() == 0
    assert d.errors["unavailable"] == 1
    assert 'slurm_sched_errors_total{kind="unavailable"} 1' in d.metrics.render()


class Broken(Policy):
    name = "broken"

    def decide(self, snapshot: ClusterSnapshot, now_s: float) -> list:
        raise RuntimeError("a bug")


def test_repeated_internal_errors_end_the_daemon_with_exit_1(tmp_path: Path, caplog):
    d, _ = make_daemon(tmp_path, once=False)
    d.max_internal_errors = 3
    d.policy.inner = Broken()
    assert d.run() == 1
    assert d.errors["internal"] == 3
    assert "giving up after 3 internal errors" in caplog.text


def test_sigterm_finishes_the_cycle_and_exits_0(tmp_path: Path):
    d, _ = make_daemon(tmp_path, once=False)
    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    d.install_signal_handlers()
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    t0 = time.monotonic()
    try:
        code = d.run()
    finally:
        timer.cancel()
        for s, h in old.items():
            signal.signal(s, h)
    assert code == 0 and time.monotonic() - t0 < 10
    assert d.controller.stats.cycles >= 2
    assert read_decisions(tmp_path / "decisions.jsonl")[-1]["event"] == "stop"


def test_sighup_reload_applies_policy_and_keeps_restart_only_fields(tmp_path: Path, caplog):
    cfg_path = tmp_path / "c.toml"
    cfg_path.write_text('policy = "fifo"\nperiod_s = 1\n')
    d = Daemon(
        load_config(cfg_path),
        config_path=cfg_path,
        runner=FakeRunner(recorded("squeue_mixed.json")),
        notifier=Notifier({}),
    )
    cfg_path.write_text('policy = "sjf"\nperiod_s = 2\nlease_s = 60\n')
    assert d.reload()
    assert d.policy.name == "sjf" and d.controller.policy is d.policy
    assert d.clock.period_s == 2
    assert d.config.lease_s == 120  # needs a restart: kept
    assert "lease_s changed; that takes a restart" in caplog.text
    cfg_path.write_text('policy = "nope"\n')
    assert not d.reload()  # a bad file keeps the running config
    assert d.policy.name == "sjf"


def test_backend_for_the_daemon_uses_config(tmp_path: Path):
    d, _ = make_daemon(tmp_path, policy="gandiva-fair", lease_s=40, period_s=1)
    b: SlurmBackend = d.backend
    # the policy's own sharing capacity (Gandiva_fair: 4) unless the config sets one
    assert b.max_jobs_per_gpu == 4 and b.lease is not None and b.lease.seconds == 40
    assert b.store.directory == tmp_path / "settings"


def test_systemd_unit_is_a_notify_service_with_watchdog_restart_and_its_own_user():
    import configparser

    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read(Path(__file__).resolve().parents[3] / "plugin" / "slurm-sched.service")
    svc = unit["Service"]
    assert svc["Type"] == "notify" and int(svc["WatchdogSec"]) > 0
    assert svc["Restart"] == "on-failure" and svc["User"] == "slurm-sched"
    assert svc["RestartPreventExitStatus"] == "2"  # a misread cluster: stay down, say why
    assert svc["ExecStart"].split()[1:3] == ["run", "--config"]
    assert svc["KillMode"] == "mixed"  # SIGTERM to the daemon only: it finishes its cycle


def test_once_without_slurmctld_exits_1(tmp_path: Path):
    d, runner = make_daemon(tmp_path)
    runner.up = False
    assert d.run() == 1
    assert d.errors["unavailable"] == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("lease_s = 5", "field 'lease_s' = 5"),
        ('mini_cluster = "/nonexistent/cluster"', "field 'mini_cluster' = '/nonexistent/cluster'"),
        ('slurm_conf = "/nonexistent/slurm.conf"', "field 'slurm_conf'"),
    ],
)
def test_cli_run_bad_setup_is_one_line_and_exit_2(tmp_path: Path, capsys, text: str, expected):
    from slurm_sched.cli import main

    p = tmp_path / "c.toml"
    p.write_text(text + "\n")
    assert main(["run", "--config", str(p), "--once"]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1, err


# ---------------------------------------------------------------------------- misread clusters
def _refused(d: Daemon, runner: FakeRunner, tmp_path: Path, caplog: Any) -> str:
    with caplog.at_level("ERROR", logger="slurm_sched.service.daemon"):
        t0 = time.monotonic()
        assert d.run() == 2
    assert time.monotonic() - t0 < 10  # refused at once, never retried
    assert not [x for x in runner.lines if x.startswith(("update", "release", "resume"))]
    rows = read_decisions(tmp_path / "decisions.jsonl")
    assert [r["event"] for r in rows] == ["refused", "stop"]
    [line] = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert line.startswith("refusing to run: ") and "\n" not in line
    return line


def test_daemon_refuses_an_empty_cluster(tmp_path: Path, caplog: Any) -> None:
    d, runner = make_daemon(tmp_path, once=False)
    for node in runner.sinfo["nodes"]:
        node["partitions"] = ["other"]
    line = _refused(d, runner, tmp_path, caplog)
    assert line.endswith(
        "no node in the managed partitions ['sched'] (sinfo --json: 4 node(s) in all, "
        "Slurm 22.05.8)"
    )


def test_daemon_refuses_a_slurm_release_it_does_not_support(tmp_path: Path, caplog: Any) -> None:
    d, runner = make_daemon(tmp_path, once=False)
    runner.sinfo["meta"]["Slurm"]["release"] = "21.08.8"
    line = _refused(d, runner, tmp_path, caplog)
    assert line == (
        "refusing to run: scontrol --version: Slurm 21.08.8 is not supported "
        "(supported: 22.05 to 25.11)"
    )


def test_daemon_refuses_a_misread_job_list(tmp_path: Path, caplog: Any) -> None:
    d, runner = make_daemon(tmp_path, once=False)
    del runner.squeue["jobs"][2]["job_state"]
    line = _refused(d, runner, tmp_path, caplog)
    assert "field 'job_state' is missing (Slurm 22.05.8)" in line
