"""The clock PriorityUsageResetPeriod runs on: slurmctld resets usage at the start of a local
calendar period (daily, weekly, monthly, quarterly, yearly), so these functions work in the
cluster's local time, daylight saving included.  Pure."""

from __future__ import annotations

import datetime as dt
import logging
import time as _time
from datetime import date, datetime, timedelta



log = logging.getLogger("fairshared.usage")

DAY = 86400
WEEK = 7 * DAY


# --- the local clock (reset periods are in local time) ---------------------------------------


class LocalClock:
    """Local calendar arithmetic for one time zone (None: the process's TZ, like slurmctld's)."""

    def __init__(self, timezone: str | None = None):
        self.timezone = timezone
        if timezone is None:
            self._zone = None
        else:
            from zoneinfo import ZoneInfo

            self._zone = ZoneInfo(timezone)

    # the calendar day is annotated dt.date: inside the class, "date" names the method below
    def date(self, t: float) -> dt.date:
        if self._zone is None:
            tm = _time.localtime(t)
            return date(tm.tm_year, tm.tm_mon, tm.tm_mday)
        return datetime.fromtimestamp(t, self._zone).date()

    def midnight(self, d: dt.date) -> float:
        # local 00:00 of day d, with the DST flag left to mktime (tm_isdst = -1, as slurm_mktime)
        if self._zone is None:
            return float(_time.mktime((d.year, d.month, d.day, 0, 0, 0, 0, 0, -1)))
        return datetime(d.year, d.month, d.day, tzinfo=self._zone).timestamp()


def _c_wday(d: date) -> int:
    # C's tm_wday: Sunday = 0 .. Saturday = 6
    return (d.weekday() + 1) % 7


def _first_of_next(period: str, d: date) -> date:
    # MONTHLY: 1st of next month; QUARTERLY: next of Apr/Jul/Oct/Jan 1st; YEARLY: next Jan 1st
    if period == "MONTHLY":
        return date(d.year + (d.month == 12), d.month % 12 + 1, 1)
    if period == "QUARTERLY":
        return date(d.year + 1, 1, 1) if d.month >= 10 else date(d.year, (d.month - 1) // 3 * 3 + 4, 1)
    return date(d.year + 1, 1, 1)


def calendar_reset(period: str, t: float, clock: LocalClock) -> float | None:
    # R = the last local-calendar boundary <= t: 00:00 of today / Sunday / the 1st / a quarter's 1st / Jan 1
    # range: R <= t, exact across DST changes (None for NONE and NOW)
    d = clock.date(t)
    if period == "DAILY":
        start = d
    elif period == "WEEKLY":
        start = d - timedelta(days=_c_wday(d))
    elif period == "MONTHLY":
        start = d.replace(day=1)
    elif period == "QUARTERLY":
        start = date(d.year, (d.month - 1) // 3 * 3 + 1, 1)
    elif period == "YEARLY":
        start = date(d.year, 1, 1)
    else:
        return None
    r = clock.midnight(start)
    if r > t:  # t falls in the hour a DST change skipped at midnight: the boundary is the day before
        return calendar_reset(period, clock.midnight(start - timedelta(days=1)), clock)
    return r


def slurm_next_reset(period: str, last_reset: float, now: float, clock: LocalClock) -> float:
    # DAILY: M(L) + 86400·(1+j); WEEKLY: M(L) + 86400·(7 − wday(L)) + 604800·j (j skips periods before now);
    # MONTHLY/QUARTERLY/YEARLY: local 00:00 of the next 1st.  M(L) = 00:00 of L's day.  (_next_reset)
    d = clock.date(last_reset)
    if period == "DAILY":
        t = clock.midnight(d) + DAY
        while t + DAY < now:
            t += DAY
        return t
    if period == "WEEKLY":
        t = clock.midnight(d) + DAY * (7 - _c_wday(d))
        while t + WEEK < now:
            t += WEEK
        return t
    return clock.midnight(_first_of_next(period, d))
