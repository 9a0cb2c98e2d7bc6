"""systemd's notification protocol (``sd_notify``), without a dependency.

With ``Type=notify`` systemd passes ``NOTIFY_SOCKET`` (a unix datagram socket path, or an abstract
one starting with ``@``); the service sends newline-separated ``KEY=VALUE`` lines to it:
``READY=1`` once it serves, ``WATCHDOG=1`` at least every ``WATCHDOG_USEC / 2`` when
``WatchdogSec=`` is set (systemd kills and restarts a service that misses it), ``STATUS=...`` for
``systemctl status``, ``RELOADING=1`` / ``STOPPING=1``. Without ``NOTIFY_SOCKET`` (not run by
systemd) every call is a no-op. A failed send is logged once and never stops the daemon.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Mapping

log = logging.getLogger(__name__)


class Notifier:
    """Sends notifications to ``env["NOTIFY_SOCKET"]`` (default: the process environment)."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        addr = env.get("NOTIFY_SOCKET", "")
        if addr.startswith("@"):
            addr = "\0" + addr[1:]  # abstract namespace
        elif not addr.startswith("/"):
            addr = ""  # unset, or a vsock address (not supported)
        self.address = addr
        self.watchdog_s = self._watchdog_interval(env)
        self._last_ping = 0.0
        self._warned = False

    @staticmethod
    def _watchdog_interval(env: Mapping[str, str]) -> float | None:
        """``WATCHDOG_USEC`` in seconds, if it is meant for this process."""
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        if not usec.isdigit() or int(usec) == 0:
            return None
        if pid and pid != str(os.getpid()):
            return None
        return int(usec) / 1e6

    @property
    def enabled(self) -> bool:
        return bool(self.address)

    def send(self, *lines: str) -> bool:
        """Send one datagram of ``KEY=VALUE`` lines; True when it was sent."""
        if not self.address:
            return False
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
                s.connect(self.address)
                s.sendall("\n".join(lines).encode("utf-8"))
        except OSError as exc:
            if not self._warned:
                self._warned = True
                log.warning("sd_notify to %r failed: %s", self.address, exc)
            return False
        return True

    def ready(self, status: str = "") -> bool:
        return self.send("READY=1", *([f"STATUS={status}"] if status else []))

    def status(self, text: str) -> bool:
        return self.send(f"STATUS={text}")

    def reloading(self) -> bool:
        return self.send("RELOADING=1")

    def stopping(self) -> bool:
        return self.send("STOPPING=1")

    def watchdog(self, force: bool = False) -> bool:
        """``WATCHDOG=1`` if a watchdog is armed, at most every quarter interval (unless
        ``force``); the daemon calls this after every cycle and while it waits."""
        if self.watchdog_s is None:
            return False
        now = time.monotonic()
        if not force and now - self._last_ping < self.watchdog_s / 4:
            return False
        self._last_ping = now
        return self.send("WATCHDOG=1")
