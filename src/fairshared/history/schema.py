"""The history database's tables, and opening one the daemon can trust.

One table per resolution, each keyed ``(t, assoc)`` WITHOUT ROWID: a cycle's rows, and an hour's or
a day's rollup, all land at the end of their B-tree (appended, not scattered), and pruning the
oldest is a range delete at its start.  ``assoc`` is an integer key into ``assoc`` (the names are
written once, not in every row; None is stored as '' because SQLite's UNIQUE holds NULLs distinct).
``times`` lists the bucket starts (the cycles' times for ``cycle``) each table holds: a query for
one association walks them and looks each point up by its primary key instead of scanning every
association's rows of the span.  ``meta`` holds the rollup and pruning marks and the row counts
(kept exact in each write, so that nothing ever counts 100 million rows).

A file is trusted when it is a regular file (not a symbolic link) owned by the daemon's user and
writable by nobody else, like the other state files (``daemon/statefiles.py``, whose directory
checks the service runs on the file's directory), and carries this schema's ``application_id``; a
file that is not SQLite or not ours is *corrupt*.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

APPLICATION_ID = 0x66534831  # "fSH1": PRAGMA application_id of a fairshared history file
TABLES = {"cycle": "cycle_points", "hour": "hour_points", "day": "day_points"}
WAL_LIMIT = 64 * 1024 * 1024  # bytes the write-ahead log is cut back to after a checkpoint
BUSY_MS = 2000  # a lock held by another connection: wait this long, then the cycle goes on without history

_DDL = """
CREATE TABLE IF NOT EXISTS assoc (id INTEGER PRIMARY KEY, account TEXT NOT NULL, user TEXT NOT NULL,
                                  partition TEXT NOT NULL, UNIQUE (account, user, partition));
CREATE INDEX IF NOT EXISTS assoc_user ON assoc (user);
CREATE TABLE IF NOT EXISTS cycle_points (t INTEGER NOT NULL, assoc INTEGER NOT NULL, factor REAL,
    rank INTEGER, usage REAL, pending INTEGER, PRIMARY KEY (t, assoc)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS hour_points (t INTEGER NOT NULL, assoc INTEGER NOT NULL, factor REAL,
    rank INTEGER, usage REAL, pending REAL, n INTEGER, PRIMARY KEY (t, assoc)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS day_points (t INTEGER NOT NULL, assoc INTEGER NOT NULL, factor REAL,
    rank INTEGER, usage REAL, pending REAL, n INTEGER, PRIMARY KEY (t, assoc)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS times (res TEXT NOT NULL, t INTEGER NOT NULL, PRIMARY KEY (res, t)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
"""

# the marks (Unix seconds), see store.py: hours before hour_done are rolled into hour_points, days
# before day_done into day_points; <res>_from: the table holds every point from there on (pruned below)
META = ("hour_done", "day_done", "cycle_from", "hour_from", "day_from", "rows_cycle", "rows_hour", "rows_day")

__all__ = ["APPLICATION_ID", "BUSY_MS", "META", "TABLES", "Refused", "check_trusted", "connect", "create"]


class Refused(ValueError):
    """The file is there but not the daemon's to use (owner, mode, a symbolic link): one line why."""


def check_trusted(path: Path) -> bool:
    """Whether ``path`` exists; :class:`Refused` when it (or its -wal or -shm file) is a symbolic link,
    not a regular file, another user's, or writable by its group or others."""
    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            if p == path:
                return False
            continue
        if stat.S_ISLNK(st.st_mode):
            raise Refused(f"{p} is a symbolic link; refusing to follow it")
        if not stat.S_ISREG(st.st_mode):
            raise Refused(f"{p} is not a regular file")
        if st.st_uid != os.geteuid():
            raise Refused(f"{p} is owned by uid {st.st_uid}, not by this daemon's uid {os.geteuid()}")
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise Refused(f"{p} is writable by others (mode {stat.S_IMODE(st.st_mode):04o}); chmod go-w it")
    return True


def create(path: Path) -> None:
    """Create ``path`` empty, 0600, never through a symbolic link (SQLite would create it 0644 and
    its -wal and -shm files take its mode)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    os.close(fd)


def connect(path: Path, *, write: bool) -> sqlite3.Connection:
    """A connection to the trusted file ``path`` in WAL mode; the writer also makes the schema.

    sqlite3.DatabaseError when the file is not SQLite (SQLITE_NOTADB) or is another application's
    (its application_id is not ours): the caller sets it aside.  Autocommit mode: transactions are
    the caller's ``BEGIN``/``COMMIT``."""
    con = sqlite3.connect(path, timeout=BUSY_MS / 1000, isolation_level=None, check_same_thread=False)
    try:
        con.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
        app = con.execute("PRAGMA application_id").fetchone()[0]
        fresh = con.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0] == 0
        if app != APPLICATION_ID and not fresh:
            raise sqlite3.DatabaseError(f"not a fairshared history file (application_id {app:#x})")
        if write:
            con.execute("PRAGMA journal_mode = WAL")
            # WAL: a power cut loses the last cycles, never the file
            con.execute("PRAGMA synchronous = NORMAL")
            # the log is reused, not shrunk, after a checkpoint: without a limit it stays as big as the
            # largest transaction it ever held (a day's rollup)
            con.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT}")
            if fresh:
                con.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            con.executescript("BEGIN IMMEDIATE;" + _DDL + "COMMIT;")
            con.executemany("INSERT OR IGNORE INTO meta VALUES (?, 0)", [(m,) for m in META])
    except BaseException:
        con.close()
        raise
    return con
