"""When the service's cycles run: the period's timer (APScheduler), backed off after failures, cycles
asked for on demand (SIGUSR1, POST /-/recompute, a reload: merged by requests.py, spaced by
``http.min_interval``), and every timer moved by a step of the wall clock.

APScheduler times its jobs by the wall clock: the main loop watches the wall clock against the
boot clock and moves every timer by a step it sees, so a step back of an hour does not stop the
timer for an hour (nor a step forward fire it early).
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from apscheduler.events import EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED

from . import memory, sdnotify
from .runner import period_for
from .service_shared import ServiceShared

CLOCK_STEP = 2.0  # seconds: a change of wall minus monotonic time larger than this is a clock step


def boot_clock() -> float:
    """Seconds since boot, suspended time included (CLOCK_BOOTTIME; monotonic where there is none):
    a machine resumed from suspend has not had its clock stepped."""
    try:
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    except (AttributeError, OSError):
        return time.monotonic()


class ServiceCycles(ServiceShared):
    """The service's cycles and their timers (a part of :class:`~fairshared.daemon.service.Service`)."""

    def _run_cycle(self, reason: str = "timer") -> None:
        # returns nothing: APScheduler would hand the cycle's whole result (snapshot and all) to its events
        if self.stopping.is_set():
            return  # a cycle queued before SIGTERM is dropped
        with memory.collector_paused():  # no full collections over the cycle's objects: memory.py
            self._cycle(reason)
        memory.release_free_memory()  # what the cycle freed (its result is garbage by now): memory.py
        self._reschedule()

    def _cycle(self, reason: str) -> None:
        res = self.runner.cycle(reason)
        if res.algorithm and self.metrics is not None:
            self._set_info()
        sdnotify.status(f"cycle {res.number}: {res.outcome}, {res.pushed} job(s) updated"
                        + (" (dry run)" if res.dry_run else ""))

    def _reschedule(self) -> None:
        """Keep the timer at the cluster's period; after failures, back off."""
        if self.scheduler is None:
            return
        period = period_for(self.config, self.runner.cluster_settings)
        delay = self.runner.retry_delay() if self.runner.failures else period
        if self.stopping.is_set():
            return
        try:
            if self.scheduler.get_job("cycle") is None:
                return
            if period != self.period or self.runner.failures:
                self.period = period
                self.scheduler.reschedule_job("cycle", trigger="interval", seconds=period,
                                              start_date=datetime.now() + timedelta(seconds=delay))
        except Exception as exc:  # the scheduler is shutting down under us: nothing left to schedule
            self.log.debug("reschedule skipped", error=str(exc))

    def _on_event(self, event):
        if event.code == EVENT_JOB_MAX_INSTANCES:
            self.log.warning("cycle overran its period; the late cycle was coalesced into the next one")
        elif event.code == EVENT_JOB_MISSED:
            self.log.warning("cycle missed its time; coalesced")

    def trigger(self, reason: str) -> bool:
        """Ask for a cycle now (after a cycle in progress); requests merge into one pending cycle."""
        if self.scheduler is None or self.stopping.is_set():
            return False
        try:
            return self.requests.request(reason)
        except Exception as exc:  # the scheduler is shutting down under us: nothing to queue
            self.log.warning("cycle request dropped", reason=reason, error=str(exc))
            return False

    def _submit(self, reason: str) -> None:
        """Queue a requested cycle: at once, or when ``http.min_interval`` after the last cycle's start
        is over (requests meanwhile merge into this one, see requests.py)."""
        started = self.runner.started_at
        wait = 0.0 if started is None else started + self.config.http.min_interval - time.monotonic()
        when = {"trigger": "date", "run_date": datetime.now() + timedelta(seconds=wait)} if wait > 0 else {}
        assert self.scheduler is not None  # trigger() asks for cycles only once run() started it
        self.scheduler.add_job(self._run_requested, args=[reason], executor="default", misfire_grace_time=None,
                               **when)

    def _run_requested(self, reason: str) -> None:
        if self.requests.take():
            self._run_cycle(reason)

    def _watch_clock(self, wall=time.time, mono=boot_clock) -> None:
        """Move every timer by a step of the wall clock (an operator's ``date -s``, a VM resumed, NTP
        stepping): the next cycle stays where it was in real time, the period with it."""
        offset = wall() - mono()
        step, self._clock_offset = offset - self._clock_offset, offset
        if abs(step) < CLOCK_STEP or self.scheduler is None:
            return
        moved = 0
        try:
            for job in self.scheduler.get_jobs():
                if job.next_run_time is not None:
                    self.scheduler.modify_job(job.id, next_run_time=job.next_run_time + timedelta(seconds=step))
                    moved += 1
        except Exception as exc:  # the scheduler is shutting down under us
            self.log.debug("clock step not applied", error=str(exc))
            return
        self.log.warning("wall clock stepped; timers moved with it", seconds=round(step, 1), timers=moved)
