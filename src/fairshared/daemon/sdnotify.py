"""systemd's sd_notify protocol without libsystemd (see sd_notify(3), systemd.service(5)).

Protocol: newline-separated ``KEY=VALUE`` lines sent as one datagram on the AF_UNIX/SOCK_DGRAM
socket named in ``$NOTIFY_SOCKET`` (a leading ``@`` means Linux's abstract namespace).

Every function is a silent no-op returning False when ``$NOTIFY_SOCKET`` is unset (not under
systemd, or a unit that is not ``Type=notify``), and none raises: a notification is best effort
and must never take the daemon down.  No logging either, so it is safe to call from anywhere
(signal paths, worker threads: the sender PID is still the main PID for ``NotifyAccess=main``).
"""

from __future__ import annotations

import os
import socket
import time

__all__ = ["notify", "ready", "stopping", "reloading", "status", "watchdog", "watchdog_interval"]

# A datagram to systemd is only ever delayed when PID 1 is not draining its queue; do not let that
# block the caller (the main loop pings the watchdog) for longer than this.
SEND_TIMEOUT = 5.0


def _address(env: str) -> str | bytes | None:
    if env.startswith("@"):
        return b"\0" + os.fsencode(env[1:])  # abstract namespace
    if env.startswith("/"):
        return env
    return None  # e.g. "vsock:CID:PORT" (systemd >= 254, VMs): not supported here


def notify(*lines: str) -> bool:
    """Send ``lines`` (e.g. ``"READY=1"``, ``"STATUS=..."``) as one datagram.  True if it was sent."""
    try:
        env = os.environ.get("NOTIFY_SOCKET")
        if not env or not lines:
            return False
        addr = _address(env)
        if addr is None:
            return False
        data = "\n".join(lines).encode("utf-8")
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.settimeout(SEND_TIMEOUT)
            sock.connect(addr)
            sock.sendall(data)
        return True
    except Exception:  # noqa: BLE001 - best effort by contract
        return False


def _one_line(text: object) -> str:
    return " ".join(str(text).splitlines())


def ready(status: str | None = None) -> bool:
    """Start-up (or a reload) is complete: ``READY=1`` (+ ``STATUS=``)."""
    return notify("READY=1", *([f"STATUS={_one_line(status)}"] if status is not None else []))


def stopping() -> bool:
    return notify("STOPPING=1")


def reloading() -> bool:
    """``RELOADING=1`` with ``MONOTONIC_USEC=`` (required by Type=notify-reload, systemd >= 253).

    Follow it with ``ready()`` when the reload is done (or rejected).
    """
    try:
        usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    except Exception:  # noqa: BLE001
        return False
    return notify("RELOADING=1", f"MONOTONIC_USEC={usec}")


def status(text: str) -> bool:
    """Free-form one-line status shown by ``systemctl status``."""
    return notify(f"STATUS={_one_line(text)}")


def watchdog() -> bool:
    """Keep-alive ping: ``WATCHDOG=1``."""
    return notify("WATCHDOG=1")


def watchdog_interval() -> float | None:
    """Seconds between keep-alive pings (half of ``$WATCHDOG_USEC``), or None if no watchdog is asked for.

    Like sd_watchdog_enabled(3): if ``$WATCHDOG_PID`` is set, the watchdog is ours only when it
    names this process (a child that inherited the environment must not ping).
    """
    try:
        usec = int(os.environ.get("WATCHDOG_USEC", ""))
        if usec <= 0:
            return None
        pid = os.environ.get("WATCHDOG_PID")
        if pid is not None and int(pid) != os.getpid():
            return None
        return usec / 2 / 1_000_000
    except Exception:  # noqa: BLE001 - unset or malformed: no watchdog
        return None
