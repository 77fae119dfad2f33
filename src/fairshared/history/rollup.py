"""Downsampling, incrementally: close the hours and days a cycle has left behind, prune the oldest.

How a downsampled point is made (an hour from its cycles, a day from its hours):

* ``factor``, ``usage`` and ``pending``: the mean over the bucket's cycles (a day's from its hours,
  weighted by the cycles each holds, so it is the mean of the day's cycles).  A blank factor (NULL)
  is left out of its mean; a bucket of blanks only is blank.  ``pending`` is therefore a mean, not
  a whole number: 0.5 is "a job waiting half the hour".
* ``rank``: the rank at the bucket's *last* cycle, not a mean.  A mean rank (3.5) is a place nobody
  held, and it smears a user's step from 10th to 2nd over the bucket; the last rank is one the user
  really had, and it is where the next bucket's cycles start from.  Set beside a mean factor it can
  look inconsistent (a mean factor that ranked 5th next to rank 2): meant.
* ``t``: the bucket's start (UTC), ``n``: how many cycles it holds.

Each write rolls only what it closed: the cycles of the hours between the mark ``hour_done`` and
the hour of the newest cycle, and then the hours of the days between ``day_done`` and the day of
``hour_done``: never a rescan of the tables.

"Now" is the cycle's own time.  A cycle older than ``hour_done`` (the wall clock stepped back) stays
in the cycle table, is rolled into no hour and is pruned with its neighbours; it neither rolls nor
prunes anything itself.  A clock set far forward and back again moved the marks ahead: the cycles
written after it are not deleted by the bogus "now", but they are rolled only from ``hour_done`` on
and the series shows them only from the marks on (:mod:`.query`) until real time passes them.
"""

from __future__ import annotations

import sqlite3

from .rows import DAY, HOUR, floor_to
from .schema import TABLES

__all__ = ["prune", "roll"]

_HOURS = """
INSERT OR REPLACE INTO hour_points (t, assoc, factor, rank, usage, pending, n)
SELECT b, assoc, f, rank, u, p, k FROM (
  SELECT t - t % 3600 AS b, assoc, avg(factor) AS f, rank, avg(usage) AS u, avg(pending) AS p,
         count(*) AS k, max(t)  -- max(): the bare column rank comes from the bucket's last cycle
  FROM cycle_points WHERE t >= ? AND t < ? GROUP BY b, assoc)
"""

_DAYS = """
INSERT OR REPLACE INTO day_points (t, assoc, factor, rank, usage, pending, n)
SELECT b, assoc, f, rank, u, p, k FROM (
  SELECT t - t % 86400 AS b, assoc,
         sum(factor * n) / sum(CASE WHEN factor IS NULL THEN 0 ELSE n END) AS f, rank,
         sum(usage * n) / sum(CASE WHEN usage IS NULL THEN 0 ELSE n END) AS u,
         sum(pending * n) / sum(n) AS p, sum(n) AS k, max(t)
  FROM hour_points WHERE t >= ? AND t < ? GROUP BY b, assoc)
"""


def _meta(con: sqlite3.Connection) -> dict[str, int]:
    return dict(con.execute("SELECT name, value FROM meta"))


def _set(con: sqlite3.Connection, **values: int) -> None:
    con.executemany("UPDATE meta SET value = ? WHERE name = ?", [(v, k) for k, v in values.items()])


def _roll(con, sql: str, res: str, src: str, start: int, end: int, width: int) -> int:
    """Roll the ``src`` points of [start, end) into ``res`` buckets of ``width``; rows added."""
    count = f"SELECT count(*) FROM {TABLES[res]} WHERE t >= ? AND t < ?"
    before = con.execute(count, (start, end)).fetchone()[0]
    con.execute(sql, (start, end))
    con.execute(f"INSERT OR IGNORE INTO times (res, t) SELECT DISTINCT ?, t - t % {width} FROM times "
                f"WHERE res = ? AND t >= ? AND t < ?", (res, src, start, end))
    after = con.execute(count, (start, end)).fetchone()[0]
    return after - before


def roll(con: sqlite3.Connection, now: int) -> None:
    """Close every hour before ``now``'s hour and every day before the last closed hour's day (inside
    the caller's transaction).  The first write only sets the marks: there is nothing before it."""
    m = _meta(con)
    hour_end = floor_to(now, HOUR)
    if m["hour_done"] == 0:
        _set(con, hour_done=hour_end, day_done=floor_to(hour_end, DAY))
        return
    if hour_end > m["hour_done"]:
        added = _roll(con, _HOURS, "hour", "cycle", m["hour_done"], hour_end, HOUR)
        _set(con, hour_done=hour_end, rows_hour=m["rows_hour"] + added)
        m["rows_hour"] += added
    day_end = floor_to(max(hour_end, m["hour_done"]), DAY)
    if day_end > m["day_done"]:
        added = _roll(con, _DAYS, "day", "hour", m["day_done"], day_end, DAY)
        _set(con, day_done=day_end, rows_day=m["rows_day"] + added)


def prune(con: sqlite3.Connection, now: int, keep: dict[str, float]) -> None:
    """Delete what is older than each resolution keeps (``keep``: seconds per resolution), never a
    point not yet rolled into the next resolution (the cycle table keeps what is after
    ``hour_done``, the hour table what is after ``day_done``), and move the ``<res>_from`` marks."""
    m = _meta(con)
    limits = {"cycle": min(now - keep["cycle"], m["hour_done"]),
              "hour": floor_to(int(min(now - keep["hour"], m["day_done"])), HOUR),
              "day": floor_to(int(now - keep["day"]), DAY)}
    for res, cut in limits.items():
        cut = int(cut)
        if cut <= m[f"{res}_from"]:
            continue
        gone = con.execute(f"DELETE FROM {TABLES[res]} WHERE t < ?", (cut,)).rowcount
        con.execute("DELETE FROM times WHERE res = ? AND t < ?", (res, cut))
        _set(con, **{f"{res}_from": cut, f"rows_{res}": m[f"rows_{res}"] - gone})
