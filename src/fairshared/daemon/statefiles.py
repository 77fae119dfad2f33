"""The daemon's own files in its state directory: written safely, read with suspicion.

* :func:`check_directory` — the directory exists (created 0700), is not a symbolic link, is
  ours and not writable by anyone else; otherwise one line naming it (a file there could be
  swapped under us).  Its parents too, before anything is created: each is ours or root's, not
  writable by others unless sticky, and a symbolic link among them is ours or root's (another
  user's link chose where the state went, their directory could swap it).
* :func:`check_not_symlink`, :func:`append_line` — the audit log is refused when it is a
  symbolic link, and appended to with O_NOFOLLOW (a link planted later fails the write), a
  record whole or not at all (a full disk leaves no half line).
* :func:`write_atomic` — ``mkstemp`` in the directory (O_EXCL: never follows a planted
  symlink), write, fsync, ``rename`` over the name (replaces a symlink, never writes through
  it), fsync the directory so the rename survives a crash.
* :func:`read_json` — O_NOFOLLOW, a regular file, at most ``max_bytes``; anything else is
  :class:`Untrusted`.
* :func:`set_aside` — an untrusted file is renamed ``NAME.bad-<unix time>`` (kept for a
  post-mortem), never deleted and never fatal.
* :func:`lock` — an exclusive ``flock`` held for the process's life: a second daemon on the
  same directory or pid file stops with one line (a pid file of another user's, see
  :func:`foreign_owner`, is not locked: the daemon runs without one), and so does a pid that
  cannot be written (a full disk: ``cannot write: No space left on device``).
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import tempfile
import time
from pathlib import Path

from ..model import InputError

__all__ = ["Untrusted", "append_line", "check_directory", "check_not_symlink", "foreign_owner", "lock",
           "read_json",
           "set_aside", "write_atomic"]

MAX_STATE_BYTES = 256 * 1024 * 1024


class Untrusted(ValueError):
    """A state file that exists but cannot be trusted (not a regular file, too big, not JSON)."""


def _check_parents(d: Path) -> None:
    """InputError when a parent of ``d`` (as written, then as resolved) belongs to another user, is
    writable by others without the sticky bit, or is a symbolic link another user owns."""
    me = os.geteuid()
    where = f"state directory {d}"
    lexical = Path(os.path.abspath(d)).parent
    for chain in (lexical, Path(os.path.realpath(lexical))):
        for p in [*reversed(chain.parents), chain]:
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                break  # the rest is created by us
            except OSError as exc:
                raise InputError(f"cannot read its parent {p}: {exc.strerror or exc}", where) from None
            if stat.S_ISLNK(st.st_mode):
                if st.st_uid not in (me, 0):
                    raise InputError(f"its parent {p} is a symbolic link owned by uid {st.st_uid}, neither "
                                     f"this user nor root: refusing to follow it", where)
                continue
            if st.st_uid not in (me, 0):
                raise InputError(f"its parent {p} is owned by uid {st.st_uid}, neither this user nor root: "
                                 f"that user could swap the directory", where)
            if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
                mode = stat.S_IMODE(st.st_mode)
                raise InputError(f"its parent {p} is writable by others (mode {mode:04o}), not sticky",
                                 where)


def check_directory(d: Path) -> None:
    _check_parents(d)
    try:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
    except FileExistsError:
        pass  # a file (or a dangling symlink) by that name: refused just below
    except OSError as exc:
        raise InputError(f"cannot create: {exc.strerror or exc}", f"state directory {d}") from None
    try:
        st = os.lstat(d)  # not stat(): a symlink is refused, never followed to wherever it points
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", f"state directory {d}") from None
    if stat.S_ISLNK(st.st_mode):
        raise InputError(f"is a symbolic link (to {os.readlink(d)!r}); refusing to follow it: "
                         f"give the real directory", f"state directory {d}")
    if not stat.S_ISDIR(st.st_mode):
        raise InputError("is not a directory", f"state directory {d}")
    if st.st_uid != os.geteuid():
        raise InputError(f"is owned by uid {st.st_uid}, not by this daemon's uid {os.geteuid()}",
                         f"state directory {d}")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise InputError(f"is writable by others (mode {stat.S_IMODE(st.st_mode):04o}); chmod go-w it",
                         f"state directory {d}")


def check_not_symlink(path: Path, what: str) -> None:
    """A file the daemon will append to: refused (one line naming it) when it is a symbolic link."""
    if os.path.islink(path):
        raise InputError(f"is a symbolic link (to {os.readlink(path)!r}); refusing to follow it: "
                         f"give the real file", f"{what} {path}")


def append_line(path: Path, line: str) -> None:
    """Append ``line`` (one record, ending in a newline) to ``path`` (created 0600), never through a
    symbolic link (ELOOP instead), whole or not at all: a write that fails part-way (a full disk)
    is cut off again before the OSError is raised, so the next record is never glued onto half of
    this one.  Should a partial line be there already (the cut failed too, or an older version
    left it), the record starts on a line of its own."""
    data = line.encode("utf-8")
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        start = os.lseek(fd, 0, os.SEEK_END)
        if start and os.pread(fd, 1, start - 1) != b"\n":
            data = b"\n" + data
        done = 0
        try:
            while done < len(data):
                done += os.write(fd, data[done:])
        except OSError:
            if done:
                try:
                    os.ftruncate(fd, start)
                except OSError:
                    pass
            raise
    finally:
        os.close(fd)


def write_atomic(d: Path, name: str, data: bytes) -> None:
    """Replace ``d/name`` by ``data``, durably; raises OSError (the old file stays intact)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, d / name)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def read_json(path: Path, max_bytes: int = MAX_STATE_BYTES):
    """The parsed JSON of ``path``; None when it does not exist; :class:`Untrusted` otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:  # ELOOP: a symlink
        raise Untrusted(f"cannot open: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise Untrusted("not a regular file")
        if st.st_size > max_bytes:
            raise Untrusted(f"{st.st_size} bytes, more than {max_bytes}")
        raw = fh.read(max_bytes + 1)
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise Untrusted(f"not JSON: {str(exc)[:200]}") from None


def set_aside(path: Path) -> Path | None:
    """Rename an untrusted file out of the way; the new path, or None if even that failed."""
    dest = path.with_name(f"{path.name}.bad-{int(time.time())}")
    try:
        os.replace(path, dest)
        return dest
    except OSError:
        try:
            os.unlink(path)
        except OSError:
            pass
        return None


def foreign_owner(path: Path) -> int | None:
    """The uid of ``path`` when it exists (a symbolic link included) and belongs to another user."""
    try:
        uid = os.lstat(path).st_uid
    except OSError:
        return None
    return uid if uid != os.geteuid() else None


def lock(path: Path, what: str) -> int:
    """Hold an exclusive lock on ``path`` (created 0600, never through a symlink); the fd to keep open.

    ``what`` names the file in the one-line error when another process holds it.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror or exc}", f"{what} {path}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = ""
        try:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        except OSError:
            pass
        os.close(fd)
        raise InputError("in use by another fairshared" + (f" (pid {holder})" if holder.isdigit() else ""),
                         f"{what} {path}") from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError as exc:  # a full disk (ENOSPC), a read-only or failing one: one line, not a traceback
        os.close(fd)
        raise InputError(f"cannot write: {exc.strerror or exc}", f"{what} {path}") from None
    return fd
