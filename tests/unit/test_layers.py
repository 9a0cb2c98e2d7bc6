"""The import layers of ``slurm_sched``: dependencies point one way.

    errors, clock, hostinfo, native, cli_options   (no slurm_sched imports)
    model            <- traces <- perf <- policy
    model            <- backend (the interface) <- {sim, slurm}
    model            <- protocol (hints, settings files) <- {slurm, runtime}
    controller       sees the interface, the clock and the policies, never sim/ or slurm/
    service, advisor, cli     on top

Every ``import`` of every module is checked, those inside functions included; an import inside a
function is allowed only for the optional or plotting-only libraries listed in
:data:`LAZY_THIRD_PARTY` and for the modules in :data:`LAZY_INTERNAL` (the torch-based runtime).
"""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Iterator

import slurm_sched

ROOT = pathlib.Path(slurm_sched.__file__).parent

_BASE = {"errors", "model"}
#: component -> the components it may import (a component is a top-level module or package).
ALLOWED: dict[str, set[str]] = {
    "__init__": {"native"},
    "errors": set(),
    "clock": set(),
    "hostinfo": set(),
    "native": set(),
    "cli_options": set(),
    "model": {"errors"},
    "traces": _BASE | {"protocol"},  # the sacct reader reads job hints from the comment
    "perf": _BASE | {"traces"},
    "policy": _BASE | {"perf", "native"},  # the registry reads compiled classes' options
    "backend": _BASE,
    "protocol": _BASE,
    "controller": _BASE | {"backend", "clock", "policy"},
    "sim": _BASE | {"traces", "perf", "policy", "backend", "clock", "controller", "cli_options"},
    "slurm": _BASE | {"backend", "protocol"},
    "runtime": _BASE | {"perf", "protocol", "hostinfo"},
    "workloads": _BASE | {"traces", "perf"},
    "native_cli": {"native"},
    "service": _BASE | {"traces", "perf", "policy", "backend", "protocol", "clock",
                        "controller", "sim", "slurm", "cli_options"},
    "advisor": _BASE | {"traces", "policy", "sim", "slurm"},
    # grids of simulations; the generated traces come from workloads; --slurm mode has its own
    # small subprocess runner (sbatch, squeue), so not slurm
    "sweep": _BASE | {"traces", "perf", "policy", "sim", "cli_options", "workloads"},
    "cli": {"__init__", "errors"},  # the commands themselves are imported by name, on use
}

#: Third-party libraries that may be imported inside a function: optional extras (torch, mypy for
#: the native build) and the plotting stack, imported only by the commands that draw.
LAZY_THIRD_PARTY = {"torch", "mypy", "matplotlib", "numpy"}
#: slurm_sched modules imported inside a function, with why.
LAZY_INTERNAL = {
    # they import torch at module level
    ("slurm_sched.runtime.profile_cli", "slurm_sched.runtime"),
    ("slurm_sched.runtime.profile_cli", "slurm_sched.runtime.models"),
}


def _modules() -> Iterator[tuple[str, pathlib.Path]]:
    for path in sorted(ROOT.rglob("*.py")):
        if "_native" in path.parts:
            continue
        rel = path.relative_to(ROOT.parent).with_suffix("")
        yield ".".join(rel.parts).removesuffix(".__init__"), path


def _component(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(module: str, path: pathlib.Path) -> Iterator[tuple[str, bool]]:
    """(imported module, inside a function) for every import statement of ``path``."""
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    inner: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inner.update(id(n) for n in ast.walk(fn) if n is not fn)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, id(node) in inner
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target == "slurm_sched":
                for alias in node.names:
                    yield f"slurm_sched.{alias.name}", id(node) in inner
            else:
                yield target, id(node) in inner


def test_every_component_is_placed() -> None:
    assert {_component(m) for m, _ in _modules()} == set(ALLOWED)


def test_imports_point_down_the_layers() -> None:
    wrong = []
    for module, path in _modules():
        own = _component(module)
        for target, _ in _imports(module, path):
            if not target.startswith("slurm_sched"):
                continue
            other = _component(target)
            if other != own and other not in ALLOWED[own] and target != "slurm_sched.__version__":
                wrong.append(f"{module} imports {target}")
    assert wrong == []


def test_no_import_inside_a_function_but_the_listed_ones() -> None:
    wrong = []
    for module, path in _modules():
        for target, inside in _imports(module, path):
            if not inside:
                continue
            if target.startswith("slurm_sched"):
                if (module, target) not in LAZY_INTERNAL:
                    wrong.append(f"{module}: {target}")
            elif target.split(".")[0] not in LAZY_THIRD_PARTY:
                wrong.append(f"{module}: {target}")
    assert wrong == []


def test_the_checker_sees_a_wrong_import(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("def f():\n    from slurm_sched.sim import backend\n")
    found = list(_imports("slurm_sched.controller", path))
    assert found == [("slurm_sched.sim", True)]
    assert "sim" not in ALLOWED["controller"]
