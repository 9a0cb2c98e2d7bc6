"""Docs, comments and docstrings state what is true now; they never narrate how the work went.

Scanned: every tracked Markdown file, the other tracked text docs (``plugin/``,
``sbatch_templates/``, ``docker/``, ``scripts/``, ``.ci/``), and the comments and docstrings of
every tracked ``.py`` file. Flagged: the phrases of :data:`NARRATION`. :data:`ALLOWED` lists
the few legitimate uses of those words (a Slurm error message, a comparison, an upstream
project's issue tracker), each as a phrase matched where the hit is.
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: This file quotes the phrases it looks for.
_SELF = "tests/unit/test_docs_history.py"


def _phrase(rx: str) -> re.Pattern[str]:
    """A case-insensitive pattern whose spaces also match a line break, so a phrase wrapped
    across lines is still one phrase."""
    return re.compile(rx.replace(" ", r"\s+"), re.IGNORECASE)


#: Phrases that narrate how the work went instead of stating what is true.
NARRATION: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, _phrase(rx))
    for name, rx in (
        ("numbered work session", r"\bsessions? \d+"),
        ("issue number", r"\bissues? #?\d+"),
        ("bare issue reference", r"(?<![\w&#])#\d{1,4}\b"),
        ("note to the lead", r"\bthe lead(?:'s)?\b"),
        ("this task", r"\b(?:this|the) task(?:'s)?\b"),
        ("commit message", r"\bcommit message\b"),
        ("before/after a change",
         r"\b(?:before|after|since|until) (?:this|that) (?:change|fix|commit)\b"),
        ("previously", r"\bpreviously\b"),
        ("no longer", r"\bno longer\b"),
        ("used to", r"\bused to (?:be|do|wait|take|run|call|fail)\b"),
        ("what was done", r"\b(?:was|were) (?:tried|fixed|reverted)\b"),
        ("we changed", r"\bwe (?:added|fixed|changed|removed|moved|replaced|rewrote|renamed)\b"),
        ("not adopted", r"\bnot adopted\b"),
        ("earlier design", r"\b(?:earlier|older|old|first) (?:design|version of the code)\b"),
    )
)

#: Legitimate uses of flagged words: (path, or "*" for every file; a phrase around the hit).
ALLOWED: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (path, _phrase(rx))
    for path, rx in (
        ("*", r"no longer pending"),  # Slurm's error text for a job that has started
        ("*", r"no longer than"),  # a comparison of durations
        ("slurm_sched/policy/pollux.py", r"a jump that no longer fits"),
        ("slurm_sched/runtime/interleave.py", r"the others no longer wait"),
        ("slurm_sched/runtime/launch.py", r"may no longer find"),
        ("slurm_sched/policy/themis.py", r"Muri issue #3"),  # the Muri artifact's own tracker
    )
)

#: Tracked text docs besides Markdown, read whole.
TEXT_DOC_DIRS = ("plugin/", "sbatch_templates/", "docker/", "scripts/", ".ci/")
BINARY_SUFFIXES = {".json", ".csv", ".png", ".gz", ".tar", ".pt"}


def tracked_files() -> list[str]:
    """Paths git tracks, relative to the repository root (the tree without git: every file
    outside hidden, build and cache folders)."""
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout
        return [line for line in out.splitlines() if line]
    except (OSError, subprocess.CalledProcessError):
        skip = {".venv", ".git", "__pycache__", "_native", "results", "build", ".pytest_cache"}
        return [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")
                if p.is_file() and not skip.intersection(p.relative_to(ROOT).parts[:-1])
                and not p.relative_to(ROOT).parts[0].startswith(".")]


def doc_files(paths: list[str]) -> list[str]:
    """Markdown anywhere, plus the text docs of :data:`TEXT_DOC_DIRS`."""
    return [p for p in paths
            if p.endswith(".md")
            or (p.startswith(TEXT_DOC_DIRS) and Path(p).suffix not in BINARY_SUFFIXES)]


def python_prose(source: str) -> Iterator[tuple[int, str]]:
    """(first line, text) of every run of consecutive comment lines and of every docstring (a
    string statement) of ``source``."""
    comments: list[tuple[int, str]] = [
        (tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT]
    start, block, last = 0, [], -1
    for lineno, text in comments:
        if lineno != last + 1 and block:
            yield start, "\n".join(block)
            block = []
        if not block:
            start = lineno
        block.append(re.sub(r"^#+:?", "", text))  # the comment's text, wrapped lines joined
        last = lineno
    if block:
        yield start, "\n".join(block)
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            yield node.lineno, node.value.value


def hits(path: str, blocks: Iterator[tuple[int, str]]) -> Iterator[str]:
    """``path:line: [pattern] text`` for every narrating phrase not covered by :data:`ALLOWED`."""
    for first, text in blocks:
        for name, rx in NARRATION:
            for m in rx.finditer(text):
                allowed = any(
                    where in ("*", path) and any(a.start() <= m.start() and m.end() <= a.end()
                                                 for a in ok.finditer(text))
                    for where, ok in ALLOWED)
                if not allowed:
                    line = first + text.count("\n", 0, m.start())
                    context = " ".join(text[max(0, m.start() - 50):m.end() + 50].split())
                    yield f"{path}:{line}: [{name}] ...{context}..."


def narration_hits(paths: list[str]) -> list[str]:
    """Every narrating phrase of the tracked docs and of the tracked Python prose."""
    found: list[str] = []
    for path in doc_files(paths):
        text = (ROOT / path).read_text(encoding="utf-8", errors="replace")
        found += hits(path, iter([(1, text)]))
    for path in (p for p in paths if p.endswith(".py")):
        found += hits(path, python_prose((ROOT / path).read_text(encoding="utf-8")))
    return found


def test_docs_comments_and_docstrings_do_not_narrate_history() -> None:
    paths = [p for p in tracked_files() if p != _SELF]
    found = narration_hits(paths)
    assert not found, "narration of how the work went:\n" + "\n".join(found)


@pytest.mark.parametrize(("text", "flagged"), [
    ("Since session 10 every variant meets it.", True),
    ("Target (issue #10): one decide() <= 1 s.", True),
    ("Note for the lead: hints.md says otherwise.", True),
    ("The per-job loop no longer computes a speed.", True),
    ("This was tried and\n  rejected.", True),
    ('A go answered "Job is no longer pending execution".', False),
    ("a group whose period is no longer than running alone", False),
    ("stage 2 of the pipeline runs on server 1", False),
    ("--cpus-per-task comes from the job", False),
])
def test_the_patterns_tell_narration_from_prose(text: str, flagged: bool) -> None:
    assert bool(list(hits("docs/x.md", iter([(1, text)])))) is flagged


def test_a_phrase_wrapped_across_comment_lines_is_found() -> None:
    source = "x = 1  # this was\n# tried and predicts worse\n"
    assert [h.split(": [")[0] for h in hits("a.py", python_prose(source))] == ["a.py:1"]
