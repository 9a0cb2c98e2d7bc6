"""The daemon's configuration: a TOML file validated by pydantic-settings.

Every value can also come from the environment (``SLURM_SCHED_<FIELD>``, nested with ``__``),
which wins over the file; an empty variable counts as unset (a compose file's
``${VAR:-}`` passes one through). Errors name the file, the field and the bad value in one line.

Example ``/etc/slurm-sched/config.toml``::

    policy = "tiresias"
    period_s = 5
    lease_s = 120
    managed_partitions = ["sched"]
    settings_dir = "/shared/slurm-sched/job-settings"

    [policy_options]        # the policy's options (slurm-sched policies --options)

    [safety]
    min_runtime_before_preempt_s = 300
    max_preemptions_per_cycle = 8
    loop_preemptions = 4
    loop_window_s = 3600

    [observability]
    decision_log = "/var/log/slurm-sched/decisions.jsonl"
    metrics_port = 9810
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from slurm_sched.errors import InputError
from slurm_sched.policy import registry


class _FieldError(ValueError):
    """A cross-field check that blames one field (reported with its name and value)."""

    def __init__(self, field: str, value: Any, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.value = value


class SafetyConfig(BaseModel):
    """Limits that keep a policy from thrashing a production cluster."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_runtime_before_preempt_s: float = Field(default=300.0, ge=0)
    max_preemptions_per_cycle: int = Field(default=8, ge=0)
    #: A job preempted this many times within ``loop_window_s`` is pinned (never preempted
    #: again until it finishes): loop detection.
    loop_preemptions: int = Field(default=4, ge=1)
    loop_window_s: float = Field(default=3600.0, gt=0)


class ObservabilityConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    #: JSON-lines decision log (one line per action, with its reason; None: no log)
    decision_log: Path | None = None
    #: serve Prometheus /metrics on metrics_host:metrics_port
    metrics: bool = True
    metrics_host: str = "127.0.0.1"
    #: 0: any free port (logged at start); None: no endpoint
    metrics_port: int | None = Field(default=9810, ge=0, le=65535)
    log_level: str = "INFO"

    @field_validator("log_level")
    @classmethod
    def _level(cls, v: str) -> str:
        v = v.upper()
        if v not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
            raise ValueError("must be one of DEBUG, INFO, WARNING, ERROR")
        return v


class ServiceConfig(BaseSettings):
    """Everything ``slurm-sched run`` needs. Defaults are safe for a first start."""

    model_config = SettingsConfigDict(
        env_prefix="SLURM_SCHED_", env_nested_delimiter="__", extra="forbid", frozen=True,
        env_ignore_empty=True,
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # load_config passes the file's values as init values, which pydantic-settings ranks
        # first by default: the environment must win over the file (nested tables are merged)
        return env_settings, init_settings, dotenv_settings, file_secret_settings

    policy: str = "tiresias"
    #: Keyword options of the policy (``slurm-sched policies --options`` lists them).
    policy_options: dict[str, Any] = Field(default_factory=dict)
    #: Longest time between two scheduling cycles; at most ``lease_s / 4`` so that a lease is
    #: renewed twice before it can run out.
    period_s: float = Field(default=5.0, gt=0, le=3600)
    #: Fail-open lease: if the daemon stops renewing, managed jobs are left to Slurm's own
    #: scheduler after at most this long (plus Slurm's periodic pass, ``sched_interval``).
    lease_s: float = Field(default=120.0, ge=10, le=3600)
    managed_partitions: tuple[str, ...] = ("sched",)
    #: slurm.conf of the cluster (exported as SLURM_CONF to every Slurm command; None: the
    #: Slurm clients' default)
    slurm_conf: Path | None = None
    #: State dir of a local mini cluster (``slurm-sched cluster up``): its SLURM_CONF, and
    #: ``<dir>/job-settings`` as the settings dir unless ``settings_dir`` is given.
    mini_cluster: Path | None = None
    #: Per-job settings/progress files shared with the jobs (default
    #: /var/lib/slurm-sched/job-settings, or the mini cluster's)
    settings_dir: Path | None = None
    #: the daemon's own files: ``daemon.json`` (pid, mode, policy, /metrics address)
    state_dir: Path = Path("/var/lib/slurm-sched")
    #: Shadow mode: decide and log the scontrol commands it would run, change nothing.
    dry_run: bool = False
    command_timeout_s: float = Field(default=30.0, gt=0, le=600)
    #: How actions reach Slurm: "cli" (scontrol, the tested default) or "pyslurm" (in-process,
    #: Slurm 25.11 sites with the pyslurm extra; docs/pyslurm.md).
    transport: Literal["cli", "pyslurm"] = "cli"
    #: A pinned job not running after this long gets its lease back (GPUs not free after all).
    start_timeout_s: float = Field(default=60.0, gt=0, le=3600)
    #: How long the node list (sinfo) is reused: a node drained or set down is seen, and taken
    #: out of the policy's view, at most this long after the change. A start pinned there
    #: meanwhile is not carried out by Slurm and gets its lease back after start_timeout_s.
    #: A node Slurm marks DOWN under running jobs (a crash: its jobs are requeued or end
    #: NODE_FAIL) is seen in the same cycle as that job change, and the node list is read with
    #: every cycle while shard jobs run.
    node_refresh_s: float = Field(default=30.0, gt=0, le=3600)
    #: Jobs per GPU (>1 needs gres/shard); None: 2 for a policy that shares GPUs, else 1.
    max_jobs_per_gpu: int | None = Field(default=None, ge=1, le=64)
    safety: SafetyConfig = SafetyConfig()
    observability: ObservabilityConfig = ObservabilityConfig()

    @field_validator("policy")
    @classmethod
    def _known_policy(cls, v: str) -> str:
        if v not in registry.names():
            raise ValueError(f"unknown policy; known: {', '.join(registry.names())}")
        return v

    @field_validator("managed_partitions")
    @classmethod
    def _partitions(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v or any(not p.strip() for p in v):
            raise ValueError("needs at least one non-empty partition name")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> ServiceConfig:
        if self.period_s > self.lease_s / 4:
            raise _FieldError(
                "period_s",
                self.period_s,
                f"must be at most lease_s / 4 = {self.lease_s / 4:g}, so that every lease is "
                "renewed before it runs out",
            )

        if self.policy in registry.names():
            accepted = registry.info(self.policy).options
            for key in self.policy_options:
                if key not in accepted:
                    raise _FieldError(
                        f"policy_options.{key}",
                        self.policy_options[key],
                        f"policy {self.policy!r} has no such option "
                        f"(its options: {', '.join(accepted) or 'none'})",
                    )
        return self

    @property
    def job_settings_dir(self) -> Path:
        """Where per-job settings and progress files live."""
        if self.settings_dir is not None:
            return self.settings_dir
        if self.mini_cluster is not None:
            return self.mini_cluster / "job-settings"
        return Path("/var/lib/slurm-sched/job-settings")


def _first_error(e: ValidationError, source: str, data: dict[str, Any]) -> InputError:
    err = e.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    value: Any = err.get("input")
    if err["type"] == "missing":
        value = None
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown setting"
    exc = (err.get("ctx") or {}).get("error")
    if isinstance(exc, _FieldError):
        loc, value, msg = exc.field, exc.value, str(exc)
    return InputError(msg, source=source, field=loc, value=value)


def load_config(path: str | Path | None = None) -> ServiceConfig:
    """Load and validate the config file (None: defaults plus environment).

    Raises:
        InputError: one line naming the file, the field and the value.
    """
    data: dict[str, Any] = {}
    source = str(path) if path is not None else "<environment>"
    if path is not None:
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as e:
            raise InputError(f"cannot read config: {e.strerror or e}", source=source) from None
        except UnicodeDecodeError:
            raise InputError("config is not UTF-8 text", source=source) from None
        except tomllib.TOMLDecodeError as e:
            raise InputError(f"not valid TOML: {e}", source=source) from None
    for key, value in data.items():
        # only field names: a TOML key such as `_cli_parse_args` or `_env_file` would otherwise
        # reach BaseSettings.__init__ as one of its own options (found by fuzzing)
        if key not in ServiceConfig.model_fields:
            raise InputError("unknown setting", source=source, field=key, value=value)
    try:
        return ServiceConfig(**data)
    except ValidationError as e:
        raise _first_error(e, source, data) from None
    except (TypeError, ValueError) as e:  # e.g. a non-string key from odd TOML
        raise InputError(f"invalid config: {e}", source=source) from None
