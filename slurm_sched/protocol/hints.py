"""Job hints: the versioned JSON a user puts in ``sbatch --comment`` for the scheduler.

Slurm has no field for "what model is this job training and how long will it take", so users
pass it as a small JSON object in the job's comment (at most :data:`MAX_COMMENT_BYTES` bytes,
Slurm's comment limit)::

    sbatch --comment '{"v":1,"model":"resnet50","batch_size":256,"duration_s":5400}' train.sh

The schema is documented in ``docs/hints.md`` and exported as JSON Schema to
``plugin/hints.schema.json``. The same rules are enforced twice: at submit time by
``plugin/job_submit.lua`` (so ``sbatch`` rejects a bad hint with a one-line message) and here,
when the scheduler reads the job back. Keep both in step; ``tests/unit/test_hints.py`` runs the
Lua validator against this module when a ``lua`` interpreter is installed.

Rules, in the order they are checked (the first failure is reported):

1. the comment is at most 1024 bytes of UTF-8; empty or whitespace only means "no hints";
2. it is one JSON object (RFC 8259: no NaN/Infinity, no trailing commas) with no duplicate keys;
3. ``v``, when present, is the integer 1 (absent means 1);
4. every key is known (the first unknown key in document order is reported);
5. the known keys in schema order: type, then range. ``null`` means "not given".

The user is never a hint: it comes from the Slurm account of the job.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from slurm_sched.errors import InputError
from slurm_sched.model.job import JobSpec

SCHEMA_VERSION = 1
MAX_COMMENT_BYTES = 1024
# A job without a duration_s hint is assumed to run this long, unless the caller passes the
# job's --time limit (see default_duration_s).
DEFAULT_DURATION_S = 3600.0

# Upper bounds keep integers below 2**53, so the Lua plugin (doubles only) and Python agree.
MAX_BATCH_SIZE = 10**9
MAX_ITERATIONS = 10**12
MAX_DURATION_S = 1e9
MAX_STAGE_TIME_MS = 1e7
MAX_STAGES = 8
MAX_TICKETS = 1e6
MAX_PLANS = 16
MODEL_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/+-]*$"
MODEL_MAX_LEN = 64
PLAN_PATTERN = r"^[a-z0-9][a-z0-9-]*$"
PLAN_MAX_LEN = 16

_StageTime = Annotated[float, Field(gt=0, le=MAX_STAGE_TIME_MS, allow_inf_nan=False)]
_PlanCode = Annotated[str, Field(pattern=PLAN_PATTERN, max_length=PLAN_MAX_LEN)]


class JobHints(BaseModel):
    """What a user may tell the scheduler about a job (schema version 1).

    Every field is optional; a policy that needs a missing one falls back to its own estimate.
    Field order is the order in which the fields are validated (keep in step with the Lua
    plugin's ``FIELDS`` table).
    """

    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        frozen=True,
        title="slurm_sched job hints",
        json_schema_extra={
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "urn:slurm-sched:job-hints:v1",
            "description": (
                "JSON object in `sbatch --comment` (at most 1024 bytes). "
                "See docs/hints.md for which policy reads which key."
            ),
        },
    )

    v: Literal[1] = Field(default=1, description="schema version; absent means 1")
    model: Annotated[str, Field(pattern=MODEL_PATTERN, max_length=MODEL_MAX_LEN)] | None = Field(
        default=None, description="model name, e.g. resnet50 (performance-model lookup)"
    )
    batch_size: Annotated[int, Field(ge=1, le=MAX_BATCH_SIZE)] | None = Field(
        default=None, description="global batch size (SJF-BSBF, Pollux-style models)"
    )
    iterations: Annotated[int, Field(ge=1, le=MAX_ITERATIONS)] | None = Field(
        default=None, description="total training iterations (A-SRPT, progress)"
    )
    duration_s: Annotated[float, Field(gt=0, le=MAX_DURATION_S, allow_inf_nan=False)] | None = (
        Field(
            default=None,
            description="user's estimate of the isolated run time on the requested GPUs, s",
        )
    )
    stage_times_ms: (
        Annotated[list[_StageTime], Field(min_length=1, max_length=MAX_STAGES)] | None
    ) = Field(
        default=None,
        description="per-iteration time of each resource stage, ms (Muri interleaving)",
    )
    plans: Annotated[list[_PlanCode], Field(min_length=1, max_length=MAX_PLANS)] | None = Field(
        default=None,
        description="allowed execution plans, e.g. dp, zero-dp, zero-offload, gc, 2-2-1 (Rubick)",
    )
    tickets: Annotated[float, Field(gt=0, le=MAX_TICKETS, allow_inf_nan=False)] | None = Field(
        default=None, description="lottery tickets / weight of this job (Gandiva_fair)"
    )
    guaranteed: bool | None = Field(
        default=None, description="job has a performance guarantee (Rubick SLA)"
    )

    @field_validator("v", mode="before")
    @classmethod
    def _v_is_int(cls, value: object) -> object:
        # Literal[1] would also accept True and 1.0.
        if type(value) is not int or value != SCHEMA_VERSION:
            raise ValueError("unsupported schema version")
        return value


class HintError(InputError):
    """A hint that breaks the schema: ``hint 'batch_size' = -3: must be >= 1``."""

    def one_line(self) -> str:
        where = f"{self.source}: " if self.source else ""
        if self.field is None:
            return f"{where}hint: {self.message}"
        field = "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in self.field)
        return f"{where}hint '{field}' = {_show(self.value)}: {self.message}"


def _show(value: object, limit: int = 60) -> str:
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_FIELDS = tuple(JobHints.model_fields)


class _DuplicateKeyError(ValueError):
    def __init__(self, key: str, value: object) -> None:
        super().__init__(key)
        self.key = key
        self.value = value


def _pairs_no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKeyError(key, value)
        out[key] = value
    return out


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _num(x: object) -> str:
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return str(x)


def _message(err: Any) -> str:
    """Turn one pydantic error into the short message both validators use."""
    kind = err["type"]
    ctx = err.get("ctx") or {}
    value = err.get("input")
    messages = {
        "int_type": "must be an integer",
        "float_type": "must be a number",
        "string_type": "must be a string",
        "bool_type": "must be true or false",
        "list_type": "must be a list",
        "finite_number": "must be finite",
        "greater_than": f"must be > {_num(ctx.get('gt'))}",
        "greater_than_equal": f"must be >= {_num(ctx.get('ge'))}",
        "less_than_equal": f"must be <= {_num(ctx.get('le'))}",
        "too_short": f"must have at least {ctx.get('min_length')} item(s)",
        "too_long": f"must have at most {ctx.get('max_length')} items",
        "string_too_long": f"must be at most {ctx.get('max_length')} characters",
        "string_pattern_mismatch": f"must match {ctx.get('pattern')}",
    }
    if kind == "float_type" and isinstance(value, int) and not isinstance(value, bool):
        return "is out of range"  # an integer too large for a float
    return messages.get(kind, str(err.get("msg", kind)))


def parse_hints(comment: str | None, *, source: str | None = None) -> JobHints:
    """Parse and validate a job comment.

    Parameters
    ----------
    comment:
        The job's comment as Slurm returns it; ``None``, empty or whitespace-only means no hints.
    source:
        Where the comment came from (e.g. ``job 42``), prefixed to error messages.

    Raises
    ------
    HintError
        (an :class:`~slurm_sched.errors.InputError`) naming the field and value.
    """
    if comment is None:
        return JobHints()
    size = len(comment.encode("utf-8", errors="surrogatepass"))
    if size > MAX_COMMENT_BYTES:
        raise HintError(f"comment is {size} bytes, the limit is {MAX_COMMENT_BYTES}", source=source)
    if not comment.strip(" \t\n\r"):
        return JobHints()
    try:
        data = json.loads(
            comment, object_pairs_hook=_pairs_no_duplicates, parse_constant=_reject_constant
        )
    except _DuplicateKeyError as exc:
        raise HintError("duplicate key", source=source, field=exc.key, value=exc.value) from None
    except (ValueError, RecursionError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise HintError(f"not valid JSON ({detail})", source=source) from None
    if not isinstance(data, dict):
        raise HintError("must be a JSON object", source=source)
    if "v" in data and (type(data["v"]) is not int or data["v"] != SCHEMA_VERSION):
        raise HintError(
            f"unsupported schema version (this scheduler reads v {SCHEMA_VERSION})",
            source=source,
            field="v",
            value=data["v"],
        )
    for key in data:
        if key not in JobHints.model_fields:
            raise HintError(
                f"unknown hint (known: {', '.join(_FIELDS)})",
                source=source,
                field=key,
                value=data[key],
            )
    try:
        return JobHints.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = first["loc"]
        field = str(loc[0]) if loc else None
        message = _message(first)
        if len(loc) > 1 and isinstance(loc[1], int):
            message = f"item {loc[1]} {message}"
        raise HintError(
            message, source=source, field=field, value=data.get(field) if field else None
        ) from None


def encode_hints(hints: JobHints) -> str:
    """Compact JSON for ``sbatch --comment``; unset fields are left out, ``v`` is always written.

    Raises :class:`HintError` if the result exceeds :data:`MAX_COMMENT_BYTES`.
    """
    data = hints.model_dump(exclude_none=True)
    data["v"] = SCHEMA_VERSION
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    size = len(text.encode("utf-8"))
    if size > MAX_COMMENT_BYTES:
        raise HintError(f"encoded hints are {size} bytes, the limit is {MAX_COMMENT_BYTES}")
    return text


def duration_from_time_limit(time_limit_s: float | None) -> float:
    """Duration assumed for a job without a ``duration_s`` hint.

    The job's ``--time`` limit when it has one (the user's own upper bound), else
    :data:`DEFAULT_DURATION_S`. Only clairvoyant policies read it.
    """
    if time_limit_s is not None and math.isfinite(time_limit_s) and time_limit_s > 0:
        return float(time_limit_s)
    return DEFAULT_DURATION_S


def hints_to_jobspec(
    job_id: str,
    submit_time_s: float,
    num_gpus: int,
    user: str,
    gpu_type: str | None,
    hints: JobHints,
    *,
    default_duration_s: float = DEFAULT_DURATION_S,
    num_cpus: int | None = None,
) -> JobSpec:
    """Build the canonical :class:`JobSpec` of a Slurm job from what Slurm knows plus its hints.

    ``default_duration_s`` is used when the user gave no ``duration_s`` (pass
    ``duration_from_time_limit(time_limit_s)`` to use the job's ``--time``). Hints without a
    ``JobSpec`` field go to ``attrs``: ``plans`` (tuple), ``tickets``, ``guaranteed``, and
    ``duration_source`` (``"hint"`` or ``"default"``) is always set.
    """
    if not (math.isfinite(default_duration_s) and default_duration_s > 0):
        raise ValueError(f"default_duration_s must be > 0, got {default_duration_s!r}")
    attrs: dict[str, Any] = {
        "duration_source": "hint" if hints.duration_s is not None else "default",
    }
    if hints.plans is not None:
        attrs["plans"] = tuple(hints.plans)
    if hints.tickets is not None:
        attrs["tickets"] = hints.tickets
    if hints.guaranteed is not None:
        attrs["guaranteed"] = hints.guaranteed
    return JobSpec(
        job_id=job_id,
        submit_time_s=submit_time_s,
        num_gpus=num_gpus,
        duration_s=hints.duration_s if hints.duration_s is not None else default_duration_s,
        user=user,
        model=hints.model,
        batch_size=hints.batch_size,
        iterations=hints.iterations,
        gpu_type=gpu_type,
        num_cpus=num_cpus,
        stage_times_ms=tuple(hints.stage_times_ms) if hints.stage_times_ms is not None else None,
        attrs=attrs,
    )


def schema_json() -> str:
    """The JSON Schema of :class:`JobHints`, as stored in ``plugin/hints.schema.json``."""
    return json.dumps(JobHints.model_json_schema(), indent=2) + "\n"


if __name__ == "__main__":  # python -m slurm_sched.protocol.hints > plugin/hints.schema.json
    print(schema_json(), end="")
