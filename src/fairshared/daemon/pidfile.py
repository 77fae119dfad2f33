"""``fairshared recompute --signal``: signal the daemon of a pid file, and nothing else.

A pid file is only a claim.  Before SIGUSR1 goes out, :func:`signal_daemon` checks that

* the file is a regular file, not a symbolic link (opened with O_NOFOLLOW);
* its owner is this user, root, or the user the named process runs as (the daemon wrote its own
  pid file: under systemd root runs this command and the file belongs to ``fairshared``) -- so a
  file planted by one user never makes another's process a target;
* nobody else may write it (no g+w, no o+w);
* it holds a pid, that process's command line says ``fairshared``, and that process holds the
  exclusive lock the daemon keeps on its pid file for its whole life (``/proc/locks``): a stale
  file's pid, reused by ``tail -f /var/log/fairshared.log``, names a process that says
  fairshared but is not the daemon.

The process is then held by a pidfd while it is checked and signalled through it, so a pid reused
in between cannot be hit.  Every refusal is an InputError naming the file: one line, exit 2.
"""

from __future__ import annotations

import os
import signal
import stat
from pathlib import Path

from ..model import InputError

__all__ = ["signal_daemon"]


def _read_pid(path: Path) -> tuple[int, int]:
    """(pid, owner uid) of a pid file that passes the file checks."""
    pid, st = _read_pid_stat(path)
    return pid, st.st_uid


def _read_pid_stat(path: Path) -> tuple[int, os.stat_result]:
    """(pid, the file's stat) of a pid file that passes the file checks."""
    where = f"pid file {path}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        reason = "is a symbolic link; refusing to follow it" if os.path.islink(path) else \
            f"cannot open: {exc.strerror or exc}"
        raise InputError(reason, where) from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise InputError("is not a regular file", where)
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            mode = stat.S_IMODE(st.st_mode)
            raise InputError(f"is writable by others (mode {mode:04o}): not trusted", where)
        text = fh.read(32).decode("ascii", "replace").strip()
    if not text.isdigit() or int(text) <= 0:
        raise InputError(f"holds no pid ({text[:20]!r})", where)
    return int(text), st


def _holds_lock(pid: int, st: os.stat_result) -> bool:
    """Whether ``pid`` holds a lock on the file ``st`` describes, as ``/proc/locks`` lists them
    (``1: FLOCK  ADVISORY  WRITE 1234 fe:00:5310721 0 EOF``; waiters' lines, ``->``, are skipped)."""
    ident = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as fh:
            for line in fh:
                fields = line.split()
                if len(fields) >= 6 and fields[1] != "->" and fields[4] == str(pid) and fields[5] == ident:
                    return True
    except OSError:
        pass
    return False


def _process_uid(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Uid:"):
                return int(line.split()[1])  # the real uid
    except (OSError, ValueError, IndexError):
        pass
    return None


def signal_daemon(path: Path, signum: int = signal.SIGUSR1) -> int:
    """Send ``signum`` to the fairshared process of pid file ``path``; its pid.  InputError otherwise."""
    where = f"pid file {path}"
    pid, st = _read_pid_stat(path)
    owner = st.st_uid
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        raise InputError(f"names pid {pid}, which is not running (is the daemon stopped?)", where) from None
    except OSError:  # no pidfd on this kernel: plain kill() after the same checks
        pidfd = None
    try:
        uid = _process_uid(pid)
        if owner not in (os.geteuid(), 0) and owner != uid:
            raise InputError(f"belongs to uid {owner}, neither this user ({os.geteuid()}), root, nor the "
                             f"user of pid {pid}: not trusted", where)
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            raise InputError(f"names pid {pid}, which is not running (is the daemon stopped?)",
                             where) from None
        if b"fairshared" not in cmdline:
            shown = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()[:80]
            raise InputError(f"names pid {pid}, which is not fairshared ({shown!r}): not signalled", where)
        if not _holds_lock(pid, st):
            shown = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()[:80]
            raise InputError(f"names pid {pid} ({shown!r}), which does not hold the pid file's lock: a stale "
                             f"file (is the daemon stopped?), not signalled", where)
        try:
            if pidfd is not None:
                signal.pidfd_send_signal(pidfd, signum)
            else:
                os.kill(pid, signum)
        except OSError as exc:
            raise InputError(f"cannot signal pid {pid}: {exc.strerror or exc}", where) from None
    finally:
        if pidfd is not None:
            os.close(pidfd)
    return pid
