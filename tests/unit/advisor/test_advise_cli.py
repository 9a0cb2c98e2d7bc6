"""``slurm-sched advise`` end to end: on a constructed history (through the test double of the
accounting reader), on recorded sacct output (the real reader), and its one-line errors."""

from __future__ import annotations

import html
import json
import os
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
RECORDED = Path(__file__).resolve().parents[2] / "data" / "sacct" / "recorded"
CONFIG = Path(__file__).resolve().parents[2] / "data" / "scontrol_show_config.txt"


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
    scontrol = bindir / "scontrol"  # the site's scheduling settings, read live too
    scontrol.write_text(f"#!/bin/sh\ncat {CONFIG}\n")
    scontrol.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    rc, out, err = run(capsys, "--since", "30d", *BASE, "--policies", "fifo", "--quiet",
                       "--format", "json", "--resamples", "5")
    assert rc == 0, err
    assert json.loads(out)["input"]["jobs"] == 24
    assert any(n.startswith("slurm-backfill ran with the settings of scontrol show config")
               for n in json.loads(out)["notes"])
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


def test_an_unknown_baseline_is_refused_before_reading(hist: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(capsys, "--sacct", hist, "--cluster", "1x4", "--baseline", "no-such")
    assert rc == 2
    assert err.startswith("error: field 'policy' = 'no-such': unknown policy; known: fifo")
    assert "reading" not in err


@pytest.mark.parametrize("name", ["sacct.txt", "sacct.json"])
def test_recorded_accounting_with_the_sites_slurm_config(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real reader on sacct output of the mini cluster (Slurm 24.11), slurm-backfill with
    the settings of a `scontrol show config` file."""
    rc, out, err = run(capsys, "--sacct", str(RECORDED / "24.11" / name), "--cluster",
                       "2x4:a100,2x4:v100", "--policies", "fifo", "--slurm-config",
                       str(CONFIG), "--format", "json", "--quiet", "--resamples", "10")
    assert rc == 0, err
    data = json.loads(out)
    assert data["input"]["jobs"] == 9
    assert [r["name"] for r in data["rows"]] == ["observed", "slurm-backfill", "fifo"]
    [note] = [n for n in data["notes"] if n.startswith("slurm-backfill ran with")]
    assert str(CONFIG) in note and "weight_age=" in note


def test_a_bad_slurm_config_names_the_key(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "config.txt"
    bad.write_text("PriorityWeightAge = lots\n")
    rc, _, err = run(capsys, "--sacct", str(RECORDED / "22.05" / "sacct.txt"), "--cluster",
                     "2x4", "--slurm-config", str(bad), "--quiet")
    assert rc == 2
    assert "PriorityWeightAge" in err and "lots" in err


def test_each_malformed_record_is_one_warning_in_every_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = (RECORDED / "24.11" / "sacct.txt").read_text().splitlines()
    start = lines[0].split("|").index("Start")
    bad = lines[1].split("|")
    bad[start] = "garbage"
    path = tmp_path / "sacct.txt"
    path.write_text("\n".join([lines[0], "|".join(bad), *lines[2:]]) + "\n")
    expected = f"{path}:2: field 'Start' = 'garbage': not a time"
    rc, out, err = run(capsys, "--sacct", str(path), "--cluster", "2x4:a100,2x4:v100",
                       "--policies", "fifo", "--quiet", "--resamples", "5")
    assert rc == 0
    assert [x for x in err.splitlines() if x.startswith("warning:")] == [
        f"warning: {expected} (expected YYYY-MM-DDTHH:MM:SS)"]
    assert "Malformed records skipped (1)" in out and expected in out
    page = tmp_path / "r.html"
    rc, _, _ = run(capsys, "--sacct", str(path), "--cluster", "2x4:a100,2x4:v100",
                   "--policies", "fifo", "--quiet", "--resamples", "5", "--html", str(page))
    assert rc == 0
    assert "Malformed records skipped (1)" in page.read_text()
    assert html.escape(expected) in page.read_text()
    rc, out, _ = run(capsys, "--sacct", str(path), "--cluster", "2x4:a100,2x4:v100",
                     "--policies", "fifo", "--quiet", "--resamples", "5", "--format", "json")
    data = json.loads(out)["input"]
    assert data["warnings"] == 1 and data["warning_messages"][0].startswith(expected)
    assert data["set_aside"]["malformed"] == 1
