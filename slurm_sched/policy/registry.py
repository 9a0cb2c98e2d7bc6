"""Policy registry: name -> factory, plus third-party policies from entry points.

Third-party packages register policies under the entry-point group ``slurm_sched.policies``
(``name = "package.module:PolicyClass"``). Built-in names win over entry points.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points

from slurm_sched.errors import InputError, UnknownPolicyError
from slurm_sched.policy.base import Policy

#: Builds a policy; keyword arguments are the policy's options (``round_s=5``, ``tau=0``...).
PolicyFactory = Callable[..., Policy]


@dataclass(frozen=True)
class PolicyInfo:
    name: str
    factory: PolicyFactory
    paper: str
    summary: str
    clairvoyant: bool

    @property
    def options(self) -> tuple[str, ...]:
        """Keyword options ``create(name, options)`` accepts (the factory's parameters)."""
        return option_names(self.factory)

    @property
    def fixed(self) -> tuple[str, ...]:
        """Options the registered variant sets itself (see :func:`fixed_option_names`)."""
        return fixed_option_names(self.factory)


def fixed_option_names(factory: PolicyFactory) -> tuple[str, ...]:
    """What defines a registered variant, so that it is not an option of it: the keywords of a
    ``functools.partial`` (``a-srpt-tau0``'s ``tau``, ``rubick-e``'s ``variant``) and the
    class's :attr:`Policy.fixed_options` (Muri-S's ``know_duration``). Setting one would make
    another policy under the variant's name; its base policy takes it."""
    cls = factory.func if isinstance(factory, functools.partial) else factory
    fixed = list(getattr(cls, "fixed_options", ()))
    if isinstance(factory, functools.partial):
        fixed += [k for k in factory.keywords if k not in fixed]
    return tuple(fixed)


def option_names(factory: PolicyFactory) -> tuple[str, ...]:
    """The keyword parameters of a policy factory (a class or a ``functools.partial``), less
    those the variant fixes (:func:`fixed_option_names`).

    A class whose ``__init__`` passes ``**kwargs`` on to its base class also takes the base
    class's options (after its own)."""
    try:
        params = list(inspect.signature(factory).parameters.values())
    except (TypeError, ValueError):  # builtins without a signature take no options
        return ()
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    fixed = set(fixed_option_names(factory))
    names = [p.name for p in params if p.kind in kinds and p.name not in fixed]
    cls = factory.func if isinstance(factory, functools.partial) else factory
    if isinstance(cls, type) and any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        base = next((b for b in cls.__mro__[1:] if "__init__" in vars(b)), object)
        if base is not object:
            names += [n for n in option_names(base) if n not in names and n not in fixed]
    return tuple(names)


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
        functools.partial(cls, **kwargs),
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


def info(name: str) -> PolicyInfo:
    """The registration of ``name``; :class:`UnknownPolicyError` lists the known names."""
    _builtins()
    found = _REGISTRY.get(name.strip().lower())
    if found is None:
        raise UnknownPolicyError(
            f"unknown policy; known: {', '.join(_REGISTRY)}", field="policy", value=name
        )
    return found


def create(name: str, options: Mapping[str, object] | None = None) -> Policy:
    """A fresh policy instance by registry name, with optional keyword ``options``.

    An option the policy does not take, or a value its constructor refuses, raises
    :class:`InputError` naming the option and the value (never a traceback for the user).
    """
    found = info(name)
    if not options:
        return found.factory()
    accepted = found.options
    for key, value in options.items():
        if key not in accepted:
            takes = ", ".join(accepted) if accepted else "none"
            why = (f"; the variant sets {key!r} itself, its base policy takes it"
                   if key in found.fixed else "")
            raise InputError(
                f"policy {found.name!r} has no option {key!r}{why} (its options: {takes})",
                field="policy option", value=f"{key}={value}",
            )
    try:
        return found.factory(**options)
    except (TypeError, ValueError) as e:
        shown = ",".join(f"{k}={v}" for k, v in options.items())
        raise InputError(
            f"policy {found.name!r} refused its options: {e}", field="policy option", value=shown
        ) from e
