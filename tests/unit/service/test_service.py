"""Service building blocks: config loading, decision log, Prometheus metrics."""

from __future__ import annotations

import contextlib
import urllib.request

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_sched.errors import InputError
from slurm_sched.model import ActionResult, Preempt, Start
from slurm_sched.service.config import load_config
from slurm_sched.service.decision_log import DecisionLog, read_decisions
from slurm_sched.service.metrics import SchedulerMetrics, serve_metrics
from tests.builders import place


def write(tmp_path, text):
    p = tmp_path / "config.toml"
    p.write_text(text)
    return p


def test_defaults_and_nested_sections(tmp_path):
    text = 'policy = "fifo"\nperiod_s = 2\n[safety]\nloop_preemptions = 3\n'
    cfg = load_config(write(tmp_path, text))
    assert cfg.policy == "fifo" and cfg.period_s == 2 and cfg.safety.loop_preemptions == 3
    assert cfg.lease_s == 120  # fail-open within 2 minutes by default


def test_the_environment_wins_and_an_empty_variable_counts_as_unset(tmp_path, monkeypatch):
    text = 'policy = "tiresias"\nlease_s = 60\n[policy_options]\nthresholds_gpu_s = [100]\n'
    for name in ("POLICY", "POLICY_OPTIONS", "LEASE_S"):
        monkeypatch.setenv(f"SLURM_SCHED_{name}", "")
    cfg = load_config(write(tmp_path, text))
    assert (cfg.policy, cfg.policy_options, cfg.lease_s) == (
        "tiresias", {"thresholds_gpu_s": [100]}, 60)
    monkeypatch.setenv("SLURM_SCHED_POLICY_OPTIONS", '{"thresholds_gpu_s": [10]}')
    monkeypatch.setenv("SLURM_SCHED_LEASE_S", "20")
    cfg = load_config(write(tmp_path, text))
    assert (cfg.policy_options, cfg.lease_s) == ({"thresholds_gpu_s": [10]}, 20)
    monkeypatch.setenv("SLURM_SCHED_SAFETY__MIN_RUNTIME_BEFORE_PREEMPT_S", "0")
    cfg = load_config(write(tmp_path, text + "[safety]\nloop_preemptions = 3\n"))
    assert (cfg.safety.min_runtime_before_preempt_s, cfg.safety.loop_preemptions) == (0, 3)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('policy = "fastest"', "field 'policy' = 'fastest': unknown policy"),
        ("period_s = -1", "field 'period_s' = -1"),
        ("lease_s = 5", "field 'lease_s' = 5"),
        ('[safety]\nmax_preemptions_per_cycle = "x"', "field 'safety.max_preemptions_per_cycle'"),
        ("surprise = 1", "field 'surprise' = 1: unknown setting"),
        ("managed_partitions = []", "field 'managed_partitions'"),
        ('[observability]\nlog_level = "LOUD"', "field 'observability.log_level' = 'LOUD'"),
        ("policy = ", "not valid TOML"),
        ('transport = "carrier-pigeon"', "field 'transport' = 'carrier-pigeon'"),
    ],
)
def test_bad_values_are_named(tmp_path, text, expected):
    path = write(tmp_path, text)
    with pytest.raises(InputError) as e:
        load_config(path)
    assert expected in str(e.value)
    assert str(path) in str(e.value)
    assert "\n" not in str(e.value)


def test_missing_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="cannot read config"):
        load_config(tmp_path / "nope.toml")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_fuzz_config_loader_only_raises_input_errors(tmp_path_factory, text):
    p = tmp_path_factory.mktemp("cfg") / "c.toml"
    p.write_text(text, encoding="utf-8")
    with contextlib.suppress(InputError):  # any other exception fails the test
        load_config(p)


def test_decision_log_lines(tmp_path):
    log = DecisionLog(tmp_path / "d.jsonl", policy="fifo")
    a = Start(job_id="7", placement=place(**{"n1": [0]}), reason="fifo order")
    log.record(10.0, [ActionResult(action=a, ok=True),
                      ActionResult(action=Preempt(job_id="8"), ok=False, error="gone")])
    log.record(11.0, [])
    log.close()
    rows = read_decisions(tmp_path / "d.jsonl")
    assert [(r["kind"], r["job_id"], r["ok"]) for r in rows] == [("start", "7", True),
                                                                 ("preempt", "8", False)]
    assert rows[0]["reason"] == "fifo order" and rows[1]["error"] == "gone"
    assert rows[0]["action"]["placement"]["parts"][0]["node"] == "n1"


def test_metrics_endpoint_serves_prometheus_text():
    m = SchedulerMetrics()
    m.observe_cycle(0.25, [ActionResult(action=Preempt(job_id="1"), ok=True)])
    server = serve_metrics(m, "127.0.0.1", 0)
    try:
        port = server.server_address[1]
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    finally:
        server.shutdown()
    assert 'slurm_sched_actions_total{kind="preempt",outcome="ok"} 1' in body
    assert "slurm_sched_cycle_latency_seconds_count 1" in body
