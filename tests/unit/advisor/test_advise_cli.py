"""``slurm-sched advise`` end to end on a constructed history (through the test double of the
accounting reader), and its one-line errors."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from slurm_sched.advisor import advise_cli
from slurm_sched.advisor.sources import Reader
from slurm_sched.cli import main
from tests.unit.advisor.conftest import history, write_history


@pytest.fixture
def hist(tmp_path: Path, fake_reader: Reader, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(advise_cli, "reader", lambda: fake_reader)
    return str(write_history(tmp_path / "h.json", history(4)))


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["advise", *args])
    out, err = capsys.readouterr()
    return rc, out, err


BASE = ("--baseline", "fifo", "--cluster", "1x4")


def test_table_json_and_html(hist: str, tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys, "--sacct", hist, *BASE, "--policies", "tiresias",
                       "--resamples", "30", "--html", str(tmp_path / "r.html"))
    assert rc == 0, err
    assert "Per schedule (times in hours)" in out and "Recommendation:" in out
    assert "replay fifo" in err and "replay tiresias" in err and "resampling" in err
    assert "HTML report written to" in err
    assert (tmp_path / "r.html").read_text().count("<svg") == 4
    rc, out, err = run(capsys, "--sacct", hist, *BASE, "--policies", "tiresias",
                       "--format", "json", "--seed", "5", "--block", "week", "--quiet")
    assert rc == 0 and err == ""
    data = json.loads(out)
    assert data["baseline"] == "fifo" and data["input"]["jobs"] == 24
    assert data["resampling"]["block"] == "week" and data["resampling"]["seed"] == 5
    assert [r["name"] for r in data["rows"]] == ["observed", "fifo", "tiresias"]


def test_default_policy_list_and_partition(hist: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "--sacct", hist, *BASE, "--format", "json", "--quiet",
                     "--resamples", "5", "--partition", "gpu")
    assert rc == 0
    names = [p["name"] for p in json.loads(out)["policies"]]
    assert names[0] == "fifo" and "tiresias" in names and "sjf" not in names
    rc, _, err = run(capsys, "--sacct", hist, *BASE, "--quiet", "--partition", "cpu")
    assert rc == 2 and "no usable job to replay" in err


def test_since_runs_sacct(hist: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                          capsys: pytest.CaptureFixture[str]) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    sacct = bindir / "sacct"
    sacct.write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path}/argv\ncat {hist}\n")
    sacct.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    rc, out, err = run(capsys, "--since", "30d", *BASE, "--policies", "fifo", "--quiet",
                       "--format", "json", "--resamples", "5")
    assert rc == 0, err
    assert json.loads(out)["input"]["jobs"] == 24
    assert (tmp_path / "argv").read_text().split() == ["-X", "-a", "-P", "--starttime=now-30d"]


@pytest.mark.parametrize(("args", "message"), [
    ((), "give exactly one of --sacct FILE and --since PERIOD"),
    (("--sacct", "{hist}", "--since", "3d"), "give exactly one of --sacct"),
    (("--sacct", "{missing}"), "Invalid value for '--sacct'"),
    (("--sacct", "{hist}", "--policies", "fifo,no-such-policy"), "unknown policy; known: fifo"),
    (("--sacct", "{hist}", "--policies", " , "), "no policy given"),
    (("--sacct", "{hist}", "--cluster", "4y2"), "expected NxG[:type]"),
    (("--sacct", "{bad}"), "not a history"),
    (("--sacct", "{hist}", "--resamples", "0"), "Invalid value for '--resamples'"),
    (("--sacct", "{hist}", "--block", "month"), "Invalid value for '--block'"),
])
def test_bad_input_exits_2_with_one_line(hist: str, tmp_path: Path, args: tuple[str, ...],
                                         message: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    full = [a.format(hist=hist, missing=tmp_path / "missing", bad=bad) for a in args]
    if "--cluster" not in full:
        full += ["--cluster", "1x4"]
    rc, out, err = run(capsys, *full, "--baseline", "fifo", "--quiet")
    assert rc == 2, err
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ")
    assert message in err


def test_a_build_without_the_reader_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "slurm_sched.advisor.load", None)
    path = write_history(tmp_path / "h.json", history(1))
    rc, _, err = run(capsys, "--sacct", str(path), *BASE, "--quiet")
    assert rc == 1
    assert err.startswith("error: the accounting reader is missing from this build")


def test_an_unknown_baseline_is_refused_before_reading(hist: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(capsys, "--sacct", hist, "--cluster", "1x4", "--baseline", "no-such")
    assert rc == 2
    assert err.startswith("error: field 'policy' = 'no-such': unknown policy; known: fifo")
    assert "reading" not in err
