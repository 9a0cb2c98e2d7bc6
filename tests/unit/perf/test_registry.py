"""The progress-model registry: an explicit table, each model's module imported on use."""

from __future__ import annotations

import ast
import importlib
import pathlib
import subprocess
import sys

import pytest

import slurm_sched.perf as perf_pkg
from slurm_sched.errors import InputError
from slurm_sched.perf import registry
from slurm_sched.perf.progress import ProgressModel


def test_table_and_modules_agree() -> None:
    for module in dict.fromkeys(registry.BUILTIN.values()):
        declared = list(importlib.import_module(module).PROGRESS_MODELS)
        assert declared == [n for n, m in registry.BUILTIN.items() if m == module], module


def test_every_module_declaring_models_is_listed() -> None:
    root = pathlib.Path(perf_pkg.__file__).parent
    listed = set(registry.BUILTIN.values())
    for path in root.rglob("*.py"):
        text = path.read_text()
        declares = any(
            isinstance(node, (ast.Assign, ast.AnnAssign))
            and any(isinstance(t, ast.Name) and t.id == "PROGRESS_MODELS"
                    for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))
            for node in ast.parse(text).body
        )
        rel = path.relative_to(root.parent.parent).with_suffix("")
        assert declares == (".".join(rel.parts).removesuffix(".__init__") in listed), path


def test_every_model_is_created() -> None:
    for name in registry.names():
        assert isinstance(registry.create(name), ProgressModel)


def test_creating_one_model_imports_only_its_module() -> None:
    code = (
        "import sys\n"
        "from slurm_sched.perf import registry\n"
        "registry.create('identity')\n"
        "print(sorted(m for m in sys.modules if m.startswith('slurm_sched.perf.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "rubick_model" not in out.stdout and "muri_stages" not in out.stdout, out.stdout


def test_unknown_name_is_an_input_error() -> None:
    with pytest.raises(InputError, match="unknown progress model; known: identity"):
        registry.create("no-such-world")
