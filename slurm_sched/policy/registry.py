"""Policy registry: name -> factory, from an explicit table of built-ins plus entry points.

Contract:

- :data:`BUILTIN` lists every built-in policy name and the module that declares it, in the order
  ``slurm-sched policies`` shows them. A module declares its policies in a module-level
  ``POLICIES`` list; an entry is a ``Policy`` subclass (registered under its ``name``) or a
  ``(name, factory, summary)`` tuple for a variant with other parameters. Adding a policy means
  adding its names here and to its module's ``POLICIES`` (``tests/unit/policy/test_registry.py``
  checks that the two agree).
- A policy's module (and what it imports: scipy, scikit-learn, networkx...) is imported the first
  time one of its names is looked up (:func:`info`, :func:`create`), not when this registry is
  imported. :func:`available` imports them all.
- :func:`register` is idempotent: registering the same factory under the same name again changes
  nothing; another factory under a taken name (a built-in's included) raises ``ValueError``.
- Third-party packages register policies under the entry-point group ``slurm_sched.policies``
  (``name = "package.module:PolicyClass"``); they are read when a name is not a built-in or when
  every policy is listed. Built-in names win over entry points.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points

from slurm_sched import native
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
    class's options (after its own). A class of the compiled core (mypyc keeps no signature)
    takes those of its pure-Python twin (:func:`slurm_sched.native.source_module`)."""
    try:
        params = list(inspect.signature(_signature_source(factory)).parameters.values())
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


def _signature_source(factory: PolicyFactory) -> PolicyFactory:
    """``factory``, or for a class of a compiled module its pure-Python twin (same keywords)."""
    cls = factory.func if isinstance(factory, functools.partial) else factory
    module = inspect.getmodule(cls)
    if not (isinstance(cls, type) and module is not None and native.is_compiled(module)):
        return factory
    twin = getattr(native.source_module(module.__name__), cls.__name__)
    if isinstance(factory, functools.partial):
        return functools.partial(twin, *factory.args, **factory.keywords)
    return twin  # type: ignore[no-any-return]


#: Every built-in policy: name -> the module whose ``POLICIES`` declares it, in listing order.
BUILTIN: dict[str, str] = {
    "fifo": "slurm_sched.policy.fifo",
    "sjf": "slurm_sched.policy.sjf",
    "srtf": "slurm_sched.policy.srtf",
    "tiresias": "slurm_sched.policy.tiresias",
    "tiresias-3q": "slurm_sched.policy.tiresias",
    "a-srpt": "slurm_sched.policy.a_srpt",
    "a-srpt-tau0": "slurm_sched.policy.a_srpt",
    "a-srpt-nonblocking": "slurm_sched.policy.a_srpt",
    "a-srpt-perfect": "slurm_sched.policy.a_srpt_baselines",
    "a-srpt-mean": "slurm_sched.policy.a_srpt_baselines",
    "a-srpt-median": "slurm_sched.policy.a_srpt_baselines",
    "a-srpt-spjf": "slurm_sched.policy.a_srpt_baselines",
    "a-srpt-spwf": "slurm_sched.policy.a_srpt_baselines",
    "a-srpt-wcs-duration": "slurm_sched.policy.a_srpt_baselines",
    "a-srpt-wcs-workload": "slurm_sched.policy.a_srpt_baselines",
    "a-srpt-wcs-subtime": "slurm_sched.policy.a_srpt_baselines",
    "antman": "slurm_sched.policy.antman",
    "gandiva-fair": "slurm_sched.policy.gandiva_fair.policy",
    "gandiva-fair-notrade": "slurm_sched.policy.gandiva_fair.policy",
    "muri-s": "slurm_sched.policy.muri",
    "muri-l": "slurm_sched.policy.muri",
    "muri-l-worst-ordering": "slurm_sched.policy.muri",
    "muri-l-no-blossom": "slurm_sched.policy.muri",
    "pollux": "slurm_sched.policy.pollux",
    "rubick": "slurm_sched.policy.rubick.policy",
    "rubick-e": "slurm_sched.policy.rubick.policy",
    "rubick-r": "slurm_sched.policy.rubick.policy",
    "rubick-n": "slurm_sched.policy.rubick.policy",
    "sia": "slurm_sched.policy.rubick_baselines",
    "synergy": "slurm_sched.policy.rubick_baselines",
    "antman-rubick": "slurm_sched.policy.rubick_baselines",
    "sjf-bsbf": "slurm_sched.policy.sjf_bsbf.policy",
    "sjf-ffs": "slurm_sched.policy.sjf_ffs",
    "srsf": "slurm_sched.policy.srsf",
    "themis": "slurm_sched.policy.themis",
    "slurm-backfill": "slurm_sched.policy.slurm_backfill.policy",
}

_REGISTRY: dict[str, PolicyInfo] = {}
_LOADED: set[str] = set()  # built-in modules whose POLICIES are registered
_entry_points_read = False


def _same_factory(a: PolicyFactory, b: PolicyFactory) -> bool:
    """Whether two factories build the same policy (a fresh ``functools.partial`` of the same
    class and keywords counts as the same)."""
    if isinstance(a, functools.partial) and isinstance(b, functools.partial):
        return a.func is b.func and a.args == b.args and a.keywords == b.keywords
    return a is b


def _add(found: PolicyInfo) -> None:
    """Record ``found``; the same factory again is a no-op, another one a ``ValueError``."""
    taken = _REGISTRY.get(found.name)
    if taken is None:
        _REGISTRY[found.name] = found
    elif not _same_factory(taken.factory, found.factory):
        raise ValueError(f"policy {found.name!r} registered twice (with another factory)")


def _class_info(cls: type[Policy], name: str | None = None, **kwargs: object) -> PolicyInfo:
    """A Policy subclass's registration, paper and summary from its class attributes."""
    return PolicyInfo(name or cls.name, functools.partial(cls, **kwargs), cls.paper,
                      cls.summary, cls.clairvoyant)


def register(
    name: str,
    factory: PolicyFactory,
    *,
    paper: str = "",
    summary: str = "",
    clairvoyant: bool = False,
) -> None:
    """Add a policy under ``name`` (lower-case, unique).

    Registering the same factory under the same name again is a no-op; another factory under a
    registered or built-in name raises ``ValueError``."""
    if name in BUILTIN:
        _load_module(BUILTIN[name])
    _add(PolicyInfo(name, factory, paper, summary, clairvoyant))


def register_class(cls: type[Policy], name: str | None = None, **kwargs: object) -> None:
    """Register a Policy subclass, taking paper/summary from its class attributes."""
    found = _class_info(cls, name, **kwargs)
    register(found.name, found.factory, paper=found.paper, summary=found.summary,
             clairvoyant=found.clairvoyant)


def _load_module(module: str) -> None:
    """Import a built-in policy module and register its ``POLICIES`` (once)."""
    if module in _LOADED:
        return
    for entry in getattr(importlib.import_module(module), "POLICIES", ()):
        if isinstance(entry, type) and issubclass(entry, Policy):
            found = _class_info(entry)
        else:
            pname, factory, summary = entry
            base = factory()
            found = PolicyInfo(pname, factory, base.paper, summary, base.clairvoyant)
        _check_listed(found.name, module)
        _add(found)
    _LOADED.add(module)
    missing = [n for n, m in BUILTIN.items() if m == module and n not in _REGISTRY]
    if missing:
        raise ValueError(f"{module} does not declare the built-in policies {missing}")


def _check_listed(name: str, module: str) -> None:
    if BUILTIN.get(name) != module:
        raise ValueError(f"policy {name!r} of {module} is not listed in the registry's BUILTIN")


def _load_entry_points() -> None:
    global _entry_points_read
    if _entry_points_read:
        return
    _entry_points_read = True
    for ep in entry_points(group="slurm_sched.policies"):
        if ep.name not in _REGISTRY and ep.name not in BUILTIN:
            cls = ep.load()
            register_class(cls, ep.name)


def available() -> list[PolicyInfo]:
    """Every policy: the built-ins in :data:`BUILTIN` order, then the others in registration
    order (imports every built-in policy module)."""
    for module in dict.fromkeys(BUILTIN.values()):
        _load_module(module)
    _load_entry_points()
    builtin = [_REGISTRY[n] for n in BUILTIN]
    return builtin + [p for n, p in _REGISTRY.items() if n not in BUILTIN]


def names() -> list[str]:
    """Every policy name, in :func:`available` order."""
    return [p.name for p in available()]


def info(name: str) -> PolicyInfo:
    """The registration of ``name`` (importing only its module); :class:`UnknownPolicyError`
    lists the known names."""
    key = name.strip().lower()
    if key in BUILTIN:
        _load_module(BUILTIN[key])
    elif key not in _REGISTRY:
        _load_entry_points()
    found = _REGISTRY.get(key)
    if found is None:
        known = list(BUILTIN) + [n for n in _REGISTRY if n not in BUILTIN]
        raise UnknownPolicyError(
            f"unknown policy; known: {', '.join(known)}", field="policy", value=name
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
