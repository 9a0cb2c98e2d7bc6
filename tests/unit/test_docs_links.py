"""Every relative link of the tracked Markdown files leads to a file of the repository, and
every ``#anchor`` to a heading of its target (GitHub's heading slugs)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.unit.test_docs_history import ROOT, tracked_files

#: ``[text](target)``; targets with a scheme (``https:``, ``mailto:``) are not checked.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def prose_lines(text: str) -> list[str]:
    """The lines of a Markdown text outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file's headings (a repeated slug gets ``-1``, ``-2``...)."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for line in prose_lines(path.read_text(encoding="utf-8")):
        m = HEADING.match(line)
        if m:
            s = slug(m.group(1))
            out.add(s if s not in seen else f"{s}-{seen[s]}")
            seen[s] = seen.get(s, 0) + 1
    return out


def broken_links() -> list[str]:
    broken: list[str] = []
    for name in (p for p in tracked_files() if p.endswith(".md")):
        doc = ROOT / name
        for line in prose_lines(doc.read_text(encoding="utf-8")):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue
                file_part, _, anchor = target.partition("#")
                dest = (doc.parent / file_part).resolve() if file_part else doc
                if not dest.exists():
                    broken.append(f"{name}: {target} (no such file)")
                elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                    broken.append(f"{name}: {target} (no such heading)")
    return broken


def test_relative_links_of_the_docs_resolve() -> None:
    assert not broken_links(), "\n".join(broken_links())


def test_slugs_follow_github() -> None:
    assert slug("Decision time (2,000 pending 1-GPU jobs, 64×8 = 512 GPUs)") == (
        "decision-time-2000-pending-1-gpu-jobs-648--512-gpus")
    assert slug("The live Slurm backend (`SlurmBackend`)") == "the-live-slurm-backend-slurmbackend"
