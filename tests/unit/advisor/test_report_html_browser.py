"""The HTML report in a real headless browser: the plots render, the page is not blank, and it
makes no network request.

Needs a Chromium binary: ``scripts/setup.sh`` installs Debian's ``chromium-headless-shell``,
so the suite runs this wherever setup ran; elsewhere it is skipped, saying so, except under
``CI=true``, where a missing browser is a failure.

No request can escape unseen: every request is sent to a local TCP listener, through
``--proxy-server`` (``<-loopback>`` takes away the proxy's implicit bypass of localhost) and
``--host-resolver-rules`` (any host name resolves to it); the test checks that the trap catches
an ``<img>`` of a remote URL, then that the report reaches it never.
"""

from __future__ import annotations

import html.parser
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from slurm_sched.advisor import report_html
from tests.unit.advisor.conftest import make_advice

BROWSERS = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome",
            "chrome-headless-shell")


def _browser() -> str:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    why = "no Chromium binary on PATH (scripts/setup.sh installs chromium-headless-shell)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why}: CI must check the HTML report in a real browser")
    pytest.skip(why)


class Trap:
    """A TCP listener on 127.0.0.1 that records every connection made to it."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(1.0)
                try:
                    first = conn.recv(200)
                except OSError:
                    first = b""
                self.connections.append(first)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


@pytest.fixture
def trap() -> Iterator[Trap]:
    t = Trap()
    yield t
    t.close()


def _run(browser: str, trap: Trap, profile: Path, page: Path, *extra: str) -> str:
    argv = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-default-apps", "--disable-extensions", f"--user-data-dir={profile}",
        f"--proxy-server=127.0.0.1:{trap.port}", "--proxy-bypass-list=<-loopback>",
        f"--host-resolver-rules=MAP * 127.0.0.1:{trap.port}",
        "--virtual-time-budget=3000", "--window-size=1200,2400", *extra, page.as_uri(),
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


class _Svg(html.parser.HTMLParser):
    """Counts the ``<svg>`` elements and the ``<path>`` elements inside them."""

    def __init__(self) -> None:
        super().__init__()
        self.svgs = 0
        self.paths_in_svg = 0
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "svg":
            self.svgs += 1
            self._depth += 1
        elif tag == "path" and self._depth:
            self.paths_in_svg += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self._depth -= 1


def test_the_trap_catches_a_remote_request(trap: Trap, tmp_path: Path) -> None:
    browser = _browser()
    page = tmp_path / "remote.html"
    page.write_text('<!DOCTYPE html><html><body><img src="http://example.org/x.png">'
                    "</body></html>")
    _run(browser, trap, tmp_path / "profile", page, "--dump-dom")
    assert trap.connections, "a remote image should have reached the listener"


def test_report_renders_its_plots_offline(trap: Trap, tmp_path: Path) -> None:
    browser = _browser()
    page = report_html.write(make_advice(days=3, resamples=20), tmp_path / "report.html")
    dom = _run(browser, trap, tmp_path / "profile", page, "--dump-dom")
    parsed = _Svg()
    parsed.feed(dom)
    assert parsed.svgs == 4
    assert parsed.paths_in_svg > 20
    assert "Recommendation:" in dom

    shot = tmp_path / "shot.png"
    _run(browser, trap, tmp_path / "profile", page, f"--screenshot={shot}")
    with Image.open(shot) as img:
        rgb = img.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 20) or []
        pixels = rgb.width * rgb.height
    assert len(colours) > 50  # text, lines and bars in several colours
    white = sum(n for n, c in colours if c == (255, 255, 255))
    assert white < 0.97 * pixels
    assert trap.connections == []
