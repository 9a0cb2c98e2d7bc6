"""The CLI: results, JSON keys, plot, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from slurm_sched.cli import main

JSON_KEYS = {"policy", "jobs", "avg_jct_s", "median_jct_s", "p99_jct_s", "avg_queue_s",
             "makespan_s", "gpu_util", "lower_bound_jct_s"}


def run(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def write(tmp_path, text: str, name: str = "t.csv"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


CANON = "job_id,submit_time_s,num_gpus,duration_s\na,0,2,100\nb,10,4,50\nc,20,2,30\n"


def test_compare_json_has_every_key_and_the_hand_computed_jct(tmp_path, capsys):
    trace = write(tmp_path, CANON)
    rc, out, _ = run(capsys, "compare", "--trace", trace, "--policies", "fifo,sjf",
                     "--cluster", "1x4", "--restart-overhead-s", "0", "--format", "json",
                     "--quiet")
    assert rc == 0
    rows = json.loads(out)
    assert [r["policy"] for r in rows] == ["fifo", "sjf"]
    assert set(rows[0]) >= JSON_KEYS
    assert rows[0]["avg_jct_s"] == pytest.approx((100 + 140 + 160) / 3)
    assert rows[1]["avg_jct_s"] == pytest.approx((100 + 140 + 30) / 3)


def test_compare_table_and_plot(tmp_path, capsys):
    plot = tmp_path / "cdf.png"
    rc, out, err = run(capsys, "compare", "--trace", "tiresias/60_job.csv", "--policies",
                       "fifo,tiresias", "--cluster", "4x8", "--plot", str(plot))
    assert rc == 0
    assert "avg JCT (h)" in out and "tiresias" in out
    assert plot.stat().st_size > 10_000
    assert "60/60 jobs done" in err  # progress output


def test_policies_lists_every_registered_name(capsys):
    from slurm_sched.policy import registry

    rc, out, _ = run(capsys, "policies")
    assert rc == 0
    for name in registry.names():
        assert name in out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("job_id,submit_time_s,num_gpus,duration_s\na,0,2,100\nb,10,x,50\n",
         ":3: field 'num_gpus' = 'x'"),
        ("job_id,submit_time_s,num_gpus,duration_s\na,0,2,-5\n", ":2: field 'duration_s' = '-5'"),
        ("job_id,submit_time_s,duration_s\na,0,100\n", "num_gpus"),
    ],
)
def test_malformed_trace_row_is_one_line_exit_2(tmp_path, capsys, text, expected):
    trace = write(tmp_path, text)
    rc, _, err = run(capsys, "simulate", "--trace", trace, "--policy", "fifo", "--cluster", "1x4")
    assert rc == 2
    assert expected in err
    assert trace in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--cluster", "4by4"], "field 'cluster' = '4by4'"),
        (["--policy", "fastest"], "field 'policy' = 'fastest'"),
        (["--limit", "0"], "--limit"),
        (["--trace", "/no/such/file.csv"], "field 'trace' = '/no/such/file.csv'"),
    ],
)
def test_bad_cli_values_are_one_line_exit_2(capsys, args, expected):
    base = {"--trace": "tiresias/60_job.csv", "--policy": "fifo", "--cluster": "2x4"}
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    rc, _, err = run(capsys, "simulate", *[x for kv in base.items() for x in kv])
    assert rc == 2
    assert expected in err
    assert len(err.strip().splitlines()) == 1


def test_console_script_exit_code_without_traceback(tmp_path):
    """Through a real process: what a user sees."""
    trace = write(tmp_path, "job_id,submit_time_s,num_gpus,duration_s\na,zero,1,5\n")
    p = subprocess.run([sys.executable, "-m", "slurm_sched.cli", "simulate", "--trace", trace,
                        "--policy", "fifo", "--cluster", "1x1"], capture_output=True, text=True)
    assert p.returncode == 2
    assert p.stderr.startswith("error: ") and "submit_time_s" in p.stderr
    assert "Traceback" not in p.stderr


def test_policy_option_reaches_only_the_policies_that_take_it(tmp_path, capsys):
    trace = write(tmp_path, CANON)
    args = ["compare", "--trace", trace, "--policies", "fifo,tiresias", "--cluster", "1x4",
            "--restart-overhead-s", "0", "--format", "json", "--quiet"]
    rc, out, _ = run(capsys, *args)
    assert rc == 0
    default = {r["policy"]: r for r in json.loads(out)}
    # a 10 GPU-s first queue demotes job a (2 GPUs) after 5 s, so b preempts it
    rc, out, _ = run(capsys, *args, "-o", "thresholds_gpu_s=[10]")
    assert rc == 0
    tuned = {r["policy"]: r for r in json.loads(out)}
    assert tuned["fifo"] == default["fifo"]
    assert default["tiresias"]["preemptions"] == 0 and tuned["tiresias"]["preemptions"] == 2


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        ("round_s=5", "field '--option' = 'round_s=5': no policy of fifo, tiresias takes"),
        ("nokey", "field '--option' = 'nokey': expected KEY=VALUE"),
        ("thresholds_gpu_s=abc", "field 'policy option' = 'thresholds_gpu_s=abc': policy "
                                 "'tiresias' refused its options"),
    ],
)
def test_bad_policy_option_is_one_line_exit_2(tmp_path, capsys, option, expected):
    trace = write(tmp_path, CANON)
    rc, out, err = run(capsys, "compare", "--trace", trace, "--policies", "fifo,tiresias",
                       "--cluster", "1x4", "--quiet", "-o", option)
    assert rc == 2 and out == ""
    assert err.startswith(f"error: {expected}") and err.count("\n") == 1, err


def test_registry_options_come_from_the_constructor():
    from slurm_sched.errors import InputError
    from slurm_sched.policy import registry

    assert "round_s" in registry.info("sia").options
    assert registry.create("sia", {"round_s": 5.0}).round_s == 5.0
    # a variant keeps what defines it (refused by name: its base policy takes it) and still
    # takes the others
    assert registry.create("a-srpt-tau0").tau == 0.0
    assert registry.create("a-srpt-tau0", {"keep_predictions": True}).tau == 0.0
    for name, fixed in (("a-srpt-tau0", "tau"), ("rubick-e", "variant"),
                        ("muri-l-worst-ordering", "ordering")):
        assert fixed not in registry.info(name).options
        refused = f"has no option '{fixed}'; the variant sets '{fixed}' itself"
        with pytest.raises(InputError, match=refused):
            registry.create(name, {fixed: 1})
    assert registry.create("a-srpt", {"tau": 2.0}).tau == 2.0
    assert registry.info("fifo").options == ()
    with pytest.raises(InputError, match="has no option 'x'"):
        registry.create("fifo", {"x": 1})
    # a subclass passing **options on to its base takes the base's options too
    assert registry.info("sjf-ffs").options == (
        "interference", "sub_batch", "memory_gb", "a2", "sjf_key", "placement_aware")
    ffs = registry.create("sjf-ffs", {"sub_batch": "full", "memory_gb": None})
    assert (ffs.sub_batch, ffs.memory_gb) == ("full", None)
    with pytest.raises(InputError, match="has no option 'x'"):
        registry.create("sjf-ffs", {"x": 1})
    # ... except those the subclass sets itself (Muri-S's know_duration, no-trade's trading)
    assert registry.create("muri-s", {"interval_s": 5.0}).interval_s == 5.0
    for name, fixed in (("muri-s", "know_duration"), ("gandiva-fair-notrade", "trading")):
        assert fixed not in registry.info(name).options
        with pytest.raises(InputError, match=f"has no option '{fixed}'; the variant sets"):
            registry.create(name, {fixed: True})


def test_policies_options_flag_lists_options(capsys):
    rc, out, _ = run(capsys, "policies", "--options")
    assert rc == 0
    assert "options: catalog, restart_cost_s, round_s" in out


def test_every_listed_command_loads_and_its_help_line_is_its_own():
    from slurm_sched.cli import COMMANDS, load_command

    for name, (_, help_line) in COMMANDS.items():
        command = load_command(name)
        own = " ".join((command.help or "").split("\n\n")[0].split())
        assert own == help_line, name


def test_help_imports_no_command_module():
    import subprocess
    import sys

    code = ("import sys\nfrom slurm_sched.cli import main\nmain(['--help'])\n"
            "print(sorted(m for m in sys.modules if m.startswith('slurm_sched.') "
            "and m.split('.')[1] not in ('cli', 'errors', 'native')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout
