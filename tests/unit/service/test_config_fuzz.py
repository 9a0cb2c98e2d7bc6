"""Fuzzing the daemon config loader: any file gives a ServiceConfig or a one-line InputError
naming the file, never a crash.

5,000 Hypothesis examples, each checking two files: a TOML document over the known settings
and sections (plus unknown keys, pydantic-settings' own ``_init`` keyword names, and values of
every TOML type: huge and non-finite numbers, dates, arrays, inline tables), and a mutation of
a valid config at the byte level (invalid UTF-8 included). A loaded config must validate again
from its own dump.

Cases are built from one drawn seed with ``random.Random`` (Hypothesis costs about 1-2 ms per
example on a busy 2-core machine whatever the test does; a failure prints the seed, which
reproduces it).
"""

from __future__ import annotations

import inspect
import json
import os
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_settings import BaseSettings

from slurm_sched.errors import InputError
from slurm_sched.service.config import ServiceConfig, load_config

FUZZ = settings(max_examples=5000, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])
SEEDS = st.integers(min_value=0, max_value=2**63)

TOP = list(ServiceConfig.model_fields)
SECTIONS = {"safety": ["min_runtime_before_preempt_s", "max_preemptions_per_cycle",
                       "loop_preemptions", "loop_window_s"],
            "observability": ["decision_log", "metrics_host", "metrics_port", "log_level"]}
#: Keyword arguments of pydantic-settings' BaseSettings.__init__ (``_env_file``,
#: ``_cli_parse_args``, ``_secrets_dir``...). load_config passes the TOML table as keyword
#: arguments, so a config file can set them: ``_cli_parse_args = true`` parses the daemon's own
#: command line and exits (SystemExit), ``_env_file``/``_secrets_dir`` read other files. config.py
#: rejects every key that is not a field ("unknown setting"), and the fuzz loop draws them too.
SETTINGS_INIT_KEYWORDS = [p for p in inspect.signature(BaseSettings.__init__).parameters
                          if p.startswith("_")]
ODD_KEYS = ["surprise", "_", "_policy", "model_config", "__init__", "self", "values", "POLICY",
            "policy ", "\u00e9", "", *SETTINGS_INIT_KEYWORDS]
GOOD: dict[str, list[str]] = {
    "policy": ['"fifo"', '"tiresias"', '"srtf"'],
    "period_s": ["5", "0.5", "3600"],
    "lease_s": ["120", "10", "3600"],
    "managed_partitions": ['["sched"]', '["a", "b"]'],
    "slurm_conf": ['"/etc/slurm/slurm.conf"'],
    "settings_dir": ['"/var/lib/x"'],
    "state_dir": ['"/tmp/s"'],
    "dry_run": ["true", "false"],
    "command_timeout_s": ["30", "0.1"],
    "node_refresh_s": ["30", "2"],
    "min_runtime_before_preempt_s": ["0", "300"],
    "max_preemptions_per_cycle": ["0", "8"],
    "loop_preemptions": ["1", "4"],
    "loop_window_s": ["3600", "0.5"],
    "decision_log": ['"/tmp/d.jsonl"'],
    "metrics_host": ['"127.0.0.1"', '"::"'],
    "metrics_port": ["9810", "1", "65535"],
    "log_level": ['"info"', '"DEBUG"'],
}
ANY = ["0", "-1", "1", "9223372036854775807", "-9223372036854775808", "99999999999999999999",
       "1e400", "inf", "-inf", "nan", "+nan", "-0.0", "1_000", "0x10", "0o7", "0b1", "1.5",
       "true", "false", '""', '" "', '"fastest"', '"\\u00e9"', '"\\ud800"', '"a\\nb"', "'lit'",
       '"""multi\nline"""', "1979-05-27T07:32:00Z", "1979-05-27", "07:32:00", "[]", "[1, \"a\"]",
       '["", " "]', "[[1], [2]]", "{}", "{ a = 1 }", '{ policy = "fifo" }', "[1,]", "=", "",
       '"' + "x" * 300 + '"', "65536", "3601", "9"]


def _value(rng: random.Random, key: str, clean: bool) -> str:
    if key in GOOD and (clean or rng.random() < 0.7):
        return rng.choice(GOOD[key])
    return rng.choice(ANY)


def _key(rng: random.Random, names: list[str], clean: bool) -> str:
    name = rng.choice(names) if clean or rng.random() < 0.9 else rng.choice(ODD_KEYS)
    return name if name.isidentifier() and rng.random() < 0.9 else json.dumps(name)


def _document(rng: random.Random) -> str:
    clean = rng.random() < 0.4  # known keys, good values, each once
    lines = []
    top = [n for n in TOP if n not in SECTIONS]
    for k in rng.sample(top, rng.randint(0, 5)) if clean else [
            _key(rng, top, clean) for _ in range(rng.randint(0, 5))]:
        lines.append(f"{k} = {_value(rng, k.strip(chr(34)), clean)}")
    for section, names in SECTIONS.items():
        if rng.random() < 0.5:
            continue
        if not clean and rng.random() < 0.15:  # a section as a plain value or inline table
            lines.append(f"{section} = {rng.choice(ANY)}")
            continue
        lines.append(f"[{section}]")
        for k in rng.sample(names, rng.randint(0, 4)) if clean else [
                _key(rng, names, clean) for _ in range(rng.randint(0, 4))]:
            lines.append(f"{k} = {_value(rng, k.strip(chr(34)), clean)}")
    if not clean and rng.random() < 0.05:
        lines.append(rng.choice(["[safety]", "[[safety]]", "[observability.x]", "[", "a.b = 1"]))
    return "\n".join(lines) + rng.choice(["", "\n", "\r\n"])


_VALID = (
    b'policy = "fifo"\nperiod_s = 2\nmanaged_partitions = ["sched"]\n'
    b"[safety]\nmin_runtime_before_preempt_s = 300\nloop_preemptions = 3\n"
    b'[observability]\nlog_level = "info"\nmetrics_port = 9810\n'
)
_BYTES = [b"\xff", b"\xc3", b"\x00", b"\xef\xbb\xbf", b"\r", b"\n", b"=", b'"', b"[", b"]",
          b"#", b"'", b".", b" ", b"\xed\xa0\x80"]


def _mutation(rng: random.Random) -> bytes:
    data = bytearray(_VALID)
    for _ in range(rng.randint(1, 5)):
        pos = rng.randint(0, len(data))
        chunk = rng.choice(_BYTES) if rng.random() < 0.7 else rng.randbytes(rng.randint(1, 3))
        if rng.random() < 0.5:
            data[pos:pos] = chunk
        else:
            data[pos:pos + len(chunk)] = chunk
    return bytes(data)


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    # a new file per case, in memory where /dev/shm exists (overwriting a file can cost ms)
    shm = Path("/dev/shm")
    base = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="fuzz-config-", dir=base) as d:
        yield Path(d)


@pytest.fixture(autouse=True, scope="module")
def _no_settings_from_the_environment() -> Iterator[None]:
    saved = {k: v for k, v in os.environ.items() if k.startswith("SLURM_SCHED_")}
    for k in saved:
        del os.environ[k]
    yield
    os.environ.update(saved)


def _check(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    try:
        cfg = load_config(path)
    except InputError as exc:
        text = str(exc)
        assert text.startswith(str(path)) and "\n" not in text, text
        return
    finally:
        path.unlink()
    dumped: dict[str, Any] = cfg.model_dump()
    assert ServiceConfig(**dumped) == cfg


@FUZZ
@given(SEEDS)
def test_any_config_file_loads_or_fails_with_an_input_error(workdir, seed):
    rng = random.Random(seed)
    _check(workdir / "doc.toml", _document(rng).encode("utf-8", errors="surrogatepass"))
    _check(workdir / "mut.toml", _mutation(rng))


def test_the_generators_reach_both_outcomes(workdir):
    rng = random.Random(3)
    ok = bad = 0
    for make in (lambda: _document(rng).encode(), lambda: _mutation(rng)):
        for _ in range(300):
            path = workdir / "t.toml"
            path.write_bytes(make())
            try:
                load_config(path)
                ok += 1
            except InputError:
                bad += 1
            path.unlink()
    assert ok > 60 and bad > 60, (ok, bad)


def test_settings_init_keywords_are_unknown_settings(workdir):
    accepted = []
    for key in SETTINGS_INIT_KEYWORDS:
        path = workdir / "init.toml"
        path.write_text(f"{key} = true\n")
        try:
            load_config(path)
            accepted.append(key)
        except InputError as exc:
            if "unknown setting" not in str(exc):
                accepted.append(key)
        except BaseException:  # _cli_parse_args parses sys.argv and exits (SystemExit)
            accepted.append(key)
        finally:
            path.unlink()
    assert not accepted, f"config keys taken as BaseSettings options: {accepted}"
