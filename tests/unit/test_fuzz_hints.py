"""Fuzzing the job-hint parser: any comment gives hints or a one-line HintError, never a crash.

5,000 Hypothesis examples, each checking three comments: arbitrary text (Hypothesis' own
unicode strategy), a JSON document over the known keys with hostile values (NaN/Infinity tokens,
huge and boundary numbers, wrong types, deep nesting, duplicate keys, bad escapes), and a
character-level mutation of a valid comment. Accepted hints must survive encode -> parse and
build a JobSpec.

The structured comments are built from one drawn seed with ``random.Random``: Hypothesis costs
about 1-2 ms per example on a busy 2-core machine whatever the test does, so few draws and
several cases per example keep 15,000 cases to seconds; a failure prints the seed, which
reproduces it.
"""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_sched.protocol.hints import (
    MAX_COMMENT_BYTES,
    HintError,
    JobHints,
    encode_hints,
    hints_to_jobspec,
    parse_hints,
)

FUZZ = settings(max_examples=5000, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])
SEEDS = st.integers(min_value=0, max_value=2**63)

KEYS = [*JobHints.model_fields, "V", "user", "", "model ", "\u00e9", "duration_s\x00", "v\u0000"]
SCALARS: list[Any] = [
    None, True, False, 0, 1, -1, 2, 7, 2**31, 2**53, 2**53 + 1, 10**9, 10**9 + 1, 10**12,
    10**12 + 1, 10**400, -(10**30), 0.0, -0.0, 1e-320, 0.5, 1.0, 1.5, 1e7, 1e7 + 1, 1e9,
    1e9 + 1e-6, 1e308, float("nan"), float("inf"), float("-inf"), "", "dp", "2-2-1",
    "resnet50", "a" * 64, "a" * 65, "-x", "zero-offload", "ZERO", "x y", "\u00e9", "\ud800",
    "\x00", "1", "true", "null", [], {},
]
RAW_TOKENS = ["NaN", "Infinity", "-Infinity", "1e999", "-0", "01", "1.", ".5", "0x10", "tru",
              "\"\\ud800\"", "\"\\u00\"", "[", "]", "{", "}", ",", ":", "//", "'a'"]


def _value(rng: random.Random, depth: int = 0) -> Any:
    r = rng.random()
    if r < 0.6 or depth > 3:
        v = rng.choice(SCALARS)
        if isinstance(v, float) and rng.random() < 0.3:
            v = rng.uniform(-1e10, 1e10)
        elif isinstance(v, int) and not isinstance(v, bool) and rng.random() < 0.3:
            v = rng.randint(-(2**64), 2**64)
        return v
    if r < 0.85:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 10))]
    return {rng.choice(KEYS): _value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


#: values each known key accepts, so that a fair share of documents is valid
VALID: dict[str, list[Any]] = {
    "v": [1],
    "model": ["resnet50", "gpt2-xl", "a/b:c+d", "x" * 64, None],
    "batch_size": [1, 64, 256, 10**9, None],
    "iterations": [1, 1000, 10**12, None],
    "duration_s": [0.001, 1, 5400.5, 1e9, None],
    "stage_times_ms": [[1.5], [1, 2, 0.25], [1e7] * 8, None],
    "plans": [["dp"], ["zero-offload", "2-2-1"], ["gc"] * 16, None],
    "tickets": [0.5, 1, 1e6, None],
    "guaranteed": [True, False, None],
}


def _document(rng: random.Random) -> str:
    clean = rng.random() < 0.4  # a plausible comment: known keys, good values, no tricks
    items = []
    for _ in range(rng.randint(0, 7)):
        key = rng.choice(list(VALID) if clean else KEYS)
        good = key in VALID and (clean or rng.random() < 0.8)
        items.append((key, rng.choice(VALID[key]) if good else _value(rng)))
    if clean or rng.random() < 0.5:  # no duplicate keys
        items = list(dict(items).items())
    if not clean and rng.random() < 0.3:  # deep nesting
        d = rng.randint(10, 3000)
        items.append((rng.choice(KEYS), "@DEEP@"))
        text_deep = "[" * d + "1" + "]" * d
    else:
        text_deep = ""
    parts = []
    for k, v in items:  # written by hand: keeps duplicate keys
        value = text_deep if v == "@DEEP@" else json.dumps(
            v, ensure_ascii=rng.random() < 0.5, allow_nan=True)
        parts.append(f"{json.dumps(k)}:{value}")
    text = "{" + ",".join(parts) + "}"
    if not clean and rng.random() < 0.2:  # a raw token somewhere
        pos = rng.randint(0, len(text))
        text = text[:pos] + rng.choice(RAW_TOKENS) + text[pos:]
    if not clean and rng.random() < 0.1:
        text = rng.choice(["", " ", "\t\n", "\ufeff", "\x00"]) + text
    return text


def _check(comment: str) -> None:
    try:
        hints = parse_hints(comment, source="job 1")
    except HintError as exc:
        line = exc.one_line()
        assert line.startswith("job 1: hint") and "\n" not in line, line
        return
    # accepted: round-trips and makes a JobSpec
    assert parse_hints(encode_hints(hints)) == hints
    spec = hints_to_jobspec("1", 0.0, 1, "u", None, hints)
    assert spec.duration_s > 0


_VALID = [
    '{"v":1,"model":"resnet50","batch_size":256,"duration_s":5400}',
    '{"iterations":1000,"stage_times_ms":[1.5,2,0.5],"plans":["dp","2-2-1"],"tickets":3}',
    '{"guaranteed":true,"duration_s":1e9,"batch_size":1000000000}',
    '  {"model": null, "plans": ["zero-dp"]}\n',
]
_CHARS = '{}[]",:0123456789.eE+-tfnul \\\n\t\x00\u00e9\ud800\U0001f600a'


def _mutation(rng: random.Random) -> str:
    text = rng.choice(_VALID)
    for _ in range(rng.randint(1, 6)):
        pos = rng.randint(0, len(text))
        op = rng.randrange(4)
        ch = rng.choice(_CHARS)
        if op == 0:
            text = text[:pos] + ch + text[pos:]
        elif op == 1:
            text = text[:pos] + text[pos + 1:]
        elif op == 2:
            text = text[:pos] + ch + text[pos + 1:]
        else:  # duplicate a slice: duplicate keys, nested brackets
            text = text[:pos] + text[pos:pos + rng.randint(1, 20)] + text[pos:]
    return text


@FUZZ
@given(st.text(max_size=MAX_COMMENT_BYTES + 50), SEEDS)
def test_any_comment_parses_or_fails_with_a_hint_error(text, seed):
    rng = random.Random(seed)
    _check(text)
    _check(_document(rng))
    _check(_mutation(rng))


def test_the_generators_reach_both_outcomes():
    """The fuzz cases are not all rejected at the first byte: a fair share parses."""
    rng = random.Random(1)
    outcomes = {"ok": 0, "error": 0}
    for make in (_document, _mutation):
        for _ in range(400):
            try:
                parse_hints(make(rng))
                outcomes["ok"] += 1
            except HintError:
                outcomes["error"] += 1
    assert outcomes["ok"] > 80 and outcomes["error"] > 80, outcomes
