"""The history sink: every computed cycle into SQLite, and the series the API reads back.

:class:`HistoryStore` is a publisher of :class:`~fairshared.daemon.runner.Runner` (``publish(res)``
after every cycle) and what the API's ``/api/v1/history`` calls (``series(keys, since, until)``).
One write is one transaction: the association ids of names not seen before, the cycle's rows
(``executemany``), the hours and days the cycle closed (:mod:`.rollup`) and the pruning.

Nothing here ever stops a cycle.  A write that fails is rolled back, counted by reason in
``fairshared_history_write_failures_total`` (:mod:`.health`), logged once per change of reason (and
once when writes work again), and the next cycle tries again with its own rows (the failed cycle's
are lost):

* ``locked``: another connection held a write transaction for longer than ``schema.BUSY_MS``;
* ``full``: the disk (or ``PRAGMA max_page_count``) is full;
* ``corrupt``: not SQLite, another application's file, or a damaged one: the file (and its -wal and
  -shm) is set aside by ``set_aside`` (the daemon's ``statefiles.set_aside``: renamed
  ``NAME.bad-<unix time>``, kept for a post-mortem) and the same cycle starts a new one;
* ``refused``: a file the daemon must not trust (owner, mode, a symbolic link; :mod:`.schema`),
  left where it is for the operator: nothing is written until it is fixed;
* ``error``: anything else (an I/O error, a read-only file system).

Thread safety: the writer (the cycle's thread) and the readers (the HTTP threads) each have their
own connection, each under its own lock; WAL mode lets a read run beside a write.
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import threading
import time
from pathlib import Path
from typing import Callable

from ..logs import get_logger
from . import rollup, schema
from .health import Health
from .query import read_series
from .rows import DAY, cycle_rows

__all__ = ["HistoryStore", "HistoryUnavailable"]

_REASONS = {sqlite3.SQLITE_BUSY: "locked", sqlite3.SQLITE_LOCKED: "locked", sqlite3.SQLITE_FULL: "full",
            sqlite3.SQLITE_CORRUPT: "corrupt", sqlite3.SQLITE_NOTADB: "corrupt"}


class HistoryUnavailable(RuntimeError):
    """The history cannot be read now (a damaged or refused file): one line why."""


def reason_of(exc: BaseException) -> str:
    """Which failure ``exc`` is: locked, full, corrupt, refused or error (see the module docstring)."""
    if isinstance(exc, schema.Refused):
        return "refused"
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and (code & 0xFF) in _REASONS:
        return _REASONS[code & 0xFF]
    if isinstance(exc, sqlite3.DatabaseError) and "application_id" in str(exc):
        return "corrupt"
    return "error"


RESERVE = 64 * 1024 * 1024  # history.reserve_mb's default, in bytes
ROW_BYTES = 256  # at most what one association's row adds to the file in one write (rows, index, WAL)


def _close_quietly(con: sqlite3.Connection | None) -> None:
    """Close ``con`` if open; a connection to a damaged or vanished file may fail to: it is gone either way."""
    if con is not None:
        try:
            con.close()
        except sqlite3.Error:
            pass


class HistoryStore:
    """The history in the SQLite file ``path``, whose directory the caller has checked; ``keep``:
    seconds each resolution is kept (``{"cycle": 86400, "hour": 31 * 86400, "day": 365 * 86400}``);
    ``enabled`` False writes and reads nothing (the file stays as it is); ``set_aside(path)`` moves a
    damaged file out of the way (the new path, or None)."""

    def __init__(self, path: str | Path, keep: dict[str, float] | None = None, *, enabled: bool = True,
                 set_aside: Callable[[Path], Path | None], reserve: int = RESERVE):
        self.path = Path(path)
        self.reserve = reserve  # bytes the history leaves free on its file system (see write)
        self.set_aside = set_aside
        self.keep = dict(keep or {"cycle": DAY, "hour": 31 * DAY, "day": 365 * DAY})
        self.enabled = enabled
        self.health = Health()
        self.log = get_logger()
        self._write_lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._writer: sqlite3.Connection | None = None
        self._reader: sqlite3.Connection | None = None
        self._generation = 0  # bumped when the file is set aside: the reader reopens
        self._reader_generation = -1
        self._ids: dict[tuple, int] = {}  # association key -> assoc.id of the open file
        self._failing: str | None = None  # the failure last logged (reason and message), once per change

    def configure(self, keep: dict[str, float], enabled: bool, reserve: int | None = None) -> None:
        """A reload's retentions, switch and reserve, from the next write on."""
        self.keep, self.enabled = dict(keep), enabled
        if reserve is not None:
            self.reserve = reserve

    # -- writing ------------------------------------------------------------------------------------

    def publish(self, res) -> None:
        """Record one finished cycle (nothing when it computed no result, or the history is off)."""
        if not self.enabled:
            return
        got = cycle_rows(res)
        if got is not None:
            self.write(*got)

    def write(self, t: int, rows: list[tuple]) -> bool:
        """Store the rows of the cycle at ``t`` (see :func:`.rows.cycle_rows`); whether it worked.
        Never raises for the database's sake: see the module docstring."""
        with self._write_lock:
            t0 = time.monotonic()
            short = self._short_of_room(len(rows))
            if short:  # the push state shares this file system: it must find room when it saves
                return self._failed("reserve", OSError(errno.ENOSPC, short))
            try:
                self._write(t, rows)
            except (sqlite3.Error, OSError, schema.Refused) as exc:
                reason = reason_of(exc)
                if reason == "corrupt" and self._start_afresh(exc):
                    try:
                        self._write(t, rows)
                    except (sqlite3.Error, OSError, schema.Refused) as again:
                        return self._failed(reason_of(again), again)
                    self.health.written(time.monotonic() - t0, self._sizes())
                    return True
                return self._failed(reason, exc)
            self.health.written(time.monotonic() - t0, self._sizes())
            if self._failing is not None:
                self.log.info("history writes work again", file=str(self.path))
                self._failing = None
            return True

    def _connection(self) -> sqlite3.Connection:
        if self._writer is None:
            if not schema.check_trusted(self.path):
                schema.create(self.path)
            con = schema.connect(self.path, write=True)
            self._ids = {(a, u or None, p or None): i
                         for i, a, u, p in con.execute("SELECT id, account, user, partition FROM assoc")}
            self._writer = con
        return self._writer

    def _write(self, t: int, rows: list[tuple]) -> None:
        if not schema.check_trusted(self.path):  # Refused: a file swapped or chmod-ed under the connection
            self._close_writer()  # removed under it: the connection would write to the deleted file
        con = self._connection()
        con.execute("BEGIN IMMEDIATE")
        try:
            new = [r[0] for r in rows if r[0] not in self._ids]
            ids: dict[tuple, int] = {}
            for a, u, p in new:
                rowid = con.execute("INSERT INTO assoc (account, user, partition) VALUES (?, ?, ?)",
                                    (a, u or "", p or "")).lastrowid
                assert rowid is not None  # an INSERT's row id (None only before any)
                ids[(a, u, p)] = rowid
            known = {**self._ids, **ids}
            # a cycle in the same second as the last one replaces it
            gone = con.execute("DELETE FROM cycle_points WHERE t = ?", (t,)).rowcount
            # in key order: appended to the B-tree's end, pages filled whole
            points = sorted(((known[k], f, r, u, n) for k, f, r, u, n in rows), key=lambda p: p[0])
            added = con.executemany("INSERT INTO cycle_points VALUES (?, ?, ?, ?, ?, ?)",
                                    [(t, *p) for p in points]).rowcount
            con.execute("INSERT OR IGNORE INTO times VALUES ('cycle', ?)", (t,))
            con.execute("UPDATE meta SET value = value + ? WHERE name = 'rows_cycle'", (added - gone,))
            rollup.roll(con, t)
            rollup.prune(con, t, self.keep)
            con.execute("COMMIT")
        except BaseException:
            try:
                con.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise
        self._ids = known

    def _close_writer(self) -> None:
        _close_quietly(self._writer)
        self._writer, self._ids = None, {}

    def _start_afresh(self, exc: BaseException) -> bool:
        """Set the damaged file (and its -wal and -shm) aside; whether a new one may be started."""
        self._close_writer()
        self._generation += 1
        moved = self.set_aside(self.path)
        for side in ("-wal", "-shm"):
            p = self.path.with_name(self.path.name + side)
            if os.path.lexists(p):
                self.set_aside(p)
        self.health.failed("corrupt")
        self.log.error("history database cannot be read: set aside, starting a new one", file=str(self.path),
                       moved_to=str(moved) if moved else None, error=str(exc)[:300])
        return not os.path.lexists(self.path)

    def _short_of_room(self, rows: int) -> str | None:
        """Why this write would eat into the reserve, or None.  The history grows (~1.2 GiB a day at
        100,000 associations) in the state directory by default, beside the push state, whose save
        before every push must not fail for want of room: a 256 KiB state file system filled by the
        history stopped every push of a live fault drill.  ``rows`` x ROW_BYTES bounds what one
        write adds (rows, index and WAL)."""
        try:
            free = shutil.disk_usage(self.path.parent).free
        except OSError:
            return None  # the write itself will say what is wrong
        if free - rows * ROW_BYTES >= self.reserve:
            return None
        return (f"{free} bytes free on the history's file system, below the {self.reserve} it leaves for the "
                f"push state (history.reserve_mb)")

    def _failed(self, reason: str, exc: BaseException) -> bool:
        if reason not in ("locked", "full", "reserve"):  # the connection itself is sound for those
            self._close_writer()  # reopened (and re-checked) by the next write
        self.health.failed(reason)
        said = f"{reason}: {exc}"
        if said != self._failing:
            self._failing = said
            self.log.error("history not written; the next cycle tries again", file=str(self.path),
                           reason=reason, error=str(exc)[:300])
        return False

    def _sizes(self) -> tuple[dict[str, int], int]:
        """Rows per resolution and the bytes on disk, right after a write (its connection still open)."""
        con = self._connection()
        rows = dict(con.execute("SELECT substr(name, 6), value FROM meta WHERE name LIKE 'rows_%'"))
        size = 0
        for side in ("", "-wal"):
            try:
                size += os.stat(self.path.with_name(self.path.name + side)).st_size
            except OSError:
                pass
        return rows, size

    # -- reading ------------------------------------------------------------------------------------

    def series(self, keys, since: float | None = None, until: float | None = None) -> list[dict]:
        """The points of the associations ``keys`` between ``since`` and ``until`` (Unix seconds,
        None = unbounded); see :func:`.query.read_series` for the answer and which resolution
        serves which part of the span.  [] when the history is off or has no file yet;
        :class:`HistoryUnavailable` when the file cannot be read (an API answers 503), ValueError for
        a key that is not three parts or is all None (a caller's bug: 400)."""
        if not self.enabled:
            return []
        with self._read_lock:
            try:
                con = self._read_connection()
                if con is None:
                    return []
                return read_series(con, list(keys), since, until)
            except (sqlite3.Error, OSError, schema.Refused) as exc:
                self._drop_reader()
                raise HistoryUnavailable(f"history {self.path}: {reason_of(exc)}: {exc}") from None

    def _read_connection(self) -> sqlite3.Connection | None:
        if self._reader is not None and self._reader_generation == self._generation:
            return self._reader
        self._drop_reader()
        if not schema.check_trusted(self.path):
            return None
        self._reader_generation = self._generation
        self._reader = schema.connect(self.path, write=False)
        return self._reader

    def _drop_reader(self) -> None:
        _close_quietly(self._reader)
        self._reader = None

    def close(self) -> None:
        with self._write_lock:
            self._close_writer()
        with self._read_lock:
            self._drop_reader()
