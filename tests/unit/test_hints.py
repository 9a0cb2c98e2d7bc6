"""Job hints in ``--comment``: parsing, errors, encoding, schema file, Lua plugin parity."""

from __future__ import annotations

import json
import operator
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_sched.errors import InputError
from slurm_sched.protocol.hints import (
    DEFAULT_DURATION_S,
    MAX_COMMENT_BYTES,
    HintError,
    JobHints,
    duration_from_time_limit,
    encode_hints,
    hints_to_jobspec,
    parse_hints,
    schema_json,
)

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "plugin" / "job_submit.lua"
SCHEMA_FILE = ROOT / "plugin" / "hints.schema.json"
LUA = shutil.which("lua5.1") or shutil.which("lua5.3") or shutil.which("lua")

FULL = (
    '{"v":1,"model":"resnet50","batch_size":256,"iterations":1000,"duration_s":5400.5,'
    '"stage_times_ms":[1.5,20,3,4],"plans":["dp","zero-dp","2-2-1"],"tickets":2,'
    '"guaranteed":true}'
)


def test_full_hint_parses_every_field():
    h = parse_hints(FULL)
    assert h.model == "resnet50"
    assert h.batch_size == 256
    assert h.iterations == 1000
    assert h.duration_s == 5400.5
    assert h.stage_times_ms == [1.5, 20.0, 3.0, 4.0]
    assert h.plans == ["dp", "zero-dp", "2-2-1"]
    assert h.tickets == 2.0
    assert h.guaranteed is True


@pytest.mark.parametrize("comment", [None, "", "   ", "\n\t\r ", "{}", '{"v":1}', '{"model":null}'])
def test_no_hints_means_all_defaults(comment):
    assert parse_hints(comment) == JobHints()


def test_v_is_optional_and_unknown_fields_default_to_none():
    h = parse_hints(' {"batch_size": 8} ')
    assert h.v == 1 and h.batch_size == 8 and h.model is None


@pytest.mark.parametrize(
    ("comment", "field", "text"),
    [
        ('{"v":1,"batch_size":-3}', "batch_size", "hint 'batch_size' = -3: must be >= 1"),
        ('{"batch_size":0}', "batch_size", "must be >= 1"),
        ('{"batch_size":2.5}', "batch_size", "must be an integer"),
        ('{"batch_size":1e3}', "batch_size", "must be an integer"),
        ('{"batch_size":"64"}', "batch_size", "must be an integer"),
        ('{"batch_size":true}', "batch_size", "must be an integer"),
        ('{"batch_size":1000000001}', "batch_size", "must be <= 1000000000"),
        ('{"iterations":0}', "iterations", "'iterations' = 0: must be >= 1"),
        ('{"duration_s":0}', "duration_s", "'duration_s' = 0: must be > 0"),
        ('{"duration_s":-1.5}', "duration_s", "must be > 0"),
        ('{"duration_s":1e400}', "duration_s", "must be finite"),
        ('{"duration_s":"1h"}', "duration_s", "must be a number"),
        ('{"duration_s":1' + "0" * 400 + "}", "duration_s", "is out of range"),
        ('{"model":""}', "model", "must match"),
        ('{"model":"res net"}', "model", "must match"),
        ('{"model":"abc\\n"}', "model", "must match"),
        ('{"model":"' + "m" * 65 + '"}', "model", "at most 64 characters"),
        ('{"model":42}', "model", "must be a string"),
        ('{"stage_times_ms":[1,-2]}', "stage_times_ms", "item 1 must be > 0"),
        ('{"stage_times_ms":[]}', "stage_times_ms", "at least 1 item"),
        ('{"stage_times_ms":[1,1,1,1,1,1,1,1,1]}', "stage_times_ms", "at most 8 items"),
        ('{"stage_times_ms":5}', "stage_times_ms", "must be a list"),
        ('{"plans":["DP"]}', "plans", "item 0 must match"),
        ('{"plans":"dp"}', "plans", "must be a list"),
        ('{"tickets":0}', "tickets", "must be > 0"),
        ('{"guaranteed":1}', "guaranteed", "must be true or false"),
        ('{"guaranteed":"yes"}', "guaranteed", "'guaranteed' = \"yes\""),
        ('{"v":2}', "v", "unsupported schema version"),
        ('{"v":1.0}', "v", "unsupported schema version"),
        ('{"v":true}', "v", "unsupported schema version"),
        ('{"v":null}', "v", "unsupported schema version"),
        ('{"batchsize":8}', "batchsize", "unknown hint"),
        ('{"user":"alice"}', "user", "unknown hint"),
        ('{"batch_size":8,"batch_size":9}', "batch_size", "duplicate key"),
    ],
)
def test_bad_hint_names_field_and_value(comment, field, text):
    with pytest.raises(HintError) as e:
        parse_hints(comment)
    assert isinstance(e.value, InputError)
    assert e.value.field == field
    assert text in str(e.value)
    assert str(e.value).startswith(f"hint '{field}' = ")


@pytest.mark.parametrize(
    ("comment", "text"),
    [
        ("resnet50", "not valid JSON"),
        ("{", "not valid JSON"),
        ('{"batch_size":8,}', "not valid JSON"),
        ("{'batch_size':8}", "not valid JSON"),
        ('{"duration_s":NaN}', "not valid JSON"),
        ('{"duration_s":Infinity}', "not valid JSON"),
        ('{"a":1} x', "not valid JSON"),
        ("[1,2]", "must be a JSON object"),
        ("42", "must be a JSON object"),
        ('"x"', "must be a JSON object"),
        ("null", "must be a JSON object"),
        (" " * (MAX_COMMENT_BYTES + 1), f"the limit is {MAX_COMMENT_BYTES}"),
    ],
)
def test_bad_document_is_an_input_error_without_field(comment, text):
    with pytest.raises(InputError) as e:
        parse_hints(comment)
    assert e.value.field is None
    assert str(e.value).startswith("hint: ")
    assert text in str(e.value)


def test_order_of_checks_version_then_unknown_then_schema_order():
    with pytest.raises(HintError) as e:
        parse_hints('{"zz":1,"v":2}')
    assert e.value.field == "v"
    with pytest.raises(HintError) as e:
        parse_hints('{"tickets":-1,"zz":1,"yy":2}')
    assert e.value.field == "zz"
    with pytest.raises(HintError) as e:
        parse_hints('{"tickets":-1,"batch_size":-1}')
    assert e.value.field == "batch_size"


def test_source_prefixes_the_message():
    with pytest.raises(HintError) as e:
        parse_hints('{"batch_size":-3}', source="job 42")
    assert str(e.value) == "job 42: hint 'batch_size' = -3: must be >= 1"


def test_limit_is_in_utf8_bytes():
    pad = 1024 - len('{"model":null,"zz":""}')
    ok = '{"model":null,"zz":"' + "x" * pad + '"}'
    assert len(ok.encode()) == MAX_COMMENT_BYTES
    with pytest.raises(HintError, match="unknown hint"):  # passes the size check
        parse_hints(ok)
    too_long = '{"model":null,"zz":"' + "é" * pad + '"}'
    with pytest.raises(HintError, match="the limit is 1024"):
        parse_hints(too_long)


def test_encode_is_compact_and_round_trips():
    h = parse_hints(FULL)
    text = encode_hints(h)
    assert " " not in text and text.startswith('{"v":1,')
    assert parse_hints(text) == h
    assert encode_hints(JobHints()) == '{"v":1}'
    assert encode_hints(JobHints(batch_size=8)) == '{"v":1,"batch_size":8}'


def test_encode_refuses_more_than_1024_bytes():
    h = JobHints(plans=["a" * 16] * 16, stage_times_ms=[1.0000000000000002] * 8, model="m" * 64)
    assert len(encode_hints(h)) <= MAX_COMMENT_BYTES  # the largest sane hint fits
    big = JobHints.model_construct(model="m" * 2000)  # bypasses validation on purpose
    with pytest.raises(HintError, match="the limit is 1024"):
        encode_hints(big)


@st.composite
def valid_hints(draw: st.DrawFn) -> JobHints:
    pos = st.floats(min_value=1e-6, max_value=1e6, allow_nan=False, allow_infinity=False)
    lower = "abcdefghijklmnopqrstuvwxyz0123456789"
    alnum = lower + "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    code = st.builds(operator.add, st.sampled_from(lower), st.text(lower + "-", max_size=15))
    fields = {
        "model": st.builds(
            operator.add, st.sampled_from(alnum), st.text(alnum + "._:/+-", max_size=40)
        ),
        "batch_size": st.integers(1, 10**9),
        "iterations": st.integers(1, 10**12),
        "duration_s": pos,
        "stage_times_ms": st.lists(pos, min_size=1, max_size=8),
        "plans": st.lists(code, min_size=1, max_size=4),
        "tickets": pos,
        "guaranteed": st.booleans(),
    }
    chosen = draw(st.sets(st.sampled_from(sorted(fields))))
    return JobHints.model_validate({k: draw(fields[k]) for k in chosen})


@settings(max_examples=200)
@given(valid_hints())
def test_round_trip_property(h):
    assert parse_hints(encode_hints(h)) == h


def test_schema_file_is_current():
    """plugin/hints.schema.json is regenerated with: python -m slurm_sched.protocol.hints"""
    assert SCHEMA_FILE.read_text() == schema_json(), (
        "run: python -m slurm_sched.protocol.hints > plugin/hints.schema.json"
    )
    schema = json.loads(SCHEMA_FILE.read_text())
    assert schema["additionalProperties"] is False
    assert list(schema["properties"]) == list(JobHints.model_fields)


def test_hints_to_jobspec_uses_hints_and_default_duration():
    h = parse_hints(
        '{"model":"bert","batch_size":32,"plans":["dp"],"tickets":3,"guaranteed":false}'
    )
    spec = hints_to_jobspec("7", 12.0, 4, "alice", "a100", h, default_duration_s=600.0)
    assert (spec.job_id, spec.num_gpus, spec.user, spec.gpu_type) == ("7", 4, "alice", "a100")
    assert spec.duration_s == 600.0 and spec.attrs["duration_source"] == "default"
    assert spec.model == "bert" and spec.batch_size == 32
    assert spec.attrs["plans"] == ("dp",) and spec.attrs["tickets"] == 3.0
    assert spec.attrs["guaranteed"] is False
    spec = hints_to_jobspec("8", 0.0, 1, "bob", None, parse_hints(FULL))
    assert spec.duration_s == 5400.5 and spec.attrs["duration_source"] == "hint"
    assert spec.stage_times_ms == (1.5, 20.0, 3.0, 4.0) and spec.iterations == 1000
    assert hints_to_jobspec("9", 0.0, 1, "c", None, JobHints()).duration_s == DEFAULT_DURATION_S
    with pytest.raises(ValueError):
        hints_to_jobspec("9", 0.0, 1, "c", None, JobHints(), default_duration_s=0.0)


def test_duration_from_time_limit():
    assert duration_from_time_limit(7200) == 7200.0
    assert duration_from_time_limit(None) == DEFAULT_DURATION_S
    assert duration_from_time_limit(0) == DEFAULT_DURATION_S
    assert duration_from_time_limit(float("inf")) == DEFAULT_DURATION_S


# ---------------------------------------------------------------------------- fuzz
_KEYS = [*JobHints.model_fields, "user", "x", "", "batch_size ", "\u00e9"]
_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
)
_json_values = st.recursive(
    _json_scalars,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def hint_like_text(draw: st.DrawFn) -> str:
    """Mostly hint-shaped JSON (right keys, wrong values), sometimes mutated or plain text."""
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return draw(st.text(max_size=80))
    obj = draw(st.dictionaries(st.sampled_from(_KEYS), _json_values, max_size=5))
    text = json.dumps(obj, separators=draw(st.sampled_from([(",", ":"), (", ", ": ")])))
    if kind == 3 and text:
        i = draw(st.integers(0, len(text) - 1))
        text = text[:i] + draw(st.text(max_size=3)) + text[i + draw(st.integers(0, 2)) :]
    return text


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(hint_like_text())
def test_fuzz_parse_only_raises_input_error(comment):
    try:
        h = parse_hints(comment)
    except InputError as e:
        assert str(e).startswith("hint")
        assert "\n" not in str(e) and "\r" not in str(e)
    else:
        assert parse_hints(encode_hints(h)) == h


# ---------------------------------------------------------------------------- Lua parity
_LUA_DRIVER = """
slurm = {SUCCESS = 0, ERROR = -1, log_info = function() end, log_user = function() end}
dofile(arg[1])
local function hex(s)
  return (string.gsub(s, ".", function(c) return string.format("%02x", string.byte(c)) end))
end
local f = assert(io.open(arg[2], "rb"))
while true do
  local n = f:read("*l")
  if not n then break end
  local comment = f:read(tonumber(n)) or ""
  f:read("*l")
  local ok, field, msg = slurm_sched_check_hints(comment)
  if ok then print("ok") else print("err " .. (field and hex(field) or "-") .. " " .. msg) end
end
"""


def _python_verdict(comment: str) -> str:
    try:
        parse_hints(comment)
    except HintError as e:
        field = e.field.encode("utf-8", "surrogatepass").hex() if e.field is not None else "-"
        return f"err {field}"
    return "ok"


def _lua_verdicts(cases: list[str], tmp_path: Path) -> list[str]:
    assert LUA is not None
    driver = tmp_path / "driver.lua"
    driver.write_text(_LUA_DRIVER)
    data = tmp_path / "cases.bin"
    with data.open("wb") as f:
        for case in cases:
            raw = case.encode("utf-8", "surrogatepass")
            f.write(b"%d\n" % len(raw) + raw + b"\n")
    proc = subprocess.run(
        [LUA, str(driver), str(PLUGIN), str(data)],
        capture_output=True,
        check=True,
        timeout=60,
    )
    lines = proc.stdout.decode("utf-8", "replace").split("\n")[:-1]
    assert len(lines) == len(cases), proc.stderr.decode()
    return [" ".join(line.split(" ")[:2]) for line in lines]


def _assert_same_verdicts(cases: list[str], tmp_path: Path) -> None:
    lua = _lua_verdicts(cases, tmp_path)
    for case, got in zip(cases, lua, strict=True):
        assert got == _python_verdict(case), f"Lua and Python disagree on {case!r}"


CURATED = [
    FULL,
    "",
    "  ",
    "{}",
    '{"v":1,"batch_size":-3}',
    '{"model":"a\\u0062c","plans":["d\\u0070"]}',
    '{"b\\u0061tch_size":-1}',
    '{"model":"\\ud83d\\ude00"}',
    '{"model":"\\ud800"}',
    '{"\\ud800":1}',
    '{"model":"x\\/y"}',
    '{"model":"a\\qb"}',
    '{"model":"tab\there"}',
    '{"batch_size":01}',
    '{"batch_size":-0}',
    '{"batch_size":1.}',
    '{"batch_size":.5}',
    '{"batch_size":+1}',
    '{"duration_s":1E2}',
    '{"duration_s":1e-400}',
    '{"duration_s":-Infinity}',
    '{"batch_size":1000000000}',
    '{"iterations":1000000000000}',
    '{"iterations":1000000000001}',
    '{"stage_times_ms":[1,2,[3]]}',
    '{"plans":["dp",null]}',
    '{"a":{"b":1,"b":2}}',
    '{"a":1,"a":',
    '{"model":null,"model":null}',
    '{"v":1}\n',
    "\ufeff{}",
    '{"guaranteed":false}',
    '{"guaranteed":nul}',
    "[" * 300 + "]" * 300,
    '{"stage_times_ms":' + "[" * 200 + "]" * 200 + "}",
    " " * 1024,
    " " * 1025,
    '{"model":"' + "m" * 64 + '"}',
    '{"tickets":1000000,"tickets2":1}',
]


@pytest.mark.skipif(LUA is None, reason="no lua interpreter installed (apt-get install lua5.3)")
def test_lua_plugin_agrees_with_python_on_curated_cases(tmp_path):
    _assert_same_verdicts(CURATED, tmp_path)


@pytest.mark.skipif(LUA is None, reason="no lua interpreter installed (apt-get install lua5.3)")
@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(hint_like_text(), min_size=30, max_size=30))
def test_lua_plugin_agrees_with_python_fuzz(tmp_path, cases):
    _assert_same_verdicts(cases, tmp_path)


@pytest.mark.skipif(LUA is None, reason="no lua interpreter installed (apt-get install lua5.3)")
def test_lua_plugin_agrees_on_mutations_of_valid_hints(tmp_path):
    rng = random.Random(1234)
    alphabet = '{}[]",:0123456789.-eE tfnul\\abz_'
    cases = []
    for _ in range(400):
        text = FULL
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(text))
            op = rng.randrange(3)
            if op == 0:
                text = text[:i] + text[i + 1 :]
            elif op == 1:
                text = text[:i] + rng.choice(alphabet) + text[i:]
            else:
                text = text[:i] + rng.choice(alphabet) + text[i + 1 :]
        cases.append(text)
    _assert_same_verdicts(cases, tmp_path)


# ---------------------------------------------------------------------------- Lua hooks
_LUA_HOOKS = """
slurm = {SUCCESS = 0, ERROR = -1, NO_VAL = 4294967294,
         log_info = function() end, log_user = function() end}
dofile(arg[1])
local function show(v) if v == nil then return "nil" end return tostring(v) end
local function submit(partition, comment, priority)
  local now = os.time()
  local d = {partition = partition, comment = comment, priority = priority, begin_time = 0}
  local rc = slurm_job_submit(d, {}, 1000)
  local lease = d.begin_time == 0 and "none" or tostring(d.begin_time - now)
  print("submit " .. rc .. " " .. lease .. " " .. show(d.priority))
end
local function modify(rec_partition, new_partition, uid)
  local rc = slurm_job_modify({partition = new_partition}, {partition = rec_partition, job_id = 7},
                              {}, uid)
  print("modify " .. rc)
end
submit(nil, nil, nil)                       -- default partition: managed
submit("sched", '{"v":1,"batch_size":8}', 0) -- sbatch --hold in a managed partition
submit("direct", "free text", 0)           -- unmanaged: untouched
submit("sched", '{"v":1,"batch_size":-3}', nil) -- bad hint: rejected
submit("direct,sched", nil, nil)           -- any managed partition makes it managed
modify("sched", nil, 1000)                 -- the owner: refused
modify("sched", nil, 0)                    -- root (the scheduler): allowed
modify("direct", nil, 1000)                -- unmanaged job: allowed
modify("direct", "sched", 1000)            -- moving a job into a managed partition: refused
"""


def _plugin_lease_s() -> int:
    m = re.search(r"^local LEASE_S = (\d+) ", PLUGIN.read_text(), re.MULTILINE)
    assert m, "job_submit.lua has no 'local LEASE_S = <n> ' line (cluster.sh rewrites it)"
    return int(m.group(1))


def test_plugin_site_settings_are_the_lines_cluster_sh_rewrites():
    text = PLUGIN.read_text()
    script = (ROOT / "slurm_sched" / "slurm" / "cluster.sh").read_text()
    for name in ("MANAGED_PARTITIONS", "DEFAULT_PARTITION", "LEASE_S"):
        assert re.search(rf"^local {name} = ", text, re.MULTILINE), name
        assert f"s/^local {name} = .*/" in script, name
    assert _plugin_lease_s() == 120  # the documented default: fail-open within 2 minutes


@pytest.mark.skipif(LUA is None, reason="no lua interpreter installed (apt-get install lua5.3)")
def test_lua_submit_gives_a_lease_drops_holds_and_modify_guards_managed_jobs(tmp_path):
    driver = tmp_path / "hooks.lua"
    driver.write_text(_LUA_HOOKS)
    proc = subprocess.run(
        [LUA, str(driver), str(PLUGIN)], capture_output=True, text=True, check=True, timeout=30
    )
    lines = proc.stdout.splitlines()
    lease = _plugin_lease_s()

    def submitted(line: str) -> tuple[str, int | None, str]:
        _, rc, lease_s, prio = line.split()
        return rc, None if lease_s == "none" else int(lease_s), prio

    rc, got, prio = submitted(lines[0])
    assert rc == "0" and got in (lease, lease + 1) and prio == "nil"  # not held
    rc, got, prio = submitted(lines[1])
    assert rc == "0" and got in (lease, lease + 1) and prio == "4294967294"  # hold dropped
    assert submitted(lines[2]) == ("0", None, "0")  # unmanaged: untouched
    rc, got, _ = submitted(lines[3])
    assert rc == "-1" and got is None  # bad hint
    rc, got, _ = submitted(lines[4])
    assert rc == "0" and got in (lease, lease + 1)
    assert lines[5:] == ["modify -1", "modify 0", "modify 0", "modify -1"]
