"""The compiled core: hot policy modules built into C extensions with mypyc, used only when the
build matches the source.

Rubick's pass over a big cluster (14,000 jobs, 1,024 nodes) spends most of its time in the node
walk, the donor search and the undo journal: plain Python over dicts, sets and small dataclasses.
The same typed modules compiled by mypyc make the same decisions about twice as fast
(``docs/reproductions/rubick.md``, "Decision time at scale"). Compiling is optional: without a
build, or with a stale one, everything runs from the source.

Contract:

- The ``.py`` files are the only truth. :func:`build` compiles :data:`COMPILED` into
  ``slurm_sched/_native/`` (ignored by git) and writes a manifest with each source's SHA-256, the
  interpreter's extension suffix and the mypy version that built it.
- :func:`install` (run when ``slurm_sched`` is imported) puts a finder first on
  ``sys.meta_path``. It serves the compiled modules only while the manifest matches every
  compiled source byte for byte and this interpreter's suffix; otherwise Python imports the
  sources as usual, so an edited module never runs from an old build.
- ``SLURM_SCHED_NATIVE`` chooses: ``auto`` (default) as above; ``off`` (or ``0``) never uses the
  build; ``require`` makes importing a compiled module fail with :class:`ImportError` unless an
  up-to-date build is there (the test command sets it: CI then tests what the benchmarks time).
- :func:`status` says, per module, whether it runs compiled and if not why.
- :func:`source_module` gives the pure-Python module beside the compiled one (the parity test,
  and tests that patch a module's internals, which compiled code does not look up at run time).
  The compiled modules run from source as one unit: a source module's imports of the other
  compiled modules get their source modules too, so a patch of one is seen by all.

``slurm-sched native build`` builds (needs a C compiler, the Python headers and mypy:
``scripts/setup.sh`` installs them); ``slurm-sched native status`` reports.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

log = logging.getLogger(__name__)

#: The modules compiled, as one mypyc group (they may call each other natively): Rubick's
#: policy package (every module but its ``__init__``) and the placement helpers it uses.
COMPILED: tuple[str, ...] = (
    "slurm_sched.policy.rubick.candidates",
    "slurm_sched.policy.rubick.curves",
    "slurm_sched.policy.rubick.allocations",
    "slurm_sched.policy.rubick.embedding",
    "slurm_sched.policy.rubick.plans",
    "slurm_sched.policy.rubick.policy",
    "slurm_sched.policy.placement",
)
PACKAGE_DIR = Path(__file__).resolve().parent
NATIVE_DIR = PACKAGE_DIR / "_native"
MANIFEST = NATIVE_DIR / "manifest.json"
MODES = ("auto", "off", "require")
ENV = "SLURM_SCHED_NATIVE"
SOURCE_SUFFIX = "__source"  # the pure-Python modules' names: <module>__source
_MISSING = object()  # (a parent package without the attribute)


class NativeBuildError(RuntimeError):
    """The compiled core could not be built (the message says what is missing)."""


def mode() -> str:
    """``SLURM_SCHED_NATIVE`` as one of :data:`MODES` (``0``/``no``/``false`` = off)."""
    raw = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if raw in ("0", "no", "false"):
        raw = "off"
    if raw not in MODES:
        raise ValueError(f"{ENV} must be one of {', '.join(MODES)} (or 0), got {raw!r}")
    return raw


def source_path(module: str) -> Path:
    """The ``.py`` file of a module of this package."""
    rel = module.split(".")[1:]
    return PACKAGE_DIR.joinpath(*rel[:-1], rel[-1] + ".py")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _suffix() -> str:
    return importlib.machinery.EXTENSION_SUFFIXES[0]


def check_build(native_dir: Path = NATIVE_DIR) -> tuple[dict[str, Path], str]:
    """The extension file of every module the build in ``native_dir`` serves (the compiled
    modules and mypyc's shared group library), or ``({}, why not)`` when it is not usable."""
    manifest_path = native_dir / MANIFEST.name
    if not manifest_path.is_file():
        return {}, "not built (slurm-sched native build)"
    try:
        manifest = json.loads(manifest_path.read_text())
        files = {name: native_dir / f for name, f in manifest["files"].items()}
        sources = manifest["sources"]
        suffix = manifest["suffix"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return {}, f"unreadable manifest {manifest_path}: {exc}"
    if suffix != _suffix():
        return {}, f"built for {suffix}, this interpreter loads {_suffix()}"
    if set(sources) != set(COMPILED):
        return {}, f"built for {sorted(sources)}, the package compiles {list(COMPILED)}"
    for module, digest in sources.items():
        if _sha256(source_path(module)) != digest:
            rel = source_path(module).relative_to(PACKAGE_DIR)
            return {}, f"stale: {rel} changed since the build"
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        return {}, f"missing {', '.join(missing)}"
    return files, ""


class _Finder(importlib.abc.MetaPathFinder):
    """Serves the build's extension files for their module names (see the module contract)."""

    def __init__(self, want: str) -> None:
        self.want = want
        self._checked: tuple[dict[str, Path], str] | None = None

    def files(self) -> tuple[dict[str, Path], str]:
        if self._checked is None:
            self._checked = check_build()
            files, why = self._checked
            if not files and self.want == "auto" and MANIFEST.exists():
                log.warning("compiled core not used, running from source: %s", why)
        return self._checked

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if not (fullname.startswith("slurm_sched.") or fullname.endswith("__mypyc")):
            return None  # (mypyc's shared library of a group of modules: <hash>__mypyc)
        files, why = self.files()
        found = files.get(fullname)
        if found is None:
            if self.want == "require" and fullname in COMPILED:
                raise ImportError(f"{fullname}: {ENV}=require but the compiled core is {why}",
                                  name=fullname)
            return None
        return importlib.util.spec_from_file_location(fullname, found)


_finder: _Finder | None = None


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once; nothing in ``off`` mode)."""
    global _finder
    if _finder is not None:
        return
    want = mode()
    if want == "off":
        return
    _finder = _Finder(want)
    sys.meta_path.insert(0, _finder)


def is_compiled(module: ModuleType) -> bool:
    """Whether a module was loaded from an extension file."""
    return isinstance(getattr(module, "__loader__", None), importlib.machinery.ExtensionFileLoader)


def status() -> dict[str, str]:
    """Per compiled module: ``compiled`` if the imported module is the build, else
    ``source: <why>``. Imports the modules."""
    out = {}
    for name in COMPILED:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:  # require mode without a usable build
            out[name] = f"unavailable: {exc}"
            continue
        if is_compiled(module):
            out[name] = "compiled"
        else:
            why = "off" if mode() == "off" else check_build()[1] or "imported before install()"
            out[name] = f"source: {why}"
    return out


def source_module(name: str) -> ModuleType:
    """The pure-Python module ``name`` (one of :data:`COMPILED`), kept under ``name +
    '__source'``: its own classes and functions, separate from the compiled module's. The first
    call executes every compiled module from its ``.py`` (:func:`_load_sources`)."""
    alias = name + SOURCE_SUFFIX
    if alias not in sys.modules:
        if name not in COMPILED:
            raise ValueError(f"{name} is not a compiled module ({', '.join(COMPILED)})")
        _load_sources()
    return sys.modules[alias]


class _SourceFinder(importlib.abc.MetaPathFinder):
    """Serves the ``.py`` of every compiled module (first on ``sys.meta_path`` while
    :func:`_load_sources` runs)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname not in COMPILED:
            return None
        return importlib.util.spec_from_file_location(fullname, source_path(fullname))


def _load_sources() -> None:
    """Execute the compiled modules from their ``.py`` as one unit and keep each under its
    ``__source`` alias. They run under their own names, with ``sys.modules`` holding the
    source modules while they do (their imports of each other, and dataclasses' lookups of
    their module, find the sources); afterwards the modules imported as usual and the parent
    packages' attributes are as they were. The parent packages are imported first, so no
    package ``__init__`` runs against the source modules."""
    for name in COMPILED:
        importlib.import_module(name.rpartition(".")[0])
    saved = {name: sys.modules.pop(name) for name in COMPILED if name in sys.modules}
    parents: dict[str, tuple[ModuleType, str, object]] = {}
    for name in COMPILED:
        pkg, _, attr = name.rpartition(".")
        parents[name] = (sys.modules[pkg], attr, getattr(sys.modules[pkg], attr, _MISSING))
    finder = _SourceFinder()
    sys.meta_path.insert(0, finder)
    try:
        for name in COMPILED:
            importlib.import_module(name)
        for name in COMPILED:
            sys.modules[name + SOURCE_SUFFIX] = sys.modules[name]
    finally:
        sys.meta_path.remove(finder)
        for name in COMPILED:
            sys.modules.pop(name, None)
        sys.modules.update(saved)
        for package, attr, value in parents.values():
            if value is _MISSING:
                if hasattr(package, attr):
                    delattr(package, attr)
            else:
                setattr(package, attr, value)


# The build runs in a child interpreter: setuptools' build machinery is not for a library to
# run in its caller's process. Its working directory holds only a link to this package, so
# mypy reads the package's sources and nothing else of the checkout (pyproject.toml...).
_BUILD_SCRIPT = """
import sys
from mypyc.build import mypycify
from setuptools import setup
work, *paths = sys.argv[1:]
exts = mypycify(["--ignore-missing-imports", "--follow-imports=silent",
                 "--cache-dir", work + "/mypy-cache", *paths],
                opt_level="3", target_dir=work + "/c")
setup(name="slurm-sched-native", ext_modules=exts,
      script_args=["-q", "build_ext", "--build-lib", work + "/lib", "--build-temp", work + "/obj"])
"""


def build() -> dict[str, str]:
    """Compile :data:`COMPILED` into :data:`NATIVE_DIR` and write the manifest; returns
    :func:`check_build`'s files by module name. Raises :class:`NativeBuildError` (mypy missing,
    a type error, no compiler: the output says) and then leaves no build behind."""
    try:
        import mypy.version
    except ImportError as exc:
        raise NativeBuildError(
            "mypy (with mypyc) is not installed: pip install 'slurm-sched[native]'") from exc
    sources = {m: _sha256(source_path(m)) for m in COMPILED}
    with tempfile.TemporaryDirectory(prefix="slurm-sched-native-") as tmp:
        work = Path(tmp)
        (work / "src").mkdir()
        (work / "src" / "slurm_sched").symlink_to(PACKAGE_DIR, target_is_directory=True)
        rel = [str(source_path(m).relative_to(PACKAGE_DIR.parent)) for m in COMPILED]
        proc = subprocess.run([sys.executable, "-c", _BUILD_SCRIPT, str(work), *rel],
                              cwd=work / "src", capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stdout + proc.stderr)[-4000:]
            raise NativeBuildError(f"mypyc build failed (exit {proc.returncode}):\n{tail}")
        lib = work / "lib"
        found = {".".join(so.relative_to(lib).parts)[: -len(_suffix())]: so
                 for so in lib.rglob("*" + _suffix())}
        if not set(COMPILED) <= set(found):
            raise NativeBuildError(f"mypyc built {sorted(found)}, expected {list(COMPILED)}")
        # no half-written build is ever served: the manifest goes first, the new one last
        MANIFEST.unlink(missing_ok=True)
        if NATIVE_DIR.exists():
            shutil.rmtree(NATIVE_DIR)
        NATIVE_DIR.mkdir()
        built = {name: name + _suffix() for name in found}
        for name, so in found.items():
            shutil.copy2(so, NATIVE_DIR / built[name])
    if {m: _sha256(source_path(m)) for m in COMPILED} != sources:
        raise NativeBuildError("a source changed during the build; build again")
    manifest = {"sources": sources, "files": built, "suffix": _suffix(),
                "mypy": mypy.version.__version__, "python": sys.version.split()[0]}
    tmp_manifest = MANIFEST.with_suffix(".tmp")
    tmp_manifest.write_text(json.dumps(manifest, indent=2) + "\n")
    tmp_manifest.replace(MANIFEST)
    if _finder is not None:
        _finder._checked = None  # (modules imported already stay as they are)
    return built
