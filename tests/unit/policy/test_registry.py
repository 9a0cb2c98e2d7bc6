"""The policy registry: an explicit table, lazy imports, idempotent registration."""

from __future__ import annotations

import ast
import functools
import pathlib
import subprocess
import sys

import pytest

import slurm_sched.policy as policy_pkg
from slurm_sched.errors import UnknownPolicyError
from slurm_sched.policy import registry
from slurm_sched.policy.fifo import Fifo
from slurm_sched.policy.sjf import Sjf


def _declared_names(module: str) -> list[str]:
    """The names a module's ``POLICIES`` declares (read from the imported module)."""
    import importlib

    out = []
    for entry in importlib.import_module(module).POLICIES:
        out.append(entry.name if isinstance(entry, type) else entry[0])
    return out


def test_table_and_modules_agree() -> None:
    for module in dict.fromkeys(registry.BUILTIN.values()):
        declared = _declared_names(module)
        listed = [n for n, m in registry.BUILTIN.items() if m == module]
        assert declared == listed, module


def test_every_module_declaring_policies_is_listed() -> None:
    root = pathlib.Path(policy_pkg.__file__).parent
    listed = set(registry.BUILTIN.values())
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text())
        declares = any(
            isinstance(node, (ast.Assign, ast.AnnAssign))
            and any(isinstance(t, ast.Name) and t.id == "POLICIES"
                    for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))
            for node in tree.body
        )
        rel = path.relative_to(root.parent.parent).with_suffix("")
        module = ".".join(rel.parts).removesuffix(".__init__")
        assert declares == (module in listed), module


def test_listing_order_is_the_table_order() -> None:
    assert registry.names()[: len(registry.BUILTIN)] == list(registry.BUILTIN)


def test_looking_up_one_policy_imports_only_its_module() -> None:
    code = (
        "import sys\n"
        "from slurm_sched.policy import registry\n"
        "before = set(sys.modules)\n"
        "registry.create('fifo')\n"
        "new = sorted(m for m in set(sys.modules) - before if m.startswith('slurm_sched.policy'))\n"
        "heavy = sorted(m for m in ('scipy', 'sklearn', 'networkx', 'torch') if m in sys.modules)\n"
        "print(new, heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    new, heavy = out.stdout.strip().split("] [")
    assert "slurm_sched.policy.muri" not in new and "slurm_sched.policy.rubick" not in new
    assert heavy == "]", out.stdout


def test_registering_the_same_factory_again_changes_nothing() -> None:
    before = registry.info("fifo")
    registry.register_class(Fifo)
    assert registry.info("fifo") is before


def test_another_factory_under_a_builtin_name_is_an_error() -> None:
    with pytest.raises(ValueError, match="'fifo' registered twice"):
        registry.register("fifo", functools.partial(Sjf))


def test_a_new_name_registers_and_a_duplicate_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry.register("sjf-by-gpus", functools.partial(Sjf, key="gpus"), summary="test")
    registry.register("sjf-by-gpus", functools.partial(Sjf, key="gpus"), summary="test")
    assert registry.create("sjf-by-gpus").key == "gpus"
    with pytest.raises(ValueError, match="registered twice"):
        registry.register("sjf-by-gpus", functools.partial(Sjf, key="duration"))
    assert registry.names().count("sjf-by-gpus") == 1


def test_an_early_registration_does_not_hide_the_builtins() -> None:
    code = (
        "import functools\n"
        "from slurm_sched.policy import registry\n"
        "from slurm_sched.policy.sjf import Sjf\n"
        "registry.register('mine', functools.partial(Sjf, key='gpus'))\n"
        "print(len(registry.names()), registry.info('rubick').name)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(len(registry.BUILTIN) + 1), "rubick"]


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(UnknownPolicyError, match="known: fifo, sjf"):
        registry.info("no-such-policy")


def test_a_policy_of_the_compiled_core_keeps_its_options() -> None:
    """mypyc-compiled classes have no signature; their options come from the source twin, so
    ``-o lock_rule=...`` works the same with the compiled core (the run mode of the test suite
    when one is built) as from source."""
    assert {"lock_rule", "online_fit", "predictor"} <= set(registry.info("rubick").options)
    assert "variant" not in registry.info("rubick-e").options  # fixed by the variant
    policy = registry.create("rubick", {"lock_rule": "inclusive", "online_fit": False})
    assert policy.lock_rule == "inclusive"  # type: ignore[attr-defined]
