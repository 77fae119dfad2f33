"""Reading the history back: which resolution serves which part of a span, and the series.

Each part of the asked span is served by the finest resolution that holds it *whole*:

* ``cycle`` points from ``Bc`` on, where ``Bc`` is the first hour boundary at or after ``cycle_from``
  (from there on the cycle table holds every cycle written; before it, the hour the pruning cut
  into is served whole by its hourly point instead of by its last few cycles);
* ``hour`` points for the buckets from ``Bh`` up to ``Bc``, where ``Bh`` is the first day boundary at
  or after ``hour_from`` (same rule, one level up);
* ``day`` points for the buckets before ``Bh``.

A bucket is in the answer when it overlaps ``[since, until]`` (its start may be before ``since``); a
cycle when its time is inside.  So the points of an association follow each other in time without a
gap or an overlap between resolutions: a day's mean is never shown beside the hours it was made of.
While the history is younger than a resolution's retention nothing has been pruned, ``Bc`` is
before everything and all of it is served at cycle resolution.
"""

from __future__ import annotations

import math
import sqlite3

from .rows import DAY, HOUR, ceil_to, floor_to
from .schema import TABLES

__all__ = ["coverage", "read_series"]

FAR = 2 ** 62  # an unbounded end of a span


def coverage(marks: dict[str, int], since: float | None, until: float | None) -> list[tuple[str, int, int]]:
    """(resolution, first t, end t) of each part of the span, coarsest first, ``t`` being a bucket's
    start (a cycle's time): the rule of the module docstring over the marks ``cycle_from`` and
    ``hour_from`` (:mod:`.schema`)."""
    lo = -FAR if since is None else math.floor(since)
    first = -FAR if since is None else math.ceil(since)
    end = FAR if until is None else math.floor(until) + 1  # exclusive
    bc = ceil_to(marks["cycle_from"], HOUR)
    bh = min(ceil_to(marks["hour_from"], DAY), bc)  # meant: a config that kept hours shorter than cycles
    # each from the bucket that holds since
    parts = [("day", lo if since is None else floor_to(lo, DAY), min(bh, end)),
             ("hour", max(floor_to(lo, HOUR), bh), min(bc, end)),
             ("cycle", max(first, bc), end)]
    return [p for p in parts if p[1] < p[2]]


def _where(key) -> tuple[str, list]:
    """The WHERE clause selecting the associations of ``key``: a None part matches any value."""
    names = ("account", "user", "partition")
    if len(key) != 3 or all(v is None for v in key):
        raise ValueError(f"history key {key!r}: give (account, user, partition), not all of them None")
    clauses = [(f"{n} = ?", v) for n, v in zip(names, key) if v is not None]
    return " AND ".join(c for c, _ in clauses), [v for _, v in clauses]


def _associations(con: sqlite3.Connection, keys) -> dict[int, tuple]:
    found: dict[int, tuple] = {}
    for key in keys:
        where, args = _where(key)
        for i, a, u, p in con.execute(f"SELECT id, account, user, partition FROM assoc WHERE {where}", args):
            found[i] = (a, u or None, p or None)
    return found


def read_series(con: sqlite3.Connection, keys, since: float | None, until: float | None) -> list[dict]:
    """The series of the associations matching ``keys`` ((account, user, partition) each; a None part
    matches any: ``("physics", "alice", None)`` is alice's associations in physics in every
    partition), over ``[since, until]``.

    One dict per association and resolution that has points in the span: ``{"account", "user",
    "partition", "resolution": "cycle"|"hour"|"day", "points": [[t, factor, rank, usage, pending],
    ...]}``, points sorted by ``t``; an association's dicts come coarsest first (day, hour, cycle),
    so their points follow each other in time (:func:`coverage`), and associations are sorted by
    (account, user, partition).  An hour's or a day's point is the bucket's start and its means
    (:mod:`.rollup`); a blank factor is None.  One read transaction: the marks and the points are
    of the same write."""
    con.execute("BEGIN")
    try:
        if con.execute("SELECT 1 FROM sqlite_schema WHERE name = 'meta'").fetchone() is None:
            return []  # a file the writer has not set up yet
        marks = dict(con.execute("SELECT name, value FROM meta"))
        assocs = _associations(con, keys)
        if not assocs:
            return []
        parts = coverage(marks, since, until)
        ids = ",".join(str(int(i)) for i in assocs)
        points: dict[tuple[int, str], list] = {}
        for res, first, end in parts:
            # times first, then each point by its primary key (t, assoc): a year of one user's days
            # reads 365 points, not the 365 days of every association
            sql = (f"SELECT p.assoc, p.t, p.factor, p.rank, p.usage, p.pending FROM times AS c "
                   f"CROSS JOIN {TABLES[res]} AS p ON p.t = c.t AND p.assoc IN ({ids}) "
                   f"WHERE c.res = ? AND c.t >= ? AND c.t < ? ORDER BY p.assoc, p.t")
            for a, *point in con.execute(sql, (res, first, end)):
                points.setdefault((a, res), []).append(point)
    finally:
        con.execute("COMMIT")
    out = []
    for i, (a, u, p) in sorted(assocs.items(), key=lambda kv: tuple(x or "" for x in kv[1])):
        for res, *_ in parts:
            if (i, res) in points:
                out.append({"account": a, "user": u, "partition": p, "resolution": res,
                            "points": points[(i, res)]})
    return out

