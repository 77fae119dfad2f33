"""The fair-share history (src/fairshared/history/): rows, rollup, pruning, series, and a database that
is garbage, locked, full or not ours -- none of which may stop a cycle.

Every test writes its own SQLite file under tmp_path; times are fixed Unix seconds (a fake clock: the
store takes each cycle's time from the cycle, never from the wall clock)."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from samples import TWO_ACCOUNTS
from structlog.testing import capture_logs

from fairshared.cycle import CycleResult
from fairshared.daemon import statefiles
from fairshared.daemon.config import config_from_dict, for_reload
from fairshared.engine import compute
from fairshared.history import HistoryCollector, HistoryStore, HistoryUnavailable, schema
from fairshared.history.query import coverage
from fairshared.history.rows import DAY, HOUR, cycle_rows
from fairshared.model import Job, Snapshot

T0 = 1_700_006_400  # a UTC midnight (2023-11-15 00:00)
PERIOD = 300
KEEP = {"cycle": DAY, "hour": 3 * DAY, "day": 10 * DAY}

TREE = TWO_ACCOUNTS  # tests/samples.py


def store(tmp_path: Path, keep=KEEP, name="history.sqlite") -> HistoryStore:
    return HistoryStore(tmp_path / name, keep, set_aside=statefiles.set_aside)


def rows_at(i: int, users=("u1", "u2", "u3")) -> list[tuple]:
    """Cycle i's rows for a few users of account a: factor 0.1·k + 0.001·(i mod 10), rank k + i mod 2,
    usage 10·i, pending i mod 3 (k: the user's place)."""
    return [(("a", u, None), 0.1 * k + 0.001 * (i % 10), k + i % 2, 10.0 * i, i % 3)
            for k, u in enumerate(users, 1)]


def fill(s: HistoryStore, cycles: int, start: int = T0) -> None:
    for i in range(cycles):
        assert s.write(start + i * PERIOD, rows_at(i))


def one(series: list[dict], res: str, user: str = "u1") -> list:
    [found] = [x for x in series if x["resolution"] == res and x["user"] == user]
    return found["points"]


# -- what a cycle adds ----------------------------------------------------------------------------------

def test_a_computed_cycle_gives_one_row_per_user_association_with_its_factor_rank_usage_and_pending():
    jobs = [Job(1, "u1", "a", "debug"), Job(2, "u1", "a", "debug"), Job(3, "u4", "b", "debug,gpu"),
            Job(4, "u2", "a", "debug", state="RUNNING"), Job(5, "ghost", "a", "debug")]
    res = CycleResult(number=1, started=T0 + 0.7, algorithm="fair_tree", source="test", push_mode="off",
                      dry_run=False, snapshot=Snapshot(associations=TREE, jobs=jobs), result=compute(TREE))
    t, rows = cycle_rows(res)
    assert t == T0
    # Fair Tree by hand (tests/test_metrics.py's tree): a's users first, unused ones leading
    assert rows == [(("a", "u1", None), 0.75, 2, 100.0, 2), (("a", "u2", None), 1.0, 1, 0.0, 0),
                    (("b", "u3", None), 0.5, 3, 0.0, 0), (("b", "u4", "gpu"), 0.25, 4, 50.0, 1)]
    failed = CycleResult(number=2, started=T0, algorithm="", source="test", push_mode="off", dry_run=False,
                         outcome="pull_failed")
    assert cycle_rows(failed) is None


# -- rollup, pruning, series ------------------------------------------------------------------------------

def test_an_hour_is_the_mean_of_its_cycles_with_the_rank_of_its_last_and_a_day_the_mean_of_its_hours(tmp_path):
    s = store(tmp_path)
    fill(s, 2 * 288 + 1)  # two whole days and the first cycle of the third
    con = sqlite3.connect(tmp_path / "history.sqlite")
    u1 = con.execute("SELECT id FROM assoc WHERE user = 'u1'").fetchone()[0]
    hours = con.execute("SELECT t, factor, rank, usage, pending, n FROM hour_points WHERE assoc = ? ORDER BY t",
                        (u1,)).fetchall()
    assert len(hours) == 48 and hours[0][0] == T0 and hours[-1][0] == T0 + 47 * HOUR
    t, factor, rank, usage, pending, n = hours[1]  # cycles 12..23
    assert n == 12
    assert factor == pytest.approx(0.1 + 0.001 * sum(i % 10 for i in range(12, 24)) / 12)
    assert usage == pytest.approx(10.0 * sum(range(12, 24)) / 12)
    assert pending == pytest.approx(sum(i % 3 for i in range(12, 24)) / 12)
    assert rank == 1 + 23 % 2  # the last cycle's (23: odd), not the mean 1.5
    days = con.execute("SELECT t, factor, rank, usage, n FROM day_points WHERE assoc = ? ORDER BY t", (u1,)).fetchall()
    assert [d[0] for d in days] == [T0, T0 + DAY]
    assert days[1][1] == pytest.approx(0.1 + 0.001 * sum(i % 10 for i in range(288, 576)) / 288)
    assert days[1][3] == pytest.approx(10.0 * sum(range(288, 576)) / 288)
    assert days[1][2] == 2 and days[1][4] == 288
    # the counts the metrics report are the tables' own
    for res in ("cycle", "hour", "day"):
        assert s.health.rows[res] == con.execute(f"SELECT count(*) FROM {res}_points").fetchone()[0]
    assert s.health.bytes == os.path.getsize(tmp_path / "history.sqlite") + os.path.getsize(
        tmp_path / "history.sqlite-wal")


def test_pruning_keeps_each_resolution_for_its_time_and_the_series_has_no_gap_or_overlap(tmp_path):
    s = store(tmp_path)
    fill(s, 5 * 288 + 6)  # 5 days and half an hour
    now = T0 + (5 * 288 + 5) * PERIOD
    con = sqlite3.connect(tmp_path / "history.sqlite")
    oldest = dict(con.execute("SELECT 'cycle', min(t) FROM cycle_points UNION ALL SELECT 'hour', min(t) FROM "
                              "hour_points UNION ALL SELECT 'day', min(t) FROM day_points"))
    assert now - DAY <= oldest["cycle"] <= now - DAY + PERIOD  # a day of cycles, no more
    assert oldest["hour"] == T0 + 2 * DAY  # 3 days before now, to the hour
    assert oldest["day"] == T0  # ten days not over yet
    assert s.health.rows == {"cycle": 3 * (288 + 1), "hour": 3 * 72, "day": 3 * 5}

    series = s.series([("a", "u1", None)], None, None)
    assert [x["resolution"] for x in series] == ["day", "hour", "cycle"]
    days, hours, cycles = (x["points"] for x in series)
    # day points up to where whole hours start, hours up to the first whole hour of cycles
    assert hours[0][0] == days[-1][0] + DAY
    assert cycles[0][0] == hours[-1][0] + HOUR
    assert cycles[-1][0] == now and len(cycles) == (now - cycles[0][0]) // PERIOD + 1
    ts = [p[0] for x in series for p in x["points"]]
    assert ts == sorted(ts) and len(set(ts)) == len(ts)
    # a cycle point is the cycle as written
    i = (cycles[0][0] - T0) // PERIOD
    assert cycles[0] == [T0 + i * PERIOD, 0.1 + 0.001 * (i % 10), 1 + i % 2, 10.0 * i, i % 3]


def test_coverage_serves_each_part_of_a_span_from_the_finest_resolution_that_holds_it_whole():
    marks = {"cycle_from": T0 + 3 * DAY + 1234, "hour_from": T0 + DAY - 7}
    bc, bh = T0 + 3 * DAY + HOUR, T0 + DAY  # next hour, next day
    assert coverage(marks, None, None) == [("day", -2 ** 62, bh), ("hour", bh, bc), ("cycle", bc, 2 ** 62)]
    # a bucket overlapping the span's start is in; a cycle only when inside it
    assert coverage(marks, T0 + 90, T0 + 5 * DAY) == [("day", T0, bh), ("hour", bh, bc),
                                                      ("cycle", bc, T0 + 5 * DAY + 1)]
    assert coverage(marks, bc + 10, None) == [("cycle", bc + 10, 2 ** 62)]
    assert coverage(marks, None, T0 - 1) == [("day", -2 ** 62, T0)]
    # the marks after a first write at T0 (each set to its retention before it): all of the history,
    # which starts at T0, is at cycle resolution
    first = {"cycle_from": T0 - DAY, "hour_from": T0 - 3 * DAY}
    assert coverage(first, T0, None) == [("cycle", T0, 2 ** 62)]
    assert coverage(first, None, None)[-1] == ("cycle", T0 - DAY, 2 ** 62)


def test_series_takes_wildcards_and_a_span(tmp_path):
    s = store(tmp_path)
    assert s.series([("a", "u1", None)], None, None) == []  # no file yet
    fill(s, 24)
    s.write(T0 + 24 * PERIOD, [(("b", "u1", "gpu"), 0.5, 4, 1.0, 0)])
    assert [(x["account"], x["user"], x["partition"]) for x in s.series([(None, "u1", None)], None, None)] == \
        [("a", "u1", None), ("b", "u1", "gpu")]
    assert len(s.series([("a", None, None)], None, None)) == 3
    assert s.series([("a", "nobody", None)], None, None) == []
    pts = s.series([("a", "u2", None)], T0 + 3 * PERIOD, T0 + 5 * PERIOD)[0]["points"]
    assert [p[0] for p in pts] == [T0 + 3 * PERIOD, T0 + 4 * PERIOD, T0 + 5 * PERIOD]
    with pytest.raises(ValueError, match="not all of them None"):
        s.series([(None, None, None)], None, None)


def test_restart_keeps_the_history_and_the_association_ids(tmp_path):
    s = store(tmp_path)
    fill(s, 30)
    before = s.series([("a", "u2", None)], None, None)
    s.close()
    again = store(tmp_path)
    assert again.series([("a", "u2", None)], None, None) == before
    assert again.write(T0 + 30 * PERIOD, rows_at(30))
    after = again.series([("a", "u2", None)], None, None)
    assert after[-1]["points"][:-1] == before[-1]["points"] and after[-1]["points"][-1][0] == T0 + 30 * PERIOD
    con = sqlite3.connect(tmp_path / "history.sqlite")
    assert con.execute("SELECT count(*) FROM assoc").fetchone()[0] == 3
    assert again.health.rows["cycle"] == 31 * 3


def test_a_cycle_in_the_same_second_replaces_the_earlier_one(tmp_path):
    s = store(tmp_path)
    assert s.write(T0, rows_at(0)) and s.write(T0, rows_at(1))
    assert s.series([("a", "u1", None)], None, None)[0]["points"] == [[T0, 0.101, 2, 10.0, 1]]
    assert s.health.rows["cycle"] == 3


def test_a_clock_stepped_back_neither_rolls_nor_prunes_and_the_history_goes_on(tmp_path):
    s = store(tmp_path)
    fill(s, 2 * 12 + 1)  # two hours and a cycle: two hours rolled
    before = dict(s.health.rows)
    assert s.write(T0 + HOUR + 60, rows_at(99))  # the clock went back 59 minutes
    assert s.health.rows == {**before, "cycle": before["cycle"] + 3}
    assert s.write(T0 + 25 * PERIOD, rows_at(25))
    points = s.series([("a", "u1", None)], None, None)[0]["points"]
    assert [p[0] for p in points] == sorted([T0 + i * PERIOD for i in range(26)] + [T0 + HOUR + 60])
    con = sqlite3.connect(tmp_path / "history.sqlite")
    assert con.execute("SELECT count(*) FROM hour_points").fetchone()[0] == 2 * 3  # the step rolled nothing again


# -- a database that is garbage, locked, full or not ours ----------------------------------------------------

def failures(s: HistoryStore) -> dict[str, int]:
    return {k: v for k, v in s.health.failures.items() if v}


def test_a_garbage_file_is_set_aside_and_a_new_one_started_in_the_same_cycle(tmp_path):
    path = tmp_path / "history.sqlite"
    path.write_bytes(b"not a database at all\n" * 100)
    path.chmod(0o600)
    s = store(tmp_path)
    with capture_logs() as logs:
        assert s.write(T0, rows_at(0))
    [bad] = tmp_path.glob("history.sqlite.bad-*")
    assert bad.read_bytes().startswith(b"not a database at all")
    assert failures(s) == {"corrupt": 1}
    assert [e["event"] for e in logs] == ["history database cannot be read: set aside, starting a new one"]
    assert s.series([("a", "u1", None)], None, None)[0]["points"] == [[T0, 0.1, 1, 0.0, 0]]


def test_a_truncated_file_is_set_aside_when_a_write_meets_the_damage(tmp_path):
    s = store(tmp_path)
    fill(s, 300)
    s.close()
    con = sqlite3.connect(tmp_path / "history.sqlite")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    path = tmp_path / "history.sqlite"
    with open(path, "r+b") as fh:
        fh.truncate(os.path.getsize(path) // 3)
    again = store(tmp_path)
    assert again.write(T0 + 300 * PERIOD, rows_at(300))
    assert failures(again) == {"corrupt": 1}
    assert len(list(tmp_path.glob("history.sqlite.bad-*"))) == 1
    assert again.series([("a", "u1", None)], None, None)[0]["points"][0][0] == T0 + 300 * PERIOD


def test_a_database_locked_by_another_writer_skips_the_cycle_logs_once_and_the_next_cycle_writes(
        tmp_path, monkeypatch):
    monkeypatch.setattr(schema, "BUSY_MS", 50)
    s = store(tmp_path)
    fill(s, 2)
    s.close()  # reopened below with the short busy timeout
    s = store(tmp_path)
    other = sqlite3.connect(tmp_path / "history.sqlite", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    with capture_logs() as logs:
        t0 = time.monotonic()
        assert not s.write(T0 + 2 * PERIOD, rows_at(2))
        assert not s.write(T0 + 3 * PERIOD, rows_at(3))
        assert time.monotonic() - t0 < 5
        other.execute("ROLLBACK")
        assert s.write(T0 + 4 * PERIOD, rows_at(4))
    assert failures(s) == {"locked": 2}
    assert [(e["event"], e.get("reason")) for e in logs] == [
        ("history not written; the next cycle tries again", "locked"), ("history writes work again", None)]
    assert [p[0] for p in s.series([("a", "u1", None)], None, None)[0]["points"]] == [T0, T0 + PERIOD, T0 + 4 * PERIOD]
    assert s.health.rows["cycle"] == 9
    # a reader is not stopped by a writer in WAL mode
    other.execute("BEGIN IMMEDIATE")
    assert len(s.series([("a", "u1", None)], None, None)[0]["points"]) == 3
    other.execute("ROLLBACK")


def test_a_full_database_rolls_the_cycle_back_and_the_next_one_writes_when_there_is_room(tmp_path):
    s = store(tmp_path)
    fill(s, 2)
    pages = s._writer.execute("PRAGMA page_count").fetchone()[0]
    s._writer.execute(f"PRAGMA max_page_count = {pages}")  # "full": no page may be added
    many = [(("a", f"user{k}", None), 0.5, k, 1.0, 0) for k in range(5000)]
    with capture_logs() as logs:
        assert not s.write(T0 + 2 * PERIOD, many)
        assert not s.write(T0 + 3 * PERIOD, many)
    assert failures(s) == {"full": 2}
    assert [e.get("reason") for e in logs] == ["full"]
    # nothing of the failed cycles stayed: no half-written cycle, no association names
    assert s.series([(None, "user7", None)], None, None) == []
    assert s.health.rows["cycle"] == 6
    s._writer.execute("PRAGMA max_page_count = 1073741823")  # room again
    assert s.write(T0 + 4 * PERIOD, many)
    assert s.series([("a", "user7", None)], None, None)[0]["points"] == [[T0 + 4 * PERIOD, 0.5, 7, 1.0, 0]]


def test_the_history_leaves_its_reserve_free_for_the_push_state(tmp_path, monkeypatch):
    """A live fault drill (tests/test_faults_slurm.py) keeps the state directory on a 256 KiB file
    system: the history filled it, the push state could no longer be saved before a push, and every
    later cycle pushed nothing.  Below history.reserve_mb of free space the history writes nothing."""
    import shutil
    from collections import namedtuple

    s = HistoryStore(tmp_path / "h.sqlite", KEEP, set_aside=statefiles.set_aside, reserve=1_000_000)
    fill(s, 2)
    usage = namedtuple("usage", "total used free")
    free = {"bytes": 1_000_000 + 3 * 256 - 1}  # one byte short for 3 rows over the reserve
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10**9, 10**9 - free["bytes"], free["bytes"]))
    with capture_logs() as logs:
        assert not s.write(T0 + 2 * PERIOD, rows_at(2))
        assert not s.write(T0 + 3 * PERIOD, rows_at(3))
    assert failures(s) == {"reserve": 2}
    assert [e.get("reason") for e in logs] == ["reserve"]  # logged once, not every cycle
    assert "below the 1000000 it leaves for the push state (history.reserve_mb)" in logs[0]["error"]
    assert s.health.rows["cycle"] == 6  # the two cycles before, 3 rows each: nothing of the skipped ones
    free["bytes"] += 1
    assert s.write(T0 + 4 * PERIOD, rows_at(4))
    assert s.health.rows["cycle"] == 9


@pytest.mark.parametrize("make", ["group_writable", "symlink", "foreign_owner"])
def test_a_file_the_daemon_must_not_trust_is_refused_and_left_alone(tmp_path, monkeypatch, make):
    s = store(tmp_path)
    fill(s, 1)
    s.close()
    path = tmp_path / "history.sqlite"
    if make == "group_writable":
        path.chmod(0o620)
        why = "writable by others (mode 0620)"
    elif make == "symlink":
        real = tmp_path / "elsewhere.sqlite"
        path.rename(real)
        path.symlink_to(real)
        why = "is a symbolic link"
    else:
        me = os.geteuid()
        monkeypatch.setattr(schema.os, "geteuid", lambda: me + 1)
        why = f"owned by uid {me}, not by this daemon's uid {me + 1}"
    before = os.lstat(path)
    s = store(tmp_path)
    with capture_logs() as logs:
        assert not s.write(T0 + PERIOD, rows_at(1))
        assert not s.write(T0 + 2 * PERIOD, rows_at(2))
    assert failures(s) == {"refused": 2}
    [line] = logs
    assert why in line["error"] and line["reason"] == "refused"
    after = os.lstat(path)
    assert (after.st_ino, after.st_mode, after.st_size) == (before.st_ino, before.st_mode, before.st_size)
    assert not list(tmp_path.glob("*.bad-*"))
    with pytest.raises(HistoryUnavailable, match="refused"):
        s.series([("a", "u1", None)], None, None)


def test_another_applications_sqlite_file_is_set_aside(tmp_path):
    path = tmp_path / "history.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE mine (x)")
    con.commit()
    con.close()
    path.chmod(0o600)
    s = store(tmp_path)
    assert s.write(T0, rows_at(0))
    assert failures(s) == {"corrupt": 1}
    [bad] = tmp_path.glob("history.sqlite.bad-*")
    assert sqlite3.connect(bad).execute("SELECT name FROM sqlite_schema").fetchall() == [("mine",)]


def test_a_new_file_is_created_for_the_daemons_user_alone(tmp_path):
    s = store(tmp_path)
    fill(s, 1)
    for name in ("history.sqlite", "history.sqlite-wal", "history.sqlite-shm"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o600, name


def test_reads_beside_writes_from_other_threads_see_whole_cycles(tmp_path):
    s = store(tmp_path)
    fill(s, 1)
    errors, seen = [], []
    done = threading.Event()

    def read():
        while not done.is_set():
            try:
                got = s.series([("a", None, None)], None, None)
                counts = {len(x["points"]) for x in got}
                if len(counts) != 1:  # the three users of one cycle: all written, or none
                    errors.append(counts)
                seen.append(counts.pop())
            except Exception as exc:  # noqa: BLE001 -- any failure is the test's
                errors.append(repr(exc))

    readers = [threading.Thread(target=read) for _ in range(3)]
    for r in readers:
        r.start()
    for i in range(1, 60):
        assert s.write(T0 + i * PERIOD, rows_at(i))
        # a read between any two writes, however loaded the machine (a 2-core CI run once gave the
        # readers only 3 reads in all 59 writes): the reads really interleave with the writes
        deadline = time.monotonic() + 10
        while len(seen) + len(errors) < i and time.monotonic() < deadline:
            time.sleep(0.001)
    done.set()
    for r in readers:
        r.join()
    assert not errors
    assert len(seen) >= 59 and max(seen) <= 60 and min(seen) >= 1


# -- configuration, the daemon's wiring, the metrics --------------------------------------------------------

@pytest.mark.parametrize("history, message", [
    ({"cycle_hours": 1}, "history.cycle_hours: Input should be greater than or equal to 2"),
    ({"hourly_days": 400}, "history.hourly_days: Input should be less than or equal to 366"),
    ({"daily_days": 10}, "history: daily_days (10) keeps days for less time than hourly_days (31) keeps hours"),
    ({"cycle_hours": 48, "hourly_days": 1}, "history: hourly_days (1) keeps hours for less time than cycle_hours"),
    ({"keep": 3}, "history.keep: unknown key"),
    ({"enabled": "maybe"}, "history.enabled: Input should be a valid boolean"),
])
def test_a_bad_history_section_is_one_line_naming_the_key(history, message):
    with pytest.raises(ValueError) as err:
        config_from_dict({"history": history}, "f.toml")
    assert str(err.value).startswith(f"f.toml: {message}")
    assert "\n" not in str(err.value)


def test_a_reload_changes_the_retentions_but_the_path_waits_for_a_restart():
    running = config_from_dict({})
    new = config_from_dict({"history": {"path": "/elsewhere.sqlite", "cycle_hours": 6, "enabled": False}})
    adopted, later = for_reload(running, new)
    assert later == ["history.path"]
    assert adopted.history.path is None and adopted.history.cycle_hours == 6 and not adopted.history.enabled
    assert adopted.history.keep() == {"cycle": 6 * HOUR, "hour": 31 * DAY, "day": 365 * DAY}


def test_the_daemon_records_every_computed_cycle_and_exports_the_history_metrics(tmp_path):
    from fairshared.daemon.service import Service

    cfg = config_from_dict({"state": {"directory": str(tmp_path / "state")}, "history": {"cycle_hours": 6}})
    svc = Service(cfg, None, demo=True, once=True)
    try:
        assert svc.history.path == tmp_path / "state" / "history.sqlite"
        assert svc.history.keep["cycle"] == 6 * HOUR
        first = svc.runner.cycle("test")
        second = svc.runner.cycle("test")
        assert first.ok and second.ok
        # the store's rows are the cycle's own: compare with a fresh computation of its result
        t, rows = cycle_rows(second)
        user = ([r for r in rows if r[4]] or rows)[0]  # a user with pending jobs, if there is one
        key = user[0]
        [got] = svc.history.series([key], None, None)
        assert got["resolution"] == "cycle" and got["points"][-1] == [t, *user[1:]]
        assert len(got["points"]) == (2 if int(first.started) != t else 1)
        families = {f.name: f for f in text_string_to_metric_families(svc.metrics.render().decode())}
        rows_metric = {s.labels["resolution"]: s.value for s in families["fairshared_history_rows"].samples}
        assert rows_metric["cycle"] == svc.history.health.rows["cycle"] >= len(rows)
        assert families["fairshared_history_bytes"].samples[0].value > 0
        fail = {s.labels["reason"]: s.value for s in families["fairshared_history_write_failures"].samples
                if s.name.endswith("_total")}
        assert fail == {"locked": 0, "full": 0, "corrupt": 0, "refused": 0, "error": 0}
    finally:
        svc.history.close()
        for fd in svc._locks:
            os.close(fd)


def test_a_reload_turns_the_history_off_and_changes_its_retentions_at_once(tmp_path):
    from fairshared.daemon.config import load_config
    from fairshared.daemon.service import Service

    conf = tmp_path / "fairshared.toml"
    conf.write_text(f'[state]\ndirectory = "{tmp_path / "state"}"\n')
    svc = Service(load_config(conf), str(conf), demo=True, once=True)
    try:
        assert svc.history.enabled and svc.history.keep["hour"] == 31 * DAY
        conf.write_text(f'[state]\ndirectory = "{tmp_path / "state"}"\n'
                        f'[history]\nenabled = false\nhourly_days = 7\npath = "other.sqlite"\n')
        svc.reload()
        assert not svc.history.enabled and svc.history.keep["hour"] == 7 * DAY
        assert svc.history.path == tmp_path / "state" / "history.sqlite"  # the path waits for a restart
        svc.runner.cycle("test")
        assert not (tmp_path / "state" / "history.sqlite").exists()
    finally:
        svc.history.close()
        for fd in svc._locks:
            os.close(fd)


def test_history_off_writes_no_file(tmp_path):
    s = HistoryStore(tmp_path / "h.sqlite", KEEP, enabled=False, set_aside=statefiles.set_aside)
    res = CycleResult(number=1, started=T0, algorithm="fair_tree", source="test", push_mode="off",
                      dry_run=False, snapshot=Snapshot(associations=TREE), result=compute(TREE))
    s.publish(res)
    assert not (tmp_path / "h.sqlite").exists()
    assert s.series([("a", "u1", None)], None, None) == []
    s.configure(KEEP, True)
    s.publish(res)
    assert s.series([("a", "u1", None)], None, None)[0]["points"] == [[T0, 0.75, 2, 100.0, 0]]


def test_the_collector_reports_failures_by_reason():
    from fairshared.history.health import Health

    h = Health()
    h.failed("locked")
    h.failed("locked")
    h.failed("full")
    got = {(m.name, tuple(sorted(s.labels.items()))): s.value
           for m in HistoryCollector(h).collect() for s in m.samples}
    assert got[("fairshared_history_write_failures", (("reason", "locked"),))] == 2
    assert got[("fairshared_history_write_failures", (("reason", "full"),))] == 1
    assert not any(name == "fairshared_history_rows" for name, _ in got)  # nothing written yet: absent, not 0


def test_the_size_benchmark_runs_and_its_figures_grow_with_the_history(tmp_path):
    import json
    import subprocess
    import sys

    bench = Path(__file__).resolve().parent.parent / "benchmarks" / "history_size.py"
    proc = subprocess.run([sys.executable, str(bench), "--users", "200", "--dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    day, month, year = rows[1:]
    assert day["writes"] == 289 and day["tables"]["cycle_points"] > 0
    assert day["file_bytes"] < month["file_bytes"] < year["file_bytes"]
    # one user's year: 335 days, the month's hours, a day of cycles: no gap, no overlap
    assert year["query_year"]["by_resolution"]["cycle"] == 288
    assert year["query_year"]["by_resolution"]["day"] + year["query_year"]["by_resolution"]["hour"] / 24 \
        == pytest.approx(365 - 1, abs=1.1)
