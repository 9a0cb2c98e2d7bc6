"""CommandRunner.run_optional: a command whose failure is ignored never raises and never waits
past its own limit."""

from __future__ import annotations

from slurm_sched.slurm.runner import CommandRunner


def test_a_command_past_its_limit_is_given_up_not_an_outage() -> None:
    runner = CommandRunner(timeout_s=30.0, ping_on_error=False)
    res = runner.run_optional(["sleep", "5"], timeout_s=0.2)
    assert res.rc == 124
    assert "did not finish" in res.stderr
    assert runner.timeout_s == 30.0  # the runner's own limit is back


def test_a_failing_command_returns_its_result() -> None:
    runner = CommandRunner(ping_on_error=False)
    res = runner.run_optional(["sh", "-c", "echo nope >&2; exit 3"], timeout_s=5.0)
    assert (res.rc, res.stderr.strip()) == (3, "nope")


def test_a_missing_program_is_given_up() -> None:
    res = CommandRunner(ping_on_error=False).run_optional(["no-such-program-x"], timeout_s=5.0)
    assert res.rc == 124
