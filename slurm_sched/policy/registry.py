"""Policy registry: name -> factory, plus third-party policies from entry points.

Third-party packages register policies under the entry-point group ``slurm_sched.policies``
(``name = "package.module:PolicyClass"``). Built-in names win over entry points.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points

from slurm_sched.errors import UnknownPolicyError
from slurm_sched.policy.base import Policy

PolicyFactory = Callable[[], Policy]


@dataclass(frozen=True)
class PolicyInfo:
    name: str
    factory: PolicyFactory
    paper: str
    summary: str
    clairvoyant: bool


_REGISTRY: dict[str, PolicyInfo] = {}


def register(
    name: str,
    factory: PolicyFactory,
    *,
    paper: str = "",
    summary: str = "",
    clairvoyant: bool = False,
) -> None:
    """Add a policy under ``name`` (lower-case, unique)."""
    if name in _REGISTRY:
        raise ValueError(f"policy {name!r} registered twice")
    _REGISTRY[name] = PolicyInfo(name, factory, paper, summary, clairvoyant)


def register_class(cls: type[Policy], name: str | None = None, **kwargs: object) -> None:
    """Register a Policy subclass, taking paper/summary from its class attributes."""
    register(
        name or cls.name,
        lambda: cls(**kwargs),
        paper=cls.paper,
        summary=cls.summary,
        clairvoyant=cls.clairvoyant,
    )


def _load_entry_points() -> None:
    for ep in entry_points(group="slurm_sched.policies"):
        if ep.name not in _REGISTRY:
            cls = ep.load()
            register_class(cls, ep.name)


def _builtins() -> None:
    if _REGISTRY:
        return
    from slurm_sched.policy import builtin  # noqa: F401  (registers on import)

    _load_entry_points()


def available() -> list[PolicyInfo]:
    """Every registered policy, in registration order."""
    _builtins()
    return list(_REGISTRY.values())


def names() -> list[str]:
    return [p.name for p in available()]


def create(name: str) -> Policy:
    """A fresh policy instance by registry name."""
    _builtins()
    info = _REGISTRY.get(name.strip().lower())
    if info is None:
        raise UnknownPolicyError(
            f"unknown policy; known: {', '.join(_REGISTRY)}", field="policy", value=name
        )
    return info.factory()
