"""The fair-share history at 100,000 associations: per-cycle write time, size after a day, a month
and a year, and the time of one user's year of points.

A year of 5-minute cycles is 105,120 writes; this runs about 600 of them for real and writes the rest
of the year's rows directly, as the rollup would have left them:

1. **A day, for real** (fresh file): a day and an hour of cycles through ``HistoryStore.write`` (rows,
   hourly rollups, the day's rollup, pruning): the size after a day, and the write times of a
   history that starts empty.
2. **A month** (second file): the month before ``t0`` is filled with synthetic rollup rows, in time
   order, hour by hour and day by day (SQL copies of one synthetic bucket with its time shifted), the
   rollup marks set as the daemon would have left them; then a day and an hour of cycles for real
   on top: hourly rollups, a daily rollup and pruning of the oldest hours as in steady state.  The
   size is then a month's; the write times are a full history's.
3. **A year**: the 333 older days are added to that file (written before the month's rows in time,
   appended to the table after them), and one user's year is read back with ``series``.

The cycles' values are synthetic (a factor per user drifting slowly, its competition rank, usage
growing, a pending job for one user in five); the rows' sizes depend on them only through SQLite's
variable-length integers, so the figures hold for real trees of the same size.  ``--users`` is the
number of user associations recorded per cycle (100,000: every association of a 100,000-association
tree, where a real one has ~95 % users).  The time to build a cycle's rows from its result is
measured on a synthetic tree of ``--users`` associations (benchmarks/synthetic.py), apart.

    python benchmarks/history_size.py [--users 100000] [--period 300] [--dir DIR]

Prints one JSON line per figure and a summary table.  The files (about 7 GB at 100,000 users) stay
in --dir when it is given; a temporary directory is removed at the end.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fairshared.daemon import statefiles  # noqa: E402
from fairshared.history import HistoryStore  # noqa: E402
from fairshared.history.rows import DAY, HOUR  # noqa: E402

KEEP = {"cycle": DAY, "hour": 31 * DAY, "day": 365 * DAY}  # the defaults
T0 = 1_767_225_600  # 2026-01-01 00:00 UTC


class Cycles:
    """Synthetic cycles of ``users`` associations (deterministic)."""

    def __init__(self, users: int, seed: int = 1):
        self.rng = np.random.default_rng(seed)
        self.keys = [(f"a{k // 20}", f"u{k}", None) for k in range(users)]
        self.base = self.rng.random(users)
        self.usage = self.rng.lognormal(10, 2, users)
        self.users = users

    def rows(self, i: int) -> list[tuple]:
        factor = np.clip(self.base + 0.01 * np.sin(i / 50 + self.base * 10), 0, 1)
        order = np.sort(factor)[::-1]
        rank = 1 + np.searchsorted(-order, -factor, side="left")
        self.usage *= 0.9999
        self.usage += self.rng.exponential(100.0, self.users) * (self.rng.random(self.users) < 0.1)
        pending = (self.rng.random(self.users) < 0.2) * self.rng.integers(1, 50, self.users)
        return list(zip(self.keys, factor.tolist(), rank.tolist(), self.usage.tolist(), pending.tolist()))


def size(path: Path) -> dict:
    """Bytes on disk (file and WAL) and per table (dbstat), after a checkpoint."""
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    tables = dict(con.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"))
    free = con.execute("PRAGMA freelist_count").fetchone()[0] * con.execute("PRAGMA page_size").fetchone()[0]
    con.close()
    wal = path.with_name(path.name + "-wal")
    return {"file_bytes": path.stat().st_size, "wal_bytes": wal.stat().st_size if wal.exists() else 0,
            "free_bytes": free, "tables": tables}


def run_cycles(store: HistoryStore, gen: Cycles, start: int, count: int, period: int, first: int = 0) -> list[float]:
    times = []
    for i in range(first, first + count):
        rows = gen.rows(i)
        t0 = time.perf_counter()
        ok = store.write(start + (i - first) * period, rows)
        times.append(time.perf_counter() - t0)
        if not ok:
            raise SystemExit(f"write {i} failed: {store.health.failures}")
    return times


class Filler:
    """Writes rollup rows straight into a history file: copies of one synthetic bucket (means of
    ``n`` cycles) with their time shifted, as the rollup would have left them."""

    def __init__(self, path: Path, gen: Cycles):
        self.con = sqlite3.connect(path, isolation_level=None)
        self.con.execute("CREATE TEMP TABLE template (assoc INTEGER, factor REAL, rank INTEGER, usage REAL, "
                         "pending REAL)")
        ids = {(a, u, p or None): i for i, a, u, p in self.con.execute("SELECT id, account, user, partition FROM assoc")}
        rows = gen.rows(0)
        pend = gen.rng.random(gen.users) * (gen.rng.random(gen.users) < 0.2) * 20
        self.con.executemany("INSERT INTO template VALUES (?, ?, ?, ?, ?)",
                             [(ids[k], f, r, u, p) for (k, f, r, u, _), p in zip(rows, pend.tolist())])

    def fill(self, res: str, buckets: list[int], n: int) -> None:
        """Rows of ``res`` at each bucket start of ``buckets``, in that order."""
        con = self.con
        con.execute("BEGIN")
        added = 0
        for b in buckets:
            added += con.execute(f"INSERT INTO {res}_points SELECT ?, assoc, factor, rank, usage, pending, ? "
                                 f"FROM template ORDER BY assoc", (b, n)).rowcount
            con.execute("INSERT INTO times VALUES (?, ?)", (res, b))
        con.execute("UPDATE meta SET value = value + ? WHERE name = ?", (added, f"rows_{res}"))
        con.execute("COMMIT")

    def close(self) -> None:
        self.con.close()


def set_marks(path: Path, **marks: int) -> None:
    con = sqlite3.connect(path, isolation_level=None)
    con.executemany("UPDATE meta SET value = ? WHERE name = ?", [(v, k) for k, v in marks.items()])
    con.close()


def summary(name: str, times: list[float]) -> dict:
    return {"phase": name, "writes": len(times), "median_s": round(statistics.median(times), 3),
            "p95_s": round(sorted(times)[int(len(times) * 0.95)], 3), "max_s": round(max(times), 3)}


def query_times(store: HistoryStore, gen: Cycles, since: int, until: int, n: int = 20) -> dict:
    rng = np.random.default_rng(7)
    picks = rng.choice(gen.users, n, replace=False)
    times, points = [], 0
    for k in picks:
        key = gen.keys[int(k)]
        t0 = time.perf_counter()
        got = store.series([(key[0], key[1], None)], since, until)
        times.append(time.perf_counter() - t0)
        points = sum(len(x["points"]) for x in got)
        resolutions = {x["resolution"]: len(x["points"]) for x in got}
    return {"first_s": round(times[0], 4), "median_s": round(statistics.median(times), 4),
            "max_s": round(max(times), 4), "points": points, "by_resolution": resolutions}


def rows_from_result(users: int) -> float:
    """Seconds to build one cycle's rows from a computed result (history.rows.cycle_rows)."""
    from synthetic import make_associations

    from fairshared.cycle import CycleResult
    from fairshared.engine import compute
    from fairshared.history.rows import cycle_rows
    from fairshared.model import Job, Snapshot

    assocs = make_associations(users)
    users_ = [a for a in assocs if a.user is not None]
    jobs = [Job(i, a.user, a.account, "batch") for i, a in enumerate(users_[::5])]
    res = CycleResult(number=1, started=T0, algorithm="fair_tree", source="bench", push_mode="off", dry_run=False,
                      snapshot=Snapshot(associations=assocs, jobs=jobs), result=compute(assocs))
    t0 = time.perf_counter()
    _, rows = cycle_rows(res)
    return time.perf_counter() - t0, len(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", type=int, default=100_000)
    ap.add_argument("--period", type=int, default=300)
    ap.add_argument("--dir", default=None, help="where the files go (kept); default: a temporary directory")
    args = ap.parse_args(argv)
    d = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="history-bench-"))
    d.mkdir(parents=True, exist_ok=True)
    per_day = DAY // args.period
    per_hour = HOUR // args.period
    out = {}

    secs, n = rows_from_result(args.users)
    out["rows_from_result"] = {"users": n, "seconds": round(secs, 3)}
    print(json.dumps(out["rows_from_result"]), flush=True)

    # 1. a day for real, from an empty file
    gen = Cycles(args.users)
    day_file = d / "day.sqlite"
    store = HistoryStore(day_file, KEEP, set_aside=statefiles.set_aside)
    times = run_cycles(store, gen, T0, per_day + 1, args.period)  # the last closes the day
    store.close()
    out["day"] = {**summary("a day from empty", times), **size(day_file)}
    print(json.dumps(out["day"]), flush=True)

    # 2. a month: synthetic rollups for the month before t0, then a day and an hour of cycles for real
    month_file = d / "year.sqlite"
    store = HistoryStore(month_file, KEEP, set_aside=statefiles.set_aside)
    gen = Cycles(args.users)
    assert store.write(T0 - 31 * DAY, gen.rows(0))  # names the associations (its rows are dropped below)
    store.close()
    con = sqlite3.connect(month_file, isolation_level=None)
    con.execute("DELETE FROM cycle_points")
    con.execute("DELETE FROM times")
    con.execute("VACUUM")  # as if those rows had never been: the file holds the names alone
    con.close()
    t0 = time.perf_counter()
    filler = Filler(month_file, gen)
    for day in range(31, 0, -1):  # time order: each day's hours, then its day
        start = T0 - day * DAY
        filler.fill("hour", [start + h * HOUR for h in range(24)], per_hour)
        filler.fill("day", [start], per_day)
    filler.close()
    filled = time.perf_counter() - t0
    set_marks(month_file, hour_done=T0, day_done=T0, cycle_from=T0 - DAY, hour_from=T0 - 31 * DAY,
              day_from=T0 - 365 * DAY, rows_cycle=0, rows_hour=31 * 24 * args.users, rows_day=31 * args.users)
    store = HistoryStore(month_file, KEEP, set_aside=statefiles.set_aside)
    times = run_cycles(store, gen, T0, per_day + per_hour, args.period, first=1)
    now = T0 + (per_day + per_hour - 1) * args.period
    out["month"] = {**summary("a day and an hour on a month", times), "fill_s": round(filled, 1),
                    **size(month_file), "query_month": query_times(store, gen, now - 31 * DAY, now)}
    print(json.dumps(out["month"]), flush=True)
    store.close()

    # 3. a year: the 333 older days, then one user's year
    t0 = time.perf_counter()
    filler = Filler(month_file, gen)
    filler.fill("day", [T0 - day * DAY for day in range(364, 31, -1)], per_day)
    filler.close()
    filled = time.perf_counter() - t0
    store = HistoryStore(month_file, KEEP, set_aside=statefiles.set_aside)
    times = run_cycles(store, gen, now + args.period, per_hour, args.period, first=per_day + per_hour + 1)
    now += per_hour * args.period
    out["year"] = {**summary("an hour on a year", times), "fill_s": round(filled, 1), **size(month_file),
                   "query_year": query_times(store, gen, now - 365 * DAY, now)}
    print(json.dumps(out["year"]), flush=True)
    store.close()

    mb = 1024 * 1024
    print(f"\nhistory at {args.users} user associations, a cycle every {args.period} s")
    print(f"rows from a computed result: {out['rows_from_result']['seconds']:.2f} s")
    for key, label in (("day", "after a day"), ("month", "after a month"), ("year", "after a year")):
        r = out[key]
        print(f"{label:14s} {r['file_bytes'] / mb:9.0f} MB   writes: median {r['median_s']:.2f} s, "
              f"p95 {r['p95_s']:.2f} s, max {r['max_s']:.2f} s ({r['writes']} cycles)")
    q = out["year"]["query_year"]
    print(f"one user's year: {q['points']} points {q['by_resolution']}, first {q['first_s'] * 1000:.0f} ms, "
          f"median {q['median_s'] * 1000:.0f} ms, max {q['max_s'] * 1000:.0f} ms")
    if args.dir:
        print(f"files in {d}")
    else:
        shutil.rmtree(d)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
